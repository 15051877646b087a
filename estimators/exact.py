"""Exact confidence intervals for A from the joint two-binomial model, outcomes ordered by
their maximum-likelihood estimate (METHODS.md M1; Clopper–Pearson generalised).

Model: S_o ~ Bin(n_o, A) and S_c ~ Bin(n_c, q(A)), q(A) = (A+K−2)/(K−1), independent.
Order the outcomes x = (s_o, s_c) by their ML estimate T = Â(x). Both counts grow
stochastically with A and Â is non-decreasing in each, so for the observed â the tails

    G_>(A) = P_A(T > â),  G_≥(A) = P_A(T ≥ â)   (and P_A(T < â), P_A(T ≤ â))

are monotone in A. With a tie weight w ∈ [0, 1] for the outcomes tied with the observed one,

    lower = the A with G_>(A) + w_lo·P_A(T = â) = α/2,
    upper = the A with P_A(T < â) + w_hi·P_A(T = â) = α/2.

Two versions (``estimate(interval=…)`` picks):

* conservative, w_lo = w_hi = 1: covers with probability ≥ 1 − α for every A (Clopper–
  Pearson when n_c = 0). On small discrete samples it must cover much more — up to 99.5 %
  on the validation grid — because outcomes carry large probabilities (n_o = 40, A = .99:
  zero to two errors have probability 99.2 %).
* randomised, w_lo = U, w_hi = 1 − U with U ~ Uniform(0, 1) drawn independently of the
  data: the two randomised p-values are exactly uniform under the truth and sum to one,
  so each end excludes the truth with probability exactly α/2 and never both at once —
  coverage exactly 1 − α for every A and every sample size. The interval is then widened,
  where needed, to contain the point estimate â (it only can add coverage, and only
  through one tail, so coverage lies in [1 − α, 1 − α/2]; see the tests, which compute it
  by summing over all outcomes and integrating over U). U must be fresh for every study
  (the platform draws one seed per study, at its creation); a U fixed once for all
  studies would turn this back into a non-randomised interval.

Computing a tail needs no enumeration of the outcome plane: ℓ is concave, so Â(x) ≥ â iff
ℓ'(â; x) ≥ 0, which for fixed s_o is linear in s_c:

    Â ≥ â  ⇔  s_c ≥ c(s_o) = q̂ n_c − (K−1) q̂(1−q̂) [s_o/â − (n_o−s_o)/(1−â)],  q̂ = q(â),

so a tail is Σ_{s_o} Bin(s_o; n_o, A) · P(Bin(n_c, q(A)) ≥ ⌈c(s_o)⌉): one sum over s_o
(restricted to where its binomial has mass) per evaluation.

Fast path (:func:`exact_interval`, both versions): per distinct outcome and end, the
strict and inclusive tails are interpolated by a Chebyshev series on a bracket that holds
the end for every tie weight — [wide likelihood-ratio end, â] when the tails confirm it,
else [end at w = 1, end at w = 0] — and checked at the midpoints between nodes (error
≤ ``INTERPOLATION_TOLERANCE``, else each end is solved directly). Each tie weight is then
solved on the series (a grid, then a Newton step). Brackets and solved ends are memoised:
the ML and IVW intervals of a cell, and successive recomputes of a study, share them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import chebyshev
from scipy import optimize, special

from estimators.intervals import likelihood_ratio_interval

TIE_EPS = 1e-9
TIE_WEIGHT = 1.0  # weight of tied outcomes in the non-randomised interval (1: conservative)
PROFILE_NODES = 16  # Chebyshev nodes per bracket (interpolation error < 1e-9, see tests)
GRID_POINTS = 257  # where the series are tabulated to locate each crossing
NEWTON_STEPS = 1  # from a linear interpolation on that grid: error ~1e-5 → ~1e-10
GUESS_WIDENING = 20  # the bracket guess is the likelihood-ratio interval at level 1 − α/20
# Largest error of the tails' series (at the midpoints between nodes) for them to be used:
# an error ε in a tail moves the coverage of that end by at most ε.
INTERPOLATION_TOLERANCE = 1e-9


def _q(a: float | np.ndarray, k: int):
    return (a + k - 2) / (k - 1)


@functools.lru_cache(maxsize=64)
def _log_factorials(n: int) -> np.ndarray:
    """log x! for x = 0 … n (read-only)."""
    table = special.gammaln(np.arange(n + 1) + 1.0)
    table.flags.writeable = False
    return table


def _binom_pmf(x: np.ndarray, n: int, p: float) -> np.ndarray:
    """Bin(x; n, p) for integer-valued x in [0, n] (log-factorials looked up, not
    recomputed: the tails evaluate thousands of these per outcome)."""
    lf = _log_factorials(int(n))
    xi = np.asarray(x).astype(np.intp)
    log = lf[int(n)] - lf[xi] - lf[int(n) - xi] + special.xlogy(x, p) + special.xlog1py(n - x, -p)
    return np.exp(log)


def _binom_ge(t: np.ndarray, n: int, p: float) -> np.ndarray:
    """P(Bin(n, p) ≥ t) for real thresholds t (rounded up)."""
    t = np.ceil(t)
    return np.where(t <= 0, 1.0, np.where(t > n, 0.0, special.bdtrc(np.maximum(t - 1, 0), n, p)))


def _binom_le(t: np.ndarray, n: int, p: float) -> np.ndarray:
    """P(Bin(n, p) ≤ t) for real thresholds t (rounded down)."""
    t = np.floor(t)
    return np.where(t < 0, 0.0, np.where(t >= n, 1.0, special.bdtr(np.maximum(t, 0), n, p)))


def _binom_ge_rows(t: np.ndarray, n: int, p: np.ndarray) -> np.ndarray:
    """P(Bin(n, p_r) ≥ t_rj) for integer thresholds, one success probability per row.

    When each row's thresholds span a short range [lo_r, hi_r] (the usual case: they come
    from consecutive ordinary counts), one incomplete-beta call per row gives P(≥ lo_r) and
    the rest follows by subtracting cumulated probabilities, ~10× cheaper than an
    incomplete beta per entry when n is large. Absolute error ~1e-15 · span."""
    t = np.clip(t, 0, n + 1)
    lo, hi = t.min(axis=1), t.max(axis=1)
    span = int((hi - lo).max()) + 1
    if span > 4 * t.shape[1] + 16 or len(t) < 8:  # few rows: the saving is not worth it
        return _binom_ge(t, n, p)
    s = lo[:, None] + np.arange(span)  # (rows, span)
    inside = s <= n
    s_in = np.where(inside, s, 0)
    pmf = np.where(inside, _binom_pmf(s_in, n, p), 0.0)
    below = np.concatenate([np.zeros((len(t), 1)), np.cumsum(pmf, axis=1)], axis=1)
    start = _binom_ge(lo[:, None], n, p)  # P(≥ lo_r)
    ge = start - np.take_along_axis(below, (t - lo[:, None]).astype(int), axis=1)
    return np.clip(np.where(t > n, 0.0, ge), 0.0, 1.0)


def _s_o_window(n_o: int, a: np.ndarray) -> np.ndarray:
    """The ordinary counts that carry the mass of Bin(n_o, a) for every a (mean ± 8 sd)."""
    if n_o == 0:
        return np.zeros(1)
    sd = np.sqrt(n_o * a * (1 - a))
    lo = max(0, int(np.min(n_o * a - 8 * sd)) - 2)
    hi = min(n_o, int(np.max(n_o * a + 8 * sd)) + 3)
    return np.arange(lo, hi + 1, dtype=float)


def _threshold(s_o: np.ndarray, a_hat: float, n_o: int, n_c: int, k: int) -> np.ndarray:
    """c(s_o) for an interior â (0 < â < 1)."""
    q = _q(a_hat, k)
    g = s_o / a_hat - (n_o - s_o) / (1 - a_hat)
    return q * n_c - (k - 1) * q * (1 - q) * g


@dataclass(frozen=True)
class _Cell:
    n_o: int
    s_o: int
    n_c: int
    s_c: int
    k: int
    a_hat: float


def _tails(a, cell: _Cell, upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """(strict, inclusive) tails at each A of ``a``: (P_A(T > â), P_A(T ≥ â)) for the
    lower end, or (P_A(T < â), P_A(T ≤ â)) for the upper end (``upper=True``)."""
    n_o, n_c, k, a_hat = cell.n_o, cell.n_c, cell.k, cell.a_hat
    a = np.atleast_1d(np.asarray(a, dtype=float))
    zero = np.zeros(a.shape)
    if not upper and a_hat >= 1:  # only the perfect score has Â = 1
        return zero, a**n_o * _q(a, k) ** n_c
    if upper and a_hat <= 0:  # Â = 0 needs s_o = 0 and s_c ≤ q0 n_c + (K−1) q0 (1−q0) n_o
        q0 = _q(0.0, k)
        limit = np.floor(q0 * n_c + (k - 1) * q0 * (1 - q0) * n_o + TIE_EPS * (n_c + 1))
        return zero, (1 - a) ** n_o * _binom_le(np.full(a.shape, limit), n_c, _q(a, k))
    s_o = _s_o_window(n_o, a)
    p_o = _binom_pmf(s_o, n_o, a[:, None]) if n_o else np.ones((len(a), 1))
    c = _threshold(s_o, a_hat, n_o, n_c, k)
    q = _q(a, k)[:, None]
    eps = TIE_EPS * (n_c + 1)
    c = np.broadcast_to(c, (len(a), len(s_o)))
    if upper:  # P(S_c ≤ ⌊c + ε⌋) = 1 − P(S_c ≥ ⌊c + ε⌋ + 1)
        inclusive = 1.0 - _binom_ge_rows(np.floor(c + eps) + 1, n_c, q)
    else:
        inclusive = _binom_ge_rows(np.ceil(c - eps), n_c, q)
    # an outcome ties with the observed one where an integer s_c lies within eps of c
    tie = np.ceil(c - eps)
    tied = np.nonzero((tie <= c + eps) & (tie >= 0) & (tie <= n_c))
    strict = inclusive.copy()
    if tied[0].size:
        strict[tied] -= _binom_pmf(tie[tied], n_c, np.broadcast_to(q, c.shape)[tied])
    return np.sum(p_o * strict, axis=1), np.sum(p_o * inclusive, axis=1)


def _tail(a: float, a_hat: float, n_o: int, n_c: int, k: int, upper: bool,
          tie: float) -> float:
    """P_A(T > â) + tie · P_A(T = â) (upper=False, for the lower end), or the same with
    T < â (upper=True), for an interior â."""
    strict, inclusive = _tails(a, _Cell(n_o, -1, n_c, -1, k, a_hat), upper)
    return float(strict[0] + tie * (inclusive[0] - strict[0]))


def _solve(f, target: float, increasing: bool) -> float:
    """The A in [0, 1] where the monotone f(A) crosses ``target`` (Brent's method); an end
    of [0, 1] when f stays on one side."""
    f0, f1 = f(0.0) - target, f(1.0) - target
    if increasing and f0 >= 0 or not increasing and f1 >= 0:
        return 0.0 if increasing else 1.0
    if increasing and f1 <= 0 or not increasing and f0 <= 0:
        return 1.0 if increasing else 0.0
    return optimize.brentq(lambda a: f(a) - target, 0.0, 1.0, xtol=1e-10, rtol=1e-10)


def _end(cell: _Cell, half: float, upper: bool, tie: float) -> float:
    """One end of the interval for tie weight ``tie`` (before the hull with â)."""
    if not upper and cell.a_hat <= 0:
        return 0.0
    if upper and cell.a_hat >= 1:
        return 1.0

    def f(a: float) -> float:
        strict, inclusive = _tails(a, cell, upper)
        return float(strict[0] + tie * (inclusive[0] - strict[0]))

    return _solve(f, half, increasing=not upper)


@functools.lru_cache(maxsize=65_536)
def exact_interval_cell(n_o: int, s_o: int, n_c: int, s_c: int, k: int, confidence: float,
                        a_hat: float, tie: float | None = None) -> tuple[float, float]:
    """Non-randomised exact interval of one cell, ``tie`` the weight of tied outcomes in
    both tails (default 1: conservative); ``a_hat`` is the cell's ML estimate. Solved
    directly by Brent's method on the exact tails: the reference the fast path of
    :func:`exact_interval` is tested against, and any tie weight (mid-p: ½) is allowed."""
    if n_o + n_c == 0:
        return 0.0, 1.0
    half = (1 - confidence) / 2
    tie = TIE_WEIGHT if tie is None else tie
    cell = _Cell(n_o, s_o, n_c, s_c, k, a_hat)
    lower, upper = _end(cell, half, False, tie), _end(cell, half, True, tie)
    return min(lower, a_hat), max(upper, a_hat)


# Chebyshev–Lobatto nodes (they include the bracket's ends, where the tails are checked),
# the midpoints between them (where the interpolation error is measured) and a fine grid
# (where the series are tabulated to locate each crossing).
_NODES = np.cos(np.pi * np.arange(PROFILE_NODES) / (PROFILE_NODES - 1))
_MIDPOINTS = np.cos(np.pi * (np.arange(PROFILE_NODES - 1) + 0.5) / (PROFILE_NODES - 1))
_GRID = np.linspace(-1.0, 1.0, GRID_POINTS)
_GRID_BASIS = chebyshev.chebvander(_GRID, PROFILE_NODES - 1)
_INTERPOLATE = np.linalg.inv(chebyshev.chebvander(_NODES, PROFILE_NODES - 1))  # values → coef
_MIDPOINT_BASIS = chebyshev.chebvander(_MIDPOINTS, PROFILE_NODES - 1)
_DERIVATIVE = np.vstack([chebyshev.chebder(np.eye(PROFILE_NODES)),
                         np.zeros((1, PROFILE_NODES))])  # coef → coef of the derivative


@dataclass(frozen=True)
class _Bracket:
    """One end of the interval for every tie weight w. It lies in [lo, hi]; on that
    bracket the strict and inclusive tails are Chebyshev series of x ∈ [−1, 1] (``series``
    holds their coefficients and their derivatives', ``table`` their values on the grid).
    Without series the end is fixed at its side of the bracket (``series`` None) or, when
    no series was accurate enough, each weight is solved directly (``direct``)."""

    lo: float
    hi: float
    series: np.ndarray | None = None
    table: np.ndarray | None = None
    direct: bool = False

    def solve(self, cell: _Cell, w: np.ndarray, half: float, upper: bool) -> np.ndarray:
        """The A where strict + w (inclusive − strict) = α/2, or the bracket's end where
        the tail stays on one side: the crossing is located on the grid, interpolated
        linearly, then polished by a Newton step on the series."""
        if self.direct:
            return np.array([_end(cell, half, upper, float(x)) for x in w])
        if self.series is None:
            return np.full(w.shape, self.hi if upper else self.lo)
        sign = -1.0 if upper else 1.0  # g = sign · (f − α/2) increases with x
        s, i = self.table[:, 0], self.table[:, 1]
        g = sign * (s + w[:, None] * (i - s) - half)  # (weights, grid)
        above = g >= 0
        first = np.where(above.any(axis=1), above.argmax(axis=1), len(_GRID))
        j = np.clip(first, 1, len(_GRID) - 1)
        rows = np.arange(len(w))
        g0, g1 = g[rows, j - 1], g[rows, j]
        x0, x1 = _GRID[j - 1], _GRID[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.where(g1 > g0, x0 - g0 * (x1 - x0) / (g1 - g0), x1)
        for _ in range(NEWTON_STEPS):
            s, i, ds, di = chebyshev.chebval(x, self.series)
            gx = sign * (s + w * (i - s) - half)
            dg = sign * (ds + w * (di - ds))
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.clip(np.where(dg > 0, x - gx / dg, x), x0, x1)
        x = np.where(first == 0, -1.0, np.where(first == len(_GRID), 1.0, x))
        return (self.lo + self.hi) / 2 + x * (self.hi - self.lo) / 2


def _fit(cell: _Cell, a: float, b: float, upper: bool) -> tuple[_Bracket, float, float]:
    """The tails' series on [a, b]; the inclusive tail at the end away from â; and the
    largest interpolation error at the midpoints between nodes."""
    x = np.concatenate([_NODES, _MIDPOINTS])
    strict, inclusive = _tails((a + b) / 2 + (b - a) / 2 * x, cell, upper)
    values = np.stack([strict, inclusive], axis=1)
    n = PROFILE_NODES
    coef = _INTERPOLATE @ values[:n]
    error = float(np.abs(_MIDPOINT_BASIS @ coef - values[n:]).max())
    far = float(inclusive[0] if upper else inclusive[n - 1])  # node +1 is b, node −1 is a
    series = np.hstack([coef, _DERIVATIVE @ coef])
    return _Bracket(a, b, series, _GRID_BASIS @ coef), far, error


def _bracket(cell: _Cell, half: float, upper: bool, guess: float | None) -> _Bracket:
    """A bracket holding this end for every tie weight, with accurate series. First try
    [guess, â] ([â, guess] for the upper end), ``guess`` a cheap far bound (a wide
    likelihood-ratio end): it holds every end when the conservative tail at ``guess`` is
    ≤ α/2 (an end beyond â is cut to â by the hull anyway). Otherwise the ends for tie
    weights 1 and 0 are solved for and span the bracket; if even there the series miss
    the tails by more than ``INTERPOLATION_TOLERANCE``, each weight is solved directly."""
    if (not upper and cell.a_hat <= 0) or (upper and cell.a_hat >= 1):
        return _Bracket(cell.a_hat, cell.a_hat)
    if guess is not None and abs(guess - cell.a_hat) > 1e-12:
        bracket, far, error = _fit(cell, *sorted((guess, cell.a_hat)), upper)
        if far <= half and error <= INTERPOLATION_TOLERANCE:
            return bracket
    a, b = sorted((_end(cell, half, upper, 0.0), _end(cell, half, upper, 1.0)))
    if b - a < 1e-12:
        return _Bracket(a, b)
    bracket, _, error = _fit(cell, a, b, upper)
    return bracket if error <= INTERPOLATION_TOLERANCE else _Bracket(a, b, direct=True)


# Memos of the randomised path, oldest entries dropped first: an outcome's brackets, and
# its ends for a given array of tie-breaks (the ML and IVW intervals of a cell share both).
MEMO_SIZE = 32_768
_PROFILES: dict[tuple, tuple[_Bracket, _Bracket]] = {}
_SOLVED: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def _remember(memo: dict, key: tuple, value):
    if len(memo) >= MEMO_SIZE:
        memo.pop(next(iter(memo)))
    memo[key] = value
    return value


def clear_memo() -> None:
    """Forget every memoised interval (benchmarks time the cold path with it)."""
    exact_interval_cell.cache_clear()
    _PROFILES.clear()
    _SOLVED.clear()


def _profile(key: tuple, guess_lo: float | None, guess_hi: float | None
             ) -> tuple[_Bracket, _Bracket]:
    found = _PROFILES.get(key)
    if found is not None:
        return found
    n_o, s_o, n_c, s_c, k, confidence, a_hat = key
    cell = _Cell(n_o, s_o, n_c, s_c, k, a_hat)
    half = (1 - confidence) / 2
    return _remember(_PROFILES, key, (_bracket(cell, half, False, guess_lo),
                                      _bracket(cell, half, True, guess_hi)))


def _interval(key: tuple, w_lower: np.ndarray, w_upper: np.ndarray,
              guess_lo: float | None, guess_hi: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Ends of one outcome for tie weights ``w_lower`` (lower end) and ``w_upper`` (upper
    end), widened to contain â; memoised per outcome and weights."""
    n_o, s_o, n_c, s_c, k, confidence, a_hat = key
    if n_o + n_c == 0:
        return np.zeros(w_lower.shape), np.ones(w_lower.shape)
    memo_key = (key, w_lower.tobytes(), w_upper.tobytes())
    solved = _SOLVED.get(memo_key)
    if solved is None:
        half = (1 - confidence) / 2
        cell = _Cell(n_o, s_o, n_c, s_c, k, a_hat)
        lower_b, upper_b = _profile(key, guess_lo, guess_hi)
        solved = _remember(_SOLVED, memo_key, (
            np.minimum(lower_b.solve(cell, w_lower, half, upper=False), a_hat),
            np.maximum(upper_b.solve(cell, w_upper, half, upper=True), a_hat)))
    return solved[0].copy(), solved[1].copy()


def randomized_interval_cell(n_o: int, s_o: int, n_c: int, s_c: int, k: int,
                             confidence: float, a_hat: float, u: np.ndarray,
                             guess_lo: float | None = None,
                             guess_hi: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Randomised exact interval of one outcome for each tie-break U in ``u`` (lower end
    with weight U, upper with 1 − U), widened to contain ``a_hat``. ``guess_lo`` and
    ``guess_hi`` (optional) are bounds likely beyond the ends; they only speed it up."""
    u = np.asarray(u, dtype=float)
    return _interval((n_o, s_o, n_c, s_c, k, confidence, a_hat), u, 1 - u, guess_lo, guess_hi)


def exact_interval(n_ord, s_ord, n_comp, s_comp, k: int, confidence: float,
                   mle, u=None) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised front end, each distinct outcome computed once: the conservative interval
    when ``u`` is None, else the randomised one with tie-breaks ``u`` (broadcast, values in
    [0, 1], independent of the data)."""
    arrays = [n_ord, s_ord, n_comp, s_comp, mle] + ([] if u is None else [u])
    arrays = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in arrays))
    n_o, s_o, n_c, s_c, a = arrays[:5]
    flat = np.stack([n_o.ravel(), s_o.ravel(), n_c.ravel(), s_c.ravel()], axis=1)
    lower = np.empty(flat.shape[0])
    upper = np.empty(flat.shape[0])
    if flat.shape[0]:
        unique, first, inverse = np.unique(flat, axis=0, return_index=True,
                                           return_inverse=True)
        inverse = inverse.ravel()
        order = np.argsort(inverse, kind="stable")
        starts = np.searchsorted(inverse[order], np.arange(len(unique) + 1))
        a_flat = a.ravel()
        keys = [(*(int(round(v)) for v in cell), int(k), float(confidence), float(a_flat[j]))
                for cell, j in zip(unique, first, strict=True)]
        u_flat = None if u is None else arrays[5].ravel()
        guesses = {}
        new = [i for i, key in enumerate(keys) if key not in _PROFILES]
        if new:  # far bounds for new brackets: a wide likelihood-ratio interval
            g_lo, g_hi = likelihood_ratio_interval(
                *unique[new].T, k, 1 - (1 - confidence) / GUESS_WIDENING,
                mle=a_flat[first[new]])
            guesses = {i: (float(lo), float(hi))
                       for i, lo, hi in zip(new, g_lo, g_hi, strict=True)}
        one = np.ones(1)
        for i, key in enumerate(keys):
            members = order[starts[i]:starts[i + 1]]
            guess = guesses.get(i, (None, None))
            if u_flat is None:  # conservative: tie weight 1 at both ends
                lo, hi = _interval(key, one, one, *guess)
                lower[members], upper[members] = lo[0], hi[0]
            else:
                w = u_flat[members]
                lower[members], upper[members] = _interval(key, w, 1 - w, *guess)
    return lower.reshape(n_o.shape), upper.reshape(n_o.shape)
