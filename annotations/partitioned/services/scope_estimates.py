"""Every estimator method on one scope of a partitioned study's answered labels (the whole
study, a stratum, a confidence band): the sufficient statistics of METHODS.md M1, their
item clusters (several queries per item), every method's estimate, and the JSON-safe
per-system cells a snapshot stores. Shared by the recompute (``estimates``) and the
per-band estimates (``band_estimates``)."""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
from scipy import sparse

from annotations.partitioned.models import Query
from annotations.partitioned.selectors import ItemLabels
from estimators.partitioned.accuracy import estimate
from estimators.partitioned.clustered import Clusters, design_effects, estimate_clustered
from estimators.partitioned.moment_sums import LabelArrays, MomentSums, moment_sums

METHODS = ("ord", "comp", "ivw", "ivw_pilot", "ivw_fixed", "ml")
ESTIMATE_FIELDS = ("accuracy", "accuracy_clipped", "se", "ci_low", "ci_high", "bound",
                   "weight")  # and "approximate" (:func:`approximate_column`)
CONFIDENCE = 0.95


NUMPY_TYPES = (np.generic, np.ndarray)


def _clean(value):
    """JSON-safe scalar: numpy → Python, non-finite → None."""
    if value is None:
        return None
    if isinstance(value, NUMPY_TYPES):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def system_counts(counts, k: int) -> dict[str, np.ndarray]:
    """Per-system (columns) and per-group sufficient statistics of METHODS.md M1.

    Ordinary ('yes' to class k): z = 1{ŷ = k}. Complementary ('no'): w = 1{ŷ ≠ k}, and a
    missing prediction scores w = (K−2)/(K−1) so it adds exactly 0 to Â_comp. With K = 2 a
    'no' to class k is an ordinary label of the other class and is counted as such."""
    yes = (counts.answer == Query.Answer.YES)[:, None]
    no = (counts.answer == Query.Answer.NO)[:, None]
    n = counts.n[:, None] if counts.n.ndim == 1 else counts.n  # per system: a band's counts
    if k == 2:
        n_ord = np.broadcast_to((yes * n) + (no * n), counts.match.shape)
        s_ord = yes * counts.match + no * (counts.present - counts.match)
        zeros = np.zeros(counts.match.shape)
        return {"n_ord": n_ord, "s_ord": s_ord, "n_comp": zeros, "s_comp": zeros}
    missing_score = (k - 2) / (k - 1)
    n_ord = np.broadcast_to(yes * n, counts.match.shape)
    s_ord = yes * counts.match
    n_comp = np.broadcast_to(no * n, counts.match.shape)
    s_comp = no * ((counts.present - counts.match) + missing_score * (n - counts.present))
    return {"n_ord": n_ord, "s_ord": s_ord, "n_comp": n_comp, "s_comp": s_comp}


def label_clusters(labels: ItemLabels, k: int, weights: np.ndarray | None = None,
                   include: np.ndarray | None = None) -> Clusters:
    """Per-item sums of the labels (METHODS.md M1's z and w, as in :func:`system_counts`),
    each label weighted by ``weights`` (per label; None: 1): the clusters of the
    item-clustered variance. Three sparse products (items × labels) @ (labels × systems)
    of the mask bits: Σ over "yes" of the match bit, Σ over "no" of the match and present
    bits. ``include`` (labels × systems, 0/1): only those labels count for that system (a
    confidence band)."""
    n = len(labels.yes)
    weight = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    rows = np.arange(n)

    def over(selected: np.ndarray) -> sparse.csr_matrix:
        return sparse.csr_matrix((weight * selected, (labels.item, rows)),
                                 shape=(labels.n_items, n))

    on_yes, on_no = over(labels.yes), over(~labels.yes)
    match, present = labels.match, labels.present
    if include is not None:
        match, present = match * include, present * include
    yes_match = np.asarray(on_yes @ match, dtype=float)
    no_match = np.asarray(on_no @ match, dtype=float)
    no_present = np.asarray(on_no @ present, dtype=float)
    if include is None:
        n_yes = np.asarray(on_yes.sum(axis=1), dtype=float)
        n_no = np.asarray(on_no.sum(axis=1), dtype=float)
    else:
        n_yes = np.asarray(on_yes @ include, dtype=float)
        n_no = np.asarray(on_no @ include, dtype=float)
    if k == 2:  # a "no" is an ordinary label of the other class
        zeros = np.zeros_like(n_yes)
        return Clusters(n_ord=n_yes + n_no, s_ord=yes_match + no_present - no_match,
                        n_comp=zeros, s_comp=np.zeros_like(yes_match))
    # w = 1 − match where the prediction is present, (K−2)/(K−1) where it is missing
    s_comp = no_present - no_match + (k - 2) / (k - 1) * (n_no - no_present)
    return Clusters(n_ord=n_yes, s_ord=yes_match, n_comp=n_no, s_comp=s_comp)


