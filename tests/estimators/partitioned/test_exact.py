"""The exact intervals: against Clopper–Pearson, brute-force enumeration of the outcome
plane, direct root-finding, and their coverage computed without simulation noise (a sum
over every outcome and, for the randomised one, an integral over the tie-break)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from estimators.partitioned import exact
from estimators.partitioned.accuracy import estimate
from estimators.partitioned.exact import (
    _Cell,
    _distinct_rows,
    _end,
    _tail,
    clear_memo,
    exact_interval,
    exact_interval_cell,
    randomized_interval_cell,
)
from estimators.partitioned.likelihood import ml_accuracy


@pytest.mark.parametrize(("n", "x"), [(20, 0), (20, 1), (20, 13), (20, 20), (40, 39), (7, 3)])
def test_conservative_version_is_clopper_pearson_without_complementary_labels(n, x):
    expected = stats.binomtest(x, n).proportion_ci(0.95, method="exact")
    lo, hi = exact_interval_cell(n, x, 0, 0, 5, 0.95, x / n)  # the default is conservative
    assert lo == pytest.approx(expected.low, abs=1e-7)
    assert hi == pytest.approx(expected.high, abs=1e-7)


def _outcomes(n_o: int, n_c: int, k: int):
    grid = np.array(list(itertools.product(range(n_o + 1), range(n_c + 1))), float)
    s_o, s_c = grid[:, 0], grid[:, 1]
    return s_o, s_c, ml_accuracy(float(n_o), s_o, float(n_c), s_c, k)


def _probabilities(s_o, s_c, n_o, n_c, k, a):
    return stats.binom.pmf(s_o, n_o, a) * stats.binom.pmf(s_c, n_c, (a + k - 2) / (k - 1))


@pytest.mark.parametrize("tie", [1.0, 0.5])
def test_tails_equal_enumeration_of_the_outcome_plane(tie):
    n_o, n_c, k = 6, 9, 4
    s_o, s_c, a_hats = _outcomes(n_o, n_c, k)
    for a_hat in (0.2, 0.55, float(a_hats[17]), 0.9):
        for a in (0.1, 0.5, 0.8):
            p = _probabilities(s_o, s_c, n_o, n_c, k, a)
            tied = np.isclose(a_hats, a_hat, atol=1e-9)
            ge = p[(a_hats > a_hat) & ~tied].sum() + tie * p[tied].sum()
            le = p[(a_hats < a_hat) & ~tied].sum() + tie * p[tied].sum()
            assert _tail(a, a_hat, n_o, n_c, k, False, tie) == pytest.approx(ge, abs=1e-12)
            assert _tail(a, a_hat, n_o, n_c, k, True, tie) == pytest.approx(le, abs=1e-12)


def test_conservative_version_covers_at_least_nominal_for_every_accuracy():
    """Coverage computed exactly (sum over all outcomes), on a fine grid of true A; the
    mid-p variant is narrower and near nominal on average, without the guarantee."""
    n_o, n_c, k = 10, 30, 4
    s_o, s_c, a_hats = _outcomes(n_o, n_c, k)
    lo, hi = exact_interval(n_o, s_o, n_c, s_c, k, 0.95, a_hats)
    mid = np.array([exact_interval_cell(n_o, int(o), n_c, int(c), k, 0.95, float(h), tie=0.5)
                    for o, c, h in zip(s_o, s_c, a_hats, strict=True)])
    cover, cover_mid = [], []
    for a in np.linspace(0.01, 0.99, 50):
        p = _probabilities(s_o, s_c, n_o, n_c, k, a)
        cover.append(p[(lo <= a) & (a <= hi)].sum())
        cover_mid.append(p[(mid[:, 0] <= a) & (a <= mid[:, 1])].sum())
    assert min(cover) >= 0.95 - 1e-9
    assert ((mid[:, 1] - mid[:, 0]) <= (hi - lo) + 1e-9).all()  # ends solved to ~1e-10
    assert 0.945 <= np.mean(cover_mid) <= 0.975 and np.mean(cover_mid) < np.mean(cover)


def test_each_distinct_outcome_is_computed_once_and_shapes_are_kept():
    s_o = np.array([[3, 3], [4, 3]])
    lo, hi = exact_interval(5, s_o, 12, 10, 4, 0.95, ml_accuracy(5.0, s_o, 12.0, 10.0, 4))
    assert lo.shape == (2, 2) and lo[0, 0] == lo[0, 1] == lo[1, 1] and lo[1, 0] > lo[0, 0]
    assert (hi >= lo).all()


def test_fractional_complementary_counts_from_missing_predictions_are_accepted():
    # a missing prediction scores (K−2)/(K−1) in S_c, so S_c need not be an integer
    lo, hi = exact_interval(30, 29, 90, 88.75, 5, 0.95,
                            ml_accuracy(30.0, 29.0, 90.0, 88.75, 5))
    assert 0 < lo < ml_accuracy(30.0, 29.0, 90.0, 88.75, 5) < hi <= 1


@pytest.mark.parametrize(("n_o", "n_c", "k"), [(10, 30, 4), (40, 0, 5), (0, 40, 3), (20, 20, 10)])
def test_randomised_version_covers_exactly_nominal_for_every_accuracy(n_o, n_c, k):
    """Coverage = Σ_x P_A(x) · P_U(A ∈ CI(x, U)), the U-integral by the midpoint rule on M
    points (error ≤ 1/M): 95 % at every A of a fine grid, where the conservative version
    (test above; here at n_o = 40, n_c = 0 Clopper–Pearson) reaches 99 %."""
    m = 1000
    s_o, s_c, a_hats = _outcomes(n_o, n_c, k)
    u = (np.arange(m) + 0.5) / m
    lo, hi = exact_interval(n_o, np.repeat(s_o, m), n_c, np.repeat(s_c, m), k, 0.95,
                            np.repeat(a_hats, m), u=np.tile(u, len(s_o)))
    lo, hi = lo.reshape(len(s_o), m), hi.reshape(len(s_o), m)
    for a in np.linspace(0.01, 0.99, 99):
        p = _probabilities(s_o, s_c, n_o, n_c, k, a)
        coverage = (p * ((lo <= a) & (a <= hi)).mean(axis=1)).sum()
        assert coverage == pytest.approx(0.95, abs=1.5 / m), a


CELLS = [(40, 40, 0, 0, 5), (40, 38, 0, 0, 5), (40, 39, 360, 358, 10), (20, 20, 20000, 19990, 3),
         (2000, 1985, 0, 0, 4), (200, 190, 2000, 1990, 16), (0, 0, 20000, 19985, 10),
         (40, 2, 40, 10, 3), (2000, 1999, 20000, 19999, 16), (20, 0, 40, 15, 3),
         (20, 1, 20000, 6690, 3), (5, 3, 7, 6, 4), (1, 1, 0, 0, 3), (0, 0, 3, 1, 3),
         (20, 1, 20000, 17800, 10), (20, 0, 20000, 17900, 10)]  # lower ends at or near 0


@pytest.mark.parametrize("cell", CELLS)
def test_randomised_ends_equal_direct_root_finding(cell):
    """The fast path (tails interpolated on a bracket, crossings from a grid and a Newton
    step) against Brent's method on the exact tails, for many tie-breaks; and each end
    lies between the tie-weight-1 (conservative) and tie-weight-0 ones."""
    n_o, s_o, n_c, s_c, k = cell
    a_hat = float(ml_accuracy(float(n_o), float(s_o), float(n_c), float(s_c), k))
    u = np.random.default_rng(sum(cell)).random(25)
    lo, hi = randomized_interval_cell(n_o, s_o, n_c, s_c, k, 0.95, a_hat, u)
    c = _Cell(n_o, s_o, n_c, s_c, k, a_hat)
    for ui, low, high in zip(u, lo, hi, strict=True):
        assert low == pytest.approx(min(_end(c, 0.025, False, ui), a_hat), abs=1e-8)
        assert high == pytest.approx(max(_end(c, 0.025, True, 1 - ui), a_hat), abs=1e-8)
    wide = exact_interval_cell(n_o, s_o, n_c, s_c, k, 0.95, a_hat, tie=1.0)
    narrow = exact_interval_cell(n_o, s_o, n_c, s_c, k, 0.95, a_hat, tie=0.0)
    assert (wide[0] - 1e-9 <= lo).all() and (lo <= max(narrow[0], a_hat) + 1e-9).all()
    assert (min(narrow[1], a_hat) - 1e-9 <= hi).all() and (hi <= wide[1] + 1e-9).all()


def test_randomised_interval_is_reproduced_from_its_tie_breaks():
    n_o, s_o, n_c, s_c = np.array([40, 40]), np.array([39, 40]), np.array([360, 0]), np.array([355, 0])
    first = estimate(n_o, s_o, n_c, s_c, 10, interval="randomised", rng=7)
    again = estimate(n_o, s_o, n_c, s_c, 10, interval="randomised", u=first.u)
    assert np.array_equal(first.ci_low, again.ci_low) and np.array_equal(first.ci_high, again.ci_high)
    assert estimate(n_o, s_o, n_c, s_c, 10, interval="conservative").u is None
    assert estimate(n_o, s_o, n_c, s_c, 10).u is None  # the default needs no coin
    with pytest.raises(ValueError, match="u: tie-breaks must lie in"):
        estimate(n_o, s_o, n_c, s_c, 10, interval="randomised", u=1.5)


def test_distinct_rows_equal_numpy_unique():
    rng = np.random.default_rng(1)
    rows = rng.integers(0, 4, (5000, 4)).astype(float)
    rows[:, 3] += 0.75 * rng.integers(0, 2, 5000)  # fractional S_c (missing predictions)
    unique, first, inverse = _distinct_rows(rows)
    want_unique, want_first, want_inverse = np.unique(rows, axis=0, return_index=True,
                                                      return_inverse=True)
    assert np.array_equal(unique, want_unique) and np.array_equal(first, want_first)
    assert np.array_equal(inverse, want_inverse.ravel())


def _many_outcomes(n_o, n_c, k, a, m, seed):
    rng = np.random.default_rng(seed)
    s_o = rng.binomial(n_o, a, m).astype(float)
    s_c = rng.binomial(n_c, (a + k - 2) / (k - 1), m).astype(float)
    return s_o, s_c, ml_accuracy(float(n_o), s_o, float(n_c), s_c, k), rng.random(m)


@pytest.mark.parametrize(("n_o", "n_c", "k", "a"), [(2000, 20000, 3, 0.99), (200, 20000, 5, 0.05),
                                                    (2000, 360, 10, 0.6), (200, 2000, 16, 0.9)])
def test_many_outcomes_of_one_design_equal_direct_root_finding(monkeypatch, n_o, n_c, k, a):
    """Many outcomes of one design go through the shared grid (one binomial table per grid
    point, bisection and a cubic): each end equals Brent's method on the exact tails; the
    per-outcome path (fitted brackets, split into chunks by â) agrees with it."""
    s_o, s_c, a_hats, u = _many_outcomes(n_o, n_c, k, a, 300, 5)
    assert len(np.unique(np.stack([s_o, s_c]), axis=1).T) >= exact.SHARED_MIN_OUTCOMES
    clear_memo()
    lo, hi = exact_interval(n_o, s_o, n_c, s_c, k, 0.95, a_hats, u=u)
    for j in np.linspace(0, len(u) - 1, 6).astype(int):
        c = _Cell(n_o, int(s_o[j]), n_c, int(s_c[j]), k, float(a_hats[j]))
        assert lo[j] == pytest.approx(min(_end(c, 0.025, False, u[j]), a_hats[j]), abs=1e-9)
        assert hi[j] == pytest.approx(max(_end(c, 0.025, True, 1 - u[j]), a_hats[j]), abs=1e-9)
    monkeypatch.setattr(exact, "SHARED_MIN_OUTCOMES", 10**9)
    monkeypatch.setattr(exact, "CHUNK_ENTRIES", 5000)
    clear_memo()
    lo_each, hi_each = exact_interval(n_o, s_o, n_c, s_c, k, 0.95, a_hats, u=u)
    assert np.allclose(lo_each, lo, rtol=0, atol=1e-9)
    assert np.allclose(hi_each, hi, rtol=0, atol=1e-9)


def test_identical_calls_are_answered_from_the_memo():
    s_o, s_c, a_hats, u = _many_outcomes(40, 360, 10, 0.97, 50, 2)
    clear_memo()
    first = exact_interval(40, s_o, 360, s_c, 10, 0.95, a_hats, u=u)
    first[0][:] = -1  # callers get copies
    again = exact_interval(40, s_o, 360, s_c, 10, 0.95, a_hats, u=u)
    assert (again[0] >= 0).all()
    other = exact_interval(40, s_o, 360, s_c, 10, 0.95, a_hats, u=1 - u)
    assert not np.array_equal(other[0], again[0])


@pytest.mark.parametrize(("n_o", "n_c", "k"), [(10, 30, 4), (40, 0, 5), (20, 20, 10), (0, 40, 3)])
def test_default_mid_p_interval_coverage_by_exact_summation(n_o, n_c, k):
    """The default interval (mid-p exact where events are few) on every outcome of small
    designs, its coverage summed exactly on 99 true accuracies: 95–96.5 % on average over
    A, never below 92 % at any A (the mid-p price: no guarantee at every A); the
    conservative option never below 95 %."""
    s_o, s_c, a_hats = _outcomes(n_o, n_c, k)
    default = estimate(n_o, s_o, n_c, s_c, k, "ml")
    conservative = estimate(n_o, s_o, n_c, s_c, k, "ml", interval="conservative")
    cover, cover_conservative = [], []
    for a in np.linspace(0.01, 0.99, 99):
        p = _probabilities(s_o, s_c, n_o, n_c, k, a)
        cover.append(p[(default.ci_low <= a) & (a <= default.ci_high)].sum())
        cover_conservative.append(
            p[(conservative.ci_low <= a) & (a <= conservative.ci_high)].sum())
    assert 0.95 <= np.mean(cover) <= 0.965
    assert min(cover) >= 0.92
    assert min(cover_conservative) >= 0.95 - 1e-9


def test_perfect_two_of_two_is_not_a_point():
    # mid-p: ½ P(2 of 2 | A) = α/2 → A = √0.05; the randomised interval could give [1, 1]
    for method in ("ord", "ml"):
        e = estimate(2, 2, 0, 0, 5, method)
        assert e.ci_high == 1.0
        assert e.ci_low == pytest.approx(np.sqrt(0.05), abs=1e-8)
    assert estimate(2, 2, 0, 0, 5, "ml", interval="conservative").ci_low == pytest.approx(
        0.025 ** 0.5, abs=1e-8)  # Clopper–Pearson
    assert estimate(2, 2, 0, 0, 5, "ml", interval="randomised", u=0.0).ci_low == 1.0


@settings(max_examples=200, deadline=None)
@given(n_o=st.integers(0, 60), n_c=st.integers(0, 400), fo=st.floats(0, 1),
       fc=st.floats(0, 1), k=st.integers(3, 12),
       method=st.sampled_from(["ord", "comp", "ivw", "ivw_pilot", "ivw_fixed", "ml"]))
def test_default_interval_is_deterministic_and_never_a_point(n_o, n_c, fo, fc, k, method):
    s_o, s_c = np.floor(fo * n_o), np.floor(fc * n_c)
    has = {"ord": n_o > 0, "comp": n_c > 0}.get(method, n_o + n_c > 0)
    first = estimate(n_o, s_o, n_c, s_c, k, method)
    clear_memo()
    # alone, or among other cells in any order: the same interval
    batch = estimate(np.array([n_o, 7, n_o]), np.array([s_o, 3, s_o]),
                     np.array([n_c, 9, n_c]), np.array([s_c, 8, s_c]), k, method)
    assert (first.ci_low, first.ci_high) == (batch.ci_low[0], batch.ci_high[0])
    assert (batch.ci_low[0], batch.ci_high[0]) == (batch.ci_low[2], batch.ci_high[2])
    if has:
        assert first.ci_high - first.ci_low > 1e-3


def test_a_call_with_more_outcomes_than_the_memo_holds(monkeypatch):
    # regression: outcomes found in the memo were evicted by the new ones fitted in the
    # same call, then looked up (KeyError); the answers must not depend on the memo size
    s_o, s_c, a_hats, _ = _many_outcomes(40, 360, 10, 0.9, 40, 3)
    clear_memo()
    want = exact_interval(40, s_o, 360, s_c, 10, 0.95, a_hats)
    clear_memo()
    exact_interval(40, s_o[:10], 360, s_c[:10], 10, 0.95, a_hats[:10])  # some known
    monkeypatch.setattr(exact, "MEMO_SIZE", 5)
    monkeypatch.setattr(exact, "SHARED_MIN_OUTCOMES", 10**9)
    got = exact_interval(40, s_o, 360, s_c, 10, 0.95, a_hats)
    assert np.allclose(got[0], want[0], atol=1e-9) and np.allclose(got[1], want[1], atol=1e-9)
