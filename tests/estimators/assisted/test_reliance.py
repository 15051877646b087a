"""Reliance per arm against per-rating loops, and against simulated studies with planted
reliance (accuracy of each arm when the AI is right / wrong, rater effects)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from estimators.assisted.factuality import (
    SKIPPED,
    gold_accurate,
    item_human_correct,
    ratings_correct,
    verdicts,
)
from estimators.assisted.reliance import (
    MIN_RELIABLE_RATERS,
    overall_accuracy,
    reliance_by_arm,
)
from estimators.assisted.simulation import ArmBehaviour, AssistedDesign, simulate_assisted


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
    rep = reliance_by_arm(**x, baseline="baseline")
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
    rep = reliance_by_arm(**_inputs(sim), baseline="baseline", level=0.99)
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
    # and the planted over-reliance of the judgments arm (0.20) is detected at the
    # dashboard's 95 %: its interval excludes 0, while the evidence arm's (−0.02) does not
    rep = reliance_by_arm(**_inputs(sim), baseline="baseline", level=0.95)
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
        j = reliance_by_arm(**_inputs(sim), baseline="baseline").arm("judgments")
        for name, value in truth.items():
            iv = getattr(j, name)
            hits[name] += iv.lower <= value <= iv.upper
    # then about 95 % (the binomial sd of a coverage over 100 studies is ≈ 2.2 points; the
    # coverage tables of test_coverage.py check it closely)
    pooled = sum(hits.values()) / (n_sims * len(truth))
    assert 0.90 <= pooled <= 0.995, hits
    assert min(hits.values()) / n_sims >= 0.87, hits


def _cr2_by_hand(n_r, x_r, values=None):
    """The CR2 variance of the ratio X/N and Bell–McCaffrey's degrees of freedom, built at
    the level of single ratings with explicit matrices (an outside check of the closed
    forms): the intercept-only regression y = μ + e, H = J/N, A_g = (I − H_gg)^(−1/2),
    V = y'My with M = Σ_g q_g q_g', q_g = (I − H)_g' A_g 1 / N, and under working
    independence df = tr(M)² / tr(M²). ``values``: each rater's ratings (0/1 or times);
    by default the rater's n − x zeros and x ones."""
    keep = [j for j, n in enumerate(n_r) if n > 0]
    if values is None:
        values = [[1.0] * int(x_r[j]) + [0.0] * int(n_r[j] - x_r[j]) for j in range(len(n_r))]
    y = np.concatenate([values[j] for j in keep])
    sizes = [int(n_r[j]) for j in keep]
    big_n = sum(sizes)
    resid_maker = np.eye(big_n) - np.full((big_n, big_n), 1 / big_n)
    m = np.zeros((big_n, big_n))
    start = 0
    for size in sizes:
        block = slice(start, start + size)
        w, v = np.linalg.eigh(np.eye(size) - np.full((size, size), 1 / big_n))
        a_g = v @ np.diag(w ** -0.5) @ v.T
        q = resid_maker[block].T @ a_g @ np.ones(size) / big_n
        m += np.outer(q, q)
        start += size
    return float(y @ m @ y), float(np.trace(m) ** 2 / np.trace(m @ m))


def _wilson_by_hand(n_r, s_r, level=0.95, df=None):
    """Rater-clustered Wilson interval written out with loops: the CR2 variance of the ratio
    estimator, effective size, Student t on Bell–McCaffrey's degrees of freedom (or ``df``)."""
    pairs = [(n, s) for n, s in zip(n_r, s_r, strict=True) if n > 0]
    big_n = sum(n for n, _ in pairs)
    p = sum(s for _, s in pairs) / big_n
    var = sum((s - p * n) ** 2 / (1 - n / big_n) for n, s in pairs) / big_n ** 2
    var_matrix, bm_df = _cr2_by_hand(n_r, s_r)
    assert var == pytest.approx(var_matrix, rel=1e-9)
    df = bm_df if df is None else df
    n_eff = min(p * (1 - p) / var, big_n / 0.5)
    c = stats.t.ppf(0.5 + level / 2, df)
    centre = (p + c * c / (2 * n_eff)) / (1 + c * c / n_eff)
    half = c / (1 + c * c / n_eff) * math.sqrt(p * (1 - p) / n_eff + c * c / (4 * n_eff ** 2))
    adjusted = [(s - p * n) / math.sqrt(1 - n / big_n) if n > 0 else 0.0
                for n, s in zip(n_r, s_r, strict=True)]
    return p, centre - half, centre + half, var, adjusted, bm_df


