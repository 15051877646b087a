"""The joint ordinary + complementary likelihood of A (METHODS.md M1), and what the other
modules of :mod:`estimators.partitioned` build on it: the closed-form ML estimate, the
Fisher-information SE and the likelihood-ratio interval.

With n_o ordinary labels of which S_o are correct (T_o = n_o − S_o) and n_c complementary
labels summing to S_c (T_c = n_c − S_c),

    ℓ(A) = S_o log A + T_o log(1−A) + S_c log q + T_c log(1−q),  q = (A+K−2)/(K−1),

concave in A on [0, 1]. Every function is vectorised: counts broadcast.

No-data convention (never NaN): a cell without labels gets accuracy ``NO_DATA_ACCURACY``
(0.5), SE ``NO_DATA_SE`` (√(1/12), the sd of a uniform prior) and interval [0, 1].

This module imports nothing of the package: :mod:`.exact_grid`, :mod:`.exact`,
:mod:`.intervals` and :mod:`.accuracy` stand on it, in that order.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

NO_DATA_ACCURACY = 0.5
NO_DATA_SE = float(np.sqrt(1 / 12))
BISECTION_STEPS = 40  # interval ends to within 2⁻⁴⁰ ≈ 1e-12


def log_likelihood(a, n_ord, s_ord, n_comp, s_comp, k: int) -> np.ndarray:
    """ℓ(A) up to a constant, with 0·log 0 = 0 (METHODS.md M1)."""
    a = np.asarray(a, dtype=float)
    q = (a + k - 2) / (k - 1)
    return (special.xlogy(s_ord, a) + special.xlogy(n_ord - s_ord, 1 - a)
            + special.xlogy(s_comp, q) + special.xlogy(n_comp - s_comp, 1 - q))


def ml_accuracy(n_ord, s_ord, n_comp, s_comp, k: int) -> np.ndarray:
    """Closed-form maximiser of ℓ(A) = S_o log A + T_o log(1−A) + S_c log q + T_c log(1−q),
    q = (A+K−2)/(K−1): the root in [0, 1] of α A² + β A + γ with α = n_o + n_c,
    β = (K−2)(T_o+T_c) + (K−3) S_o − S_c, γ = −(K−2) S_o. Evaluated in the cancellation-free
    form −2γ / (β + √(β²−4αγ)) when β > 0; exactly 1 when T_o + T_c = 0. Reduces to
    Â_ord when n_c = 0 and to max(0, Â_comp) when n_o = 0 (K ≥ 3). No data → 0.5."""
    t = (n_ord - s_ord) + (n_comp - s_comp)
    alpha = n_ord + n_comp
    beta = (k - 2) * t + (k - 3) * s_ord - s_comp
    gamma = -(k - 2) * s_ord
    root = np.sqrt(np.maximum(beta * beta - 4 * alpha * gamma, 0.0))
    has = alpha > 0
    safe_alpha = np.where(has, alpha, 1.0)
    denom = beta + root
    with np.errstate(divide="ignore", invalid="ignore"):
        stable = np.where(denom > 0, -2 * gamma / np.where(denom > 0, denom, 1.0), 0.0)
    a = np.where(beta > 0, stable, (-beta + root) / (2 * safe_alpha))
    if k == 2:  # the likelihood is then binomial in A with all labels ordinary-like
        a = np.where(has, (s_ord + s_comp) / safe_alpha, a)
    # no label against the AI: the root is 1 exactly (fractional counts — effective counts,
    # missing predictions — would otherwise leave it a rounding error below)
    a = np.where(t <= 0, 1.0, a)
    return np.where(has, np.clip(a, 0.0, 1.0), NO_DATA_ACCURACY)


def fisher_se(a: np.ndarray, n_ord, n_comp, k: int) -> np.ndarray:
    """Large-sample SE [n_o/(A(1−A)) + n_c/((K−1)² q(1−q))]^(−1/2), q = (A+K−2)/(K−1).
    At A ∈ {0, 1} the information is infinite and the SE is 0 (the interval, from the
    likelihood ratio, stays honest there)."""
    q = (a + k - 2) / (k - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        info = np.where(n_ord > 0, n_ord / (a * (1 - a)), 0.0)
        info = info + np.where(n_comp > 0, n_comp / ((k - 1) ** 2 * q * (1 - q)), 0.0)
        se = np.where(np.isfinite(info) & (info > 0), 1 / np.sqrt(info), 0.0)
    no_data = (n_ord + n_comp) <= 0
    return np.where(no_data, NO_DATA_SE, se)


def likelihood_ratio_interval(n_ord, s_ord, n_comp, s_comp, k: int, confidence: float,
                              mle=None) -> tuple[np.ndarray, np.ndarray]:
    """Ends of the likelihood-ratio interval for A (cells without data get [0, 1]):
    {A : 2(ℓ(Â) − ℓ(A)) ≤ χ²₁(confidence)}, Â = ``mle`` (default :func:`ml_accuracy`). ℓ is
    concave, so this is an interval, whose ends are found by vectorised bisection on [0, Â]
    and [Â, 1]. Unlike the Wald interval it does not collapse when Â ∈ {0, 1} (a perfect
    score still gets a lower end below 1)."""
    n_ord, s_ord, n_comp, s_comp = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (n_ord, s_ord, n_comp, s_comp)))
    a_hat = ml_accuracy(n_ord, s_ord, n_comp, s_comp, k) if mle is None else np.asarray(mle)
    cut = log_likelihood(a_hat, n_ord, s_ord, n_comp, s_comp, k) - stats.chi2.ppf(
        confidence, 1) / 2

    def ell(a):
        return log_likelihood(a, n_ord, s_ord, n_comp, s_comp, k)

    # lower end: ℓ increases on [0, Â]; keep lo where ℓ(lo) < cut, hi where ℓ(hi) ≥ cut
    lo, hi = np.zeros_like(a_hat), a_hat.copy()
    inside = ell(lo) >= cut
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        below = ell(mid) < cut
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    lower = np.where(inside, 0.0, hi)
    # upper end: ℓ decreases on [Â, 1]
    lo, hi = a_hat.copy(), np.ones_like(a_hat)
    inside = ell(hi) >= cut
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        below = ell(mid) < cut
        lo, hi = np.where(below, lo, mid), np.where(below, mid, hi)
    upper = np.where(inside, 1.0, lo)
    no_data = (n_ord + n_comp) <= 0
    return np.where(no_data, 0.0, lower), np.where(no_data, 1.0, upper)
