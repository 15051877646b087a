"""Neyman allocation across strata: the rates minimise the summed variance (brute force over
allocations), the stretched queue ranks serve each stratum at its rate, and in simulated
studies with known truth the stratified estimate stays unbiased, its variance falls by the
predicted ratio, and its interval covers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from estimators.partitioned.allocation import (
    RATE_MIN,
    allocation_ratio,
    neyman_rates,
    stratum_spreads,
    stretched_ranks,
)
from estimators.partitioned.allocation_simulation import (
    answer_spread,
    answers_per_stratum,
    simulate_allocation,
)


def test_the_neyman_rates_minimise_the_summed_variance_over_every_allocation_on_a_grid():
    # given three strata with their shares and spreads, and 60 answers to share out
    w, s, n = np.array([0.5, 0.3, 0.2]), np.array([0.1, 0.45, 0.3]), 60
    # when every allocation of the answers (at least one per stratum) is tried
    best = min((((w * w * s * s) / np.array(a)).sum(), a)
               for a in itertools.product(range(1, n), repeat=3) if sum(a) == n)
    # then the best one is Neyman's n_h ∝ W_h S_h, rounded
    neyman = n * w * s / (w * s).sum()
    assert np.abs(np.array(best[1]) - neyman).max() <= 1
    # and the ratio to proportional allocation is (Σ W S)² / Σ W S², as the formula says
    assert allocation_ratio(w, s) == pytest.approx((w @ s) ** 2 / (w @ (s * s)), rel=1e-12)
    proportional = (w * w * s * s / (n * w)).sum()
    assert allocation_ratio(w, s) == pytest.approx(
        (w * w * s * s / neyman).sum() / proportional, rel=1e-12)


def test_rates_are_relative_to_the_most_spread_stratum_and_never_below_the_floor():
    assert neyman_rates([0.2, 0.4, 0.01]).tolist() == [0.5, 1.0, RATE_MIN]
    for bad in ([0, 0], [np.nan, 1], [-1, 1]):
        with pytest.raises(ValueError):
            neyman_rates(bad)


def test_spreads_come_from_each_systems_standard_error_and_its_answers():
    se = np.array([[0.02, 0.04], [0.1, np.nan], [np.nan, np.nan]])
    answers = np.array([[100, 100], [25, 0], [5, 5]])
    s = stratum_spreads(se, answers)
    assert s[0] == pytest.approx(np.sqrt((100 * 0.02**2 + 100 * 0.04**2) / 2))
    assert s[1] == pytest.approx(np.sqrt(25 * 0.1**2))
    assert s[2] == s.max() == s[1]  # no pilot: the largest spread of the others
    # a figure from fewer than the pilot minimum of answers does not count
    assert np.isnan(stratum_spreads([[0.1]], [[5]])).all()


def test_stretched_ranks_serve_each_stratum_at_its_rate_in_random_order():
    rng = np.random.default_rng(3)
    n, top = 200_000, 2**62
    stratum = rng.integers(0, 3, n)
    rates = np.array([1.0, 0.5, 0.1])
    u = rng.integers(0, top, n)
    ranks = stretched_ranks(u, rates[stratum], rates.min())
    assert (ranks <= u).all() and (ranks >= 0).all()
    order = np.argsort(ranks, kind="stable")
    for depth in (2_000, 10_000):  # the first answered items, at two budgets
        served = np.bincount(stratum[order[:depth]], minlength=3) / np.bincount(stratum)
        assert served / served[0] == pytest.approx(rates, rel=0.12)
    # within a stratum the order is the uniform draw's (a simple random sample of it)
    mine = stratum == 1
    assert (np.argsort(ranks[mine], kind="stable") == np.argsort(u[mine], kind="stable")).mean() > 0.999


@pytest.mark.parametrize(("acc", "w", "k", "n"), [
    ((0.98, 0.6), (0.5, 0.5), 4, 400),
    ((0.99, 0.9, 0.55), (0.6, 0.3, 0.1), 10, 600),
    ((0.97, 0.7), (0.5, 0.5), 4, 100),
])
def test_in_simulated_studies_neyman_is_unbiased_covers_and_saves_the_predicted_share(acc, w, k, n):
    # given strata of known accuracy and the spread one answer brings to each
    rng = np.random.default_rng(11)
    s = answer_spread(acc, k)
    rates = neyman_rates(s, floor=0)
    reps = 4000
    # when 4000 studies are answered under proportional and under Neyman allocation
    prop = simulate_allocation(acc, w, answers_per_stratum(w, np.ones(len(w)), n), k, reps, rng)
    ney = simulate_allocation(acc, w, answers_per_stratum(w, rates, n), k, reps, rng)
    # then both stratified estimates are unbiased (4 Monte Carlo standard errors)
    for run in (prop, ney):
        assert abs(run.accuracy.mean() - run.truth) < 4 * run.accuracy.std() / np.sqrt(reps)
    # Neyman's variance is the predicted share of proportional allocation's (the F-test's
    # 99 % band for two variances of 4000 draws is ±8 %), and it is smaller
    simulated = ney.accuracy.var() / prop.accuracy.var()
    assert simulated == pytest.approx(allocation_ratio(w, s), rel=0.08)
    assert simulated < 0.9
    # and the dashboard's interval keeps its promise under the unequal rates
    assert ney.coverage >= 0.935 and prop.coverage >= 0.935