def test_intervals_equal_the_sandwich_by_hand():
    # given two arms of 5 raters each, with unequal numbers of ratings
    rng = np.random.default_rng(8)
    rater, arm, correct, ai_correct, seconds, helpfulness = [], [], [], [], [], []
    for r in range(10):
        m = int(rng.integers(6, 16))
        rater += [r] * m
        arm += ["baseline" if r < 5 else "assisted"] * m
        correct += list(rng.random(m) < 0.35 + 0.06 * r)
        ai_correct += list(rng.random(m) < 0.6)
        seconds += list(rng.uniform(20, 200, m))
        helpfulness += list(rng.choice([0.0, 1.0, 2.0], m, p=[0.2, 0.3 + 0.04 * r, 0.5 - 0.04 * r]))
    rater, arm = np.array(rater), np.array(arm)
    correct, ai_correct = np.array(correct, float), np.array(ai_correct, float)
    seconds, helpfulness = np.array(seconds), np.array(helpfulness)
    rep = reliance_by_arm(rater=rater, arm=arm, correct=correct, ai_correct=ai_correct,
                          seconds=seconds, helpfulness=helpfulness, baseline="baseline")
    assert rep.stratified

    def per_rater(name, where):
        m = (arm == name) & where
        ids = sorted(set(rater[arm == name]))
        return ([float(m[rater == r].sum()) for r in ids],
                [float(correct[m & (rater == r)].sum()) for r in ids])

    everything = np.ones(rater.size, bool)
    # then every proportion's interval is the clustered Wilson written out by hand
    for name in ("baseline", "assisted"):
        for field, where in (("accuracy", everything), ("accuracy_ai_right", ai_correct == 1),
                             ("accuracy_ai_wrong", ai_correct == 0)):
            p, lo, hi, _, _, _ = _wilson_by_hand(*per_rater(name, where))
            got = getattr(rep.arm(name), field)
            assert (got.value, got.lower, got.upper) == pytest.approx((p, lo, hi), abs=1e-12)
        # and the time: x̄ · exp(± t_df √V / x̄) with the same CR2 sandwich and degrees of
        # freedom (on the log scale)
        ids = sorted(set(rater[arm == name]))
        n_r = [float((rater == r).sum()) for r in ids]
        x_r = [float(seconds[rater == r].sum()) for r in ids]
        xbar = sum(x_r) / sum(n_r)
        var, df = _cr2_by_hand(n_r, x_r, [seconds[rater == r] for r in ids])
        assert df < 4  # unequal numbers of ratings: fewer than G − 1
        spread = stats.t.ppf(0.975, df) * math.sqrt(var) / xbar
        got = rep.arm(name).seconds
        assert (got.value, got.lower, got.upper) == pytest.approx(
            (xbar, xbar * math.exp(-spread), xbar * math.exp(spread)), rel=1e-9)
        # and helpfulness (0–2): on the logit scale of its half
        h_r = [helpfulness[rater == r] / 2 for r in ids]
        m = sum(h.sum() for h in h_r) / sum(n_r)
        var, df = _cr2_by_hand(n_r, [h.sum() for h in h_r], h_r)
        spread = stats.t.ppf(0.975, df) * math.sqrt(var) / (m * (1 - m))
        got = rep.arm(name).helpfulness
        assert (got.value, got.lower, got.upper) == pytest.approx(
            (2 * m, 2 * special.expit(special.logit(m) - spread),
             2 * special.expit(special.logit(m) + spread)), rel=1e-9)
    # and the differences are Newcombe's MOVER of the two (independent raters: φ = 0),
    # both arms' limits on the Welch–Satterthwaite degrees of freedom
    for field, where, first in (("gain", everything, "assisted"),
                                ("over_reliance", ai_correct == 0, "baseline"),
                                ("under_reliance", ai_correct == 1, "baseline")):
        second = "assisted" if first == "baseline" else "baseline"
        *_, v1, _, df1 = _wilson_by_hand(*per_rater(first, where))
        *_, v2, _, df2 = _wilson_by_hand(*per_rater(second, where))
        welch = (v1 + v2) ** 2 / (v1 ** 2 / df1 + v2 ** 2 / df2)
        assert welch > max(df1, df2)
        p1, l1, u1, *_ = _wilson_by_hand(*per_rater(first, where), df=welch)
        p2, l2, u2, *_ = _wilson_by_hand(*per_rater(second, where), df=welch)
        d = p1 - p2
        lo = d - math.hypot(p1 - l1, u2 - p2)
        hi = d + math.hypot(u1 - p1, p2 - l2)
        got = getattr(rep.arm("assisted"), field)
        assert (got.value, got.lower, got.upper) == pytest.approx((d, lo, hi), abs=1e-12)
    # and below MIN_RELIABLE_RATERS an arm (and its contrasts) is flagged unreliable
    assert MIN_RELIABLE_RATERS == 5 and all(a.reliable for a in rep.arms)
    few = reliance_by_arm(rater=rater[rater != 9], arm=arm[rater != 9],
                          correct=correct[rater != 9], ai_correct=ai_correct[rater != 9],
                          baseline="baseline")
    assert few.arm("baseline").reliable and not few.arm("assisted").reliable
    assert few.arm("assisted").row()["reliable"] is False


