"""Corrections for departures from the simple protocol (METHODS.md M1): per-class
completion imbalance (inverse-probability weights, Kish effective counts: a proportion
whose honest variance exceeds the binomial one is handed to ``estimate`` as fewer labels
with the same proportion) and strata sampled out of proportion (population-weighted
combination). Several queries per item: :mod:`estimators.partitioned.clustered`.
"""

from __future__ import annotations

import numpy as np

from estimators.partitioned.accuracy import NO_DATA_SE, Estimate, estimate
from estimators.partitioned.intervals import (
    RANDOMISED,
    approximate,
    confidence_interval,
    decisive_events,
)


def ipw_class_weights(answered, routed) -> np.ndarray:
    """Inverse-probability weights per class k against unequal completion: with completion
    rate r_k = answered_k / routed_k, w_k = r̄ / r_k (r̄ = Σ answered / Σ routed), so each
    class counts as if its routed queries had been answered at the common rate and the
    weighted total equals the answered total. Classes with nothing answered get 0."""
    answered = np.asarray(answered, dtype=float)
    routed = np.asarray(routed, dtype=float)
    overall = answered.sum() / routed.sum() if routed.sum() > 0 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(routed > 0, answered / np.where(routed > 0, routed, 1), 0.0)
        return np.where(rate > 0, overall / np.where(rate > 0, rate, 1), 0.0)


def weighted_effective_counts(n_g, s_g, w_g) -> tuple[np.ndarray, np.ndarray]:
    """Counts of groups g (axis 0) weighted by w_g, as effective counts: p̂_w = Σ w s / Σ w n
    and Kish's n_eff = (Σ w n)² / Σ w² n, so unequal weights cost information honestly."""
    n_g = np.asarray(n_g, dtype=float)
    s_g = np.asarray(s_g, dtype=float)
    w = np.asarray(w_g, dtype=float).reshape((-1,) + (1,) * (n_g.ndim - 1))
    wn = (w * n_g).sum(axis=0)
    w2n = (w * w * n_g).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(wn > 0, (w * s_g).sum(axis=0) / np.where(wn > 0, wn, 1), 0.0)
        n_eff = np.where(w2n > 0, wn * wn / np.where(w2n > 0, w2n, 1), 0.0)
    return n_eff, p * n_eff


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
                        confidence: float = 0.95, interval: str = "auto") -> Estimate:
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
    :class:`Estimate` (method "stratified"; ``se`` = √V)."""
    acc = np.clip(np.asarray(accuracy, float), 0.0, 1.0)
    n_eq = np.broadcast_to(np.asarray(n_equivalent, float), acc.shape)
    w = np.asarray(population_weights, dtype=float)
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError("population_weights: need non-negative weights with a positive sum")
    w = (w / w.sum()).reshape((-1,) + (1,) * (acc.ndim - 1))
    combined = (w * acc).sum(axis=0)
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
    if interval in RANDOMISED:
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


def _out(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else x


def _flag(x: np.ndarray) -> np.ndarray | bool:
    return bool(x) if np.ndim(x) == 0 else np.asarray(x, dtype=bool)
