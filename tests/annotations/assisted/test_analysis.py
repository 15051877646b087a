"""The assisted analysis end to end: a simulated study with known AI and rater behaviour
(estimators.assisted.simulation) written as rows (sentences, traces, raters, ratings, exposures),
recomputed by the Celery recompute's service, recovers the planted accuracies, reliance
effects and best threshold within its intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from annotations.assisted.services.analysis import (
    POOLED,
    analysis_payload,
    assisted_recompute,
    assisted_rows,
)
from annotations.assisted.services.demo import ARM_TITLES, assisted_study_from_simulation
from annotations.core.services.recompute import study_recompute_any
from annotations.models import EstimateSnapshot, Rating, Sentence
from estimators.assisted.agreement import krippendorff_alpha_nominal
from estimators.assisted.factuality import verdicts
from estimators.assisted.simulation import AssistedDesign, simulate_assisted

pytestmark = pytest.mark.django_db

DESIGN = AssistedDesign(n_items=400, n_samples=11, raters_per_arm=20, items_per_rater=60)
SEED = 11


@pytest.fixture(scope="module")
def seeded(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        sim = simulate_assisted(DESIGN, seed=SEED)
        seeded = assisted_study_from_simulation(name="analysis e2e", sim=sim, seed=SEED)
        snapshot = assisted_recompute(study_id=seeded.study.pk)
        yield seeded, snapshot.payload
        seeded.study.delete()


def _arm(payload: dict, name: str) -> dict:
    return next(r for r in payload["reliance"]["rows"] if r["arm"] == ARM_TITLES[name])


def _population_ai_accuracy() -> float:
    c, pi = DESIGN.confidence_levels()
    return float((pi * DESIGN.ai_accuracy(c)).sum())


def test_the_rows_read_are_the_simulation(seeded):
    s, _ = seeded
    rows = assisted_rows(study=s.study)
    sim = s.simulation
    kept = sim.label != "skip"
    assert rows.rating_item.size == kept.sum()
    sentence_of = {pk: i for i, pk in enumerate(s.sentences)}
    got = sorted(
        (sentence_of[int(rows.sentence_id[i])], rows.arms[a].name, str(label))
        for i, a, label in zip(rows.rating_item, rows.rating_arm, rows.rating_label,
                               strict=True))
    expected = sorted((int(i), ARM_TITLES[str(a)], str(label))
                      for i, a, label in zip(sim.item[kept], sim.arm[kept], sim.label[kept],
                                             strict=True))
    assert got == expected
    # the AI rating came out of the real trace aggregation: mode and share agreeing
    ai = dict(Sentence.objects.filter(study=s.study).values_list("pk", "ai_confidence"))
    assert [ai[pk] for pk in s.sentences] == pytest.approx(sim.confidence.tolist())


@pytest.mark.parametrize("arm", ["baseline", "evidence", "full_trace"])
def test_planted_rater_accuracies_are_recovered(seeded, arm):
    _, payload = seeded
    row = _arm(payload, arm)
    planted = DESIGN.arm(arm)
    for field, value in (("accuracy_ai_right", planted.accuracy_ai_right),
                         ("accuracy_ai_wrong", planted.accuracy_ai_wrong)):
        assert row[f"{field}_lower"] <= value <= row[f"{field}_upper"], (arm, field, row)
    seconds = planted.median_seconds * math.exp(DESIGN.seconds_sigma ** 2 / 2)
    assert row["seconds_lower"] <= seconds <= row["seconds_upper"]
    if planted.helpfulness_probs is None:
        assert row["helpfulness"] is None
    else:
        mean = sum(k * p for k, p in enumerate(planted.helpfulness_probs))
        assert row["helpfulness_lower"] <= mean <= row["helpfulness_upper"]


def test_planted_reliance_effects_are_recovered(seeded):
    _, payload = seeded
    base = DESIGN.arm("baseline")
    assert payload["reliance"]["baseline"] == ARM_TITLES["baseline"]
    for arm in ("evidence", "full_trace"):
        row, planted = _arm(payload, arm), DESIGN.arm(arm)
        over = base.accuracy_ai_wrong - planted.accuracy_ai_wrong
        under = (1 - planted.accuracy_ai_right) - (1 - base.accuracy_ai_right)
        assert row["over_reliance_lower"] <= over <= row["over_reliance_upper"], arm
        assert row["under_reliance_lower"] <= under <= row["under_reliance_upper"], arm
    # the full trace misleads when the AI is wrong (significantly), evidence does not
    assert _arm(payload, "full_trace")["over_reliance_lower"] > 0
    assert _arm(payload, "evidence")["over_reliance_lower"] < 0 < _arm(
        payload, "evidence")["over_reliance_upper"]
    assert _arm(payload, "baseline")["over_reliance"] is None


@pytest.mark.parametrize("arm", ["baseline", "evidence", "full_trace"])
def test_the_best_threshold_and_the_curve_are_recovered(seeded, arm):
    _, payload = seeded
    curve = next(c for c in payload["rules"]["individual"]["curves"]
                 if c["source"] == ARM_TITLES[arm])
    true_t, true_acc = DESIGN.true_curve(arm)
    best = DESIGN.true_best_threshold(arm)
    low, high = curve["best_threshold_interval"]
    assert low <= best <= high, (arm, best, curve["best_threshold_interval"])
    # every point's band contains the population hybrid accuracy at that threshold
    rows = curve["rows"]
    covered = 0
    for row in rows:
        t = -math.inf if row["threshold"] is None else row["threshold"]
        j = int(np.argmin(np.abs(np.where(np.isinf(true_t), -1.0, true_t)
                                 - (t if math.isfinite(t) else -1.0))))
        covered += row["lower"] <= true_acc[j] <= row["upper"]
    assert covered >= 0.8 * len(rows), (arm, covered, len(rows))
    # the threshold chosen on the calibration half, measured on the held-out half
    held = next(h for h in payload["rules"]["individual"]["held_out"]
                if h["source"] == ARM_TITLES[arm] and h["budget"] == 1.0)
    j = int(np.argmin(np.abs(np.nan_to_num(true_t, neginf=-1.0) - held["threshold"])))
    assert held["held_out_accuracy_lower"] <= true_acc[j] <= held["held_out_accuracy_upper"]
    assert held["n_calibration"] + held["n_held_out"] == DESIGN.n_items


def test_budgets_cap_the_share_sent_to_humans(seeded):
    _, payload = seeded
    for h in payload["rules"]["majority"]["held_out"]:
        assert h["calibration_human_share"] <= h["budget"] + 1e-12


def test_ai_alone_and_the_results_table(seeded):
    s, payload = seeded
    realised = float(s.simulation.ai_correct.mean())
    assert payload["ai"]["accuracy"] == pytest.approx(realised)
    table = payload["rules"]["individual"]["overall"]
    assert table["threshold_source"] == "held_out"
    ai_row = next(r for r in table["rows"] if r["protocol"] == "ai")
    assert ai_row["accuracy_lower"] <= _population_ai_accuracy() <= ai_row["accuracy_upper"]
    t = table["threshold"]
    for arm in ("baseline", "evidence", "full_trace"):
        hybrid = next(r for r in table["rows"]
                      if r["protocol"] == "hybrid" and r["arm"] == ARM_TITLES[arm])
        true_t, true_acc = DESIGN.true_curve(arm)
        j = int(np.argmin(np.abs(np.nan_to_num(true_t, neginf=-1.0) - t)))
        assert hybrid["accuracy_lower"] <= true_acc[j] <= hybrid["accuracy_upper"], arm


def test_calibration_bins_are_the_ais_accuracy_per_confidence(seeded):
    s, payload = seeded
    sim = s.simulation
    cal = payload["calibration"]
    assert cal["strategy"] == "distinct"
    covered = 0
    for row in cal["rows"]:
        at = np.isclose(sim.confidence, row["mean_confidence"])
        assert row["n"] == at.sum()
        assert row["accuracy"] == pytest.approx(sim.ai_correct[at].mean())  # brute force
        covered += row["accuracy_lower"] <= DESIGN.ai_accuracy(row["mean_confidence"]) \
            <= row["accuracy_upper"]
    assert covered >= 0.8 * len(cal["rows"])
    assert cal["ece_lower"] <= cal["ece"] <= cal["ece_upper"]


def test_agreement_is_krippendorffs_alpha_of_the_ratings(seeded):
    s, payload = seeded
    sim = s.simulation
    kept = sim.label != "skip"
    for arm in ("baseline", "full_trace"):
        m = kept & (sim.arm == arm)
        expected = krippendorff_alpha_nominal(sim.item[m], verdicts(sim.label[m])).alpha
        row = next(a for a in payload["agreement"] if a["source"] == ARM_TITLES[arm])
        assert row["alpha"] == pytest.approx(expected)
        assert row["alpha_lower"] <= row["alpha"] <= row["alpha_upper"]
    assert {a["source"] for a in payload["agreement"]} == {*ARM_TITLES.values(), POOLED}


def test_engagement_comes_from_the_interaction_log(seeded):
    _, payload = seeded
    arms = {a["key"]: a for a in payload["arms"]}
    assert arms[ARM_TITLES["baseline"]]["share_expanded"] is None
    assert 0.6 < arms[ARM_TITLES["full_trace"]]["share_expanded"] < 0.8  # planted 0.7
    assert payload["n_ratings_unexposed"] == 0


def test_the_recompute_mechanism_dispatches_by_kind(seeded):
    s, payload = seeded
    before = EstimateSnapshot.objects.filter(study=s.study).count()
    snapshot = study_recompute_any(study_id=s.study.pk)
    assert EstimateSnapshot.objects.filter(study=s.study).count() == before + 1
    assert snapshot.n_answered == Rating.objects.filter(study=s.study).count()
    assert snapshot.payload["reliance"] == payload["reliance"]  # deterministic


def test_the_payload_is_plain_json_without_nan(seeded):
    _, payload = seeded

    def walk(x):
        if isinstance(x, float):
            assert math.isfinite(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        else:
            assert x is None or isinstance(x, str | int | bool)

    walk(payload)


def test_a_study_without_ratings_gives_an_empty_analysis(seeded):
    s, _ = seeded
    rows = assisted_rows(study=s.study)
    empty = analysis_payload(rows.__class__(**{**rows.__dict__,
                                               "rating_item": rows.rating_item[:0],
                                               "rating_arm": rows.rating_arm[:0]}))
    assert empty["empty"] and empty["n_answered"] == 0


def test_the_results_table_stands_when_the_best_threshold_sends_all_to_the_ai():
    """Regression: an AI right on every sentence makes "all to the AI" (T = −∞, None in the
    JSON) the best held-out threshold; the results table used to vanish then."""
    from types import SimpleNamespace

    from annotations.assisted.services.analysis import _rule_figures

    rng = np.random.default_rng(3)
    n = 200
    conf = rng.uniform(0, 1, n)
    ai_correct = np.ones(n)
    humans = (rng.uniform(size=n) < 0.7).astype(float)
    calibration = np.arange(n) % 2 == 0
    arms = [SimpleNamespace(label="A")]
    figures = _rule_figures(conf, ai_correct, {"A": humans, POOLED: humans}, calibration,
                            {}, arms, [0])
    overall = figures["overall"]
    assert overall is not None
    assert overall["threshold"] is None and overall["threshold_source"] == "held_out"
    hybrid = next(r for r in overall["rows"] if r["protocol"] == "hybrid")
    assert hybrid["accuracy"] == pytest.approx(1.0)


def test_the_regression_finds_the_planted_arm_differences(seeded):
    """The paper's mixed-effects test, on the simulated study: each assisted arm's effect
    holds its planted log-odds difference from the baseline within its interval, and it
    is significant where the rater-clustered bootstrap finds a gain."""
    _, payload = seeded
    fit = payload["regression"]
    assert fit["baseline"] == ARM_TITLES["baseline"] and fit["converged"]
    p_right = _population_ai_accuracy()

    def planted_log_odds(arm: str) -> float:
        a = DESIGN.arm(arm)
        p = p_right * a.accuracy_ai_right + (1 - p_right) * a.accuracy_ai_wrong
        return math.log(p / (1 - p))

    rows = {r["arm"]: r for r in fit["rows"]}
    assert set(rows) == {ARM_TITLES[a] for a in ("evidence", "full_trace")}
    for arm in ("evidence", "full_trace"):
        effect = planted_log_odds(arm) - planted_log_odds("baseline")
        row = rows[ARM_TITLES[arm]]
        assert row["n"] == _arm(payload, arm)["n_ratings"]
        assert row["beta_lower"] <= effect <= row["beta_upper"], (arm, effect, row)
        assert row["odds_ratio"] == pytest.approx(math.exp(row["beta"]))
        gain = _arm(payload, arm)
        assert (row["p"] < 0.05) == (gain["gain_lower"] > 0 or gain["gain_upper"] < 0), arm
