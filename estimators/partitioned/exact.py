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
  Pearson when n_c = 0). On small discrete samples it must cover much more — up to 99.6 %
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

Fast paths (:func:`exact_interval`, both versions). A design (n_o, n_c, K) with many
distinct outcomes (a simulation study) shares its binomial tables
(:mod:`estimators.partitioned.exact_grid`): on a grid of A uniform in arcsin √A (steps of 1/80 of
the estimate's SD), one table of P(inner count ≥ t) per grid point serves every outcome,
whose tail is a sum over the other count; each end is located by bisection on the grid
and refined on a cubic through four grid values. Other outcomes get their own bracket
holding the end for every tie weight — [wide likelihood-ratio end, â] when the tails
confirm it, else [end at w = 1, end at w = 0] — on which the strict and inclusive tails
are interpolated by a Chebyshev series, checked at the midpoints between nodes (error ≤
``INTERPOLATION_TOLERANCE``, else each end is solved directly); outcomes of one design
are fitted together, and every (outcome, tie weight) pair is solved on its series in one
batch. Brackets are memoised (the ML and IVW intervals of a cell, and successive
recomputes of a study, share them), and so are whole calls. Both paths are tested
against Brent's method on the exact tails (within 1e-9).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import chebyshev
from scipy import optimize

from estimators.numerics.binomial import (
    TIE_EPS,
    binom_ge_rows,
    binom_le,
    binom_pmf,
    count_window,
    q_of,
)
from estimators.partitioned.exact_grid import SOLVE_BLOCK, ml_threshold, shared_ends
from estimators.partitioned.likelihood import likelihood_ratio_interval

TIE_WEIGHT = 1.0  # weight of tied outcomes in the non-randomised interval (1: conservative)
PROFILE_NODES = 16  # Chebyshev nodes per bracket (interpolation error < 1e-9, see tests)
GRID_POINTS = 257  # where the series are tabulated to locate each crossing
NEWTON_STEPS = 1  # from a linear interpolation on that grid: error ~1e-5 → ~1e-10
GUESS_WIDENING = 20  # the bracket guess is the likelihood-ratio interval at level 1 − α/20
# Largest error of the tails' series (at the midpoints between nodes) for them to be used:
# an error ε in a tail moves the coverage of that end by at most ε.
INTERPOLATION_TOLERANCE = 1e-9


@dataclass(frozen=True)
class _Cell:
    n_o: int
    s_o: int
    n_c: int
    s_c: int
    k: int
    a_hat: float


# Largest (rows × ordinary counts) evaluated at once by the tails; bigger batches of
# outcomes are split (by their â, so each part's window of ordinary counts stays short).
CHUNK_ENTRIES = 1 << 20


def _tails_many(a: np.ndarray, a_hat: np.ndarray, n_o: int, n_c: int, k: int,
                upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """(strict, inclusive) tails for several outcomes of one design (n_o, n_c, K): row r
    at the accuracies ``a[r]`` for the outcome whose ML estimate is ``a_hat[r]`` — (P_A(T >
    â), P_A(T ≥ â)) for the lower end, (P_A(T < â), P_A(T ≤ â)) for the upper end. Not
    defined for an end fixed by â alone (â ≤ 0 for the lower end, â ≥ 1 for the upper)."""
    a = np.atleast_2d(np.asarray(a, dtype=float))
    a_hat = np.atleast_1d(np.asarray(a_hat, dtype=float))
    strict, inclusive = np.zeros(a.shape), np.zeros(a.shape)
    edge = a_hat <= 0 if upper else a_hat >= 1
    if edge.any():
        e = a[edge]
        if upper:  # Â = 0 needs s_o = 0 and s_c ≤ q0 n_c + (K−1) q0 (1−q0) n_o
            q0 = q_of(0.0, k)
            limit = np.floor(q0 * n_c + (k - 1) * q0 * (1 - q0) * n_o + TIE_EPS * (n_c + 1))
            inclusive[edge] = (1 - e) ** n_o * binom_le(np.full(e.shape, limit), n_c, q_of(e, k))
        else:  # only the perfect score has Â = 1
            inclusive[edge] = e**n_o * q_of(e, k) ** n_c
    rows = np.flatnonzero(~edge)
    rows = rows[np.argsort(a_hat[rows], kind="stable")]
    if rows.size:
        strict[rows], inclusive[rows] = _interior_tails(a[rows], a_hat[rows], n_o, n_c, k,
                                                        upper)
    return strict, inclusive


def _interior_tails(a: np.ndarray, a_hat: np.ndarray, n_o: int, n_c: int, k: int,
                    upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_tails_many` for interior â (0 < â < 1), rows sorted by â."""
    s_o = count_window(n_o, a)
    if len(a) > 1 and a.size * len(s_o) > CHUNK_ENTRIES:
        h = len(a) // 2
        first = _interior_tails(a[:h], a_hat[:h], n_o, n_c, k, upper)
        second = _interior_tails(a[h:], a_hat[h:], n_o, n_c, k, upper)
        return np.vstack([first[0], second[0]]), np.vstack([first[1], second[1]])
    m, points = a.shape
    flat = a.ravel()[:, None]  # one row per (outcome, accuracy)
    p_o = binom_pmf(s_o[None, :], n_o, flat) if n_o else np.ones((len(flat), 1))
    c = ml_threshold(s_o[None, :], np.repeat(a_hat, points)[:, None], n_o, n_c, k)
    q = q_of(flat, k)
    eps = TIE_EPS * (n_c + 1)
    c = np.broadcast_to(c, (len(flat), len(s_o)))
    if upper:  # P(S_c ≤ ⌊c + ε⌋) = 1 − P(S_c ≥ ⌊c + ε⌋ + 1)
        inclusive = 1.0 - binom_ge_rows(np.floor(c + eps) + 1, n_c, q)
    else:
        inclusive = binom_ge_rows(np.ceil(c - eps), n_c, q)
    # an outcome ties with the observed one where an integer s_c lies within eps of c
    tie = np.ceil(c - eps)
    tied = np.nonzero((tie <= c + eps) & (tie >= 0) & (tie <= n_c))
    strict = inclusive.copy()
    if tied[0].size:
        strict[tied] -= binom_pmf(tie[tied], n_c, np.broadcast_to(q, c.shape)[tied])
    return (np.sum(p_o * strict, axis=1).reshape(m, points),
            np.sum(p_o * inclusive, axis=1).reshape(m, points))


def _tails(a, cell: _Cell, upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_tails_many` for one outcome at the accuracies ``a``."""
    strict, inclusive = _tails_many(np.atleast_1d(np.asarray(a, dtype=float))[None, :],
                                    np.array([cell.a_hat]), cell.n_o, cell.n_c, cell.k, upper)
    return strict[0], inclusive[0]


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
        return _tail(a, cell.a_hat, cell.n_o, cell.n_c, cell.k, upper, tie)

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
    bracket the strict and inclusive tails are Chebyshev series of x ∈ [−1, 1] (``series``:
    their coefficients and their derivatives', shape (nodes, 4)). Without series the end is
    fixed at its side of the bracket (``series`` None) or, when no series was accurate
    enough, each weight is solved directly (``direct``)."""

    lo: float
    hi: float
    series: np.ndarray | None = None
    direct: bool = False


def _fit_many(n_o: int, n_c: int, k: int, a_hat: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              upper: bool) -> tuple[list[_Bracket], np.ndarray, np.ndarray]:
    """The tails' series on [lo_i, hi_i] for each outcome ``a_hat[i]`` of one design; the
    inclusive tail at the end away from â; and the largest interpolation error at the
    midpoints between nodes."""
    x = np.concatenate([_NODES, _MIDPOINTS])
    a = ((lo + hi) / 2)[:, None] + ((hi - lo) / 2)[:, None] * x
    strict, inclusive = _tails_many(a, a_hat, n_o, n_c, k, upper)
    values = np.stack([strict, inclusive], axis=2)  # (outcomes, nodes + midpoints, 2)
    n = PROFILE_NODES
    coef = np.einsum("ij,mjk->mik", _INTERPOLATE, values[:, :n])
    error = np.abs(np.einsum("ij,mjk->mik", _MIDPOINT_BASIS, coef) - values[:, n:])
    far = inclusive[:, 0] if upper else inclusive[:, n - 1]  # node +1 is hi, node −1 is lo
    series = np.concatenate([coef, np.einsum("ij,mjk->mik", _DERIVATIVE, coef)], axis=2)
    brackets = [_Bracket(float(lo[i]), float(hi[i]), series[i]) for i in range(len(a_hat))]
    return brackets, far, error.max(axis=(1, 2))


def _fixed(cell: _Cell, upper: bool) -> bool:
    """Whether this end is â itself whatever the tails (the lower end of â = 0, the upper
    end of â = 1)."""
    return cell.a_hat >= 1 if upper else cell.a_hat <= 0


def _bracket(cell: _Cell, half: float, upper: bool) -> _Bracket:
    """A bracket holding this end for every tie weight when the guessed one failed: the
    ends for tie weights 1 and 0 are solved for and span it; if even there the series miss
    the tails by more than ``INTERPOLATION_TOLERANCE``, each weight is solved directly."""
    if _fixed(cell, upper):
        return _Bracket(cell.a_hat, cell.a_hat)
    a, b = sorted((_end(cell, half, upper, 0.0), _end(cell, half, upper, 1.0)))
    if b - a < 1e-12:
        return _Bracket(a, b)
    brackets, _, error = _fit_many(cell.n_o, cell.n_c, cell.k, np.array([cell.a_hat]),
                                   np.array([a]), np.array([b]), upper)
    return brackets[0] if error[0] <= INTERPOLATION_TOLERANCE else _Bracket(a, b, direct=True)


def _series_table(series: np.ndarray) -> np.ndarray:
    """Values of the strict and inclusive series on the grid: (brackets, grid, 2). Summed
    by einsum's own loop, not a BLAS product, whose kernels change the order of the sums with
    the number of brackets: a bracket's values (and so its interval) are the same bits alone
    or among any others."""
    return np.einsum("gn,mnc->mgc", _GRID_BASIS, series[:, :, :2])


def _solve_series(series: np.ndarray, table: np.ndarray, r: np.ndarray, lo: np.ndarray,
                  hi: np.ndarray, w: np.ndarray, half: float, upper: bool) -> np.ndarray:
    """The A where strict + w (inclusive − strict) = α/2 for each member: bracket ``r`` (its
    series, their values on the grid, its ends lo and hi) at tie weight w; or the
    bracket's end where the tail stays on one side. The tails are monotone, so the crossing
    is located on the grid by bisection, interpolated linearly, then polished by a Newton
    step on the series."""
    sign = -1.0 if upper else 1.0  # g = sign · (f − α/2) increases with x

    def g(j: np.ndarray) -> np.ndarray:
        s, i = table[r, j, 0], table[r, j, 1]
        return sign * (s + w * (i - s) - half)

    last = len(_GRID) - 1
    below_all = g(np.full(len(w), last)) < 0  # the end is hi (lo for the upper end)
    above_all = g(np.zeros(len(w), dtype=np.intp)) >= 0
    j0, j1 = np.zeros(len(w), dtype=np.intp), np.full(len(w), last)  # g(j0) < 0 ≤ g(j1)
    while (j1 - j0 > 1).any():
        mid = (j0 + j1) // 2
        up = g(mid) >= 0
        j0, j1 = np.where(up, j0, mid), np.where(up, mid, j1)
    g0, g1 = g(j0), g(j1)
    x0, x1 = _GRID[j0], _GRID[j1]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(g1 > g0, x0 - g0 * (x1 - x0) / (g1 - g0), x1)
    for _ in range(NEWTON_STEPS):
        basis = chebyshev.chebvander(x, PROFILE_NODES - 1)  # (members, nodes)
        s, i, ds, di = np.matmul(basis[:, None, :], series[r])[:, 0, :].T
        gx = sign * (s + w * (i - s) - half)
        dg = sign * (ds + w * (di - ds))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = x - gx / dg
        # a step that leaves the grid cell (a flat stretch of the tail) is not taken
        x = np.where((dg > 0) & (x0 <= step) & (step <= x1), step, x)
    x = np.where(above_all, -1.0, np.where(below_all, 1.0, x))
    return (lo[r] + hi[r]) / 2 + x * (hi[r] - lo[r]) / 2


def _solve_ends(brackets: list[_Bracket], cells: list[_Cell], inverse: np.ndarray,
                w: np.ndarray, half: float, upper: bool) -> np.ndarray:
    """The end of each member j: outcome ``inverse[j]`` (bracket and cell) at tie weight
    ``w[j]``."""
    kind = np.array([0 if b.series is not None else 2 if b.direct else 1 for b in brackets])
    out = np.empty(len(w))
    fixed = kind[inverse] == 1
    out[fixed] = np.array([b.hi if upper else b.lo for b in brackets])[inverse[fixed]]
    for j in np.flatnonzero(kind[inverse] == 2):
        out[j] = _end(cells[inverse[j]], half, upper, float(w[j]))
    with_series = np.flatnonzero(kind == 0)
    if with_series.size:
        series = np.stack([brackets[i].series for i in with_series])
        row = np.full(len(brackets), -1)
        row[with_series] = np.arange(with_series.size)
        lo = np.array([brackets[i].lo for i in with_series])
        hi = np.array([brackets[i].hi for i in with_series])
        table = _series_table(series)
        members = np.flatnonzero(kind[inverse] == 0)
        for start in range(0, members.size, SOLVE_BLOCK):
            block = members[start:start + SOLVE_BLOCK]
            out[block] = _solve_series(series, table, row[inverse[block]], lo, hi, w[block],
                                       half, upper)
    return out


# Memo of the fitted brackets of each outcome (lower end, upper end), oldest entries dropped
# first: the ML and IVW intervals of a cell, and successive recomputes of a study, share them.
MEMO_SIZE = 32_768
_PROFILES: dict[tuple, tuple[_Bracket, _Bracket]] = {}
# Memo of whole calls (a digest of the arrays): the intervals of two estimators that need
# the exact interval on the same cells are computed once.
CALLS_MEMO = 8
_CALLS: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def _remember(memo: dict, key, value, size: int | None = None) -> None:
    if len(memo) >= (MEMO_SIZE if size is None else size):
        memo.pop(next(iter(memo)))
    memo[key] = value


def clear_memo() -> None:
    """Forget every memoised interval (benchmarks time the cold path with it)."""
    exact_interval_cell.cache_clear()
    _PROFILES.clear()
    _CALLS.clear()


def _profile_new(keys: list[tuple], guesses: np.ndarray) -> list[tuple[_Bracket, _Bracket]]:
    """Fit and memoise the brackets of outcomes not yet known, batched per design (n_o,
    n_c, K, confidence). ``guesses[i]`` = (lower, upper) far bounds of ``keys[i]`` (a wide
    likelihood-ratio interval): the bracket [guess, â] holds every end when the
    conservative tail at the guess is ≤ α/2 (an end beyond â is cut to â by the hull
    anyway); otherwise :func:`_bracket` finds one. Returns them in the order of ``keys``
    (the memo may already have dropped some when a call holds more outcomes than it)."""
    designs: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        designs.setdefault((key[0], key[2], key[4], key[5]), []).append(i)
    found: dict[int, list[_Bracket | None]] = {i: [None, None] for i in range(len(keys))}
    for (n_o, n_c, k, confidence), members in designs.items():
        half = (1 - confidence) / 2
        if n_o + n_c == 0:
            for i in members:
                found[i] = [_Bracket(0.0, 0.0), _Bracket(1.0, 1.0)]
            continue
        a_hat = np.array([keys[i][6] for i in members])
        for end, upper in ((0, False), (1, True)):
            guess = guesses[members, end]
            usable = (np.abs(guess - a_hat) > 1e-12) & ~(a_hat >= 1 if upper else a_hat <= 0)
            if usable.any():
                lo, hi = np.minimum(guess, a_hat)[usable], np.maximum(guess, a_hat)[usable]
                fits, far, error = _fit_many(n_o, n_c, k, a_hat[usable], lo, hi, upper)
                # the guess holds every end when the tail there is ≤ α/2, or when it is
                # A = 0 (A = 1 for the upper end): the ends cannot leave [0, 1]
                bound = hi >= 1 if upper else lo <= 0
                good = ((far <= half) | bound) & (error <= INTERPOLATION_TOLERANCE)
                retry = ~good & ~bound & (error <= INTERPOLATION_TOLERANCE)
                if retry.any():  # the end lies beyond the guess: try up to the bound
                    lo[retry], hi[retry] = (lo[retry], 1.0) if upper else (0.0, hi[retry])
                    refits, _, error2 = _fit_many(n_o, n_c, k, a_hat[usable][retry],
                                                  lo[retry], hi[retry], upper)
                    for j, fit, e in zip(np.flatnonzero(retry), refits, error2, strict=True):
                        if e <= INTERPOLATION_TOLERANCE:
                            fits[j], good[j] = fit, True
                for i, fit, ok in zip(np.asarray(members)[usable], fits, good, strict=True):
                    if ok:
                        found[i][end] = fit
    out = []
    for i, (lower, upper_b) in found.items():
        n_o, s_o, n_c, s_c, k, confidence, a_hat = keys[i]
        cell = _Cell(n_o, s_o, n_c, s_c, k, a_hat)
        half = (1 - confidence) / 2
        out.append((_bracket(cell, half, False) if lower is None else lower,
                    _bracket(cell, half, True) if upper_b is None else upper_b))
        _remember(_PROFILES, keys[i], out[-1])
    return out


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_index=True, return_inverse=True)`` by one lexsort
    (several times faster than the structured-view sort np.unique uses)."""
    order = np.lexsort(rows.T[::-1])
    ranked = rows[order]
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    inverse = np.empty(len(rows), dtype=np.intp)
    inverse[order] = np.cumsum(starts) - 1
    return ranked[starts], order[starts], inverse


def randomized_interval_cell(n_o: int, s_o: int, n_c: int, s_c: int, k: int,
                             confidence: float, a_hat: float,
                             u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Randomised exact interval of one outcome for each tie-break in ``u`` (lower tail
    with weight U, upper with 1 − U), widened to contain ``a_hat``."""
    u = np.atleast_1d(np.asarray(u, dtype=float))
    return exact_interval(n_o, s_o, n_c, s_c, k, confidence, a_hat, u=u)


def exact_interval(n_ord, s_ord, n_comp, s_comp, k: int, confidence: float,
                   mle, u=None) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised front end: the conservative interval when ``u`` is None, else the
    randomised one with tie-breaks ``u`` (broadcast, values in [0, 1], independent of the
    data). Each distinct outcome is fitted once (and memoised), then every (outcome, tie
    weight) pair is solved in one batch."""
    arrays = [n_ord, s_ord, n_comp, s_comp, mle] + ([] if u is None else [u])
    arrays = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in arrays))
    n_o, s_o, n_c, s_c, a = arrays[:5]
    call = (int(k), float(confidence), n_o.shape,
            hashlib.blake2b(b"".join(np.ascontiguousarray(x).tobytes() for x in arrays),
                            digest_size=16).digest())
    if call in _CALLS:  # the same arrays again (the IVW and ML intervals of a study)
        return _CALLS[call][0].copy(), _CALLS[call][1].copy()
    lower, upper = _exact_interval(n_o, s_o, n_c, s_c, a, k, confidence,
                                   None if u is None else arrays[5])
    _remember(_CALLS, call, (lower, upper), CALLS_MEMO)
    return lower.copy(), upper.copy()


SHARED_MIN_OUTCOMES = 64  # designs with this many distinct outcomes use the shared grid


def _members(ids: np.ndarray, inverse: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The members (entries of ``inverse``, one per input cell) whose outcome is among
    ``ids`` (of ``n`` outcomes), and each one's position in ``ids``."""
    position = np.full(n, -1)
    position[ids] = np.arange(len(ids))
    members = np.flatnonzero(position[inverse] >= 0)
    return members, position[inverse[members]]


def _exact_interval(n_o, s_o, n_c, s_c, a, k: int, confidence: float, u):
    """:func:`exact_interval` on broadcast arrays: designs with many distinct outcomes
    through the shared grid, the other outcomes through their fitted brackets."""
    flat = np.stack([n_o.ravel(), s_o.ravel(), n_c.ravel(), s_c.ravel()], axis=1)
    if not flat.shape[0]:
        return np.empty(n_o.shape), np.empty(n_o.shape)
    unique, first, inverse = _distinct_rows(flat)
    a_flat = a.ravel()
    keys = [(*(int(round(v)) for v in cell), int(k), float(confidence), float(a_flat[j]))
            for cell, j in zip(unique, first, strict=True)]
    if u is None:  # conservative: tie weight 1 at both ends
        w_lower = w_upper = np.ones(len(inverse))
    else:
        w_lower = u.ravel()
        w_upper = 1 - w_lower
    half = (1 - confidence) / 2
    a_key = np.array([key[6] for key in keys])
    lower, upper = np.empty(len(inverse)), np.empty(len(inverse))
    done = np.zeros(len(keys), dtype=bool)
    designs: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        designs.setdefault((key[0], key[2]), []).append(i)
    shared = [np.array(ids) for ids in designs.values() if len(ids) >= SHARED_MIN_OUTCOMES]
    # far bounds, where a path may need them: a wide likelihood-ratio interval
    guess = np.zeros((len(keys), 2))
    need = np.zeros(len(keys), dtype=bool)
    for ids in shared:
        need[ids] = True
    need |= np.array([key not in _PROFILES for key in keys])
    if need.any():
        guess[need] = np.stack(likelihood_ratio_interval(
            *unique[need].T, k, 1 - 2 * half / GUESS_WIDENING, mle=a_key[need]), axis=1)
    for ids in shared:
        members, local = _members(ids, inverse, len(keys))
        counts = (keys[ids[0]][0], keys[ids[0]][2], int(k), a_key[ids])
        lo_end, ok_lo = shared_ends(*counts, guess[ids, 0], local, w_lower[members], half,
                                    False)
        hi_end, ok_hi = shared_ends(*counts, guess[ids, 1], local, w_upper[members], half,
                                    True)
        good = (ok_lo & ok_hi)[local]
        lower[members[good]], upper[members[good]] = lo_end[good], hi_end[good]
        done[ids[ok_lo & ok_hi]] = True
    rest = np.flatnonzero(~done)
    if rest.size:  # the per-outcome path: fitted brackets (memoised), solved in one batch
        # taken from the memo before fitting: fitting many new outcomes may evict them
        known = {i: _PROFILES[keys[i]] for i in rest if keys[i] in _PROFILES}
        new = [i for i in rest if i not in known]
        if new:
            known.update(zip(new, _profile_new([keys[i] for i in new], guess[new]),
                             strict=True))
        members, local = _members(rest, inverse, len(keys))
        profiles = [known[i] for i in rest]
        cells = [_Cell(*keys[i][:5], keys[i][6]) for i in rest]
        lower[members] = _solve_ends([p[0] for p in profiles], cells, local,
                                     w_lower[members], half, False)
        upper[members] = _solve_ends([p[1] for p in profiles], cells, local,
                                     w_upper[members], half, True)
    a_hat = a_key[inverse]
    return (np.minimum(lower, a_hat).reshape(n_o.shape),
            np.maximum(upper, a_hat).reshape(n_o.shape))
