"""One binomial proportion (estimators.numerics.proportion): the intervals against
outside references and brute-force definitions, and the exact coverage against direct
enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from estimators.numerics.proportion import (
    BLAKER_TOLERANCE,
    blaker,
    blaker_acceptability,
    clopper_pearson,
    exact_coverage,
    mid_p,
)


def _brute_acceptability(p, s, n):
    """Blaker's definition written out: P_p(γ(X) ≤ γ(s)), γ(x) = min(P(X ≤ x), P(X ≥ x))."""
    x = np.arange(n + 1)
    gamma = np.minimum(stats.binom.cdf(x, n, p), stats.binom.sf(x - 1, n, p))
    return stats.binom.pmf(x, n, p)[gamma <= gamma[s] * (1 + BLAKER_TOLERANCE)].sum()


def test_acceptability_equals_its_definition():
    rng = np.random.default_rng(4)
    for _ in range(400):
        n = int(rng.integers(1, 80))
        s = int(rng.integers(0, n + 1))
        p = float(rng.random())
        assert blaker_acceptability(p, s, n) == pytest.approx(_brute_acceptability(p, s, n),
                                                              abs=1e-12)


@pytest.mark.parametrize("n", [1, 5, 20, 37, 60, 150])
def test_blaker_interval_is_the_hull_of_the_acceptable_p_on_a_fine_grid(n):
    # given every outcome of Bin(n, ·) and a grid of 20 001 values of p (acceptability as
    # checked against its definition above)
    grid = np.linspace(0, 1, 20001)
    lo, hi = blaker(np.arange(n + 1), n)
    for s in range(n + 1):
        acceptable = grid[blaker_acceptability(grid, s, n) > 0.05]
        # then no acceptable grid point lies outside the interval, and its ends are
        # acceptable themselves: it is the hull (n = 60, s = 0 and n = 150, s = 34 have
        # narrow islands of acceptable p just inside Clopper–Pearson's end)
        assert lo[s] <= acceptable.min() + 1e-12 and hi[s] >= acceptable.max() - 1e-12
        for end, edge in ((lo[s], s == 0), (hi[s], s == n)):
            assert edge or blaker_acceptability(end, s, n) > 0.05


def test_clopper_pearson_matches_scipy_and_contains_blaker():
    for n, s in itertools.product((1, 7, 40, 300), range(0, 41, 3)):
        if s > n:
            continue
        ref = stats.binomtest(s, n).proportion_ci(0.95, method="exact")
        lo, hi = clopper_pearson(s, n)
        assert (float(lo), float(hi)) == pytest.approx((ref.low, ref.high), abs=1e-12)
        b_lo, b_hi = blaker(s, n)
        assert lo - 1e-12 <= b_lo <= s / n <= b_hi <= hi + 1e-12


def test_mid_p_solves_its_tail_equations():
    # a perfect score of 100: ½ p¹⁰⁰ = 2.5 %, so the lower end is 0.05^(1/100) = 0.9705
    lo, hi = mid_p(100, 100)
    assert float(lo) == pytest.approx(0.05 ** (1 / 100), abs=1e-12) and float(hi) == 1.0
    lo, hi = mid_p(7, 30)
    assert stats.binom.sf(7, 30, lo) + 0.5 * stats.binom.pmf(7, 30, lo) == pytest.approx(0.025)
    assert stats.binom.cdf(6, 30, hi) + 0.5 * stats.binom.pmf(7, 30, hi) == pytest.approx(0.025)


def test_exact_coverage_equals_enumeration():
    # given intervals for every outcome, coverage is the sum of the outcomes' probabilities
    for n, p in ((12, 0.3), (40, 0.97), (100, 0.5)):
        lo, hi = blaker(np.arange(n + 1), n)
        brute = sum(stats.binom.pmf(s, n, p) for s in range(n + 1) if lo[s] <= p <= hi[s])
        assert exact_coverage(n, [p], blaker)[0] == pytest.approx(brute, abs=1e-13)
    # the figures of issue 18 for the former mid-p default: 92.1 % at A = 0.97, n_o = 100
    assert exact_coverage(100, [0.97], mid_p)[0] == pytest.approx(0.921, abs=5e-4)


