"""The analysis end to end: a simulated study run through the services (imports, the level
rule, answers, the Celery recompute) recovers its planted per-level accuracies within the
snapshot's intervals; the stored records give the estimators exactly what was simulated;
the effort-matched votes use the outputs the rule names; exports hold every row."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from annotations.core.services.recompute import recomputes_catch_up
from annotations.core.tasks import study_recompute_task
from annotations.critique.services.analysis import critique_payload, study_records
from annotations.critique.services.exports import critique_export
from annotations.critique.services.simulation import annotators_work, study_from_simulation
from annotations.critique.services.studies import critique_study_create, critique_study_open
from annotations.models import CritiqueOutput, CritiqueQuestion, CritiqueTask, EstimateSnapshot
from estimators.critique import CritiqueStudy, critique_report, effort_matched_votes
from estimators.critique.simulation import CritiqueDesign, simulate_critique
from tests.annotations.critique.helpers import annotators
from tests.factories import built_once

pytestmark = pytest.mark.django_db

DESIGN = CritiqueDesign(n_questions=40, counts=(7, 5, 3, 1), accuracy=(0.5, 0.62, 0.72, 0.8),
                        domains=("math", "english"))


@pytest.fixture(scope="module")
def simulated(django_db_setup, django_db_blocker):
    """One simulated study answered through the services, shared by the module's tests
    (each runs in its own transaction, so what a test changes is undone after it)."""
    from django.test import override_settings

    sim = simulate_critique(DESIGN, seed=7)

    def build():
        study = critique_study_create(name="simulated", top_level=3, counts=[7, 5, 3, 1],
                                      seed=99)
        study_from_simulation(study=study, sim=sim, ai_levels=[])
        users = annotators(study, 9)
        critique_study_open(study=study)
        study.refresh_from_db()
        run = annotators_work(study=study, sim=sim, annotators=users, seed=3)
        assert run.answered == 40 * 16
        return study

    with override_settings(OVERSIGHT_MIN_ANSWER_MS=0), built_once(django_db_blocker,
                                                                 build) as study:
        yield study, sim


def test_planted_accuracies_are_recovered_within_the_snapshot_intervals(simulated):
    study, sim = simulated
    snapshot_id = study_recompute_task.apply(args=(study.pk,)).get()
    payload = EstimateSnapshot.objects.get(pk=snapshot_id).payload
    rows = {r["level"]: r for r in payload["levels"]
            if r["domain"] is None and r["author"] == "all"}
    for level, planted in enumerate(DESIGN.accuracy):
        row = rows[level]
        assert row["accuracy_lower"] <= planted <= row["accuracy_upper"], (level, row)
        assert row["n_outputs"] == 40 * DESIGN.counts[level]
    # the figures are the estimators' on exactly what was simulated (same finals per level)
    direct = critique_report(sim.study, seed=0)
    for row in direct.level_rows():
        if row["domain"] is None:
            assert rows[row["level"]]["accuracy"] == pytest.approx(row["accuracy"])
            assert rows[row["level"]]["confidence"] == pytest.approx(row["confidence"])
            assert rows[row["level"]]["minutes"] == pytest.approx(row["minutes"], rel=1e-6)


def test_the_effort_matched_votes_use_the_outputs_the_rule_names(simulated):
    study, _ = simulated
    questions, outputs = study_records(study)
    data = CritiqueStudy.from_records(questions, outputs)
    votes = effort_matched_votes(data, seed=1)
    for c3 in CritiqueOutput.objects.filter(study=study, level=3):
        q = c3.question_id
        for voted in (0, 1, 2):
            members = votes.members_of(c3.pk, voted)
            level = CritiqueOutput.objects.filter(question_id=q, level=voted)
            assert set(members) == set(level.values_list("pk", flat=True))  # 7 R, 5 C¹, 3 C²
            pair = set(level.filter(slot__lt=2).values_list("pk", flat=True))
            assert set(members[:2]) == pair  # the chain's own pair votes first
    assert votes.complete.all()


def test_choices_are_stored_in_shown_order_and_translated_for_the_estimators(simulated):
    study, sim = simulated
    _, outputs = study_records(study)
    by_id = {o[0]: o for o in outputs}
    sim_by_key = {}
    for r in sim.records[1]:
        sim_by_key.setdefault((r.question, r.level), []).append(r)
    index = {q.pk: int(q.external_id[1:]) for q in CritiqueQuestion.objects.filter(study=study)}
    for o in CritiqueOutput.objects.filter(study=study, level__gt=0).select_related("first"):
        simulated_output = sorted(sim_by_key[(index[o.question_id], o.level)],
                                  key=lambda r: r.id)[o.slot]
        shown_first_is_slot0 = o.first.slot == 0
        if simulated_output.choice is None:
            assert o.choice == "neither" and by_id[o.pk][6] is None
        else:
            better_slot = simulated_output.choice  # 0 = slot-0 input
            expected = "first" if (better_slot == 0) == shown_first_is_slot0 else "second"
            assert o.choice == expected
            assert by_id[o.pk][6] == (0 if expected == "first" else 1)


def test_exports_hold_every_output_task_and_metric(simulated):
    study, _ = simulated
    study_recompute_task.apply(args=(study.pk,))
    out = io.StringIO()
    assert critique_export(study=study, what="outputs", out=out, fmt="csv") == 640
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    gold = dict(CritiqueQuestion.objects.filter(study=study).values_list("external_id", "gold"))
    for row in rows:
        assert row["correct"] == str(int(row["final_index"] == str(gold[row["question"]])))
        assert row["author"].startswith("ann") and row["time_ms"]
    out = io.StringIO()
    assert critique_export(study=study, what="tasks", out=out, fmt="jsonl") == 640
    tasks = [json.loads(line) for line in out.getvalue().splitlines()]
    assert all(t["status"] == "answered" and t["time_on_task_ms"] is not None for t in tasks)
    assert {t["output_id"] for t in tasks} == set(
        CritiqueOutput.objects.filter(study=study).values_list("pk", flat=True))
    out = io.StringIO()
    n = critique_export(study=study, what="metrics", out=out, fmt="jsonl")
    metrics = [json.loads(line) for line in out.getvalue().splitlines()]
    assert n == len(metrics) and {m["table"] for m in metrics} >= {"levels", "input_pairs",
                                                                   "progress", "choices"}


def test_the_sweeper_leaves_an_up_to_date_critique_study_alone(simulated, monkeypatch):
    study, _ = simulated
    study_recompute_task.apply(args=(study.pk,))
    queued = []
    monkeypatch.setattr("annotations.core.services.recompute.recompute_enqueue",
                        lambda study_id, force=False: queued.append(study_id) or True)
    recomputes_catch_up()
    assert study.pk not in queued
    CritiqueOutput.objects.filter(study=study, level=3).first().delete()  # a count mismatch
    from annotations.models import RecomputeState

    RecomputeState.objects.filter(study=study).update(dirty_since=None)
    recomputes_catch_up(now=None)
    assert RecomputeState.objects.get(study=study).dirty_since is not None


def test_a_study_without_outputs_has_an_empty_payload():
    study = critique_study_create(name="empty", top_level=1)
    payload = critique_payload(study)
    assert payload["levels"] == [] and payload["n_answered"] == 0
    assert not CritiqueTask.objects.filter(study=study).exists()
    assert np.isfinite(payload["seed"])
