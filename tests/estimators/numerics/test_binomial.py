"""The binomial helpers of the exact intervals against scipy.stats."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from estimators.numerics.binomial import binom_ge, binom_ge_rows, binom_le, binom_pmf, count_window


@pytest.mark.parametrize(("n", "p"), [(20, 0.3), (2000, 0.99), (20000, 0.525), (7, 0.0),
                                      (7, 1.0)])
def test_pmf_equals_scipy_including_certain_outcomes(n, p):
    x = np.arange(n + 1, dtype=float)
    assert np.allclose(binom_pmf(x, n, p), stats.binom.pmf(x, n, p), rtol=1e-9, atol=1e-300)


def test_pmf_broadcasts_one_probability_per_row():
    p = np.array([[0.1], [0.5], [0.9]])
    x = np.arange(11.0)[None, :]
    assert np.allclose(binom_pmf(x, 10, p), stats.binom.pmf(x, 10, p), rtol=1e-12)


def test_tails_of_real_thresholds_are_rounded_the_right_way():
    t = np.array([-3.0, 0.0, 2.5, 3.0, 10.0, 11.0])
    assert np.allclose(binom_ge(t, 10, 0.4), stats.binom.sf(np.ceil(t) - 1, 10, 0.4))
    assert np.allclose(binom_le(t, 10, 0.4), stats.binom.cdf(np.floor(t), 10, 0.4))


def test_tails_of_many_thresholds_per_row_equal_one_incomplete_beta_each():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.5, 0.99, (40, 1))
    t = np.floor(20000 * p - 300 + rng.integers(0, 600, (40, 60)))  # a short span per row
    got = binom_ge_rows(t, 20000, p)
    # log 20000! ≈ 1.8e5 carries rounding ~1e-11 into every probability
    assert np.abs(got - stats.binom.sf(t - 1, 20000, p)).max() < 1e-10


@pytest.mark.parametrize(("n", "low", "high"), [(200, 0.01, 0.05), (2000, 5e-5, 0.001),
                                                (40, 0.9, 0.999), (20000, 0.5, 0.55)])
def test_count_window_holds_the_mass_for_every_probability(n, low, high):
    p = np.linspace(low, high, 9)
    window = count_window(n, p)
    outside = 1 - stats.binom.pmf(window[None, :], n, p[:, None]).sum(axis=1)
    assert (outside < 1e-12).all()


def test_count_window_of_no_trials():
    assert np.array_equal(count_window(0, np.array([0.3, 0.7])), np.zeros(1))
