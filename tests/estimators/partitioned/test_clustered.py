"""Item-clustered variance: the sandwich against explicit per-label loops and against the
spread of simulated studies; coverage with several queries per item."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.partitioned.accuracy import estimate
from estimators.partitioned.clustered import (
    Clusters,
    design_effects,
    estimate_clustered,
    mixture_variance,
    ml_design_effect,
    per_item_sums,
    proportion_design_effect,
)
from estimators.partitioned.likelihood import ml_accuracy
from estimators.partitioned.simulation import (
    NOTE_SHARE,
    band_report,
    clustered_coverage,
    clustered_figures,
    ipw_coverage,
    simulate_routed_classes,
    simulate_routed_items,
    stratified_coverage,
)


def _routed_labels(rng, n_items: int, k: int, queries: int, accuracy: float,
                   missing: float = 0.05):
    """Item-level protocol written out label by label: a random class order per item,
    queries in that order until the first "yes" (perfect specialists), the AI right with
    probability A else a uniformly drawn wrong class. A missing prediction (``missing``,
    5 %) scores (K−2)/(K−1) in the complementary set. Returns a list of (item, kind,
    score)."""
    labels = []
    for i in range(n_items):
        truth = int(rng.integers(k))
        if rng.random() < missing:
            pred = None
        elif rng.random() < accuracy:
            pred = truth
        else:
            pred = int(rng.choice([c for c in range(k) if c != truth]))
        for asked in rng.permutation(k)[:queries]:
            if asked == truth:
                labels.append((i, "ord", float(pred == truth)))
                break
            labels.append((i, "comp", (k - 2) / (k - 1) if pred is None else float(pred != asked)))
    return labels


def _clusters(labels, n_items: int) -> Clusters:
    n_o, s_o, n_c, s_c = (np.zeros((n_items, 1)) for _ in range(4))
    for i, kind, score in labels:
        if kind == "ord":
            n_o[i] += 1
            s_o[i] += score
        else:
            n_c[i] += 1
            s_c[i] += score
    return Clusters(n_o, s_o, n_c, s_c)


def _brute_force(labels, n_items: int, k: int, a: float, w: float):
    """Per-label scores of the joint log-likelihood at A, summed per item by a loop; the
    observed information label by label; the mixture's per-item influence terms."""
    q = (a + k - 2) / (k - 1)
    per_item = [0.0] * n_items
    info = 0.0
    n_o = sum(1 for _, kind, _ in labels if kind == "ord")
    n_c = len(labels) - n_o
    a_o = sum(s for _, kind, s in labels if kind == "ord") / n_o
    q_c = sum(s for _, kind, s in labels if kind == "comp") / n_c
    influence = [0.0] * n_items
    for i, kind, s in labels:
        if kind == "ord":
            per_item[i] += s / a - (1 - s) / (1 - a)
            info += s / a**2 + (1 - s) / (1 - a) ** 2
            influence[i] += w * (s - a_o) / n_o
        else:
            per_item[i] += (s / q - (1 - s) / (1 - q)) / (k - 1)
            info += (s / q**2 + (1 - s) / (1 - q) ** 2) / (k - 1) ** 2
            influence[i] += (1 - w) * (k - 1) * (s - q_c) / n_c
    meat = sum(u * u for u in per_item)
    return meat / info, sum(e * e for e in influence)


@pytest.mark.parametrize(("k", "queries", "accuracy"), [(4, 3, 0.7), (10, 10, 0.9), (3, 2, 0.4)])
def test_sandwich_equals_an_explicit_loop_over_labels(k, queries, accuracy):
    rng = np.random.default_rng(k * 100 + queries)
    n_items = 300
    labels = _routed_labels(rng, n_items, k, queries, accuracy)
    c = _clusters(labels, n_items)
    a_hat = float(ml_accuracy(*c.totals(), k)[0])
    want_d, want_var = _brute_force(labels, n_items, k, a_hat, 0.3)
    assert ml_design_effect(c, k, a_hat)[0] == pytest.approx(want_d, rel=1e-10)
    assert mixture_variance(c, k, 0.3)[0] == pytest.approx(want_var, rel=1e-10)


def test_one_label_per_item_has_no_design_effect():
    # each label its own cluster, 0/1 scores: the sandwich is the model variance exactly
    rng = np.random.default_rng(2)
    kind = rng.random(500) < 0.3
    score = (rng.random(500) < 0.8).astype(float)
    c = Clusters(kind[:, None] * 1.0, (kind * score)[:, None], (~kind)[:, None] * 1.0,
                 ((~kind) * score)[:, None])
    a_hat = ml_accuracy(*c.totals(), 5)
    assert ml_design_effect(c, 5, a_hat)[0] == pytest.approx(1.0, rel=1e-12)
    assert proportion_design_effect(c.n_ord, c.s_ord)[0] == pytest.approx(1.0, rel=1e-12)


