"""Exact interval ends for many outcomes of one design at once (a simulation study): the
binomial tables are shared on a common grid of A (see :func:`shared_ends`). Used by
:func:`estimators.partitioned.exact.exact_interval`; tested there against direct root-finding."""

from __future__ import annotations

import numpy as np

from estimators.numerics.binomial import TIE_EPS, binom_ge, binom_pmf, count_window, q_of
from estimators.partitioned.likelihood import fisher_se

SOLVE_BLOCK = 8192  # members solved at once (bounds the (members × counts) arrays)
GRID_STEPS_PER_SD = 80  # grid step: the smallest SD of the estimate (in arcsin √A) / this
SHARED_MAX_GRID = 4096
SHARED_MAX_ENTRIES = 1 << 22  # grid × inner counts
_CUBIC = np.linalg.inv(np.vander(np.arange(4.0), 4, increasing=True))  # values → coefficients


def ml_threshold(x, a_hat, n_o: int, n_c: int, k: int, ordinary_outer: bool = True):
    """Â ≥ â ⇔ inner count ≥ t(x), x the outer count (ℓ'(â) is linear in both counts):
    with ν_o = â(1−â) and ν_c = (K−1) q̂(1−q̂), q̂ = q(â), for an interior â,

        ordinary outer:      t(s_o) = q̂ n_c − ν_c/ν_o (s_o − â n_o)   (a threshold on s_c)
        complementary outer: t(s_c) = â n_o − ν_o/ν_c (s_c − q̂ n_c)   (a threshold on s_o)
    """
    q_hat = q_of(a_hat, k)
    nu_o, nu_c = a_hat * (1 - a_hat), (k - 1) * q_hat * (1 - q_hat)
    if ordinary_outer:
        return q_hat * n_c - nu_c / nu_o * (x - a_hat * n_o)
    return a_hat * n_o - nu_o / nu_c * (x - q_hat * n_c)


