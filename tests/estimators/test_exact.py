"""The exact interval: against Clopper–Pearson, brute-force enumeration of the outcome
plane, and its coverage guarantee computed without simulation noise."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from estimators.exact import _tail, exact_interval, exact_interval_cell
from estimators.partitioned import ml_accuracy


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


def test_default_covers_at_least_nominal_for_every_accuracy():
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
    assert ((mid[:, 1] - mid[:, 0]) <= (hi - lo) + 1e-12).all()
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
