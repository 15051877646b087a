"""Corrections for departures from the simple protocol (METHODS.md M1): several queries per
item (item-clustered variance), per-class completion imbalance (inverse-probability
weights) and strata sampled out of proportion (population-weighted combination).

The first two act through *effective counts*: a proportion p̂ = S/n whose honest variance
V exceeds (or falls short of) the binomial p̂(1−p̂)/n is handed to ``estimate`` as
n_eff = p̂(1−p̂)/V labels with S_eff = p̂·n_eff successes, so every estimator, interval and
bound sees the information the data really carry.
"""

from __future__ import annotations

import numpy as np


def cluster_ratio_variance(u, m) -> np.ndarray | float:
    """Sandwich (cluster-robust) variance of p̂ = Σu_i / Σm_i over clusters i (items):
    V = G/(G−1) · Σ_i (u_i − p̂ m_i)² / (Σ_i m_i)², with G the clusters that hold labels.
    ``u`` and ``m`` have clusters on axis 0 (further axes: cells, e.g. AI systems)."""
    u = np.asarray(u, dtype=float)
    m = np.asarray(m, dtype=float)
    total = m.sum(axis=0)
    groups = (m > 0).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(total > 0, u.sum(axis=0) / np.where(total > 0, total, 1), 0.0)
        resid = ((u - p * m) ** 2).sum(axis=0)
        factor = np.where(groups > 1, groups / np.maximum(groups - 1, 1), 1.0)
        var = np.where(total > 0, factor * resid / np.where(total > 0, total, 1) ** 2, 0.0)
    return float(var) if np.ndim(var) == 0 else var


def effective_counts(n, s, variance) -> tuple[np.ndarray, np.ndarray]:
    """(n_eff, S_eff) with the same proportion as S/n and binomial variance ``variance``;
    cells with p̂ ∈ {0, 1} or no variance estimate keep their counts."""
    n = np.asarray(n, dtype=float)
    s = np.asarray(s, dtype=float)
    variance = np.asarray(variance, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n > 0, s / np.where(n > 0, n, 1), 0.0)
        usable = (n > 0) & (variance > 0) & (p > 0) & (p < 1)
        n_eff = np.where(usable, p * (1 - p) / np.where(usable, variance, 1), n)
    return n_eff, p * n_eff


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