def test_raters_in_several_arms_keep_their_correlation():
    # given raters who rated in two arms (the paper's T3 studies allowed it)
    rng = np.random.default_rng(4)
    n = 300
    rater = rng.integers(0, 12, n)
    arm = np.where(rng.random(n) < 0.5, "baseline", "assisted")
    skill = rng.uniform(0.4, 0.95, 12)
    correct = (rng.random(n) < skill[rater]).astype(float)
    ai_correct = rng.random(n) < 0.6
    rep = reliance_by_arm(rater=rater, arm=arm, correct=correct, ai_correct=ai_correct,
                          baseline="baseline")
    assert not rep.stratified
    ids = range(12)

    def sums(name):
        return ([float(((rater == r) & (arm == name)).sum()) for r in ids],
                [float(correct[(rater == r) & (arm == name)].sum()) for r in ids])

    n1, s1 = sums("assisted")
    n2, s2 = sums("baseline")
    p1, l1, u1, v1, r1, _ = _wilson_by_hand(n1, s1)
    p2, l2, u2, v2, r2, _ = _wilson_by_hand(n2, s2)
    assert (rep.arm("assisted").accuracy.lower, rep.arm("assisted").accuracy.upper) == \
        pytest.approx((l1, u1), abs=1e-12)
    # then the gain's interval uses the raters' correlation across the two arms (from the
    # CR2-adjusted residuals), each arm on its own degrees of freedom
    cov = sum(a * b for a, b in zip(r1, r2, strict=True)) / (sum(n1) * sum(n2))
    phi = cov / math.sqrt(v1 * v2)
    assert phi > 0.2  # skilled raters are skilled in both arms
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    got = rep.arm("assisted").gain
    assert (got.value, got.lower, got.upper) == pytest.approx((d, lo, hi), abs=1e-12)


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
                          ai_correct=[1, 0, 1, 1], baseline="b")
    x = rep.arm("x")
    assert not x.accuracy_ai_wrong.defined and not x.over_reliance.defined
    assert x.row()["over_reliance"] is None


def test_integer_arm_ids_work():
    rep = reliance_by_arm(rater=[1, 2, 3, 4], arm=[7, 7, 9, 9], correct=[1, 0, 1, 1],
                          ai_correct=[1, 0, 1, 0], baseline=7)
    assert [a.arm for a in rep.arms] == ["7", "9"]
    assert rep.arm("9").gain.value == pytest.approx(0.5)


def test_long_times_are_left_out_of_the_time_mean():
    rep = reliance_by_arm(rater=[1, 1, 1], arm=["b"] * 3, correct=[1, 1, 0],
                          ai_correct=[1, 1, 1], seconds=[60, 120, 7200], baseline="b")
    assert rep.arm("b").seconds.value == pytest.approx(90.0)


def test_overall_accuracy_rows_are_item_means():
    sim = simulate_assisted(DESIGN, seed=6)
    v = verdicts(sim.label)
    gold = gold_accurate(sim.gold)
    by_arm = {a: item_human_correct(sim.item[sim.arm == a], v[sim.arm == a], gold,
                                    n_items=DESIGN.n_items) for a in sim.arm_names}
    res = overall_accuracy(sim.confidence, sim.ai_correct, by_arm, 0.7)
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
