"""Clustered variance, inverse-probability weights and stratified combination, each checked
against simulations with known truth."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.partitioned.accuracy import estimate
from estimators.partitioned.adjust import (
    binomial_equivalent,
    ipw_class_weights,
    stratified_combine,
    stratified_estimate,
    weighted_effective_counts,
)
from estimators.partitioned.clustered import proportion_design_effect


def _clustered_study(rng, items: int, per_item: int, a: float, k: int):
    """Items answered with ``per_item`` complementary labels each; the AI's answer is per
    item, so its labels are correlated: w = 1{ŷ ≠ ȳ} for distinct wrong classes ȳ."""
    right = rng.random(items) < a
    pred = np.where(right, 0, rng.integers(1, k, items))
    u = np.zeros(items)
    for i in range(items):
        asked = rng.choice(np.arange(1, k), per_item, replace=False)
        u[i] = np.sum(pred[i] != asked)
    return u, np.full(items, float(per_item))


def test_cluster_robust_variance_matches_the_spread_across_replicates():
    rng = np.random.default_rng(5)
    k, a, items, per_item = 5, 0.6, 300, 3
    estimates, robust, naive = [], [], []
    for _ in range(400):
        u, m = _clustered_study(rng, items, per_item, a, k)
        q = u.sum() / m.sum()
        estimates.append(q)
        robust.append(proportion_design_effect(m, u) * q * (1 - q) / m.sum())
        naive.append(q * (1 - q) / m.sum())
    empirical = np.var(estimates, ddof=1)
    assert np.mean(robust) == pytest.approx(empirical, rel=0.15)
    # the binomial variance is wrong here (an item's labels share one AI answer; its wrong
    # classes are drawn without replacement): off by more than the robust one's tolerance
    assert abs(np.mean(naive) / empirical - 1) > 0.2


def test_ipw_removes_the_bias_of_unequal_completion():
    """Class 0's items are easy for the AI and its specialists answer everything; class 2's
    are hard and half its queries stay unanswered. Unweighted ordinary accuracy is biased
    towards class 0; weighted, it recovers the population accuracy."""
    rng = np.random.default_rng(8)
    acc_by_class = np.array([0.95, 0.7, 0.4])
    completion = np.array([1.0, 0.8, 0.5])
    routed = np.full(3, 30_000)
    answered = rng.binomial(routed, completion)
    correct = rng.binomial(answered, acc_by_class)
    truth = acc_by_class.mean()  # classes are equally frequent among routed queries
    plain = correct.sum() / answered.sum()
    w = ipw_class_weights(answered, routed)
    n_eff, s_eff = weighted_effective_counts(answered, correct, w)
    weighted = s_eff / n_eff
    assert abs(plain - truth) > 0.03
    assert abs(weighted - truth) < 0.005
    assert (w * answered).sum() == pytest.approx(answered.sum())
    assert n_eff < answered.sum()  # unequal weights cost information


def test_stratified_combination_puts_strata_back_in_proportion():
    rng = np.random.default_rng(9)
    acc = np.array([0.9, 0.5])
    population = np.array([0.8, 0.2])  # the sample over-represents stratum 1 (half/half)
    n = np.array([2000, 2000])
    s = rng.binomial(n, acc)
    est = estimate(n, s, 0, 0, 4, method="ord")
    combined, se = stratified_combine(est.accuracy, est.se, population)
    truth = (population * acc).sum()
    assert abs(combined - truth) < 3 * se
    assert abs(s.sum() / n.sum() - truth) > 0.1  # the pooled value is far off
    with pytest.raises(ValueError, match="population_weights"):
        stratified_combine(est.accuracy, est.se, [0, 0])


def test_binomial_equivalent_count_carries_the_ml_information():
    # A(1−A)/SE² of the ML estimate (SE from the Fisher information) is the count of
    # yes/no trials as informative as the labels; finite at A = 1
    for counts, k in (((40, 30, 360, 300), 10), ((200, 150, 0, 0), 4), ((0, 0, 90, 70), 3)):
        e = estimate(*counts, k, "ml")
        a = float(e.accuracy)
        want = a * (1 - a) / float(e.se) ** 2
        assert binomial_equivalent(a, counts[0], counts[2], k) == pytest.approx(want, rel=1e-9)
        assert binomial_equivalent(a, counts[0], counts[2], k, 2.0) == pytest.approx(want / 2)
    assert binomial_equivalent(1.0, 40, 360, 10) == pytest.approx(40 + 360 / 9)


def test_stratified_interval_does_not_collapse_on_perfect_strata():
    """Every stratum perfect: the Wald interval on Σ W² SE² is the point 1; the stratified
    interval is that of a perfect score of Kish's effective count (the mid-p lower end
    of n* trials, ½ A^n* = 2.5 %)."""
    acc = np.array([[1.0], [1.0]])
    n_eq = np.array([[60.0], [30.0]])
    est = stratified_estimate(acc, n_eq, [3, 1], k=4)
    _, wald_se = stratified_combine(acc, np.zeros_like(acc), [3, 1])
    assert wald_se[0] == 0.0
    n_star = 1 / (0.75**2 / 60 + 0.25**2 / 30)
    assert float(est.ci_low[0]) == pytest.approx(0.05 ** (1 / round(n_star)), abs=2e-3)
    assert float(est.ci_high[0]) == 1.0 and float(est.accuracy[0]) == 1.0
    # strata that differ: n* = Â(1−Â)/V, the variance from each stratum's own accuracy
    acc = np.array([[0.9], [0.6]])
    n_eq = np.array([[400.0], [400.0]])
    est = stratified_estimate(acc, n_eq, [1, 1], k=4)
    var = 0.25 * (0.9 * 0.1 / 400 + 0.6 * 0.4 / 400)
    assert float(est.se[0]) == pytest.approx(np.sqrt(var))
    assert float(est.ci_low[0]) < 0.75 < float(est.ci_high[0])
    assert float(est.ci_high[0]) - float(est.ci_low[0]) == pytest.approx(
        2 * 1.96 * np.sqrt(var), rel=0.02)
