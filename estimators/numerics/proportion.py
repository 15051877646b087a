"""Confidence intervals for one binomial proportion p from s successes in n trials, and
their exact coverage (a sum over every outcome; no simulation).

* :func:`clopper_pearson` — the tails P(X ≥ s), P(X ≤ s) inverted at α/2 each: coverage
  ≥ 1 − α for every p, often far above it on small samples.
* :func:`blaker` (Blaker 2000, "Confidence curves and improved exact confidence intervals
  for discrete distributions", Can. J. Statist. 28) — the set of p whose *acceptability*
  exceeds α, where the acceptability of s at p is the probability of the outcomes no more
  likely to be seen than s in the sense of their smaller tail:

      γ(p, x) = min(P_p(X ≤ x), P_p(X ≥ x)),   acc(p, s) = P_p(γ(p, X) ≤ γ(p, s)).

  The test {acc ≤ α} rejects with probability ≤ α for every p, so the interval covers
  with probability ≥ 1 − α for every p, and it lies inside Clopper–Pearson's (it never
  spends more than α/2 in one tail, and sometimes less). acc is not monotone in p; as
  usual (Blaker; R's ``exactci``) the interval reported is the hull of {p : acc > α}:
  its ends are the first p, searched from the Clopper–Pearson end towards s/n on a grid of
  ``BLAKER_GRID`` points (cubically dense at that end, where narrow islands of
  acceptability sit) and refined by finer grids, where acc exceeds α. Outcomes are
  compared with a relative tolerance ``BLAKER_TOLERANCE`` (ties in γ up to rounding).
* :func:`mid_p` — the tails with the observed outcome weighing ½ inverted at α/2 each:
  about 1 − α on average over p, below it at many p on small samples.

Every function is vectorised over s and n (broadcast); s = 0 gives a lower end 0 and
s = n an upper end 1 (never a zero-width interval).
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

BLAKER_TOLERANCE = 1e-7
BLAKER_GRID = 96
BISECTION_STEPS = 44
# Blaker's ends: after the first grid, rounds of REFINE_POINTS − 1 new points each (a
# bracket shrinks 4-fold a round: 26 rounds take 0.1 below 1e-16)
REFINE_POINTS = 5
REFINE_ROUNDS = 26


def _check(s, n, confidence: float) -> tuple[np.ndarray, np.ndarray, float]:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: must be in (0, 1), got {confidence}")
    s, n = np.broadcast_arrays(np.asarray(s, dtype=float), np.asarray(n, dtype=float))
    if ((n < 0) | (s < 0) | (s > n)).any() or (s != np.round(s)).any() or (
            n != np.round(n)).any():
        raise ValueError("s and n: need integers with 0 ≤ s ≤ n")
    return s, n, 1 - confidence


def clopper_pearson(s, n, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson: Beta quantiles (lower 0 at s = 0, upper 1 at s = n; [0, 1] at
    n = 0)."""
    s, n, alpha = _check(s, n, confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(s > 0, stats.beta.ppf(alpha / 2, np.maximum(s, 1), n - s + 1), 0.0)
        hi = np.where(s < n, stats.beta.ppf(1 - alpha / 2, s + 1, np.maximum(n - s, 1)), 1.0)
    return lo, hi


def _cdf(x, n, p):
    """P(X ≤ x) for X ~ Bin(n, p), x any integer (0 below 0, 1 from n)."""
    x, n, p = np.broadcast_arrays(x, n, p)
    inside = (x >= 0) & (x < n)
    out = np.where(x >= n, 1.0, 0.0)
    k = np.clip(x, 0, None).astype(np.int64)
    return np.where(inside, special.bdtr(k, n.astype(np.int64), p), out)


def _bisect(increasing, lo, hi, steps: int = BISECTION_STEPS):
    """The root in [lo, hi] of a vectorised increasing function (its sign change)."""
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    for _ in range(steps):
        mid = (lo + hi) / 2
        below = increasing(mid) < 0
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


def mid_p(s, n, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The mid-p exact interval: P(X > s) + ½P(X = s) = α/2 at the lower end, P(X < s) +
    ½P(X = s) = α/2 at the upper (by bisection, to 1e-15)."""
    s, n, alpha = _check(s, n, confidence)
    half = alpha / 2

    def upper_tail(p):  # increasing in p
        return 1 - _cdf(s, n, p) + 0.5 * stats.binom.pmf(s, n, p) - half

    def lower_tail(p):  # decreasing in p: negated
        return half - (_cdf(s - 1, n, p) + 0.5 * stats.binom.pmf(s, n, p))

    zeros, ones = np.zeros(s.shape), np.ones(s.shape)
    lo = np.where(s > 0, _bisect(upper_tail, zeros, ones), 0.0)
    hi = np.where(s < n, _bisect(lower_tail, zeros, ones), 1.0)
    return lo, hi


def _search(predicate, lo, hi, guess=None):
    """For integer brackets lo ≤ hi (arrays) and a predicate monotone from False to True
    on [lo, hi] that holds at hi: the smallest x in [lo, hi] where it holds. A ``guess``
    (say a quantile) is checked first — kept where the predicate holds there and not one
    below (or it is lo) — and bisection runs only for the rows it misses."""
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    if guess is not None:
        g = np.clip(np.nan_to_num(guess, nan=-1.0), lo, hi).astype(np.int64)
        right = predicate(g) & ((g == lo) | ~predicate(np.maximum(g - 1, lo)))
        if right.all():
            return g
        found = _search(_rows(predicate, ~right), lo[~right], hi[~right])
        return np.where(right, g, np.zeros_like(g)) + _scatter(found, ~right, g.shape)
    while (lo < hi).any():
        mid = (lo + hi) // 2
        ok = predicate(mid)
        lo, hi = np.where(ok | (lo >= hi), lo, mid + 1), np.where(ok & (lo < hi), mid, hi)
    return lo


def _rows(predicate, keep):
    """``predicate`` restricted to the rows ``keep`` (its arrays are indexed by row)."""
    return lambda x: predicate(_scatter(x, keep, keep.shape))[keep]


def _scatter(values, keep, shape):
    out = np.zeros(shape, dtype=np.asarray(values).dtype)
    out[keep] = values
    return out


def blaker_acceptability(p, s, n) -> np.ndarray:
    """acc(p, s) (module docstring) for Bin(n, p), vectorised over p, s and n. Computed from
    tails: with s in its lower tail (P(X ≤ s) ≤ P(X ≥ s)) it is P(X ≤ s) + P(X ≥ x*), x*
    the first x > s with P(X ≥ x) ≤ P(X ≤ s); in its upper tail the mirror image."""
    p, s, n = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(s, dtype=float),
                                  np.asarray(n, dtype=float))
    left = _cdf(s, n, p)  # P(X ≤ s)
    right = 1 - _cdf(s - 1, n, p)  # P(X ≥ s)
    lower_tail = left <= right
    level = np.minimum(left, right) * (1 + BLAKER_TOLERANCE)
    acc = np.empty(p.shape)
    lt, ut = lower_tail, ~lower_tail
    if lt.any():
        # s in its lower tail: the first x in (s, n + 1] with P(X ≥ x) ≤ level (n + 1:
        # none)
        p_, n_, lv = p[lt], n[lt], level[lt]
        with np.errstate(invalid="ignore"):  # the quantile, checked (bisection if missed)
            guess = np.ceil(special.bdtrik(1 - lv, n_, p_)) + 1
        x_hi = _search(lambda x: 1 - _cdf(x - 1, n_, p_) <= lv, s[lt] + 1, n_ + 1, guess)
        acc[lt] = left[lt] + (1 - _cdf(x_hi - 1, n_, p_))
    if ut.any():
        # s in its upper tail: the last x in [−1, s) with P(X ≤ x) ≤ level, i.e. one
        # below the first x in [0, s] with P(X ≤ x) > level (P(X ≤ s) > level there)
        p_, n_, lv = p[ut], n[ut], level[ut]
        with np.errstate(invalid="ignore"):
            guess = np.ceil(special.bdtrik(lv, n_, p_))
        x_lo = _search(lambda x: _cdf(x, n_, p_) > lv, np.zeros(lv.shape), s[ut], guess) - 1
        acc[ut] = right[ut] + _cdf(x_lo, n_, p_)
    return np.minimum(acc, 1.0)


def blaker(s, n, confidence: float = 0.95, *, clopper_pearson_from: float | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Blaker's interval (module docstring): the hull of {p : acc(p, s) > α}.
    ``clopper_pearson_from``: outcomes with at least that many events of each kind
    (min(s, n − s)) take Clopper–Pearson's interval instead — equally at least 1 − α at
    every p, and within 0.6 % of Blaker's width from 1 000 events (both ends within 3e-4
    of Blaker's there), at a thousandth of the cost. Each end is
    searched from the Clopper–Pearson end towards s/n on ``BLAKER_GRID`` points, then
    refined between the last grid point outside and the first inside by finer grids of
    ``REFINE_POINTS`` (the first point inside each time, to rounding)."""
    s, n, alpha = _check(s, n, confidence)
    if clopper_pearson_from is not None:
        plenty = np.minimum(s, n - s) >= clopper_pearson_from
        if plenty.any():
            cp_lo, cp_hi = clopper_pearson(s, n, confidence)
            if plenty.all():
                return cp_lo, cp_hi
            b_lo, b_hi = blaker(s[~plenty], n[~plenty], confidence)
            return (_scatter(b_lo, ~plenty, s.shape) + np.where(plenty, cp_lo, 0.0),
                    _scatter(b_hi, ~plenty, s.shape) + np.where(plenty, cp_hi, 0.0))
    if s.size > 1:  # each distinct outcome once (simulations repeat outcomes)
        pairs, inverse = np.unique(np.stack([s.ravel(), n.ravel()], axis=1), axis=0,
                                   return_inverse=True)
        if len(pairs) < s.size:
            lo, hi = blaker(pairs[:, 0], pairs[:, 1], confidence)
            inverse = inverse.reshape(-1)
            return lo[inverse].reshape(s.shape), hi[inverse].reshape(s.shape)
    cp_lo, cp_hi = clopper_pearson(s, n, confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_hat = np.where(n > 0, s / np.where(n > 0, n, 1), 0.5)
    lo = np.where(s > 0, _blaker_end(s, n, alpha, cp_lo, p_hat), 0.0)
    hi = np.where(s < n, _blaker_end(s, n, alpha, cp_hi, p_hat), 1.0)
    return np.where(n > 0, lo, 0.0), np.where(n > 0, hi, 1.0)


def _blaker_end(s, n, alpha: float, start, p_hat) -> np.ndarray:
    """The first p from ``start`` towards ``p_hat`` where acc(p, s) > α (rows: outcomes)."""
    flat = [np.ravel(x) for x in (s, n, start, p_hat)]
    s_f, n_f, start_f, p_hat_f = flat
    # cubic spacing: dense at the Clopper–Pearson end, where narrow islands of
    # acceptability (acc is not monotone) sit
    steps = np.linspace(0.0, 1.0, BLAKER_GRID) ** 3
    grid = start_f[:, None] + (p_hat_f - start_f)[:, None] * steps[None, :]
    inside = blaker_acceptability(grid, s_f[:, None], n_f[:, None]) > alpha
    inside[:, -1] = True  # s/n itself: acc = 1 (where n > 0)
    first = np.argmax(inside, axis=1)
    rows = np.arange(len(s_f))
    outer = grid[rows, np.maximum(first - 1, 0)]
    inner = grid[rows, first]
    lo, hi = outer.copy(), inner.copy()  # lo: last point outside, hi: first inside
    needs = first > 0
    # refine [lo, hi] by a grid of REFINE_POINTS at a time, keeping the first point inside
    # and the one before it, until the bracket is down to rounding (a quarter of the
    # sequential calls of bisection, for the first point inside as it finds it)
    fractions = np.linspace(0.0, 1.0, REFINE_POINTS)[1:]
    for _ in range(REFINE_ROUNDS):
        # each row stops on its own (a row's result never depends on the others')
        active = needs & (np.abs(hi - lo) > 4e-16 * np.maximum(np.abs(hi), 1e-300))
        if not active.any():
            break
        points = lo[:, None] + (hi - lo)[:, None] * fractions[None, :]
        points[:, -1] = hi  # the known inside point, exactly
        ok = blaker_acceptability(points, s_f[:, None], n_f[:, None]) > alpha
        ok[:, -1] = True
        j = np.argmax(ok, axis=1)
        new_hi = points[rows, j]
        new_lo = np.where(j > 0, points[rows, np.maximum(j - 1, 0)], lo)
        lo, hi = np.where(active, new_lo, lo), np.where(active, new_hi, hi)
    end = np.where(needs, hi, inner)
    return end.reshape(np.shape(s))


NEGLIGIBLE = 1e-14  # outcomes less likely than this at every p are left out of a sum
EDGE = 1e-8  # a truth this close to a computed end is "at the end": decided by the test


def covers(lo, hi, truth, accepts=None) -> np.ndarray:
    """1{truth ∈ the confidence set whose hull is [lo, hi]}, broadcast. Every set here is a
    test inverted, {p : p-value(p) > α}; an end is where the p-value crosses α, and whether
    the end itself belongs to the set is the test's to say: one label right of one, Blaker:
    acc(p) = p, the set (0.05, 1] — A = 0.05 is rejected (acc = α), so it covers 95 % there;
    Blaker's acc jumps at p = ½ (the tails swap), and 40 of 100 gives (0.306, 0.5] with
    acc(½) = 0.057 > α — ½ is inside. Ends are computed to ~1e-9 at worst and grid truths
    such as 0.05 are not exact binary numbers, so a truth within ``EDGE`` of an interior end
    is decided by ``accepts(truth)`` (the interval's own test, same shape as the broadcast;
    :func:`blaker_accepts` …) and never by the last bits of a float; without ``accepts`` the
    end is taken as inside. Ends at 0 and 1 are the parameter's bounds (s = 0, s = n):
    inside."""
    lo, hi, truth = (np.asarray(x, dtype=float) for x in (lo, hi, truth))
    at_end = (((lo > 0.0) & (np.abs(truth - lo) <= EDGE))
              | ((hi < 1.0) & (np.abs(truth - hi) <= EDGE)))
    inside = (truth >= lo) & (truth <= hi) & ~at_end
    if not at_end.any():
        return inside
    decided = np.asarray(accepts(truth) if accepts is not None else True, dtype=bool)
    return inside | (at_end & np.broadcast_to(decided, at_end.shape))


def blaker_accepts(s, n, confidence: float = 0.95):
    """Blaker's test at s of n as ``covers``' ``accepts``: p ↦ acc(p, s) > α."""
    alpha = 1 - confidence
    return lambda p: blaker_acceptability(p, s, n) > alpha


def clopper_pearson_accepts(s, n, confidence: float = 0.95):
    """Clopper–Pearson's test at s of n: p ↦ P_p(X ≥ s) > α/2 and P_p(X ≤ s) > α/2."""
    half = (1 - confidence) / 2
    return lambda p: ((1 - _cdf(np.asarray(s) - 1, n, p) > half)
                      & (_cdf(np.asarray(s), n, p) > half))


def mid_p_accepts(s, n, confidence: float = 0.95):
    """The mid-p test at s of n: both mid-p tails above α/2."""
    half = (1 - confidence) / 2

    def accepts(p):
        mid = 0.5 * stats.binom.pmf(s, n, p)
        return ((1 - _cdf(np.asarray(s), n, p) + mid > half)
                & (_cdf(np.asarray(s) - 1, n, p) + mid > half))
    return accepts


def exact_coverage(n: int, p, interval) -> np.ndarray:
    """Coverage of ``interval(s, n)`` → (lo, hi) at each true p: Σ_s P_p(X = s)·1{p in the
    set of s} (:func:`covers`, an end decided by the interval's test in ``ACCEPTS``), exact
    over the outcomes s that have probability ≥ ``NEGLIGIBLE`` at some p (those left out
    hold < 2e-14 at each p; the intervals are computed once per s)."""
    p = np.atleast_1d(np.asarray(p, dtype=float))
    first = int(np.min(stats.binom.ppf(NEGLIGIBLE, n, p)))
    last = int(np.max(stats.binom.isf(NEGLIGIBLE, n, p)))
    s = np.arange(max(first - 1, 0), min(last + 1, n) + 1)
    lo, hi = interval(s, np.full(len(s), n))
    pmf = stats.binom.pmf(s[None, :], n, p[:, None])
    test = ACCEPTS.get(interval)
    accepts = None if test is None else test(s[None, :], n)
    return (pmf * covers(lo[None, :], hi[None, :], p[:, None], accepts)).sum(axis=1)


INTERVALS = {"blaker": blaker, "clopper_pearson": clopper_pearson, "mid_p": mid_p}
ACCEPTS = {blaker: blaker_accepts, clopper_pearson: clopper_pearson_accepts,
           mid_p: mid_p_accepts}  # each interval's own test (``covers``)

__all__ = ["INTERVALS", "blaker", "blaker_acceptability", "clopper_pearson",
           "exact_coverage", "mid_p"]
