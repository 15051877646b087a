"""Clustered variance, inverse-probability weights and stratified combination, each checked
against simulations with known truth."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.adjust import (
    ipw_class_weights,
    stratified_combine,
    weighted_effective_counts,
)
from estimators.clustered import proportion_design_effect
from estimators.partitioned import estimate


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
