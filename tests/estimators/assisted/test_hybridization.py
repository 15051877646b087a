"""Confidence-based hybridization against brute force (every threshold evaluated item by
item) and against simulated studies whose hybrid accuracy and best threshold are known."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from estimators.assisted.factuality import gold_accurate, item_human_correct, verdicts
from estimators.assisted.hybridization import (
    band_accuracy,
    band_of,
    best_band_sources,
    calibration_split,
    curve_band,
    curve_bands,
    held_out_threshold,
    threshold_curve,
)
from estimators.assisted.simulation import ArmBehaviour, AssistedDesign, simulate_assisted
from estimators.numerics.units import unit_differences, unit_means


def _brute_curve(c, a, h):
    """O(n²): for t = −∞ and every distinct confidence, route item by item; keep the points
    where every routed item has a human label."""
    out = []
    for t in [-math.inf, *sorted(set(c))]:
        routed = [i for i in range(len(c)) if c[i] <= t]
        if any(math.isnan(h[i]) for i in routed):
            continue
        total = sum(h[i] if c[i] <= t else a[i] for i in range(len(c)))
        out.append((t, total / len(c), len(routed) / len(c)))
    return out


items = st.lists(
    st.tuples(st.sampled_from([0.5, 0.55, 0.6, 0.62, 0.7, 0.8, 0.9, 1.0]),
              st.integers(0, 1),
              st.one_of(st.sampled_from([0.0, 1.0, 0.5, 1 / 3]), st.just(math.nan))),
    min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(items)
def test_curve_equals_brute_force(rows):
    # given items with tied confidences, fractional and missing human labels
    c = [r[0] for r in rows]
    a = [float(r[1]) for r in rows]
    h = [r[2] for r in rows]
    # when
    t, acc, share = threshold_curve(c, a, h)
    # then every point is the item-by-item routing, the all-AI end first
    brute = _brute_curve(c, a, h)
    assert len(t) == len(brute)
    for j, (bt, bacc, bshare) in enumerate(brute):
        assert t[j] == bt
        assert acc[j] == pytest.approx(bacc, abs=1e-12)
        assert share[j] == pytest.approx(bshare, abs=1e-12)
    assert t[0] == -math.inf and acc[0] == pytest.approx(sum(a) / len(a))


@settings(max_examples=200, deadline=None)
@given(items, st.sampled_from([0.0, 0.1, 0.3, 0.5, 1.0]))
def test_best_threshold_under_budget_equals_brute_force(rows, budget):
    c = [r[0] for r in rows]
    a = [float(r[1]) for r in rows]
    h = [r[2] for r in rows]
    best = threshold_curve(c, a, h).best(max_human_share=budget)
    # brute force: the most accurate point within the budget, ties → the smaller share
    brute = [p for p in _brute_curve(c, a, h) if p[2] <= budget + 1e-12]
    top = max(p[1] for p in brute)
    bt, bacc, bshare = min((p for p in brute if p[1] >= top - 1e-9), key=lambda p: p[2])
    assert (best.threshold, best.human_share) == (bt, pytest.approx(bshare))
    assert best.accuracy == pytest.approx(bacc)


def test_unlabelled_items_can_keep_the_ai_label():
    # given an unlabelled item at confidence 0.6
    c, a, h = [0.5, 0.6, 0.9], [0.0, 1.0, 1.0], [1.0, np.nan, 0.0]
    # then truncation stops the curve before 0.6; the AI fallback keeps the AI's label there
    assert threshold_curve(c, a, h).thresholds.tolist() == [-math.inf, 0.5]
    t, acc, share = threshold_curve(c, a, h, unlabelled="ai")
    assert t.tolist() == [-math.inf, 0.5, 0.6, 0.9]
    assert acc.tolist() == pytest.approx([2 / 3, 1.0, 1.0, 2 / 3])
    assert share.tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])


def test_curve_refuses_bad_input_naming_the_item():
    with pytest.raises(ValueError, match=r"human_correct\[1\]: 1.5 is not in \[0, 1\]"):
        threshold_curve([0.5, 0.6], [1, 0], [1, 1.5])
    with pytest.raises(ValueError, match=r"ai_correct\[0\]: nan is not in \[0, 1\]"):
        threshold_curve([0.5], [np.nan], [1])
    with pytest.raises(ValueError, match=r"confidence\[1\]: not a finite number"):
        threshold_curve([0.5, np.inf], [1, 0], [1, 1])
    with pytest.raises(ValueError, match="ai_correct: 1 entries, expected 2"):
        threshold_curve([0.5, 0.6], [1], [1, 1])


def test_rows_are_json_ready():
    rows = threshold_curve([0.5, 0.7], [0, 1], [1, 1]).rows()
    assert rows[0] == {"threshold": None, "hybrid_accuracy": 0.5, "human_share": 0.0}
    assert rows[-1]["threshold"] == 0.7


def test_calibration_split_is_stable_and_balanced():
    ids = np.arange(1, 20_001)
    cal = calibration_split(ids, 0.5, seed=3)
    # then about half (6 binomial sds) …
    assert abs(cal.mean() - 0.5) < 6 * math.sqrt(0.25 / ids.size)
    # … every item keeps its side when the items are shuffled or others are added
    perm = np.random.default_rng(0).permutation(ids.size)
    np.testing.assert_array_equal(calibration_split(ids[perm], 0.5, seed=3), cal[perm])
    more = calibration_split(np.r_[ids, np.arange(50_000, 50_100)], 0.5, seed=3)
    np.testing.assert_array_equal(more[: ids.size], cal)
    # … and another seed is another split
    assert (calibration_split(ids, 0.5, seed=4) != cal).mean() > 0.4
    assert abs(calibration_split(ids, 0.2, seed=3).mean() - 0.2) < 0.02


def test_held_out_threshold_is_chosen_on_calibration_items_only():
    # given items whose held-out half would favour another threshold
    rng = np.random.default_rng(5)
    n = 400
    c = rng.choice([0.5, 0.6, 0.7, 0.8, 0.9], n)
    a = (rng.random(n) < c).astype(float)
    h = (rng.random(n) < 0.72).astype(float)
    cal = calibration_split(np.arange(n), 0.5, seed=1)
    res = held_out_threshold(c, a, h, cal)
    # then T is the calibration curve's best point …
    assert res.threshold == threshold_curve(c[cal], a[cal], h[cal]).best().threshold
    # … and the held-out figures are plain means over the held-out items at that T
    ho = ~cal
    y = np.where(c[ho] <= res.threshold, h[ho], a[ho])
    assert res.held_out_accuracy.value == pytest.approx(y.mean())
    assert res.held_out_ai_accuracy.value == pytest.approx(a[ho].mean())
    assert res.held_out_gain.value == pytest.approx(y.mean() - a[ho].mean())
    assert res.held_out_human_share == pytest.approx((c[ho] <= res.threshold).mean())
    assert res.held_out_accuracy.lower <= y.mean() <= res.held_out_accuracy.upper
    assert res.n_calibration + res.n_held_out == n


def test_budget_caps_the_human_share():
    rng = np.random.default_rng(6)
    c = rng.choice([0.5, 0.6, 0.7, 0.8, 0.9], 500)
    a = (rng.random(500) < c).astype(float)
    h = np.ones(500)  # perfect humans: without a budget every item would go to them
    cal = calibration_split(np.arange(500), 0.5, seed=1)
    free = held_out_threshold(c, a, h, cal)
    capped = held_out_threshold(c, a, h, cal, max_human_share=0.3)
    assert free.calibration_human_share == 1.0
    assert capped.calibration_human_share <= 0.3


def _individual_labels(sim, arm):
    v = verdicts(sim.label)
    m = sim.arm == arm
    return item_human_correct(sim.item[m], v[m], gold_accurate(sim.gold),
                              n_items=sim.confidence.size, rule="individual")


HYBRID_DESIGN = AssistedDesign(
    arms=(ArmBehaviour("baseline", 0.80, 0.70),), n_items=500, n_samples=10,
    raters_per_arm=25, items_per_rater=60, rater_spread=0.0, skip_rate=0.0)


def test_band_covers_the_planted_curve_and_best_threshold():
    # given repeated studies with a known population curve A(t) and best threshold
    t_true, acc_true = HYBRID_DESIGN.true_curve("baseline")
    best_true = HYBRID_DESIGN.true_best_threshold("baseline")
    n_sims, point_hits, best_hits, points = 60, 0, 0, 0
    for s in range(n_sims):
        sim = simulate_assisted(HYBRID_DESIGN, seed=100 + s)
        band = curve_band(sim.confidence, sim.ai_correct.astype(float),
                          _individual_labels(sim, "baseline"))
        # the curve's thresholds are among the possible confidences
        truth = dict(zip(t_true.tolist(), acc_true.tolist(), strict=True))
        for t, lo, hi in zip(band.curve.thresholds, band.lower, band.upper, strict=True):
            points += 1
            point_hits += lo <= truth[t] <= hi
        best_hits += bool(band.near_best[band.curve.thresholds.tolist().index(best_true)]) \
            if best_true in band.curve.thresholds else 0
    # then the pointwise intervals cover about 95 % of the true points, and the true best
    # threshold is among the near-best thresholds in at least 90 % of the studies
    assert 0.88 <= point_hits / points <= 0.99
    assert best_hits / n_sims >= 0.9


def test_held_out_accuracy_covers_the_population_accuracy_at_the_chosen_threshold():
    t_true, acc_true = HYBRID_DESIGN.true_curve("baseline")
    truth = dict(zip(t_true.tolist(), acc_true.tolist(), strict=True))
    hits, n_sims = 0, 60
    for s in range(n_sims):
        sim = simulate_assisted(HYBRID_DESIGN, seed=300 + s)
        cal = calibration_split(np.arange(sim.confidence.size), 0.5, seed=s)
        res = held_out_threshold(sim.confidence, sim.ai_correct.astype(float),
                                 _individual_labels(sim, "baseline"), cal)
        # the truth at the chosen T: routing by the same rule on the whole population
        hits += res.held_out_accuracy.lower <= truth[res.threshold] \
            <= res.held_out_accuracy.upper
    assert hits / n_sims >= 0.88


def test_band_of_is_right_closed():
    assert band_of([0.5, 0.6, 0.61, 0.75, 0.9], [0.6, 0.75]).tolist() == [0, 0, 1, 1, 2]
    with pytest.raises(ValueError, match="strictly increasing"):
        band_of([0.5], [0.7, 0.6])


@settings(max_examples=150, deadline=None)
@given(items, st.lists(st.sampled_from(["ai", "x", "y"]), min_size=3, max_size=3))
def test_band_accuracy_equals_brute_force(rows, sources):
    c = [r[0] for r in rows]
    a = [float(r[1]) for r in rows]
    hx = [r[2] for r in rows]
    hy = [1.0 - r[2] if not math.isnan(r[2]) else 0.5 for r in rows]
    edges = [0.6, 0.8]
    res = band_accuracy(c, a, {"x": hx, "y": hy}, edges, sources)
    # brute force: item by item, band j is (edges[j-1], edges[j]]
    src_of = {"ai": a, "x": hx, "y": hy}
    vals = []
    for i, ci in enumerate(c):
        j = 0 if ci <= 0.6 else 1 if ci <= 0.8 else 2
        vals.append(src_of[sources[j]][i])
    if any(math.isnan(v) for v in vals):
        assert math.isnan(res.accuracy)
    else:
        assert res.accuracy == pytest.approx(sum(vals) / len(vals))
    assert res.human_share == pytest.approx(
        sum(1 for i, ci in enumerate(c)
            if sources[0 if ci <= 0.6 else 1 if ci <= 0.8 else 2] != "ai") / len(c))


def test_one_band_to_humans_is_the_threshold_rule():
    rng = np.random.default_rng(8)
    c = rng.choice([0.5, 0.6, 0.7, 0.8], 200)
    a = (rng.random(200) < c).astype(float)
    h = (rng.random(200) < 0.7).astype(float)
    curve = threshold_curve(c, a, h)
    j = curve.thresholds.tolist().index(0.7)
    assert band_accuracy(c, a, {"arm": h}, [0.7], ["arm", "ai"]).accuracy == pytest.approx(
        curve.hybrid_accuracy[j])


def test_best_band_sources_pick_each_bands_best_on_calibration_items():
    # given two arms, one better on low confidence, the other in the middle band
    rng = np.random.default_rng(9)
    n = 3000
    c = rng.uniform(0.5, 1.0, n)
    a = (rng.random(n) < c).astype(float)
    low = (rng.random(n) < np.where(c <= 0.65, 0.85, 0.5)).astype(float)
    mid = (rng.random(n) < np.where((c > 0.65) & (c <= 0.8), 0.95, 0.5)).astype(float)
    cal = calibration_split(np.arange(n), 0.5, seed=2)
    choice = best_band_sources(c, a, {"low": low, "mid": mid}, [0.65, 0.8], calibration=cal)
    # then low → "low", middle → "mid", high → the AI, and the held-out gain is positive
    assert choice.sources == ("low", "mid", "ai")
    assert choice.held_out_gain.lower > 0
    # brute force: each band's choice is the most accurate source on the calibration items
    band = band_of(c, [0.65, 0.8])
    for j, src in enumerate(choice.sources):
        m = (band == j) & cal
        accs = {"ai": a[m].mean(), "low": low[m].mean(), "mid": mid[m].mean()}
        assert max(accs, key=accs.get) == src


def test_bands_with_unlabelled_items_are_undefined_and_unknown_sources_refused():
    res = band_accuracy([0.5, 0.9], [1, 1], {"arm": [np.nan, 1]}, [0.7], ["arm", "ai"])
    assert math.isnan(res.accuracy) and res.bands[0].n_unlabelled == 1
    with pytest.raises(ValueError, match="sources: 'other' is neither 'ai' nor a human source"):
        band_accuracy([0.5], [1], {"arm": [1]}, [0.7], ["other", "ai"])


def test_new_estimators_do_not_import_django():
    code = ("import sys, estimators.assisted.hybridization, estimators.assisted.calibration, "
            "estimators.assisted.reliance, estimators.assisted.agreement, estimators.numerics.bootstrap, "
            "estimators.assisted.factuality, estimators.assisted.simulation; print('django' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def _brute_band(c, a, h, budget, unlabelled):
    """curve_band's figures column by column: the hybrid labels y(t) of every point built
    item by item (``_brute_curve``'s routing), each column's interval from ``unit_means`` /
    ``unit_differences`` on those labels, the best point and the thresholds as good from
    their definitions."""
    h = [a[i] if unlabelled == "ai" and math.isnan(h[i]) else h[i] for i in range(len(c))]
    points = _brute_curve(c, a, h)
    y = np.array([[h[i] if c[i] <= t else a[i] for i in range(len(c))] for t, _, _ in points]).T
    acc = [p[1] for p in points]
    share = [p[2] for p in points]
    top = max(v for v, s in zip(acc, share, strict=True) if s <= budget + 1e-12)
    best = min(j for j in range(len(points)) if share[j] <= budget + 1e-12
               and acc[j] >= top - 1e-9)
    means = unit_means(y)
    gains = unit_differences(y, np.asarray(a, dtype=float))
    versus = unit_differences(y, y[:, best])
    near = [(d.upper >= -1e-9 and share[j] <= budget + 1e-12) or j == best
            for j, d in enumerate(versus)]
    t_near = [points[j][0] for j in range(len(points)) if near[j]]
    return {"thresholds": [p[0] for p in points], "accuracy": acc, "share": share,
            "lower": [m.lower for m in means], "upper": [m.upper for m in means],
            "gain_lower": [g.lower for g in gains], "gain_upper": [g.upper for g in gains],
            "best": best, "near": near, "range": (min(t_near), max(t_near))}


@settings(max_examples=150, deadline=None)
@given(items, st.sampled_from([0.2, 0.5, 1.0]), st.sampled_from(["truncate", "ai"]))
# units of one human value (1/3): Σx² − n p̂² is rounding, whose root moved an end by 2e-9
@example([(0.5, 0, 1 / 3), (0.5, 1, 1 / 3), (0.5, 1, 1 / 3)], 0.2, "truncate")
def test_single_study_band_equals_brute_force(rows, budget, unlabelled):
    # the figures the dashboard shows for one study, against every threshold's column
    c = [r[0] for r in rows]
    a = [float(r[1]) for r in rows]
    h = [r[2] for r in rows]
    got = curve_band(c, a, h, max_human_share=budget, unlabelled=unlabelled)
    want = _brute_band(c, a, h, budget, unlabelled)
    assert got.curve.thresholds.tolist() == want["thresholds"]
    for name, mine in (("accuracy", got.curve.hybrid_accuracy), ("share", got.curve.human_share),
                       ("lower", got.lower), ("upper", got.upper),
                       ("gain_lower", got.gain_lower), ("gain_upper", got.gain_upper)):
        np.testing.assert_allclose(mine, want[name], rtol=0, atol=1e-12, err_msg=name)
    assert got.best.index == want["best"]
    assert got.near_best.tolist() == want["near"]
    assert got.best_threshold_interval == want["range"]


@pytest.mark.parametrize(("budget", "unlabelled"), [(1.0, "truncate"), (0.3, "truncate"),
                                                    (0.5, "ai")])
def test_a_stack_of_studies_is_each_study_alone(budget, unlabelled):
    # given 40 studies of 30 items, confidences on a grid some studies miss parts of,
    # fractional and missing human labels
    rng = np.random.default_rng(12)
    c = rng.choice([0.5, 0.55, 0.6, 0.7, 0.8, 0.9, 1.0], (40, 30),
                   p=[0.02, 0.08, 0.2, 0.3, 0.2, 0.15, 0.05])
    a = (rng.random((40, 30)) < 0.75).astype(float)
    h = rng.choice([0.0, 1 / 3, 2 / 3, 1.0], (40, 30))
    h[rng.random((40, 30)) < 0.02] = np.nan
    # when the coverage table computes them all at once
    stack = curve_bands(c, a, h, max_human_share=budget, unlabelled=unlabelled)
    # then each study's shown points are exactly its own curve_band
    for i in range(40):
        one = curve_band(c[i], a[i], h[i], max_human_share=budget, unlabelled=unlabelled)
        keep = stack.shown[i]
        assert stack.thresholds[keep].tolist() == one.curve.thresholds.tolist()
        for mine, alone in ((stack.hybrid_accuracy, one.curve.hybrid_accuracy),
                            (stack.human_share, one.curve.human_share),
                            (stack.lower, one.lower), (stack.upper, one.upper),
                            (stack.gain_lower, one.gain_lower),
                            (stack.gain_upper, one.gain_upper),
                            (stack.near_best, one.near_best)):
            np.testing.assert_array_equal(mine[i, keep], alone)
        assert stack.thresholds[stack.best[i]] == one.best.threshold
        assert tuple(stack.best_threshold_interval[i]) == one.best_threshold_interval
    assert not stack.shown.all()  # some studies miss some confidences
