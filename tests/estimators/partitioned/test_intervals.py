"""Which cells get the exact interval: the information share against the Fisher
information computed term by term, and the likelihood-ratio interval's coverage, in
simulation, where a few-event source sits beside a much richer one."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.partitioned.accuracy import estimate
from estimators.partitioned.intervals import (
    APPROXIMATE_BELOW,
    EXACT_SHARE,
    confidence_interval,
    decisive_events,
    few_events,
    lattice_outcome,
    needs_exact,
    ordinary_information_share,
)
from estimators.partitioned.likelihood import likelihood_ratio_interval, ml_accuracy
from estimators.partitioned.simulation import simulate_counts


@pytest.mark.parametrize(("n_o", "n_c", "k", "a"), [(40, 360, 10, 0.97), (200, 20000, 3, 0.05),
                                                    (2000, 360, 10, 0.6), (7, 3, 4, 0.5)])
def test_information_share_equals_the_fisher_information_ratio(n_o, n_c, k, a):
    q = (a + k - 2) / (k - 1)
    info_o = n_o / (a * (1 - a))
    info_c = n_c / ((k - 1) ** 2 * q * (1 - q))
    assert ordinary_information_share(n_o, n_c, k, a) == pytest.approx(info_o / (info_o + info_c))


def test_information_share_at_the_edges():
    # without complementary labels everything is ordinary, and the other way round; at
    # A ∈ {0, 1} both informations diverge but their ratio does not
    assert ordinary_information_share(40, 0, 5, 1.0) == 1.0
    assert ordinary_information_share(0, 40, 5, 0.3) == 0.0
    assert ordinary_information_share(0, 0, 5, 0.3) == 1.0
    assert ordinary_information_share(40, 360, 10, 1.0) == pytest.approx(0.5)
    assert ordinary_information_share(40, 360, 10, 0.0) == 1.0


def test_exact_where_a_few_event_source_matters():
    # the hard cell's perfect score: ordinary and complementary share the information
    assert needs_exact(40, 40, 360, 360, 10, 1.0)
    # 10 correct of 200 ordinary labels beside 20 000 complementary ones (17 % of the
    # information): the likelihood is nearly quadratic, the LR interval is used
    a_hat = ml_accuracy(200.0, 10.0, 20000.0, 10500.0, 3)
    share = ordinary_information_share(200, 20000, 3, a_hat)
    assert share < EXACT_SHARE and few_events(200, 10, 20000, 10500)[0]
    assert not needs_exact(200, 10, 20000, 10500, 3, a_hat)
    lo, hi = confidence_interval(200, 10, 20000, 10500, 3, 0.95, mle=a_hat, u=0.5)
    lr = likelihood_ratio_interval(200, 10, 20000, 10500, 3, 0.95, mle=a_hat)
    assert (lo, hi) == (lr[0], lr[1])
    # the same 10 correct answers alone: exact
    assert needs_exact(200, 10, 0, 0, 3, 0.05)


@pytest.mark.parametrize(("k", "a", "n_o", "n_c"), [(3, 0.05, 200, 20000), (5, 0.6, 40, 2000),
                                                    (3, 0.3, 20, 360), (10, 0.6, 2000, 360)])
def test_default_interval_covers_where_the_rule_picks_likelihood_ratio(k, a, n_o, n_c):
    """Cells where a few-event source carries under a fifth of the information (the third
    near that threshold, so its replicates mix both intervals): the default interval
    covers 95 % (± 1 point; 8 000 replicates, Monte-Carlo SE 0.24)."""
    s_o, s_c = simulate_counts(np.random.default_rng(3), 8000, a, k, n_o, n_c)
    a_hat = ml_accuracy(float(n_o), s_o, float(n_c), s_c, k)
    few_o, few_c = few_events(n_o, s_o, n_c, s_c)
    assert (few_o | few_c).mean() > 0.5  # the old per-kind rule sent these to exact
    assert needs_exact(n_o, s_o, n_c, s_c, k, a_hat).mean() < 0.5  # most now use LR
    lo, hi = confidence_interval(n_o, s_o, n_c, s_c, k, 0.95, mle=a_hat,
                                 u=np.random.default_rng(4).random(8000))
    assert 0.94 <= np.mean((lo <= a) & (a <= hi)) <= 0.96


def test_fractional_counts_take_the_exact_interval_of_the_nearest_outcome():
    """Effective counts (n/d, S/d: several queries per item) are fractional; the exact
    interval is defined on integer outcomes. It must be that of the nearest outcome, with
    that outcome's own ML estimate: with the estimate of the fractional counts (a rounding
    error away), the observed outcome fell out of its own tail and the upper end dropped
    from 0.982 to 0.967 (2 complementary hits in 172: the comp interval of K = 10, Q = 2,
    100 items, which then covered A = 0.97 only 89.6 % of the time)."""
    d = 0.9886256975172163  # a complementary design effect of that cell
    fractional = estimate(0, 0, 170 / d, 168 / d, 10, "comp")
    nearest = estimate(0, 0, 172, 170, 10, "comp")
    assert (fractional.ci_low, fractional.ci_high) == pytest.approx(
        (nearest.ci_low, nearest.ci_high), abs=1e-9)
    # and for the joint interval: a lattice outcome's ends whatever its scale
    lo, hi = confidence_interval(40 / 1.25, 38 / 1.25, 360 / 1.25, 355 / 1.25, 10, 0.95)
    *cells, mle = lattice_outcome(40 / 1.25, 38 / 1.25, 360 / 1.25, 355 / 1.25, 10)
    assert [float(x) for x in cells] == [32, 30, 288, 284]
    assert mle == pytest.approx(float(ml_accuracy(32, 30, 288, 284, 10)), abs=0)
    want = confidence_interval(32, 30, 288, 284, 10, 0.95)
    assert needs_exact(32, 30, 288, 284, 10, mle)  # 2 ordinary errors: the exact interval
    assert (float(lo), float(hi)) == pytest.approx([float(x) for x in want], abs=1e-9)


def test_lattice_keeps_integer_counts_and_the_proportion():
    # integer counts (one query per item) pass unchanged, with the caller's estimate
    cells = lattice_outcome(np.array([40.0, 7.0]), np.array([38.0, 7.0]), 360.0,
                            np.array([355.0, 359.0]), 10, mle=np.array([0.9, 0.8]))
    assert [c.tolist() for c in cells] == [[40, 7], [38, 7], [360, 360], [355, 359],
                                           [0.9, 0.8]]
    # fractional: n rounded, then S from the proportion (rare failures stay failures)
    n_o, s_o, n_c, s_c, _ = lattice_outcome(60.4, 58.6, 0.0, 0.0, 4)
    assert (float(n_o), float(s_o)) == (60, 58)  # 60.4 − 58.6 = 1.8 failures → 2, not 1


def test_perfect_fractional_score_near_a_shared_design_does_not_crash():
    """A perfect score in effective counts had an ML estimate of 1 − 2e-16; beside 64 or
    more outcomes of the same design (the shared-grid path) the exact interval then divided
    by q̂(1 − q̂) = 0 and raised IndexError (K = 3, 3 queries per item, 100 items, A = 0.97:
    the several-queries grid stopped there)."""
    d = 1.5064402070968557
    s_o, s_c = np.meshgrid(np.arange(71, 101), np.arange(100, 107), indexing="ij")
    s_o, s_c = s_o.ravel() / d, s_c.ravel() / d
    est = estimate(100 / d, s_o, 106 / d, s_c, 3, "ml")
    perfect = (s_o == 100 / d) & (s_c == 106 / d)
    assert est.accuracy[perfect] == 1.0
    assert 0.9 < est.ci_low[perfect][0] < 1.0 == est.ci_high[perfect][0]
    assert np.all(est.ci_low <= est.accuracy) and np.all(est.accuracy <= est.ci_high)


def test_decisive_events_count_what_each_interval_rests_on():
    # ordinary: the rarer of right and wrong answers; complementary: the hits (answers that
    # name the AI's prediction) unless they are the majority; no labels: infinitely many
    n_o = np.array([40, 40, 0, 300, 40])
    s_o = np.array([38, 3, 0, 290, 2])
    n_c = np.array([80, 0, 30, 900, 360])
    s_c = np.array([77, 0, 10, 897, 190])
    assert decisive_events(n_o, s_o, n_c, s_c, 3, 0.9, "ord").tolist() == [2, 3, np.inf, 10, 2]
    assert decisive_events(n_o, s_o, n_c, s_c, 3, 0.9, "comp").tolist() == [3, np.inf, 10, 3,
                                                                            170]
    # joint: the errors seen (wrong "yes" answers plus complementary hits), or the right
    # "yes" answers where the ordinary labels carry more than EXACT_SHARE of the information
    mle = ml_accuracy(n_o, s_o, n_c, s_c, 3)
    share = ordinary_information_share(n_o, n_c, 3, mle)
    expected = [min(n_o[i] - s_o[i] + n_c[i] - s_c[i],
                    s_o[i] if n_o[i] > 0 and share[i] > EXACT_SHARE else np.inf)
                for i in range(5)]
    assert decisive_events(n_o, s_o, n_c, s_c, 3, mle).tolist() == expected == [5, 3, 20, 13, 2]
    assert decisive_events(0, 0, 0, 0, 3, 0.5).tolist() == np.inf


def test_estimates_carry_the_events_and_the_approximate_mark():
    # 2 errors in 40 ordinary labels and 1 hit in 80 complementary ones: 3 errors seen
    for method in ("ml", "ivw", "ivw_pilot", "ivw_fixed"):
        est = estimate(40, 38, 80, 79, 3, method)
        assert est.events == 3 and est.approximate is True
    assert estimate(40, 38, 80, 79, 3, "ord").events == 2
    assert estimate(40, 38, 80, 79, 3, "comp").events == 1
    # with APPROXIMATE_BELOW errors or more, exact enough
    est = estimate(400, 400 - APPROXIMATE_BELOW, 0, 0, 3)
    assert est.events == APPROXIMATE_BELOW and est.approximate is False
    # no labels: no interval to mark
    assert estimate(0, 0, 0, 0, 3).approximate is False
    marks = estimate(np.array([40, 400]), np.array([38, 300]), 0, 0, 3).approximate
    assert marks.tolist() == [True, False]
