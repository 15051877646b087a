"""Likelihood-ratio (profile) intervals for the joint ordinary + complementary likelihood.

ℓ(A) = S_o log A + T_o log(1−A) + S_c log q + T_c log(1−q),  q = (A+K−2)/(K−1),
is concave in A on [0, 1], so {A : 2(ℓ(Â) − ℓ(A)) ≤ χ²₁(confidence)} is an interval whose
ends are found by vectorised bisection on [0, Â] and [Â, 1]. Unlike the Wald interval it
does not collapse when Â ∈ {0, 1} (a perfect score still gets a lower end below 1).
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

BISECTION_STEPS = 40  # interval ends to within 2⁻⁴⁰ ≈ 1e-12


def log_likelihood(a, n_ord, s_ord, n_comp, s_comp, k: int) -> np.ndarray:
    """ℓ(A) up to a constant, with 0·log 0 = 0 (METHODS.md M1)."""
    a = np.asarray(a, dtype=float)
    q = (a + k - 2) / (k - 1)
    return (special.xlogy(s_ord, a) + special.xlogy(n_ord - s_ord, 1 - a)
            + special.xlogy(s_comp, q) + special.xlogy(n_comp - s_comp, 1 - q))


def likelihood_ratio_interval(n_ord, s_ord, n_comp, s_comp, k: int, confidence: float,
                              mle=None) -> tuple[np.ndarray, np.ndarray]:
    """Ends of the likelihood-ratio interval for A (cells without data get [0, 1])."""
    from estimators.partitioned import ml_accuracy

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