def shared_ends(n_o: int, n_c: int, k: int, a_hat: np.ndarray, guess: np.ndarray,
                 index: np.ndarray, w: np.ndarray, half: float,
                 upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """One end for many outcomes of one design (arrays over outcomes: â — which alone
    fixes the ordering — and the far bound ``guess``), for each member j = (outcome
    ``index[j]``, tie weight ``w[j]``).
    Returns (ends, ok): ``ok[i]`` is False where outcome i must take the per-outcome path
    (its â on the edge, the guess not beyond its end, or the design too spread out).

    The tails are computed on a common grid of A: with the source of narrower window as
    the outer one, tail(A) = Σ_{outer x} P(outer = x) · P(inner ≥ t_i(x)) (or ≤), where
    Â ≥ â ⇔ inner ≥ t_i(x), t_i linear in x (ℓ is concave in A). One table of the
    inner binomial per grid point serves every outcome; each end is located by bisection
    on the grid and refined on a cubic through four grid values."""
    m = len(a_hat)
    ok = (a_hat > 0) & (a_hat < 1) & (np.abs(guess - a_hat) > 1e-12)
    ends = np.zeros(len(w))
    if not ok.any():
        return ends, ok
    lo_i, hi_i = np.minimum(guess, a_hat), np.maximum(guess, a_hat)
    # the grid is uniform in φ = arcsin √A, where the SD of the estimate varies least
    # (near 0 and 1 it shrinks like √(A(1−A)) in A, not in φ)
    phi_i = np.arcsin(np.sqrt(np.stack([lo_i, hi_i])))
    phi_lo, phi_hi = phi_i[0][ok].min(), phi_i[1][ok].max()
    sample = np.sin(np.linspace(phi_lo, phi_hi, 65)) ** 2
    sd_phi = fisher_se(np.clip(sample, 1e-9, 1 - 1e-9), n_o, n_c, k) / (
        2 * np.sqrt(np.maximum(sample * (1 - sample), 1e-300)))
    size = int(np.ceil((phi_hi - phi_lo) / (sd_phi.min() / GRID_STEPS_PER_SD))) + 1
    if size > SHARED_MAX_GRID:
        return ends, np.zeros(m, dtype=bool)
    size = max(size, 8)
    step = (phi_hi - phi_lo) / (size - 1)

    def at(x: np.ndarray) -> np.ndarray:
        """A at (fractional) grid index x (the last point exactly at the range's end)."""
        return np.sin(np.where(x >= size - 1, phi_hi, phi_lo + x * step)) ** 2

    grid = at(np.arange(size))
    # orientation: sum over the source whose counts spread over fewer values
    win_o = count_window(n_o, grid) if n_o else np.zeros(1)
    win_c = count_window(n_c, q_of(grid, k)) if n_c else np.zeros(1)
    ordinary_outer = len(win_o) <= len(win_c)
    if ordinary_outer:
        x, n_out, p_out, n_in, p_in = win_o, n_o, grid, n_c, q_of(grid, k)
    else:
        x, n_out, p_out, n_in, p_in = win_c, n_c, q_of(grid, k), n_o, grid
    a_safe = np.where(ok, a_hat, 0.5)[:, None]  # the others are not solved here
    t = ml_threshold(x, a_safe, n_o, n_c, k, ordinary_outer)
    eps = TIE_EPS * (n_in + 1)
    cut = np.floor(t + eps) + 1 if upper else np.ceil(t - eps)  # P(inner ≥ cut) = tail part
    tie = np.ceil(t - eps)
    tied = (tie <= t + eps) & (tie >= 0) & (tie <= n_in)
    sd_in = np.sqrt(n_in * np.max(p_in * (1 - p_in)))
    first = max(0, int(np.floor(n_in * p_in.min() - 12 * sd_in - 20)))
    last = min(n_in + 1, int(np.ceil(n_in * p_in.max() + 12 * sd_in + 20)))
    span = last - first + 1
    if size * span > SHARED_MAX_ENTRIES or size * len(x) > SHARED_MAX_ENTRIES:
        return ends, np.zeros(m, dtype=bool)
    columns = first + np.arange(span)
    pmf = np.where(columns <= n_in, binom_pmf(np.minimum(columns, n_in), n_in, p_in[:, None]),
                   0.0)
    below = np.cumsum(pmf, axis=1) - pmf  # P(first ≤ inner < t)
    ge = np.clip(binom_ge(np.full((size, 1), float(first)), n_in, p_in[:, None]) - below,
                 0.0, 1.0)  # P(inner ≥ t), t = first, first + 1, …
    outer = binom_pmf(x[None, :], n_out, p_out[:, None]) if n_out else np.ones((size, 1))
    cut = (np.clip(cut, first, last) - first).astype(np.intp)
    tie = (np.clip(tie, first, last) - first).astype(np.intp)
    # tied entries, first in each row (every outcome ties at least with itself)
    order = np.argsort(~tied, axis=1, kind="stable")[:, :max(1, int(tied.sum(axis=1).max()))]
    tie_ok = np.take_along_axis(tied, order, axis=1)
    tie = np.take_along_axis(tie, order, axis=1)
    ge_flat, pmf_flat = ge.ravel(), pmf.ravel()
    sign = -1.0 if upper else 1.0

    def tails(rows: np.ndarray, weight: np.ndarray):
        """g(j) = sign · (tail − α/2) for the outcomes ``rows`` at tie weights ``weight``,
        at grid points j (one per row); increasing in j."""
        cut_r, x_r, tie_r, ok_r = cut[rows], order[rows], tie[rows], tie_ok[rows]

        def g(j: np.ndarray) -> np.ndarray:
            p = outer[j]
            inner = ge_flat[(j * span)[:, None] + cut_r]
            inclusive = np.sum(p * (1 - inner if upper else inner), axis=1)
            p_tied = np.take_along_axis(p, x_r, axis=1) if p.shape[1] > 1 else p
            tied_mass = np.sum(np.where(ok_r, p_tied * pmf_flat[(j * span)[:, None] + tie_r],
                                        0.0), axis=1)
            return sign * (inclusive - (1 - weight) * tied_mass - half)

        return g

    start = np.clip(np.floor((phi_i[0] - phi_lo) / step), 0, size - 1).astype(np.intp)
    stop = np.clip(np.ceil((phi_i[1] - phi_lo) / step), 0, size - 1).astype(np.intp)
    rows = np.flatnonzero(ok)
    far = stop[rows] if upper else start[rows]
    value = tails(rows, np.ones(len(rows)))(far)  # the conservative tail at the guess
    # the guess holds the end for every tie weight when the tail there is on the far side
    # of α/2, or when it is A = 0 (A = 1 for the upper end): the end is then that bound
    ok[rows] = (value >= 0) | (grid[far] >= 1) if upper else (value < 0) | (grid[far] <= 0)
    for block in range(0, len(w), SOLVE_BLOCK):
        j = np.arange(block, min(block + SOLVE_BLOCK, len(w)))
        j = j[ok[index[j]]]
        if j.size:
            rows = index[j]
            ends[j] = _bisect_grid(tails(rows, w[j]), at, size, start[rows], stop[rows])
    return ends, ok


def _bisect_grid(g, at, size: int, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Where g (increasing along the grid; ``at`` maps a fractional grid index to A)
    crosses 0 between grid points ``start`` and ``stop`` (one pair per row): bisection to
    one grid step, then Newton on the cubic through the four nearest grid values. Where g
    is already ≥ 0 at ``start`` (an upper end below â) the end is at ``start``; where it
    is < 0 at ``stop`` (a lower end above â), at ``stop`` — the hull with â replaces both."""
    g_start, g_stop = g(start), g(stop)
    j0, j1 = start.copy(), stop.copy()
    while (j1 - j0 > 1).any():
        mid = (j0 + j1) // 2
        up = g(mid) >= 0
        j0, j1 = np.where(up, j0, mid), np.where(up, mid, j1)
    base = np.clip(j0 - 1, 0, size - 4)
    values = np.stack([g(base + d) for d in range(4)], axis=1)
    coef = values @ _CUBIC.T  # p(x) = Σ coef_d x^d, x in grid steps from base
    lo_x, hi_x = (j0 - base).astype(float), (j0 - base + 1).astype(float)
    v0 = np.take_along_axis(values, (j0 - base)[:, None], axis=1)[:, 0]
    v1 = np.take_along_axis(values, np.minimum(j0 - base + 1, 3)[:, None], axis=1)[:, 0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = np.where(v1 > v0, lo_x - v0 / (v1 - v0), hi_x)
        for _ in range(3):
            p = coef[:, 0] + x * (coef[:, 1] + x * (coef[:, 2] + x * coef[:, 3]))
            dp = coef[:, 1] + x * (2 * coef[:, 2] + x * 3 * coef[:, 3])
            nxt = x - p / dp
            x = np.where((dp > 0) & (lo_x <= nxt) & (nxt <= hi_x), nxt, x)
    x = np.where(g_start >= 0, start, np.where(g_stop < 0, stop, base + x))
    return np.clip(at(x), 0.0, 1.0)
