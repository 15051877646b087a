"""Reliance per arm against per-rating loops, and against simulated studies with planted
reliance (accuracy of each arm when the AI is right / wrong, rater effects)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.assisted.factuality import (
    SKIPPED,
    gold_accurate,
    item_human_correct,
    ratings_correct,
    verdicts,
)
from estimators.assisted.reliance import overall_accuracy, reliance_by_arm
from estimators.assisted.simulation import ArmBehaviour, AssistedDesign, simulate_assisted
from estimators.numerics.bootstrap import bootstrap_ratios


def _inputs(sim):
    """The per-rating arrays reliance_by_arm takes, skips dropped."""
    v = verdicts(sim.label)
    keep = v != SKIPPED
    gold = gold_accurate(sim.gold)
    ai_v = verdicts(sim.ai_label)
    return {"rater": sim.rater[keep], "arm": sim.arm[keep],
                "correct": ratings_correct(v, gold[sim.item])[keep],
                "ai_correct": sim.ai_correct[sim.item][keep],
                "agrees_with_ai": (v == ai_v[sim.item])[keep],
                "helpfulness": sim.helpfulness[keep], "seconds": sim.seconds[keep]}


DESIGN = AssistedDesign(
    arms=(ArmBehaviour("baseline", 0.76, 0.62, None, 100.0),
          ArmBehaviour("evidence", 0.80, 0.64, (0.2, 0.5, 0.3), 150.0),
          ArmBehaviour("judgments", 0.90, 0.42, (0.1, 0.4, 0.5), 130.0)),
    n_items=300, raters_per_arm=16, items_per_rater=40, rater_spread=0.08)


def test_point_estimates_equal_per_rating_loops():
    sim = simulate_assisted(DESIGN, seed=1)
    x = _inputs(sim)
    rep = reliance_by_arm(**x, baseline="baseline", n_resamples=50)
    assert [a.arm for a in rep.arms] == ["baseline", "evidence", "judgments"]
    assert rep.stratified

    def mean(arm, value, where=None):
        vals = [value[i] for i in range(len(x["arm"]))
                if x["arm"][i] == arm and (where is None or where[i])]
        return sum(vals) / len(vals)

    base = rep.arm("baseline")
    for a in rep.arms:
        assert a.accuracy.value == pytest.approx(mean(a.arm, x["correct"]))
        assert a.accuracy_ai_right.value == pytest.approx(
            mean(a.arm, x["correct"], x["ai_correct"]))
        assert a.accuracy_ai_wrong.value == pytest.approx(
            mean(a.arm, x["correct"], ~x["ai_correct"]))
        assert a.error_ai_right.value == pytest.approx(1 - a.accuracy_ai_right.value)
        assert a.agreement_with_ai.value == pytest.approx(mean(a.arm, x["agrees_with_ai"]))
        assert a.agreement_ai_wrong.value == pytest.approx(
            mean(a.arm, x["agrees_with_ai"], ~x["ai_correct"]))
        assert a.seconds.value == pytest.approx(mean(a.arm, x["seconds"]))
        assert a.n_ratings == int((x["arm"] == a.arm).sum())
        assert a.n_raters == DESIGN.raters_per_arm
        if a.arm == "baseline":
            assert a.over_reliance is None and not a.helpfulness.defined
            continue
        assert a.helpfulness.value == pytest.approx(mean(a.arm, x["helpfulness"]))
        assert sum(a.helpfulness_shares) == pytest.approx(1.0)
        assert a.over_reliance.value == pytest.approx(
            base.accuracy_ai_wrong.value - a.accuracy_ai_wrong.value)
        assert a.under_reliance.value == pytest.approx(
            a.error_ai_right.value - base.error_ai_right.value)
        assert a.gain.value == pytest.approx(a.accuracy.value - base.accuracy.value)


def test_one_study_recovers_the_planted_reliance():
    # given one study with planted accuracies per arm and AI right/wrong
    sim = simulate_assisted(DESIGN, seed=2)
    rep = reliance_by_arm(**_inputs(sim), baseline="baseline", n_resamples=2000, level=0.99,
                          seed=3)
    base = DESIGN.arm("baseline")
    # then every planted quantity lies in its 99 % interval (15 intervals: with 95 % ones a
    # fair study misses one about half the time; the coverage tests below check 95 %)
    for a in rep.arms:
        beh = DESIGN.arm(a.arm)
        assert a.accuracy_ai_right.lower <= beh.accuracy_ai_right <= a.accuracy_ai_right.upper
        assert a.accuracy_ai_wrong.lower <= beh.accuracy_ai_wrong <= a.accuracy_ai_wrong.upper
        if a.arm != "baseline":
            over = base.accuracy_ai_wrong - beh.accuracy_ai_wrong
            under = (1 - beh.accuracy_ai_right) - (1 - base.accuracy_ai_right)
            assert a.over_reliance.lower <= over <= a.over_reliance.upper
            assert a.under_reliance.lower <= under <= a.under_reliance.upper
    # and the planted over-reliance of the judgments arm (0.20) is detected: its interval
    # excludes 0, while the evidence arm's (−0.02) does not
    assert rep.arm("judgments").over_reliance.lower > 0
    assert rep.arm("evidence").over_reliance.lower < 0 < rep.arm("evidence").over_reliance.upper


def test_intervals_cover_the_planted_reliance_in_repeated_studies():
    design = AssistedDesign(arms=DESIGN.arms, n_items=200, raters_per_arm=20,
                            items_per_rater=30, rater_spread=0.08)
    base, beh = design.arm("baseline"), design.arm("judgments")
    truth = {"accuracy_ai_wrong": beh.accuracy_ai_wrong,
             "over_reliance": base.accuracy_ai_wrong - beh.accuracy_ai_wrong,
             "under_reliance": base.accuracy_ai_right - beh.accuracy_ai_right}
    n_sims = 100
    hits = dict.fromkeys(truth, 0)
    for s in range(n_sims):
        sim = simulate_assisted(design, seed=1000 + s)
        j = reliance_by_arm(**_inputs(sim), baseline="baseline", n_resamples=400,
                            seed=s).arm("judgments")
        for name, value in truth.items():
            iv = getattr(j, name)
            hits[name] += iv.lower <= value <= iv.upper
    # then about 95 %: percentile intervals with 20 clusters per arm run 1–3 points short of
    # nominal (the bootstrap variance has the factor (C − 1)/C), and the binomial sd of a
    # coverage over 100 studies is ≈ 2.5 points
    pooled = sum(hits.values()) / (n_sims * len(truth))
    assert 0.88 <= pooled <= 0.99, hits
    assert min(hits.values()) / n_sims >= 0.85, hits


def test_raters_in_several_arms_are_resampled_together():
    # given raters who rated in two arms (the paper's T3 studies allowed it)
    rng = np.random.default_rng(4)
    n = 600
    rater = rng.integers(0, 30, n)
    arm = np.where(rng.random(n) < 0.5, "baseline", "assisted")
    correct = rng.random(n) < 0.7
    ai_correct = rng.random(n) < 0.6
    rep = reliance_by_arm(rater=rater, arm=arm, correct=correct, ai_correct=ai_correct,
                          baseline="baseline", n_resamples=300, seed=5)
    assert not rep.stratified
    # then each arm's interval is the rater bootstrap of that arm's share over all raters
    for j, name in enumerate(["assisted", "baseline"]):
        ref = bootstrap_ratios(rater, np.c_[correct * (arm == "assisted"),
                                            correct * (arm == "baseline")],
                               np.c_[arm == "assisted", arm == "baseline"], n_resamples=300,
                               seed=5)
        got = rep.arm(name).accuracy
        want = ref.interval(j)
        assert (got.value, got.lower, got.upper) == pytest.approx(
            (want.value, want.lower, want.upper))
    want = ref.difference(0, 1)
    got = rep.arm("assisted").gain
    assert (got.value, got.lower, got.upper) == pytest.approx(
        (want.value, want.lower, want.upper))


def test_reliance_refuses_bad_input():
    base = {"rater": [1, 2], "arm": ["a", "b"], "correct": [1, 0], "ai_correct": [1, 1]}
    with pytest.raises(ValueError, match="baseline: 'c' is not one of the arms"):
        reliance_by_arm(**base, baseline="c")
    with pytest.raises(ValueError, match=r"correct\[1\]: need 0/1"):
        reliance_by_arm(**{**base, "correct": [1, 0.5]}, baseline="a")
    with pytest.raises(ValueError, match=r"helpfulness\[0\]: need 0, 1, 2 or missing"):
        reliance_by_arm(**base, baseline="a", helpfulness=[3, np.nan])
    with pytest.raises(ValueError, match=r"seconds: 1 entries, expected 2"):
        reliance_by_arm(**base, baseline="a", seconds=[3])


def test_arm_without_ai_wrong_items_is_undefined_there():
    rep = reliance_by_arm(rater=[1, 2, 3, 4], arm=["b", "b", "x", "x"], correct=[1, 0, 1, 1],
                          ai_correct=[1, 0, 1, 1], baseline="b", n_resamples=50)
    x = rep.arm("x")
    assert not x.accuracy_ai_wrong.defined and not x.over_reliance.defined
    assert x.row()["over_reliance"] is None


def test_integer_arm_ids_work():
    rep = reliance_by_arm(rater=[1, 2, 3, 4], arm=[7, 7, 9, 9], correct=[1, 0, 1, 1],
                          ai_correct=[1, 0, 1, 0], baseline=7, n_resamples=50)
    assert [a.arm for a in rep.arms] == ["7", "9"]
    assert rep.arm("9").gain.value == pytest.approx(0.5)


def test_long_times_are_left_out_of_the_time_mean():
    rep = reliance_by_arm(rater=[1, 1, 1], arm=["b"] * 3, correct=[1, 1, 0],
                          ai_correct=[1, 1, 1], seconds=[60, 120, 7200], baseline="b",
                          n_resamples=20)
    assert rep.arm("b").seconds.value == pytest.approx(90.0)


def test_overall_accuracy_rows_are_item_means():
    sim = simulate_assisted(DESIGN, seed=6)
    v = verdicts(sim.label)
    gold = gold_accurate(sim.gold)
    by_arm = {a: item_human_correct(sim.item[sim.arm == a], v[sim.arm == a], gold,
                                    n_items=DESIGN.n_items) for a in sim.arm_names}
    res = overall_accuracy(sim.confidence, sim.ai_correct, by_arm, 0.7, n_resamples=300)
    rows = {(r.protocol, r.arm): r for r in res.entries}
    a = sim.ai_correct.astype(float)
    assert rows[("ai", None)].accuracy.value == pytest.approx(a.mean())
    for arm, h in by_arm.items():
        hum, hyb = rows[("humans", arm)], rows[("hybrid", arm)]
        if np.isnan(h).any():
            assert not hum.accuracy.defined and hum.n_unlabelled == int(np.isnan(h).sum())
        else:
            assert hum.accuracy.value == pytest.approx(h.mean())
        y = np.where(sim.confidence <= 0.7, h, a)
        if not np.isnan(y).any():
            assert hyb.accuracy.value == pytest.approx(y.mean())
            assert hyb.gain_over_ai.value == pytest.approx(y.mean() - a.mean())
            assert hyb.accuracy.lower <= y.mean() <= hyb.accuracy.upper
        assert hyb.human_share == pytest.approx((sim.confidence <= 0.7).mean())
    assert not math.isnan(res.rows()[0]["accuracy"])