def labels_moment_sums(labels: ItemLabels, k: int, banded: list[int] | None = None
                       ) -> MomentSums:
    """The clustered variance's sums (``estimators.partitioned.moment_sums``) of ``labels``
    — what ``services.tally_moments`` keeps — each label in its own stratum's cluster of its
    item, strata in sorted order; ``banded``: the columns of the systems with confidence
    bands (their sums per band scope too)."""
    names = sorted(labels.strata)
    order = np.array([names.index(h) for h in labels.strata], dtype=np.int64)
    arrays = LabelArrays(
        cluster=np.asarray(labels.item, dtype=np.int64),
        stratum=order[labels.stratum] if len(order) else np.zeros(0, np.int64),
        strata=tuple(names), k=np.asarray(labels.k, dtype=np.int64),
        yes=np.asarray(labels.yes, dtype=bool),
        code=(np.asarray(labels.present, np.int64) | np.asarray(labels.match, np.int64) << 1),
        band=(np.asarray(labels.band, np.int64)[:, banded] if banded else None),
        band_columns=tuple(banded or ()))
    return moment_sums(arrays, k, labels.match.shape[1])


def _columns(est) -> dict[str, list | None]:
    fields = asdict(est)
    out = {name: np.atleast_1d(np.asarray(fields[name], dtype=float)).tolist()
           if fields.get(name) is not None else None for name in ESTIMATE_FIELDS}
    return {**out, "approximate": approximate_column(est)}


def approximate_column(est) -> list[bool]:
    """Per cell of ``est``, as the other columns: whether its interval is approximate — it
    rests on so few events that its real coverage stands away from 95 %
    (:func:`estimators.partitioned.intervals.approximate`)."""
    flags = np.broadcast_to(np.asarray(est.approximate, dtype=bool), np.shape(est.ci_low))
    return np.atleast_1d(flags).tolist()


def _estimates_for(stats: dict[str, np.ndarray], k: int, interval: str,
                   clusters: Clusters | None = None,
                   effects=None, methods: tuple[str, ...] = METHODS
                   ) -> dict[str, dict[str, list]]:
    """Every method (of ``methods``) for every system of one scope: from the counts
    ``stats``, or, with several queries per item, from ``clusters`` (item-clustered
    variance; ``effects`` their design effects when already computed)."""
    out = {}
    if clusters is not None and effects is None:
        effects = design_effects(clusters, k)
    for method in methods:
        if clusters is not None:
            est = estimate_clustered(clusters, k, method, CONFIDENCE, interval=interval,
                                     effects=effects)
        else:
            est = estimate(stats["n_ord"], stats["s_ord"], stats["n_comp"], stats["s_comp"],
                           k, method=method, confidence=CONFIDENCE, interval=interval)
        out[method] = _columns(est)
        # False where the finite-sample bound's assumptions fail (Theorem 4 with a weight
        # taken from the data; labels clustered by item)
        n_cells = len(out[method]["accuracy"])
        out[method]["bound_valid"] = [bool(est.bound_valid)] * n_cells
    return out


def estimates_for_scopes(stats: list[dict[str, np.ndarray]], k: int, interval: str
                         ) -> list[dict[str, dict[str, list]]]:
    """``_estimates_for`` of each scope's counts (one query per item: no clusters), from one
    call over the scopes' counts side by side: the estimators work cell by cell, so the
    result is the same, and the scopes (bands, cuts, strata) cost one call per method
    instead of one each (Blaker's search for the single-source columns runs its rounds
    once for all of them)."""
    if not stats:
        return []
    size = len(next(iter(stats[0].values())))
    joined = {name: np.concatenate([st[name] for st in stats]) for name in stats[0]}
    together = _estimates_for(joined, k, interval)
    return [{method: {field: (None if values is None else values[i * size:(i + 1) * size])
                      for field, values in columns.items()}
             for method, columns in together.items()} for i in range(len(stats))]


def _cell(values: dict[str, list | None], j: int) -> dict:
    """System j's fields out of per-method column lists."""
    return {f: (_clean(v[j]) if v is not None else None) for f, v in values.items()}


def _has_data(method: str, n_ord: float, n_comp: float, k: int) -> bool:
    """Whether ``method`` has labels to estimate from (contract 1 of issue 8): "comp" needs
    complementary labels (none exist with K = 2), "ord" ordinary ones, the others either.
    Without, the payload holds null: the estimators' no-data convention (0.5, [0, 1]) is
    never shown as a figure."""
    if method == "comp":
        return k > 2 and n_comp > 0
    if method == "ord":
        return n_ord > 0
    return n_ord + n_comp > 0


def _method_cells(per_method: dict, j: int, n_ord: float, n_comp: float, k: int) -> dict:
    return {m: (_cell(v, j) if _has_data(m, n_ord, n_comp, k) else None)
            for m, v in per_method.items()}