def test_blaker_covers_at_least_nominal_at_every_p():
    for n in (5, 20, 60, 150):
        ps = np.linspace(0.001, 0.999, 999)
        assert exact_coverage(n, ps, blaker).min() >= 0.95 - 1e-9


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="0 ≤ s ≤ n"):
        blaker(5, 3)
    with pytest.raises(ValueError, match="confidence"):
        mid_p(1, 3, confidence=1.5)


def test_blaker_takes_clopper_pearson_from_plenty_of_events():
    # outcomes with at least `clopper_pearson_from` events of each kind: Clopper–Pearson's
    # interval exactly (equally ≥ 95 % at every p), the others Blaker's own
    s = np.array([10, 1500, 3000, 0, 1000, 999])
    n = np.array([20, 3000, 200000, 0, 5000, 5000])
    lo, hi = blaker(s, n, clopper_pearson_from=1000)
    b_lo, b_hi = blaker(s, n)
    c_lo, c_hi = clopper_pearson(s, n)
    plenty = np.minimum(s, n - s) >= 1000
    assert plenty.tolist() == [False, True, True, False, True, False]
    assert np.array_equal(lo, np.where(plenty, c_lo, b_lo))
    assert np.array_equal(hi, np.where(plenty, c_hi, b_hi))
    # where it switches, the two differ by less than 0.6 % of the width
    width = b_hi - b_lo
    assert (((c_hi - c_lo) - width)[plenty] / width[plenty]).max() < 0.006


def test_blaker_needs_no_bisection_to_find_the_opposite_tail():
    # the quantile guess of blaker_acceptability is checked, and bisection runs only where
    # it misses: the acceptability equals its definition either way, at large n too
    rng = np.random.default_rng(9)
    for _ in range(60):
        n = int(rng.integers(200, 3000))
        s = int(rng.integers(0, n + 1))
        p = float(np.clip(s / n + rng.normal(0, 0.05), 1e-4, 1 - 1e-4))
        assert blaker_acceptability(p, s, n) == pytest.approx(_brute_acceptability(p, s, n),
                                                              abs=1e-12)


def test_an_end_is_decided_by_the_intervals_own_test_not_by_its_last_bits():
    from estimators.numerics.proportion import EDGE, blaker_accepts, covers

    # 1 of 1, Blaker: acc(p) = p below ½, so 0.05 itself is rejected (acc = α): outside,
    # whichever side of the computed end the float 0.05 falls
    lo, hi = blaker(np.array([1]), np.array([1]))
    for nudge in (-3, 0, 3):
        truth = 0.05 + nudge * np.spacing(0.05)
        assert not covers(lo, hi, truth, blaker_accepts(1, 1))[0]
    assert covers(lo, hi, 0.05 + 2 * EDGE, blaker_accepts(1, 1))[0]
    # 40 of 100: acc jumps at ½ (the tails swap) and is 0.057 > α there: ½ is inside,
    # though the computed end lies 1e-9 above it
    lo, hi = blaker(np.array([40]), np.array([100]))
    assert abs(hi[0] - 0.5) < EDGE and covers(lo, hi, 0.5, blaker_accepts(40, 100))[0]
    # the parameter's bounds are inside; without a test an end is taken as inside
    assert covers(0.0, 0.95, 0.0) and covers(0.5, 1.0, 1.0) and covers(0.2, 0.5, 0.5)
    assert not covers(0.2, 0.5, 0.5 + 2 * EDGE)


def test_exact_coverage_decides_ends_by_each_intervals_test():
    # 1 label at p = 0.05 (Blaker, mid-p: 0.05 rejected when the label is right): 95 %;
    # Clopper–Pearson's end is 0.025, so 0.05 is inside both outcomes' sets: 100 %
    assert exact_coverage(1, [0.05], blaker)[0] == pytest.approx(0.95)
    assert exact_coverage(1, [0.05], mid_p)[0] == pytest.approx(0.95)
    assert exact_coverage(1, [0.05], clopper_pearson)[0] == pytest.approx(1.0)
