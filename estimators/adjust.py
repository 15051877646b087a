"""Corrections for departures from the simple protocol (METHODS.md M1): per-class
completion imbalance (inverse-probability weights, Kish effective counts: a proportion
whose honest variance exceeds the binomial one is handed to ``estimate`` as fewer labels
with the same proportion) and strata sampled out of proportion (population-weighted
combination). Several queries per item: :mod:`estimators.clustered`.
"""

from __future__ import annotations

import numpy as np


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