def test_design_effect_matches_the_spread_of_simulated_studies():
    """Across 600 replicate studies (K = 4, all 4 queries, A = 0.7, 400 items) the ML
    estimate's variance equals the mean sandwich variance within 12 %, while the model
    variance of independent labels is about a third too small."""
    rng = np.random.default_rng(5)
    c = simulate_routed_items(rng, 600, 400, 0.7, 4, 4)
    totals = c.totals()
    a_hat = ml_accuracy(*totals, 4)
    plain = estimate(*totals, 4, "ml")
    clustered = estimate_clustered(c, 4, "ml")
    spread = np.var(a_hat, ddof=1)
    assert np.mean(np.asarray(clustered.se) ** 2) == pytest.approx(spread, rel=0.12)
    assert np.mean(np.asarray(plain.se) ** 2) < 0.75 * spread
    assert np.allclose(clustered.accuracy, plain.accuracy, rtol=1e-12)  # same estimate


def test_simulated_routing_equals_the_label_by_label_protocol():
    # the positional shortcut of simulate_routed_items against the loop above: labels per
    # item and share of complementary hits agree (20 000 items each)
    rng = np.random.default_rng(9)
    k, queries, a = 5, 3, 0.6
    fast = simulate_routed_items(rng, 1, 20_000, a, k, queries)
    slow = _clusters(_routed_labels(rng, 20_000, k, queries, a), 20_000)
    for x, y in ((fast.n_ord, slow.n_ord), (fast.n_comp, slow.n_comp)):
        assert x.mean() == pytest.approx(y.mean(), abs=0.02)
    hits = (fast.n_comp - fast.s_comp).sum() / fast.n_comp.sum()
    assert hits == pytest.approx((1 - a) / (k - 1), abs=0.01)


def test_per_item_sums_equal_add_at():
    rng = np.random.default_rng(1)
    item = rng.integers(0, 50, 2000)
    values = rng.random((2000, 3))
    want = np.zeros((50, 3))
    np.add.at(want, item, values)
    assert np.allclose(per_item_sums(item, 50, values), want)


def test_perfect_score_uses_the_protocol_expectation():
    # Â = 1: no error seen; d = Σ(n_o² + 2 n_o p + p)/Σ(n_o + p), p = n_c/(K−1)
    n_o = np.array([[1.0], [1.0], [0.0]])
    n_c = np.array([[3.0], [0.0], [2.0]])
    c = Clusters(n_o, n_o.copy(), n_c, n_c.copy())
    p = n_c / 4
    want = float(((n_o**2 + 2 * n_o * p + p).sum()) / ((n_o + p).sum()))
    assert ml_design_effect(c, 5, 1.0)[0] == pytest.approx(want)
    effects = design_effects(c, 5)  # with the small-sample factor of its 3 items
    assert effects.joint[0] == pytest.approx(want * effects.small_sample[0])


@pytest.mark.parametrize(("k", "queries", "accuracy"), [(4, 4, 0.7), (10, 10, 0.6)])
def test_clustered_intervals_cover_with_several_queries_per_item(k, queries, accuracy):
    """Fast configuration of the grid in docs/coverage.md (1 500 replicate studies of 300
    items, Monte-Carlo SE 0.6 points): every estimator's clustered interval covers
    93–97 %; taking labels as independent, ML covers visibly less."""
    cell = clustered_coverage(k=k, queries=queries, accuracy=accuracy, n_items=300,
                              reps=1500, seed=1)
    for method, coverage in cell.coverage.items():
        assert 0.93 <= coverage <= 0.97, (method, coverage)
    assert cell.coverage_independent["ml"] < cell.coverage["ml"] - 0.015
    assert cell.design_effect > 1.1


def test_complementary_interval_with_effective_counts_keeps_its_ties():
    """K = 10, 2 queries per item, 100 items, A = 0.97: about 0.6 complementary hits per
    study, so the complementary interval is the exact one of the effective counts. It
    covered 89.6 % (8 000 studies) while the same interval on the raw counts covers 98 %:
    the effective counts' estimate, a rounding error off the lattice, dropped the observed
    outcome from its own tail (see test_intervals). The design effect is about 1 here, so
    clustered and independent intervals must now agree; 2 000 studies (SE 0.3 point at
    98 %)."""
    cell = clustered_coverage(k=10, queries=2, accuracy=0.97, n_items=100, reps=2000,
                              seed=3, methods=("comp",))
    assert cell.coverage["comp"] >= 0.95
    assert cell.coverage["comp"] == pytest.approx(cell.coverage_independent["comp"],
                                                  abs=0.01)


