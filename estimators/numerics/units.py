"""Intervals for means over independent units (the sentences of an assisted study), closed
form and deterministic: the assisted hybridization figures — the threshold curve's bars,
held-out thresholds, bands, the results table (issue 18; docs/coverage.md "Assisted:
hybridization").

Each unit i contributes a value x_i ∈ [0, 1] (a sentence labelled right or wrong, or the
share of its ratings that are right). The mean p̂ = Σ x_i / n has the variance estimate
(from the moments Σ x, Σ x², so a whole curve of thresholds costs cumulative sums, not a
matrix)

    V = n/(n−1) · (Σ x² − n p̂²) / n²

and the effective size n* = p̂(1−p̂)/V (:func:`estimators.numerics.clustered.
effective_size`: n* = n where p̂ ∈ {0, 1}; n* = n − 1 for 0/1 values; at most 2n).

* A mean gets the Clopper–Pearson interval at the effective size (Korn & Graubard 1998,
  "Confidence intervals for proportions with small expected number of positive counts
  estimated from survey data", Survey Methodology 24): with x* = n* p̂,
  lower = B⁻¹(α/2; x*, n* − x* + 1), upper = B⁻¹(1 − α/2; x* + 1, n* − x*) (B⁻¹ the beta
  quantile; 0 and 1 at the ends). For 0/1 values the count is binomial and this is
  Clopper–Pearson's interval on n − 1 trials: coverage ≥ the level at every accuracy.
  Wilson's interval (the reliance tables' choice) fell to 91 % at accuracies 0.97–0.99
  with 25–150 sentences.
* A paired difference p̂₁ − p̂₂ of two values on the same units (hybrid minus AI alone) is
  Newcombe's hybrid score interval from the two Wilson intervals at the effective sizes
  with Student t on n − 1 degrees of freedom (:func:`estimators.numerics.clustered.
  wilson_t_bounds`) and their correlation φ = Ĉov / √(V₁V₂),
  Ĉov = n/(n−1) (Σ x₁x₂ − n p̂₁p̂₂)/n² (0 when a variance is 0): the interval
  ``clustered_difference`` gives with one observation per cluster.

Why not the sentence bootstrap (the former intervals): its percentile interval collapses to
a point when every value is the same (all held-out sentences above the threshold: a gain of
exactly 0 whatever the population's), and it covered 66–85 % for held-out gains and down to
82 % for the curve at 50 sentences (docs/coverage.md); it also cost thousands of resamples per
recompute.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from estimators.numerics.bootstrap import UNDEFINED, IntervalEstimate, check_level
from estimators.numerics.clustered import effective_size, newcombe_bounds, wilson_t_bounds

# Σx² − n p̂² below this share of Σx² is rounding, not spread: units all of one value
# (e.g. 1/3) leave ~1e-17 there, whose square root would move an interval's end by 1e-9
# depending on the order the sums were added in.
ROUNDING_SPREAD = 1e-12


def _variance(n: np.ndarray, sx: np.ndarray, sxx: np.ndarray) -> np.ndarray:
    """The units' variance of the mean, Σ(x − p̂)² / (n(n − 1)) from Σx and Σx² (0 where
    the spread is rounding: ``ROUNDING_SPREAD``; NaN below two units)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        p = sx / n
        spread = sxx - n * p * p
        spread = np.where(spread > ROUNDING_SPREAD * np.abs(sxx), spread, 0.0)
        return np.where(n >= 2, spread / (n * (n - 1)), np.nan)


