"""Finite-sample guarantees (METHODS.md M1, paper Theorem 2, Proposition 3, Theorem 4).

Each returns a half-width b with P(|Â − A| ≤ b) ≥ 1 − δ; cells without the labels a bound
needs get +inf (no guarantee), never NaN."""

from __future__ import annotations

import numpy as np


def _safe_div(num, den):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.inf)


def hoeffding(n, delta: float) -> np.ndarray:
    """√(log(2/δ) / (2n)) for the mean of n variables in [0, 1]."""
    return np.sqrt(_safe_div(np.log(2 / delta), 2 * np.asarray(n, float)))


def empirical_bernstein(n, s, delta: float) -> np.ndarray:
    """√(2 p̂(1−p̂) log(4/δ)/(n−1)) + 7 log(4/δ)/(3(n−1)), p̂ = s/n (Maurer–Pontil form)."""
    n = np.asarray(n, float)
    p = np.where(n > 0, s / np.where(n > 0, n, 1.0), 0.0)
    log_term = np.log(4 / delta)
    return np.sqrt(_safe_div(2 * p * (1 - p) * log_term, n - 1)) + _safe_div(7 * log_term,
                                                                             3 * (n - 1))


def ordinary_bound(n_ord, s_ord, delta: float) -> np.ndarray:
    """|Â_ord − A| ≤ min(Hoeffding, empirical Bernstein) at level δ (each at δ: the minimum
    of two bounds each valid at 1−δ/2 is used with δ split, so the pair holds jointly)."""
    return np.minimum(hoeffding(n_ord, delta / 2), empirical_bernstein(n_ord, s_ord, delta / 2))


def complementary_bound(n_comp, s_comp, k: int, delta: float) -> np.ndarray:
    """Theorem 2: (K−1) · min{√(log(2/δ)/(2n_c)), √(2q̂(1−q̂)log(4/δ)/(n_c−1)) +
    7 log(4/δ)/(3(n_c−1))}."""
    return (k - 1) * np.minimum(hoeffding(n_comp, delta), empirical_bernstein(n_comp, s_comp,
                                                                              delta))


def hoeffding_union_bound(w, n_ord, n_comp, k: int, delta: float) -> np.ndarray:
    """Proposition 3 (Hoeffding arm), δ_o = δ_c = δ/2, any weight w:
    w√(log(2/δ_o)/(2n_o)) + (1−w)(K−1)√(log(2/δ_c)/(2n_c)); a zero-weight arm adds 0."""
    with np.errstate(invalid="ignore"):  # 0 · inf in a discarded branch
        o = np.where(w > 0, w * hoeffding(n_ord, delta / 2), 0.0)
        c = np.where(w < 1, (1 - w) * (k - 1) * hoeffding(n_comp, delta / 2), 0.0)
    return o + c


def bernstein_union_bound(w, n_ord, s_ord, n_comp, s_comp, k: int, delta: float
                          ) -> np.ndarray:
    """Proposition 3 (empirical-Bernstein arm), δ_o = δ_c = δ/2, any weight w."""
    with np.errstate(invalid="ignore"):  # 0 · inf in a discarded branch
        o = np.where(w > 0, w * empirical_bernstein(n_ord, s_ord, delta / 2), 0.0)
        c = np.where(w < 1, (1 - w) * (k - 1) * empirical_bernstein(n_comp, s_comp, delta / 2),
                     0.0)
    return o + c


def fixed_weight_bound(w, n_ord, s_ord, n_comp, s_comp, k: int, delta: float) -> np.ndarray:
    """Theorem 4 (plug-in form, appendix G): √(2v log(2/δ)) + c log(2/δ) with
    v = w² Â(1−Â)/n_o + (1−w)²(K−1)² q̂(1−q̂)/n_c and c = max{w/n_o, (1−w)(K−1)/n_c}.
    Valid only when w does not come from the same data."""
    n_ord, n_comp = np.asarray(n_ord, float), np.asarray(n_comp, float)
    a = np.where(n_ord > 0, s_ord / np.where(n_ord > 0, n_ord, 1.0), 0.0)
    q = np.where(n_comp > 0, s_comp / np.where(n_comp > 0, n_comp, 1.0), 0.0)
    with np.errstate(invalid="ignore"):  # 0 · inf in a discarded branch
        v_o = np.where(w > 0, w**2 * _safe_div(a * (1 - a), n_ord), 0.0)
        v_c = np.where(w < 1, (1 - w) ** 2 * (k - 1) ** 2 * _safe_div(q * (1 - q), n_comp),
                       0.0)
        c = np.maximum(np.where(w > 0, _safe_div(w, n_ord), 0.0),
                       np.where(w < 1, _safe_div((1 - w) * (k - 1), n_comp), 0.0))
    log_term = np.log(2 / delta)
    return np.sqrt(2 * (v_o + v_c) * log_term) + c * log_term
