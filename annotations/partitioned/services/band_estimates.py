"""Partitioned estimates per confidence band, and the hybridization curve they imply
(issue 9, "beyond the paper"; bands: ``annotations.partitioned.services.banding``).

Within any set of items chosen by the AI's own confidence, the class asked is still drawn
uniformly and independently of the truth, so METHODS.md M1's estimators apply unchanged to
each band's labels: the counts of a band are the recompute's counts restricted to the
answered queries whose item that system puts in that band (the same single pass,
``selectors.study_label_counts_banded``; with several queries per item the variance is
clustered by item within the band).

The curve: sending the items whose confidence is at or below edge t_j to humans leaves the
AI the bands above j; its accuracy there is estimated from those bands' summed counts
(sufficient statistics add), and the share sent to humans is the share of the system's
items (with a confidence, quality checks excluded) in bands ≤ j. Point 0 sends nothing.
No gold label is used anywhere."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from annotations.partitioned.selectors import BandCounts, LabelCounts
from annotations.partitioned.services.scope_estimates import (
    _clean,
    _estimates_for,
    _method_cells,
    estimates_for_scopes,
    system_counts,
)
from estimators.partitioned.moment_sums import BANDS, MomentSums


def bands_scheme(study) -> dict:
    """The study's banding scheme as the snapshot records it."""
    from annotations.partitioned.services.banding import study_bands

    scheme = study_bands(study)
    return {"scheme": scheme.scheme, "n_bands": scheme.n_bands,
            "edges": list(scheme.edges) if scheme.scheme == "fixed" else None}


def banded_systems(systems: list) -> list[int]:
    """Positions (in ``systems``) of the systems that have confidence bands."""
    return [j for j, s in enumerate(systems) if s.band_edges]


def n_bands_of(systems: list) -> int:
    """The most bands any system has (0: none)."""
    return max((len(s.band_edges) + 1 for s in systems if s.band_edges), default=0)


def _band_label(lower: float | None, upper: float | None) -> str:
    if lower is None and upper is None:
        return "all"
    if lower is None:
        return f"≤ {upper:.2f}"
    if upper is None:
        return f"> {lower:.2f}"
    return f"{lower:.2f}–{upper:.2f}"


def _stats_for(counts: LabelCounts, band_counts: BandCounts, bands: np.ndarray,
               k: int) -> dict[str, np.ndarray]:
    """Totals (n_o, S_o, n_c, S_c) per banded system over the bands ``bands`` (bool per
    band)."""
    n = band_counts.n[:, bands, :].sum(axis=1)
    match = band_counts.match[:, bands, :].sum(axis=1)
    present = band_counts.present[:, bands, :].sum(axis=1)
    scope = SimpleNamespace(answer=counts.answer, n=n, match=match, present=present)
    return {name: arr.sum(axis=0) for name, arr in system_counts(scope, k).items()}


def _counts_cell(stats: dict[str, np.ndarray], j: int) -> dict:
    return {name: _clean(float(arr[j])) for name, arr in stats.items()}


def band_payload(*, systems: list, counts: LabelCounts, band_counts: BandCounts,
                 sums: MomentSums | None, k: int, interval: str) -> dict[int, dict]:
    """{system id: {"edges", "n_items", "rows", "curve"}} for every banded system.

    ``rows``: one per band — its bounds (lower < c ≤ upper; None = open end), items and
    share, mean confidence, label counts and every method's estimate (None without data).
    ``curve``: one point per threshold — all to the AI, then each edge t: the share of
    items at or below t (to humans) and the estimates on the bands above."""
    columns = banded_systems(systems)
    n_bands = band_counts.n.shape[1]
    scopes = ([np.arange(n_bands) == b for b in range(n_bands)]  # each band, then
              # each cut: the AI keeps bands cut + 1 … (0-based: cut …)
              + [np.arange(n_bands) >= cut for cut in range(n_bands)])
    stats = [_stats_for(counts, band_counts, scope, k) for scope in scopes]
    if sums is None:
        estimates = estimates_for_scopes(stats, k, interval)
    else:  # several queries per item: the clustered sums of each band, then of each cut
        kept = [*range(n_bands), *(BANDS + cut for cut in range(n_bands))]
        estimates = [_estimates_for(st, k, interval, sums.band_moments(scope))
                     for st, scope in zip(stats, kept, strict=True)]
    scoped = list(zip(stats, estimates, strict=True))
    per_band, per_cut = scoped[:n_bands], scoped[n_bands:]
    out = {}
    for j, pos in enumerate(columns):
        system = systems[pos]
        edges = [float(e) for e in system.band_edges]
        stats_rows = system.band_stats or [{"n": 0, "mean_confidence": None}] * (len(edges) + 1)
        total = sum(r["n"] for r in stats_rows)
        rows = []
        for b in range(len(edges) + 1):
            lower = edges[b - 1] if b > 0 else None
            upper = edges[b] if b < len(edges) else None
            stats, per_method = per_band[b]
            n_o, n_c = float(stats["n_ord"][j]), float(stats["n_comp"][j])
            rows.append({
                "band": b + 1, "lower": lower, "upper": upper,
                "label": _band_label(lower, upper),
                "n_items": stats_rows[b]["n"],
                "share": (stats_rows[b]["n"] / total) if total else None,
                "mean_confidence": _clean(stats_rows[b]["mean_confidence"]),
                "counts": _counts_cell(stats, j),
                "estimates": _method_cells(per_method, j, n_o, n_c, k),
            })
        curve = []
        for cut in range(len(edges) + 1):
            stats, per_method = per_cut[cut]
            n_o, n_c = float(stats["n_ord"][j]), float(stats["n_comp"][j])
            to_humans = sum(r["n"] for r in stats_rows[:cut])
            curve.append({
                "threshold": edges[cut - 1] if cut > 0 else None,
                "human_share": (to_humans / total) if total else None,
                "n_items_ai": total - to_humans,
                "counts": _counts_cell(stats, j),
                "estimates": _method_cells(per_method, j, n_o, n_c, k),
            })
        out[system.pk] = {"edges": edges, "n_items": total, "rows": rows, "curve": curve}
    return out
