"""Binomial probabilities for the exact intervals, vectorised and cheap where they are
evaluated millions of times: log-factorials looked up, tails of many thresholds from one
incomplete beta and cumulated probabilities. Pure numpy/scipy."""

from __future__ import annotations

import functools

import numpy as np
from scipy import special

TIE_EPS = 1e-9  # a count within TIE_EPS·(n+1) of a threshold lies on it (a tied outcome)


def q_of(a: float | np.ndarray, k: int):
    """q(A) = (A+K−2)/(K−1): the probability that a complementary label ("not class k",
    k drawn uniformly among the wrong classes) differs from the AI's prediction."""
    return (a + k - 2) / (k - 1)


@functools.lru_cache(maxsize=64)
def log_factorials(n: int) -> np.ndarray:
    """log x! for x = 0 … n (read-only)."""
    table = special.gammaln(np.arange(n + 1) + 1.0)
    table.flags.writeable = False
    return table


def binom_pmf(x: np.ndarray, n: int, p) -> np.ndarray:
    """Bin(x; n, p) for integer-valued x in [0, n], broadcast against p. The log-factorials
    are looked up and the logs of p taken before broadcasting: the tails evaluate thousands
    of these per outcome. (A log of 0 is clamped to −1e300 so that 0 · log 0 = 0.)"""
    lf = log_factorials(int(n))
    x = np.asarray(x, dtype=float)
    xi = x.astype(np.intp)
    p = np.asarray(p, dtype=float)
    with np.errstate(divide="ignore"):
        log_p = np.maximum(np.log(p), -1e300)
        log_q = np.maximum(np.log1p(-p), -1e300)
    return np.exp((lf[int(n)] - lf[xi] - lf[int(n) - xi]) + x * log_p + (n - x) * log_q)


def binom_ge(t: np.ndarray, n: int, p: float) -> np.ndarray:
    """P(Bin(n, p) ≥ t) for real thresholds t (rounded up)."""
    t = np.ceil(t)
    return np.where(t <= 0, 1.0, np.where(t > n, 0.0, special.bdtrc(np.maximum(t - 1, 0), n, p)))


def binom_le(t: np.ndarray, n: int, p: float) -> np.ndarray:
    """P(Bin(n, p) ≤ t) for real thresholds t (rounded down)."""
    t = np.floor(t)
    return np.where(t < 0, 0.0, np.where(t >= n, 1.0, special.bdtr(np.maximum(t, 0), n, p)))


def binom_ge_rows(t: np.ndarray, n: int, p: np.ndarray) -> np.ndarray:
    """P(Bin(n, p_r) ≥ t_rj) for integer thresholds, one success probability per row.

    When each row's thresholds span a short range [lo_r, hi_r] (the usual case: they come
    from consecutive ordinary counts), one incomplete-beta call per row gives P(≥ lo_r) and
    the rest follows by subtracting cumulated probabilities, ~10× cheaper than an
    incomplete beta per entry when n is large. Absolute error ~1e-15 · n (the
    log-factorials' rounding: 2e-11 at n = 20 000, tested), well under the intervals'
    INTERPOLATION_TOLERANCE.

    Which of the two ways a row takes depends on that row alone (its thresholds' range),
    never on the other rows: a row gives the same bits alone or in any batch."""
    t = np.clip(t, 0, n + 1)
    lo, hi = t.min(axis=1), t.max(axis=1)
    short = (hi - lo) <= 4 * t.shape[1] + 16
    if not short.all():  # wide rows one incomplete beta per entry, the others cumulated
        out = np.empty(t.shape)
        wide = ~short
        out[wide] = binom_ge(t[wide], n, np.broadcast_to(p, (len(t), 1))[wide])
        if short.any():
            out[short] = binom_ge_rows(t[short], n, np.broadcast_to(p, (len(t), 1))[short])
        return out
    span = int((hi - lo).max()) + 1
    s = lo[:, None] + np.arange(span)  # (rows, span)
    inside = s <= n
    s_in = np.where(inside, s, 0)
    pmf = np.where(inside, binom_pmf(s_in, n, p), 0.0)
    below = np.concatenate([np.zeros((len(t), 1)), np.cumsum(pmf, axis=1)], axis=1)
    start = binom_ge(lo[:, None], n, p)  # P(≥ lo_r)
    ge = start - np.take_along_axis(below, (t - lo[:, None]).astype(int), axis=1)
    return np.clip(np.where(t > n, 0.0, ge), 0.0, 1.0)


def count_window(n: int, p: np.ndarray) -> np.ndarray:
    """The counts that carry the mass of Bin(n, p) for every p: mean ± 8 sd, and a few
    more where the distribution is skewed (mass left outside < 1e-12, tested)."""
    if n == 0:
        return np.zeros(1)
    sd = np.sqrt(n * p * (1 - p))
    lo = max(0, int(np.min(n * p - 8 * sd)) - 6)
    hi = min(n, int(np.max(n * p + 8 * sd)) + 8)
    return np.arange(lo, hi + 1, dtype=float)