def test_stratified_column_covers_with_several_queries_per_item():
    """Two strata (accuracies 0.9775 and 0.9475: stratum_accuracies), 300 items, K = 4
    with 4 queries per item, A = 0.97 for the population: the stratified ML from
    binomial-equivalent counts covers within 93.5–96.5 % (1 500 studies, SE 0.6 point),
    where a Wald interval on the same clustered per-stratum SEs — the platform's former
    one — covers about 90 % (it collapses on a stratum with a perfect score) and one on
    independent-label SEs about 85 %."""
    covered, independent, wald, _ = stratified_coverage(k=4, queries=4, accuracy=0.97,
                                                        n_items=300, reps=1500, seed=2)
    assert 0.935 <= covered <= 0.965
    assert wald < 0.925
    assert independent < wald


def test_ipw_column_covers_with_several_queries_per_item():
    """Classes answered at 60 to 100 %, K = 4 with 4 queries per item, 1 000 items,
    A = 0.7: the IPW-weighted ML with the item-clustered variance of the weighted score
    covers within 93.5–96.5 % (1 000 studies, SE 0.7 point); Kish's effective counts with
    the labels taken as independent cover visibly less."""
    covered, independent, _ = ipw_coverage(k=4, queries=4, accuracy=0.7, n_items=1000,
                                           reps=1000, seed=4)
    assert 0.935 <= covered <= 0.965
    assert independent < covered - 0.025


def test_routed_classes_simulation_counts_like_the_positional_one():
    # with every class answered, the class-level simulation is the positional one: same
    # labels per item and share of hits, IPW weights all 1
    rng = np.random.default_rng(8)
    c, weights, per_class = simulate_routed_classes(rng, 4, 5000, 0.6, 5, 3, np.ones(5))
    fast = simulate_routed_items(rng, 4, 5000, 0.6, 5, 3)
    assert np.allclose(weights, 1.0)
    for x, y in ((c.n_ord, fast.n_ord), (c.n_comp, fast.n_comp)):
        assert x.mean() == pytest.approx(y.mean(), abs=0.03)
    hits = (c.n_comp - c.s_comp).sum() / c.n_comp.sum()
    assert hits == pytest.approx(0.4 / 4, abs=0.01)
    assert per_class["n_ord"].sum() == pytest.approx(c.n_ord.sum())
    # unequal completion: weights r̄/r̂_c, larger for the classes answered less
    _, weights, _ = simulate_routed_classes(rng, 4, 5000, 0.6, 5, 3, np.linspace(0.5, 1, 5))
    assert np.all(np.diff(weights, axis=0) < 0)


def test_few_event_figures_of_small_studies_carry_the_approximate_note():
    """Issue 18, several queries per item from 100 items up: where a figure leaves
    93.5–96.5 % for want of events the page says so. K = 4 with 4 queries per item, 100
    items, A = 0.97 (about 3 wrong AI answers): ML covers well above the band (1 500
    studies, SE 0.4 point at 97.5 %) and most studies mark it approximate; with plenty of
    events (A = 0.7, 300 items) it keeps the band and the mark is rare."""
    few = clustered_coverage(k=4, queries=4, accuracy=0.97, n_items=100, reps=1500, seed=3,
                             methods=("ml", "ivw"))
    assert few.coverage["ml"] > 0.965
    assert few.approximate["ml"] >= 0.9 and few.approximate["ivw"] >= 0.9
    plenty = clustered_coverage(k=4, queries=2, accuracy=0.7, n_items=300, reps=1500,
                                seed=4, methods=("ml", "ord", "comp"))
    assert 0.935 <= plenty.coverage["ml"] <= 0.965
    assert max(plenty.approximate.values()) < 0.02
    report = band_report(clustered_figures([few, plenty]))
    assert report.figures == 5 and not report.unexplained
    assert [(f[1], f[0].accuracy) for f in report.noted] == [("ml", 0.97), ("ivw", 0.97)]


def test_band_report_sorts_the_figures_outside_the_band():
    figures = [("a", "ml", 0.95, 0.0), ("b", "ml", 0.975, NOTE_SHARE),
               ("c", "ord", 0.975, 0.1), ("d", "ml", 0.92, 0.2), ("e", "comp", 0.92, 0.0)]
    report = band_report(figures)
    assert (report.figures, report.inside) == (5, 1)
    assert [f[0] for f in report.noted] == ["b"]
    assert [f[0] for f in report.conservative] == ["c"]  # Blaker's: at least 95 %
    assert [f[0] for f in report.unexplained] == ["d", "e"]  # below the band: never so


