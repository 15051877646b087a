"""Live routing by AI confidence: threshold and bands, the tasks it creates, and re-routing
that moves only what is still pending."""

from __future__ import annotations

import pytest

from annotations.assisted.services.design import arm_save, assisted_study_create
from annotations.assisted.services.imports import sentences_import, traces_import
from annotations.assisted.services.ranks import task_rank
from annotations.assisted.services.rating import rating_lease_next, rating_skip
from annotations.assisted.services.routing import routing_update, tasks_sync
from annotations.core.errors import InvalidStudy
from annotations.core.services.studies import study_open
from annotations.models import Arm, RatingTask, RoutingChange, Sentence
from tests.annotations.assisted.helpers import add_rater, jsonl, marked_trace

pytestmark = pytest.mark.django_db

CONFIDENCES = [0.2, 0.4, 0.6, 0.8, 1.0]


def rated_sentences(confidences=CONFIDENCES, start: int = 0) -> list[dict]:
    return [{"id": f"s{i}", "prompt": "P", "response": f"R {i}.", "sentence": f"R {i}.",
             "ai_verdict": "accurate", "ai_confidence": c}
            for i, c in enumerate(confidences, start=start)]


def study_with(routing: str = "threshold", threshold: float | None = 0.5, arms=("E",),
               ratings_per_item: int = 2, **settings):
    study = assisted_study_create(name=f"route-{routing}-{threshold}-{len(arms)}-"
                                       f"{sorted(settings)}", routing=routing,
                                  threshold=threshold, ratings_per_item=ratings_per_item,
                                  **settings)
    for i, name in enumerate(arms, start=1):
        arm_save(arm=Arm(study=study, name=name, position=i, show_search=True))
    sentences_import(study=study, source=jsonl(rated_sentences()), name="s.jsonl")
    return study


def routes(study) -> dict[str, str]:
    return dict(Sentence.objects.filter(study=study).values_list("external_id", "route"))


def tasks_of(study) -> dict[str, int]:
    out: dict[str, int] = {}
    for ext in RatingTask.objects.filter(study=study).values_list("sentence__external_id",
                                                                  flat=True):
        out[ext] = out.get(ext, 0) + 1
    return out


def test_threshold_sends_low_confidence_to_raters_and_high_to_the_ai():
    study = study_with(threshold=0.5)
    assert set(routes(study).values()) == {"waiting"}  # a draft routes nothing
    study_open(study=study)
    assert routes(study) == {"s0": "human", "s1": "human", "s2": "ai", "s3": "ai",
                             "s4": "ai"}
    # two arms (baseline, E) × 2 ratings per sentence, for the two human sentences
    assert tasks_of(study) == {"s0": 4, "s1": 4}
    task = RatingTask.objects.filter(study=study).first()
    assert task.rank == task_rank(study.seed, task.sentence_id, task.arm_id, task.slot)
    assert task.events.filter(kind="routed").count() == 1


def test_at_the_threshold_goes_to_raters():
    study = study_with(threshold=0.6)
    study_open(study=study)
    assert routes(study)["s2"] == "human" and routes(study)["s3"] == "ai"


def test_changing_t_reroutes_only_what_is_pending(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = study_with(threshold=0.5)
    study_open(study=study)
    rater = add_rater(study)
    held = rating_lease_next(study=study, user=rater)  # this sentence is started
    started = held.sentence.external_id
    other = ({"s0", "s1"} - {started}).pop()
    change = routing_update(study=study, threshold=0.9)
    assert routes(study) == {"s0": "human", "s1": "human", "s2": "human", "s3": "human",
                             "s4": "ai"}
    assert (change.to_humans, change.to_ai, change.kept) == (2, 0, 1)
    change = routing_update(study=study, threshold=0.1)
    r = routes(study)
    assert r[started] == "human"  # a rater has it: kept, with all its tasks
    assert r[other] == "ai" and r["s2"] == "ai" and r["s3"] == "ai"
    assert (change.to_humans, change.to_ai, change.kept) == (0, 3, 1)
    assert tasks_of(study) == {started: 4}
    held.refresh_from_db()
    assert held.status == "leased" and held.holder_id == rater.pk
    assert RoutingChange.objects.filter(study=study).count() == 2
    assert RoutingChange.objects.filter(study=study).first().before["threshold"] == 0.5


def test_a_skipped_sentence_is_started_too():
    study = study_with(threshold=0.5)
    study_open(study=study)
    rater = add_rater(study)
    task = rating_lease_next(study=study, user=rater)
    rating_skip(user=rater, public_id=task.public_id)
    routing_update(study=study, threshold=0.0)
    assert routes(study)[task.sentence.external_id] == "human"


def test_bands_send_each_band_to_its_arms():
    study = study_with(routing="bands", threshold=None, arms=("E", "F"),
                       band_edges=[0.3, 0.7], band_targets=[["E"], ["F", "Baseline"], "ai"])
    study_open(study=study)
    assert routes(study) == {"s0": "human", "s1": "human", "s2": "human", "s3": "ai",
                             "s4": "ai"}
    arms = {(ext, name) for ext, name in RatingTask.objects.filter(study=study)
            .values_list("sentence__external_id", "arm__name")}
    assert arms == {("s0", "E"), ("s1", "F"), ("s1", "Baseline"), ("s2", "F"),
                    ("s2", "Baseline")}
    assert dict(Sentence.objects.filter(study=study).values_list("external_id", "band")) == {
        "s0": 0, "s1": 1, "s2": 1, "s3": 2, "s4": 2}


def test_band_settings_are_checked_with_the_field_named():
    with pytest.raises(InvalidStudy) as exc:
        study_with(routing="bands", threshold=None, band_edges=[0.7, 0.3],
                   band_targets=["ai", "ai", "ai"])
    assert exc.value.field == "band_edges"
    study = study_with(routing="bands", threshold=None, band_edges=[0.5],
                       band_targets=[["Nobody"], "ai"])
    with pytest.raises(InvalidStudy, match="no arm named 'Nobody'"):
        study_open(study=study)


def test_no_verified_sample_counts_as_confidence_zero():
    study = study_with(threshold=0.1)
    bad = marked_trace("x", "accurate")
    bad["evidence"][0]["quote"] = "absent from every snippet"
    sentences_import(study=study, source=jsonl([{"id": "z", "prompt": "P", "response": "R.",
                                                 "sentence": "R."}]), name="z.jsonl")
    traces_import(study=study, source=jsonl([{"sentence": "z", "trace": bad}]),
                  name="t.jsonl")
    z = Sentence.objects.get(study=study, external_id="z")
    assert (z.ai_confidence, z.ai_verdict, z.ai_n_verified) == (None, "", 0)
    study_open(study=study)
    assert routes(study)["z"] == "human"


def test_sentences_arriving_in_an_open_study_are_routed_at_once():
    study = study_with(threshold=0.5)
    study_open(study=study)
    sentences_import(study=study, source=jsonl(rated_sentences([0.3, 0.9], start=10)),
                     name="more.jsonl")
    assert routes(study)["s10"] == "human" and routes(study)["s11"] == "ai"


def test_new_arm_and_more_ratings_get_their_tasks():
    study = study_with(threshold=0.5)
    study_open(study=study)
    arm_save(arm=Arm(study=study, name="New", show_search=True))
    assert tasks_sync(study=study) == 2 * 2  # two human sentences × 2 slots
    study.assisted.ratings_per_item = 3
    study.assisted.save()
    assert tasks_sync(study=study) == 2 * 3  # one more slot per (sentence, arm)
    assert tasks_sync(study=study) == 0