def _wilson_t(n: np.ndarray, sx: ArrayLike, sxx: ArrayLike, level: float
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    sx, sxx = np.asarray(sx, dtype=float), np.asarray(sxx, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n > 0, sx / n, np.nan)
    v = _variance(n, sx, sxx)
    lower, upper = wilson_t_bounds(p, v, n, n, interval_level=level)
    return p, lower, upper, v


def mean_bounds(n: ArrayLike, sx: ArrayLike, sxx: ArrayLike, *, level: float = 0.95
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p̂, lower, upper) of the mean of n units from Σ x and Σ x²: Clopper–Pearson at
    the effective size (module docstring); vectorised over cells."""
    check_level(level)
    n, sx, sxx = (np.asarray(v, dtype=float) for v in (n, sx, sxx))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n > 0, sx / n, np.nan)
    n_eff = effective_size(p, _variance(n, sx, sxx), n, n)
    x = p * n_eff
    alpha = 1 - level
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = np.where(x > 0, special.betaincinv(x, n_eff - x + 1, alpha / 2), 0.0)
        upper = np.where(x < n_eff, special.betaincinv(x + 1, n_eff - x, 1 - alpha / 2),
                         1.0)
    ok = n >= 2
    lower = np.where(ok, np.minimum(lower, p), np.where(n > 0, 0.0, np.nan))
    upper = np.where(ok, np.maximum(upper, p), np.where(n > 0, 1.0, np.nan))
    return p, lower, upper


def difference_bounds(n: ArrayLike, s1: ArrayLike, ss1: ArrayLike, s2: ArrayLike,
                      ss2: ArrayLike, s12: ArrayLike, *, level: float = 0.95
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p̂₁ − p̂₂, lower, upper) for two values on the same n units from Σ x₁, Σ x₁²,
    Σ x₂, Σ x₂², Σ x₁x₂: Newcombe's interval (module docstring); vectorised."""
    check_level(level)
    n = np.asarray(n, dtype=float)
    (p1, l1, u1, v1), (p2, l2, u2, v2) = (_wilson_t(n, s, ss, level)
                                          for s, ss in ((s1, ss1), (s2, ss2)))
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = (np.asarray(s12, float) - n * p1 * p2) / (n * (n - 1))
        phi = np.where((v1 > 0) & (v2 > 0), cov / np.sqrt(v1 * v2), 0.0)
    phi = np.clip(np.where(np.isfinite(phi), phi, 0.0), -1, 1)
    lower, upper = newcombe_bounds(p1, l1, u1, p2, l2, u2, phi)
    return p1 - p2, lower, upper


def unit_means(values: ArrayLike, *, level: float = 0.95) -> list[IntervalEstimate]:
    """The mean of each column of (n, k) ``values`` (one row per unit, values in [0, 1])
    with its interval; a column holding NaN, or no rows, is UNDEFINED."""
    arr = np.asarray(values, dtype=float)
    arr = arr[:, None] if arr.ndim == 1 else arr
    p, lo, hi = mean_bounds(arr.shape[0], arr.sum(axis=0), (arr * arr).sum(axis=0),
                            level=level)
    return [IntervalEstimate(float(p[j]), float(lo[j]), float(hi[j]))
            if arr.shape[0] and np.isfinite(arr[:, j]).all() else UNDEFINED
            for j in range(arr.shape[1])]


def unit_differences(values: ArrayLike, reference: ArrayLike, *, level: float = 0.95
                     ) -> list[IntervalEstimate]:
    """mean(values[:, j] − reference) per column, paired on the units, with Newcombe's
    interval; UNDEFINED where a column (or the reference) holds NaN."""
    arr = np.asarray(values, dtype=float)
    arr = arr[:, None] if arr.ndim == 1 else arr
    ref = np.asarray(reference, dtype=float)
    d, lo, hi = difference_bounds(arr.shape[0], arr.sum(axis=0), (arr * arr).sum(axis=0),
                                  ref.sum(), (ref * ref).sum(), (arr * ref[:, None]).sum(axis=0),
                                  level=level)
    ok = arr.shape[0] > 0 and np.isfinite(ref).all()
    return [IntervalEstimate(float(d[j]), float(lo[j]), float(hi[j]))
            if ok and np.isfinite(arr[:, j]).all() else UNDEFINED
            for j in range(arr.shape[1])]
