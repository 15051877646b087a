"""Confidence bands of a partitioned study's AI systems (issue 9, "beyond the paper").

When imported predictions carry a confidence, the dashboard estimates each system's
accuracy per confidence band from the specialists' answers — partitioned estimates
stratified by band — and from those the hybridization curve without a single gold label:
if the items on which the system's confidence is at or below t went to humans, what
accuracy would it keep on the rest.

The rule (the same as ``estimators.assisted.hybridization.band_of`` and assisted routing): with
upper edges e_1 < … < e_{B−1}, band j (1-based) holds e_{j−1} < c ≤ e_j, band 1 is
c ≤ e_1, band B is c > e_{B−1}; band 0 = no confidence. "At or below t goes to humans"
then sends whole bands.

Bands per study (``ConfidenceBands``): by default **tertiles of each system's own
confidences** (3 bands), because confidences of language models bunch up (agreement
shares and verbalised probabilities mostly above 0.8): fixed edges such as 0.5 / 0.8
would leave the low bands nearly empty, with intervals too wide to read, while quantile
bands give every band the same share of items — the same precision — and the curve's
points fall at one-third and two-thirds of the items sent to humans. Ties never straddle
an edge (edges are observed values; "≤" keeps a tie in the lower band), so a system with
few distinct confidences gets fewer bands. The fixed scheme gives every system the same,
interpretable edges.

Each answered query stores its item's band index per system as three bit planes
(``Query.band_bit0..2``: bit s of plane l = bit l of system s's band), written with the
answer and refreshed with the masks, so the per-band counts come out of the recompute's
single aggregation."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
from django.db import connection

from annotations.core.models import Item, Study
from assistants.models import AISystem, ConfidenceBands, Prediction

PLANES = 3  # bits of a band index: 1..7, 0 = no confidence
BAND_FIELDS = tuple(f"band_bit{plane}" for plane in range(PLANES))
DEFAULT_SCHEME = ConfidenceBands.Scheme.QUANTILE
DEFAULT_N_BANDS = 3


def band_index(confidence: float | None, edges: Sequence[float]) -> int:
    """1 + the number of edges below ``confidence`` (band j holds e_{j−1} < c ≤ e_j); 0
    without a confidence or without edges."""
    if confidence is None or not edges:
        return 0
    return 1 + sum(1 for e in edges if e < confidence)


def quantile_edges(confidences: Iterable[float], n_bands: int) -> list[float]:
    """Upper edges of ``n_bands`` equal-share bands: the inverted-CDF quantiles at j/B
    (observed values: the smallest c with a share ≥ j/B at or below it), without repeats
    and without an edge at the maximum (the band above would be empty). Fewer than
    ``n_bands`` bands when ties allow no more; [] (one band) for a single distinct value."""
    values = np.sort(np.asarray(list(confidences), dtype=float))
    if len(values) == 0:
        return []
    # PostgreSQL's percentile_disc: row ceil(f · n) (1-based) of the sorted values
    cuts = [values[max(0, math.ceil((j / n_bands) * len(values)) - 1)]
            for j in range(1, n_bands)]
    return sorted({float(c) for c in cuts if c < values[-1]})


def band_bits(bands: dict[int, int]) -> dict[str, int | None]:
    """The three planes for {system ordinal: band index} (None: no system has a band)."""
    if not any(bands.values()):
        return dict.fromkeys(BAND_FIELDS)
    planes = [0] * PLANES
    for ordinal, band in bands.items():
        for plane in range(PLANES):
            if band >> plane & 1:
                planes[plane] |= 1 << ordinal
    return dict(zip(BAND_FIELDS, planes, strict=True))


def band_case_sql(edges_by_ordinal: dict[int, list[float]], *, ordinal: str,
                  confidence: str) -> tuple[str, list]:
    """SQL for a prediction's band index (the rule of :func:`band_index`) given its
    system's ``ordinal`` and its ``confidence`` column expressions, with the parameters."""
    whens, params = [], []
    for o, edges in sorted(edges_by_ordinal.items()):
        if not edges:
            continue
        steps = " ".join(f"WHEN {confidence} <= %s THEN {j + 1}" for j in range(len(edges)))
        whens.append(f"WHEN {ordinal} = {int(o)} THEN CASE WHEN {confidence} IS NULL THEN 0 "
                     f"{steps} ELSE {len(edges) + 1} END")
        params.extend(float(e) for e in edges)
    if not whens:
        return "0", []
    return f"(CASE {' '.join(whens)} ELSE 0 END)", params


