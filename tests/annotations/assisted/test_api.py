"""Rater API of assisted studies: tutorial and quiz, next task, answer, heartbeat, skip,
interaction events; refusals as JSON with a code; the endpoints in the OpenAPI schema."""

from __future__ import annotations

import pytest
import yaml
from django.urls import reverse
from rest_framework.test import APIClient

from annotations.assisted.services.design import DEFAULT_QUIZ
from annotations.models import Exposure, Interaction, Rating, RatingSkip, RatingTask
from tests.annotations.assisted.helpers import add_rater, make_assisted_study, rater_in_arm

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_min_time(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_quiz_gates_next_then_rate_through_the_api():
    study = make_assisted_study(n_sentences=2, arms={"E": ["search", "evidence"]})
    user = None
    while user is None:
        candidate = add_rater(study, ready=False)
        if not candidate.rater_assignments.get().components:
            user = candidate
    client = api_for(user)
    tutorial = client.get(reverse("api-tutorial", args=[study.pk])).json()
    assert tutorial["quiz_passed"] is False and tutorial["assisted"] is False
    assert all("answer" not in q for q in tutorial["quiz"])  # answers are never sent
    refused = client.post(reverse("api-rating-next", args=[study.pk]))
    assert refused.status_code == 409 and refused.json()["code"] == "tutorial_required"
    quiz = client.post(reverse("api-quiz", args=[study.pk]),
                       {"answers": [q["answer"] for q in DEFAULT_QUIZ]}, format="json")
    assert quiz.json()["passed"] is True
    task = client.post(reverse("api-rating-next", args=[study.pk])).json()
    assert set(task) == {"id", "lease_expires_at", "issued_at", "sentence"}
    answer = reverse("api-rating-answer", args=[task["id"]])
    bad = client.post(answer, {"label": "true", "confidence": 1}, format="json")
    assert bad.status_code == 400 and "label" in bad.json()
    created = client.post(answer, {"label": "disputed", "confidence": 0}, format="json")
    assert created.status_code == 201 and created.json()["label"] == "disputed"
    replay = client.post(answer, {"label": "disputed", "confidence": 0}, format="json")
    assert replay.status_code == 200
    changed = client.post(answer, {"label": "accurate", "confidence": 0}, format="json")
    assert changed.status_code == 409 and changed.json()["code"] == "already_answered"
    assert Rating.objects.filter(rater=user).count() == 1


def test_assisted_task_carries_its_panel_and_records_the_exposure():
    study = make_assisted_study(n_sentences=2, arms={"E": ["search", "evidence"]})
    user = rater_in_arm(study, "E")
    client = api_for(user)
    task = client.post(reverse("api-rating-next", args=[study.pk])).json()
    assert task["panel"]["components"] == ["search", "evidence"]
    exposure = Exposure.objects.get(task__public_id=task["id"], via="api")
    assert exposure.trace_ids == [t["sample_id"] for t in task["panel"]["traces"]]
    events = reverse("api-rating-events", args=[task["id"]])
    assert client.post(events, {"kind": "expand", "section": "evidence"},
                       format="json").status_code == 204
    refused = client.post(events, {"kind": "expand", "section": "judgments"}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "section"
    assert Interaction.objects.get().exposure_id == exposure.pk
    beat = client.post(reverse("api-rating-heartbeat", args=[task["id"]]))
    assert beat.status_code == 200 and beat.json()["id"] == task["id"]
    rated = client.post(reverse("api-rating-answer", args=[task["id"]]),
                        {"label": "accurate", "confidence": 3, "helpfulness": 2,
                         "comment": "ok"}, format="json")
    assert rated.status_code == 201
    assert Rating.objects.get().exposure_id == exposure.pk


def test_skip_and_someone_elses_task():
    study = make_assisted_study(n_sentences=2, ratings_per_item=1)
    user, other = add_rater(study), add_rater(study)
    task = api_for(user).post(reverse("api-rating-next", args=[study.pk])).json()
    stolen = api_for(other).post(reverse("api-rating-answer", args=[task["id"]]),
                                 {"label": "accurate", "confidence": 1}, format="json")
    assert stolen.status_code == 403 and stolen.json()["code"] == "not_lease_holder"
    skipped = api_for(user).post(reverse("api-rating-skip", args=[task["id"]]))
    assert skipped.status_code == 204 and RatingSkip.objects.filter(user=user).exists()
    assert RatingTask.objects.get(public_id=task["id"]).status == "pending"


def test_nothing_left_is_204_and_outsiders_are_refused():
    study = make_assisted_study(n_sentences=1, ratings_per_item=1)
    user = add_rater(study)
    client = api_for(user)
    task = client.post(reverse("api-rating-next", args=[study.pk])).json()
    client.post(reverse("api-rating-answer", args=[task["id"]]),
                {"label": "accurate", "confidence": 1}, format="json")
    assert client.post(reverse("api-rating-next", args=[study.pk])).status_code == 204
    from tests.factories import UserFactory

    outsider = api_for(UserFactory()).post(reverse("api-rating-next", args=[study.pk]))
    assert outsider.status_code == 403


def test_the_rater_endpoints_are_in_the_openapi_schema(client):
    study = make_assisted_study(n_sentences=1, open_=False)
    client.force_login(add_rater(study, ready=False))
    schema = yaml.safe_load(client.get(reverse("schema")).content)
    for path in ("/api/studies/{study_id}/tutorial/", "/api/studies/{study_id}/quiz/",
                 "/api/studies/{study_id}/ratings/next/", "/api/ratings/{task_id}/answer/",
                 "/api/ratings/{task_id}/heartbeat/", "/api/ratings/{task_id}/skip/",
                 "/api/ratings/{task_id}/events/"):
        assert path in schema["paths"], path
    rating_input = schema["components"]["schemas"]["RatingInputRequest"]["properties"]
    assert set(rating_input) == {"label", "confidence", "helpfulness", "comment"}


def test_next_task_in_bounded_statements_and_once_per_lease(django_assert_max_num_queries,
                                                            monkeypatch):
    """The API's next task in an assisted arm: one read of the rater (assignment, study,
    settings, membership), current lease, the lease with both audit rows, the sentence, its
    traces, the exposure — and asked again, the same lease with the same exposure row. (A
    random start past the last pending rank costs one more lease statement, the wrap: the
    start is pinned to 0 here.)"""
    from annotations.assisted.services import rating as rating_module

    monkeypatch.setattr(rating_module._random, "getrandbits", lambda bits: 0)
    study = make_assisted_study(n_sentences=3, arms={"E": ["search", "evidence"]})
    user = rater_in_arm(study, "E")
    client = api_for(user)
    client.post(reverse("api-rating-next", args=[study.pk]))  # warm: content types, etc.
    held = RatingTask.objects.get(holder=user, status="leased")
    client.post(reverse("api-rating-answer", args=[held.public_id]),
                {"label": "accurate", "confidence": 3, "helpfulness": 2}, format="json")
    # 7 statements + the lease's SAVEPOINT and RELEASE (its BEGIN and COMMIT outside a test)
    with django_assert_max_num_queries(9):
        first = client.post(reverse("api-rating-next", args=[study.pk])).json()
    task = RatingTask.objects.get(public_id=first["id"])
    assert task.rendered_at == task.issued_at  # stamped by the lease itself
    assert list(task.events.values_list("kind", flat=True).order_by("pk"))[-2:] == [
        "issued", "rendered"]
    again = client.post(reverse("api-rating-next", args=[study.pk])).json()
    assert again["id"] == first["id"]
    assert Exposure.objects.filter(task=task, via="api").count() == 1


def test_cant_assess_through_the_api_needs_no_confidence():
    study = make_assisted_study(n_sentences=2)
    user = rater_in_arm(study, "Baseline")
    client = api_for(user)
    first = client.post(reverse("api-rating-next", args=[study.pk])).json()
    missing = client.post(reverse("api-rating-answer", args=[first["id"]]),
                          {"label": "accurate"}, format="json")
    assert missing.status_code == 400 and missing.json()["field"] == "confidence"
    done = client.post(reverse("api-rating-answer", args=[first["id"]]),
                       {"label": "cant_assess"}, format="json")
    assert done.status_code == 201 and done.json()["confidence"] is None


def test_undo_through_the_api_gives_the_sentence_back(settings):
    settings.OVERSIGHT_UNDO_SECONDS = 30
    study = make_assisted_study(n_sentences=2)
    user = rater_in_arm(study, "Baseline")
    client = api_for(user)
    undo = reverse("api-rating-undo", args=[study.pk])
    refused = client.post(undo)
    assert refused.status_code == 409 and refused.json()["code"] == "undo_refused"
    task = client.post(reverse("api-rating-next", args=[study.pk])).json()
    client.post(reverse("api-rating-answer", args=[task["id"]]),
                {"label": "accurate", "confidence": 2}, format="json")
    back = client.post(undo)
    assert back.status_code == 200 and back.json()["id"] == task["id"]
    assert not Rating.objects.filter(rater=user).exists()