def test_small_sample_factor_is_cr1_with_a_t_quantile():
    from scipy import stats

    from estimators.partitioned.clustered import small_sample_factor

    g = np.array([0, 1, 2, 100, 1000])
    want = g[2:] / (g[2:] - 1) * (stats.t.ppf(0.975, g[2:] - 1) / stats.norm.ppf(0.975)) ** 2
    got = small_sample_factor(g)
    assert got[:2].tolist() == [1.0, 1.0]
    assert got[2:] == pytest.approx(want, rel=1e-12)
    assert got[3] == pytest.approx(1.0353, abs=1e-4)
    # in every sandwich-based design effect, not the ordinary one (one label per item)
    c = simulate_routed_items(np.random.default_rng(2), 3, 100, 0.8, 4, 2)
    effects = design_effects(c, 4)
    labelled = ((c.n_ord + c.n_comp) > 0).sum(axis=0)
    assert np.asarray(effects.small_sample) == pytest.approx(small_sample_factor(labelled))
    assert effects.ordinary == pytest.approx(np.ones(3))


def test_small_sample_factor_centres_the_coverage_of_100_item_studies():
    """ML with 100 items, A = 0.7 and 0.9, three designs (2 400 studies a cell): with the
    factor the coverage averages 95 %; without it, about half a point below (94.6 % over
    the 100-item cells with 16 000 studies each)."""
    from dataclasses import replace

    with_factor, without = [], []
    for i, (k, q, a) in enumerate([(3, 2, 0.9), (4, 4, 0.9), (10, 10, 0.9), (3, 2, 0.7),
                                   (4, 3, 0.7), (10, 5, 0.7)]):
        c = simulate_routed_items(np.random.default_rng(40 + i), 2400, 100, a, k, q)
        effects = design_effects(c, k)
        f = effects.small_sample
        raw = replace(effects, joint=effects.joint / f, small_sample=1.0,
                      complementary=effects.complementary / f,
                      influence=tuple(x / f for x in effects.influence))
        for store, e in ((with_factor, effects), (without, raw)):
            est = estimate_clustered(c, k, "ml", effects=e)
            store.append(np.mean((est.ci_low <= a) & (a <= est.ci_high)))
    assert 0.948 <= np.mean(with_factor) <= 0.956, with_factor
    assert np.mean(without) <= np.mean(with_factor) - 0.003, without


def test_moments_of_disjoint_items_add_up_to_the_whole_and_its_design_effects():
    # the form maintained statistics can keep: the moments of two disjoint sets of items
    # sum to those of their union, and the design effects from the sum are the union's
    rng = np.random.default_rng(11)
    c = simulate_routed_items(rng, 3, 400, 0.8, 5, 3)  # three cells
    part = np.arange(400) < 170
    whole, summed = c.moments(), c.subset(part).moments() + c.subset(~part).moments()
    np.testing.assert_allclose(summed.second, whole.second, rtol=1e-13)
    np.testing.assert_allclose(summed.first, whole.first, rtol=1e-13)
    assert np.array_equal(summed.labelled, whole.labelled)
    assert summed.several_ordinary == whole.several_ordinary
    from_sum, from_items = design_effects(summed, 5), design_effects(c, 5)
    for name in ("ordinary", "complementary", "joint", "small_sample"):
        np.testing.assert_allclose(getattr(from_sum, name), getattr(from_items, name),
                                   rtol=1e-12)
    a = estimate_clustered(summed, 5, "ivw")
    b = estimate_clustered(c, 5, "ivw")
    np.testing.assert_allclose(a.ci_low, b.ci_low, rtol=1e-12)


def test_design_effects_near_a_perfect_score_keep_the_loops_digits():
    # Â near 1, where the score's coefficients 1/A and −1/(1−A) differ a thousandfold: the
    # quadratic forms in the moments agree with the label-by-label loop to 1e-9 (2e-13 here)
    rng = np.random.default_rng(4)
    labels = _routed_labels(rng, 6000, 4, 3, 0.999, missing=0.0)
    c = _clusters(labels, 6000)
    a_hat = float(ml_accuracy(*c.totals(), 4)[0])
    assert 0.99 < a_hat < 1
    want_d, want_var = _brute_force(labels, 6000, 4, a_hat, 0.3)
    assert ml_design_effect(c, 4, a_hat)[0] == pytest.approx(want_d, rel=1e-9)
    assert mixture_variance(c, 4, 0.3)[0] == pytest.approx(want_var, rel=1e-9)