def study_bands(study: Study) -> ConfidenceBands:
    """The study's scheme (an unsaved default when it has none)."""
    try:
        return study.confidence_bands
    except ConfidenceBands.DoesNotExist:
        return ConfidenceBands(study=study, scheme=DEFAULT_SCHEME, n_bands=DEFAULT_N_BANDS)


def _confidences_by_system(study: Study) -> dict[int, np.ndarray]:
    """Each system's confidences on the study's items (quality checks excluded)."""
    rows = (Prediction.objects.filter(system__study=study, confidence__isnull=False,
                                      item__is_quality_check=False)
            .values_list("system_id", "confidence").order_by("system_id"))
    found: dict[int, list[float]] = {}
    for system_id, c in rows.iterator(chunk_size=20000):
        found.setdefault(system_id, []).append(c)
    return {s: np.asarray(v) for s, v in found.items()}


def _quantile_edges_sql(study: Study, n_bands: int) -> dict[int, list[float]]:
    """PostgreSQL: the quantiles in the database (percentile_disc is the inverted CDF)."""
    fractions = [j / n_bands for j in range(1, n_bands)]
    pred, item, system = (Prediction._meta.db_table, Item._meta.db_table,
                          AISystem._meta.db_table)
    sql = (f"SELECT p.system_id, percentile_disc(%s::float8[]) WITHIN GROUP "
           f"(ORDER BY p.confidence), MAX(p.confidence) FROM {pred} p "
           f"JOIN {system} s ON s.id = p.system_id JOIN {item} i ON i.id = p.item_id "
           "WHERE s.study_id = %s AND p.confidence IS NOT NULL AND NOT i.is_quality_check "
           "GROUP BY p.system_id")
    with connection.cursor() as cur:
        cur.execute(sql, [fractions, study.pk])
        return {system_id: sorted({float(c) for c in cuts if c < top})
                for system_id, cuts, top in cur.fetchall()}


def _edges_by_system(study: Study, scheme: ConfidenceBands) -> dict[int, list[float]]:
    """Edges per system that has confidences (others: absent)."""
    with_confidence = set(Prediction.objects.filter(
        system__study=study, confidence__isnull=False, item__is_quality_check=False)
        .values_list("system_id", flat=True).distinct().order_by())
    if scheme.scheme == ConfidenceBands.Scheme.FIXED:
        return {s: [float(e) for e in scheme.edges] for s in with_confidence}
    if connection.vendor == "postgresql":
        return _quantile_edges_sql(study, scheme.n_bands)
    return {s: quantile_edges(v, scheme.n_bands)
            for s, v in _confidences_by_system(study).items()}


def _band_stats(study: Study, edges_by_ordinal: dict[int, list[float]]
                ) -> dict[int, dict[int, tuple[int, float]]]:
    """{system id: {band: (items, mean confidence)}} over the study's items (no checks)."""
    band_sql, params = band_case_sql(edges_by_ordinal, ordinal="s.ordinal",
                                     confidence="p.confidence")
    sql = (f"SELECT p.system_id, {band_sql}, COUNT(*), AVG(p.confidence) "
           f"FROM {Prediction._meta.db_table} p "
           f"JOIN {AISystem._meta.db_table} s ON s.id = p.system_id "
           f"JOIN {Item._meta.db_table} i ON i.id = p.item_id "
           "WHERE s.study_id = %s AND p.confidence IS NOT NULL AND NOT i.is_quality_check "
           "GROUP BY 1, 2")
    out: dict[int, dict[int, tuple[int, float]]] = {}
    with connection.cursor() as cur:
        cur.execute(sql, [*params, study.pk])
        for system_id, band, n, mean in cur.fetchall():
            out.setdefault(system_id, {})[int(band)] = (int(n), float(mean))
    return out


def systems_bands_refresh(*, study: Study) -> bool:
    """Recompute every system's band edges (the study's scheme) and per-band item counts
    and mean confidence. Returns whether any system's edges changed (then the answered
    queries' band bits must be refreshed: ``query_masks_refresh``)."""
    scheme = study_bands(study)
    edges = _edges_by_system(study, scheme)
    systems = list(AISystem.objects.filter(study=study))
    changed = False
    for system in systems:
        new_edges = edges.get(system.pk, [])
        changed |= new_edges != system.band_edges
        system.band_edges = new_edges
    by_ordinal = {s.ordinal: s.band_edges for s in systems}
    stats = _band_stats(study, by_ordinal) if any(by_ordinal.values()) else {}
    for system in systems:
        found = stats.get(system.pk, {})
        system.band_stats = [
            {"n": found.get(b, (0, None))[0], "mean_confidence": found.get(b, (0, None))[1]}
            for b in range(1, len(system.band_edges) + 2)] if system.band_edges else []
        system.save(update_fields=["band_edges", "band_stats"])
    return changed
