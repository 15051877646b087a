"""Clustered variance, inverse-probability weights and stratified combination, each checked
against simulations with known truth."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.partitioned.accuracy import estimate
from estimators.partitioned.adjust import (
    binomial_equivalent,
    ipw_class_weights,
    ipw_design_effects,
    ipw_effective_counts,
    stratified_combine,
    stratified_estimate,
    weighted_effective_counts,
)
from estimators.partitioned.clustered import (
    Clusters,
    ml_design_effect,
    proportion_design_effect,
)
from estimators.partitioned.likelihood import ml_accuracy


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


def _per_label_clusters(groups, k: int):
    """One cluster per label (one query per item): rows (n_ord, s_ord, n_comp, s_comp) of
    the weighted label, from per-group counts (n_o, correct, n_c, hits, missing, weight)."""
    m = (k - 2) / (k - 1)
    rows = []
    for n_o, correct, n_c, hits, missing, w in groups:
        rows += [(w, w, 0, 0)] * correct + [(w, 0, 0, 0)] * (n_o - correct)
        rows += [(0, 0, w, w)] * (n_c - hits - missing) + [(0, 0, w, 0)] * hits
        rows += [(0, 0, w, w * m)] * missing
    arr = np.array(rows, float)
    return Clusters(*(arr[:, [j]] for j in range(4)))


def test_ipw_design_effect_is_the_sandwich_of_every_weighted_label():
    """The one-query IPW column's d_sandwich from per-class counts equals the clustered
    estimator's design effect computed label by label (each label its own item), missing
    predictions (scored (K−2)/(K−1)) included."""
    k = 5
    m = (k - 2) / (k - 1)
    # class 0: slow (weight 2) and hard; the others fast
    groups = [(20, 4, 80, 9, 2, 2.0), (20, 18, 80, 1, 0, 0.8), (20, 18, 80, 1, 3, 0.8),
              (20, 18, 80, 1, 0, 0.8), (20, 18, 80, 1, 1, 0.8)]
    g = np.array(groups, float)
    n_o, s_o, n_c, hits, missing, w = g.T
    s_c = n_c - hits - missing + m * missing
    totals, sandwich, model = ipw_design_effects(n_o, s_o, n_c, s_c, w, k,
                                                 n_comp_missing=missing)
    c = _per_label_clusters(groups, k)
    want_totals = [float(t[0]) for t in c.totals()]
    assert [float(t) for t in totals] == pytest.approx(want_totals, rel=1e-12)
    want = ml_design_effect(c, k, ml_accuracy(*want_totals, k))[0]
    assert float(sandwich) == pytest.approx(float(want), rel=1e-12)
    # here the errors sit on the heavy class: the sandwich exceeds the model expectation
    # and is the design effect used
    assert sandwich > model
    effective = ipw_effective_counts(n_o, s_o, n_c, s_c, w, k, n_comp_missing=missing)
    assert [float(e) for e in effective] == pytest.approx(
        [t / float(want) for t in want_totals], rel=1e-12)


def test_ipw_effective_counts_fall_back_on_the_model_design_effect():
    """Model d = Σ w²(n_o + c n_c) / Σ w(n_o + c n_c), c = Â/(Â+K−2): used where the
    sandwich is smaller (errors on light classes) and where Â = 1 (the sandwich is 0/0)."""
    k = 4
    n_o, n_c = np.array([30.0, 30.0]), np.array([90.0, 90.0])
    w = np.array([1.5, 0.5])
    for s_o, s_c in ((np.array([30.0, 20.0]), np.array([90.0, 85.0])),  # errors: light class
                     (n_o, n_c)):  # no error at all: Â = 1
        totals, sandwich, model = ipw_design_effects(n_o, s_o, n_c, s_c, w, k)
        a = float(ml_accuracy(*totals, k))
        c = a / (a + k - 2)
        want = (w**2 * (n_o + c * n_c)).sum() / (w * (n_o + c * n_c)).sum()
        assert float(model) == pytest.approx(want, rel=1e-12)
        assert not sandwich >= model  # smaller, or NaN at Â = 1
        effective = ipw_effective_counts(n_o, s_o, n_c, s_c, w, k)
        assert [float(e) for e in effective] == pytest.approx(
            [float(t) / want for t in totals], rel=1e-12)


def test_ipw_with_equal_weights_is_the_plain_ml_estimate():
    n_o, s_o = np.array([[12.0], [9.0], [15.0]]), np.array([[10.0], [6.0], [15.0]])
    n_c, s_c = np.array([[30.0], [41.0], [25.0]]), np.array([[29.0], [38.5], [25.0]])
    effective = ipw_effective_counts(n_o, s_o, n_c, s_c, np.ones(3), k=4,
                                     n_comp_missing=np.array([[0.0], [1.0], [0.0]]))
    plain = [x.sum(axis=0) for x in (n_o, s_o, n_c, s_c)]
    for got, want in zip(effective, plain, strict=True):
        assert got == pytest.approx(want, rel=1e-12)
    assert ipw_class_weights(np.array([[5.0, 8.0], [10.0, 4.0]]),
                             np.array([[10.0, 8.0], [10.0, 8.0]])).tolist() == [
        [0.75 / 0.5, 0.75 / 1.0], [0.75 / 1.0, 0.75 / 0.5]]  # classes × studies


def test_stratified_interval_can_combine_the_strata_intervals():
    """MOVER: Â ∓ √Σ W_h² (Â_h − bound_h)², each stratum's own interval."""
    acc = np.array([[0.9], [0.6], [1.0]])
    low, high = np.array([[0.8], [0.4], [0.7]]), np.array([[0.96], [0.78], [1.0]])
    est = stratified_estimate(acc, np.array([[50.0], [20.0], [8.0]]), [2, 1, 1], k=4,
                              stratum_intervals=(low, high))
    w = np.array([0.5, 0.25, 0.25])
    centre = float(w @ acc[:, 0])
    assert float(est.accuracy[0]) == pytest.approx(centre)
    assert float(est.ci_low[0]) == pytest.approx(
        centre - np.sqrt((w**2 * (acc - low)[:, 0] ** 2).sum()))
    assert float(est.ci_high[0]) == pytest.approx(
        centre + np.sqrt((w**2 * (high - acc)[:, 0] ** 2).sum()))
    # without them, the effective-count interval as before
    other = stratified_estimate(acc, np.array([[50.0], [20.0], [8.0]]), [2, 1, 1], k=4)
    assert float(other.accuracy[0]) == pytest.approx(centre)
    assert float(other.ci_low[0]) != pytest.approx(float(est.ci_low[0]))


def test_perfect_strata_combine_to_one_and_a_standard_error_of_zero():
    # population shares whose weighted sum of 1s came out 1 + 2⁻⁵² made the SE NaN
    est = stratified_estimate(np.ones((4, 1)), np.full((4, 1), 10.0), [0.4, 0.3, 0.2, 0.1],
                              k=4)
    assert float(est.accuracy[0]) <= 1.0 and float(est.ci_high[0]) <= 1.0
    assert float(est.se[0]) == 0.0
