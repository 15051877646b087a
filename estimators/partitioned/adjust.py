"""Corrections for departures from the simple protocol (METHODS.md M1): per-class
completion imbalance (inverse-probability weights; the weighted labels are handed to
``estimate`` as effective counts — fewer labels with the same proportions, so that the
binomial variance of the fewer is the weighted one's honest variance) and strata sampled
out of proportion (population-weighted combination). Several queries per item:
:mod:`estimators.partitioned.clustered`.
"""

from __future__ import annotations

import numpy as np

from estimators.partitioned.accuracy import NO_DATA_SE, Estimate, _flag, _out, estimate
from estimators.partitioned.intervals import (
    RANDOMISED,
    approximate,
    confidence_interval,
    decisive_events,
)
from estimators.partitioned.likelihood import ml_accuracy


def ipw_class_weights(answered, routed) -> np.ndarray:
    """Inverse-probability weights per class k against unequal completion: with completion
    rate r_k = answered_k / routed_k, w_k = r̄ / r_k (r̄ = Σ answered / Σ routed), so each
    class counts as if its routed queries had been answered at the common rate and the
    weighted total equals the answered total. Classes with nothing answered get 0. Classes
    on axis 0 (further axes: separate studies)."""
    answered = np.asarray(answered, dtype=float)
    routed = np.asarray(routed, dtype=float)
    total = routed.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        overall = np.where(total > 0, answered.sum(axis=0) / np.where(total > 0, total, 1), 0.0)
        rate = np.where(routed > 0, answered / np.where(routed > 0, routed, 1), 0.0)
        return np.where(rate > 0, overall / np.where(rate > 0, rate, 1), 0.0)


def _per_group(weights, like: np.ndarray) -> np.ndarray:
    """Group weights (axis 0) broadcastable against counts ``like``: one weight per group
    (shape (groups,)) or one per group and cell (the shape of ``like``)."""
    w = np.asarray(weights, dtype=float)
    if w.ndim == 1 and like.ndim > 1:
        w = w.reshape((-1,) + (1,) * (like.ndim - 1))
    return w


def weighted_effective_counts(n_g, s_g, w_g) -> tuple[np.ndarray, np.ndarray]:
    """Counts of groups g (axis 0) weighted by w_g (one per group, or one per group and
    cell), as effective counts: p̂_w = Σ w s / Σ w n and Kish's n_eff = (Σ w n)² / Σ w² n,
    so unequal weights cost information honestly."""
    n_g = np.asarray(n_g, dtype=float)
    s_g = np.asarray(s_g, dtype=float)
    w = _per_group(w_g, n_g)
    wn = (w * n_g).sum(axis=0)
    w2n = (w * w * n_g).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(wn > 0, (w * s_g).sum(axis=0) / np.where(wn > 0, wn, 1), 0.0)
        n_eff = np.where(w2n > 0, wn * wn / np.where(w2n > 0, w2n, 1), 0.0)
    return n_eff, p * n_eff


def ipw_effective_counts(n_ord, s_ord, n_comp, s_comp, weights, k: int,
                         n_comp_missing=None) -> tuple[np.ndarray, ...]:
    """The IPW column with one query per item: labels of group g (a class; groups on axis
    0, cells — AI systems, replicate studies — on further axes) weighted by w_g, handed to
    ``estimate`` as effective counts (N_o, S_o, N_c, S_c)/d — the weighted totals
    N = Σ_g w_g n_g, S = Σ_g w_g s_g (so the ML estimate is that of the weighted
    likelihood) divided by one design effect d, as the several-queries column does
    (:mod:`estimators.partitioned.clustered`; here each label is its own item).

    d = max(d_sandwich, d_model) at Â = the ML estimate of the weighted totals:

    * d_sandwich = Σ_labels w² u(Â)² / Σ_labels w i(Â), the weighted score's sandwich over
      the model information (u: a label's score, i: its observed information; METHODS.md
      M1's ℓ: an ordinary label u² = i = 1/Â² if correct, 1/(1−Â)² if not; a complementary
      one (K−1)⁻² times 1/q² or 1/(1−q)², and a missing prediction, scored
      m = (K−2)/(K−1), u² = (m/q − (1−m)/(1−q))²/(K−1)² — ``n_comp_missing`` of them per
      group, default none). It carries the spread of accuracy between classes of unequal
      weight, which Kish's count of each source (:func:`weighted_effective_counts`, the
      former rule) misses: where slow classes are the hard ones, Kish's intervals covered
      93.2–94.0 % with 2 000 answered queries (docs/coverage.md).
    * d_model = Σ_g w_g² (n_o,g + c n_c,g) / Σ_g w_g (n_o,g + c n_c,g), c = Â/(Â+K−2): its
      expectation under the model where accuracy is the same in every class (Kish's
      formula over the information, c being a complementary label's information relative
      to an ordinary one's). Where errors are few the sandwich is itself a count of a few
      weighted events, small by chance exactly when the errors fell on light classes; the
      maximum keeps the interval from narrowing then (the sandwich alone covered 92.2 % at
      K = 5, A = 0.97 with 300 answered queries).

    At Â ∈ {0, 1} the sandwich is 0/0 and d = d_model. Cells without labels keep d = 1.
    With equal weights d = 1 and the counts are the plain ones."""
    totals, sandwich, model = ipw_design_effects(n_ord, s_ord, n_comp, s_comp, weights, k,
                                                 n_comp_missing)
    d = np.where(np.isfinite(sandwich), np.maximum(sandwich, model), model)
    d = np.where(d > 0, d, 1.0)
    return tuple(t / d for t in totals)


def ipw_design_effects(n_ord, s_ord, n_comp, s_comp, weights, k: int,
                       n_comp_missing=None) -> tuple[tuple[np.ndarray, ...], np.ndarray,
                                                     np.ndarray]:
    """(weighted totals (N_o, S_o, N_c, S_c), d_sandwich, d_model) of
    :func:`ipw_effective_counts` (its docstring has the formulas); d_sandwich is NaN where
    Â ∈ {0, 1}, d_model is 1 for a cell without labels."""
    n_o, s_o, n_c, s_c = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (n_ord, s_ord, n_comp, s_comp)))
    w = _per_group(weights, n_o)
    missing = (np.zeros_like(n_c) if n_comp_missing is None
               else np.broadcast_to(np.asarray(n_comp_missing, float), n_c.shape))
    totals = tuple((w * x).sum(axis=0) for x in (n_o, s_o, n_c, s_c))
    a_hat = ml_accuracy(*totals, k)
    inside = (a_hat > 0) & (a_hat < 1)
    a = np.where(inside, a_hat, 0.5)
    info_o = s_o / a**2 + (n_o - s_o) / (1 - a) ** 2
    meat, info = info_o, info_o
    c = 0.0
    if k >= 3:
        q = (a + k - 2) / (k - 1)
        m = (k - 2) / (k - 1)
        hits_missed = s_c - m * missing  # complementary labels scoring 1
        info_c = (s_c / q**2 + (n_c - s_c) / (1 - q) ** 2) / (k - 1) ** 2
        meat_c = (hits_missed / q**2 + (n_c - hits_missed - missing) / (1 - q) ** 2
                  + missing * (m / q - (1 - m) / (1 - q)) ** 2) / (k - 1) ** 2
        meat, info = info_o + meat_c, info_o + info_c
        clipped = np.clip(a_hat, 0.0, 1.0)
        c = clipped / (clipped + k - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        sandwich = (w * w * meat).sum(axis=0) / (w * info).sum(axis=0)
        model_num = (w * w * (n_o + c * n_c)).sum(axis=0)
        model_den = (w * (n_o + c * n_c)).sum(axis=0)
        model = np.where(model_den > 0, model_num / np.where(model_den > 0, model_den, 1.0),
                         1.0)
    return totals, np.where(inside, sandwich, np.nan), model


def stratified_combine(accuracy, se, population_weights) -> tuple[np.ndarray, np.ndarray]:
    """Population-weighted accuracy Σ_h W_h Â_h (W normalised to 1 over strata, axis 0)
    with SE √(Σ_h W_h² SE_h²): strata sampled out of proportion are put back in
    proportion. Strata without labels enter with the estimators' no-data value and SE."""
    acc = np.asarray(accuracy, dtype=float)
    se = np.asarray(se, dtype=float)
    w = np.asarray(population_weights, dtype=float)
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError("population_weights: need non-negative weights with a positive sum")
    w = (w / w.sum()).reshape((-1,) + (1,) * (acc.ndim - 1))
    combined = (w * acc).sum(axis=0)
    combined_se = np.sqrt((w * w * se * se).sum(axis=0))
    return combined, combined_se


def binomial_equivalent(accuracy, n_ord, n_comp, k: int, design_effect=1.0) -> np.ndarray:
    """The number of independent yes/no trials that would estimate A as precisely as the
    labels do at A = ``accuracy``: A(1−A)·I(A)/d with I the joint model information and d
    the design effect (several queries per item), i.e.
    n* = (n_o + n_c A/(A+K−2)) / d — finite at A ∈ {0, 1}, where A(1−A)/n* is 0."""
    a = np.clip(np.asarray(accuracy, float), 0.0, 1.0)
    comp = np.asarray(n_comp, float) * a / (a + k - 2) if k >= 3 else 0.0
    return (np.asarray(n_ord, float) + comp) / np.asarray(design_effect, float)


def stratified_estimate(accuracy, n_equivalent, population_weights, k: int,
                        confidence: float = 0.95, interval: str = "auto",
                        stratum_intervals=None) -> Estimate:
    """Population-weighted accuracy Â = Σ_h W_h Â_h (strata on axis 0; W normalised to 1)
    with an interval that stays honest where events are few.

    Variance V = Σ_h W_h² p_h(1−p_h)/n*_h from each stratum's binomial-equivalent count n*_h
    (:func:`binomial_equivalent`; p_h = Â_h, or Â for a stratum at 0 or 1, whose own
    variance estimate would be 0; a stratum without labels enters with the no-data variance
    1/12). The interval treats Â as a proportion of n* = Â(1−Â)/V effective trials (Korn and
    Graubard's effective sample size for survey proportions; where V = 0, Kish's
    1/Σ W_h²/n*_h) and takes the interval of that binomial in ``interval`` mode — the
    likelihood ratio, or mid-p exact where events are few — so a perfect score does not
    collapse the interval to a point as a Wald interval on Σ W_h² SE_h² did. Returns an
    :class:`Estimate` (method "stratified"; ``se`` = √V).

    ``stratum_intervals`` = (low_h, high_h), each stratum's own interval for A_h (the
    per-stratum figures the dashboard shows, strata on axis 0), replaces that interval by
    their combination (MOVER, the method of variance estimates recovery of Zou and Donner,
    as Newcombe's interval for a difference combines two Wilson intervals):

        Â − √(Σ_h W_h² (Â_h − low_h)²),   Â + √(Σ_h W_h² (high_h − Â_h)²).

    Each stratum then brings its own small-sample behaviour — its exact interval where its
    events are few, asymmetric near 0 or 1 — where the effective-count interval above
    borrows one variance for all: with one query per item and strata of 40 to 160 items
    it covered 92.9 %, the combination 95.5 % (docs/coverage.md)."""
    acc = np.clip(np.asarray(accuracy, float), 0.0, 1.0)
    n_eq = np.broadcast_to(np.asarray(n_equivalent, float), acc.shape)
    w = np.asarray(population_weights, dtype=float)
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError("population_weights: need non-negative weights with a positive sum")
    w = (w / w.sum()).reshape((-1,) + (1,) * (acc.ndim - 1))
    combined = np.clip((w * acc).sum(axis=0), 0.0, 1.0)  # a sum of 1s may exceed 1 by 1 ulp
    p = np.where((acc > 0) & (acc < 1), acc, combined)
    has = n_eq > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        var_h = np.where(has, p * (1 - p) / np.where(has, n_eq, 1.0), NO_DATA_SE**2)
        kish = np.where(has, w * w / np.where(has, n_eq, 1.0), np.inf).sum(axis=0)
    var = (w * w * var_h).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_star = np.where(var > 0, combined * (1 - combined) / np.where(var > 0, var, 1.0),
                          np.where(kish > 0, 1 / kish, 0.0))
    n_star = np.where(np.isfinite(n_star), n_star, 0.0)
    no_data = n_star <= 0
    if stratum_intervals is not None:
        low_h, high_h = (np.broadcast_to(np.asarray(x, float), acc.shape)
                         for x in stratum_intervals)
        below = np.maximum(acc - np.clip(low_h, 0.0, 1.0), 0.0)
        above = np.maximum(np.clip(high_h, 0.0, 1.0) - acc, 0.0)
        lo = np.clip(combined - np.sqrt((w * w * below * below).sum(axis=0)), 0.0, 1.0)
        hi = np.clip(combined + np.sqrt((w * w * above * above).sum(axis=0)), 0.0, 1.0)
    elif interval in RANDOMISED:
        est = estimate(n_star, combined * n_star, 0.0, 0.0, k, "ord", confidence,
                       interval=interval)
        lo, hi = est.ci_low, est.ci_high
    else:  # the joint likelihood's interval of n* trials (not the single-source columns')
        lo, hi = confidence_interval(np.where(no_data, 1.0, n_star),
                                     np.where(no_data, 0.5, combined * n_star), 0.0, 0.0, k,
                                     confidence, mle=combined, method=interval)
    # the events of the n* effective trials the interval is built from
    events = np.where(no_data, np.inf, decisive_events(n_star, combined * n_star, 0.0, 0.0, k,
                                                       combined, "ord"))
    return Estimate(method="stratified", k=int(k), confidence=confidence,
                    accuracy=_out(combined), accuracy_clipped=_out(combined),
                    se=_out(np.sqrt(var)),
                    ci_low=_out(np.where(no_data, 0.0, np.minimum(lo, combined))),
                    ci_high=_out(np.where(no_data, 1.0, np.maximum(hi, combined))),
                    weight=None, bound=None, events=_out(events),
                    approximate=_flag(approximate(events)))
