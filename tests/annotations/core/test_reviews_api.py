"""The review API and pages (``core.reviews.api``, ``core.reviews.views``): one permission
test per endpoint (anonymous, worker, manager, another study's reviewer, the study's
reviewer and researcher), no cross-study answers or items, the decisions, the OpenAPI
schema, and the flag queue with each item in context."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotations.core.services.flags import flag_item
from annotations.models import AnswerReview, ItemFlag, Query
from annotations.partitioned.services.routing import query_lease_next
from tests.annotations.core.review_helpers import (
    assisted_answered,
    critique_answered,
    partitioned_answered,
    reviewer_of,
)
from tests.factories import UserFactory, role_user, specialist

pytestmark = pytest.mark.django_db


def _api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def two_studies():
    study, _model, ids = partitioned_answered()
    other, _m, other_ids = partitioned_answered()
    return study, ids, other, other_ids


def _who(study, other, name: str):
    return {"anonymous": None, "specialist": specialist(study, 0),
            "manager": role_user(study, "manager"), "stranger": UserFactory(),
            "other-reviewer": reviewer_of(other, f"{other.pk}-rev-x"),
            "reviewer": reviewer_of(study, f"{study.pk}-rev-x"),
            "researcher": role_user(study, "researcher")}[name]


ROLES = ["anonymous", "specialist", "manager", "stranger", "other-reviewer", "reviewer",
         "researcher"]


def _expected(name: str, allowed: int) -> set[int]:
    if name == "anonymous":
        return {401, 403}
    return {allowed} if name in ("reviewer", "researcher") else {403}


@pytest.mark.parametrize("who", ROLES)
def test_api_permissions_per_endpoint(two_studies, who):
    study, ids, other, _other_ids = two_studies
    user = _who(study, other, who)
    client = _api(user)
    item_id = Query.objects.get(pk=ids[0]).item_id
    gets = [reverse("api-review-answers", args=[study.pk]),
            reverse("api-review-answer", args=[study.pk, ids[0]]),
            reverse("api-review-disagreements", args=[study.pk]),
            reverse("api-review-item", args=[study.pk, item_id])]
    for url in gets:
        assert client.get(url).status_code in _expected(who, 200), url
    posted = client.post(reverse("api-review-answer", args=[study.pk, ids[0]]),
                         {"decision": "reject", "reason": "wrong"}, format="json")
    assert posted.status_code in _expected(who, 200)
    undo = client.post(reverse("api-review-undo", args=[study.pk, ids[0]]))
    assert undo.status_code in _expected(who, 200)
    allowed = who in ("reviewer", "researcher")
    assert AnswerReview.objects.filter(study=study).exists() is allowed
    if allowed:
        assert AnswerReview.objects.get(study=study).state == "undone"


def test_api_never_reaches_another_studys_answer_or_item(two_studies):
    study, _ids, _other, other_ids = two_studies
    client = _api(reviewer_of(study))
    other_item = Query.objects.get(pk=other_ids[0]).item_id
    assert client.get(reverse("api-review-answer", args=[study.pk, other_ids[0]])
                      ).status_code == 404
    refused = client.post(reverse("api-review-answer", args=[study.pk, other_ids[0]]),
                          {"decision": "reject", "reason": "x"}, format="json")
    assert refused.status_code == 404 and refused.json()["code"] == "unknown_answer"
    assert client.post(reverse("api-review-undo", args=[study.pk, other_ids[0]])
                       ).status_code == 404
    assert client.get(reverse("api-review-item", args=[study.pk, other_item])
                      ).status_code == 404
    assert client.get(reverse("api-review-answers", args=[999999])).status_code == 404
    assert not AnswerReview.objects.exists()


@pytest.mark.parametrize("build", [partitioned_answered, assisted_answered, critique_answered],
                         ids=["partitioned", "assisted", "critique"])
def test_api_reject_then_undo_in_every_study_type(build):
    study, _model, ids = build()
    client = _api(reviewer_of(study))
    listed = client.get(reverse("api-review-answers", args=[study.pk]), {"limit": 2}).json()
    assert listed["count"] == len(client.get(reverse("api-review-answers", args=[study.pk]),
                                             {"limit": 200}).json()["results"])
    assert len(listed["results"]) == 2 and listed["results"][0]["state"] == ""
    url = reverse("api-review-answer", args=[study.pk, ids[0]])
    no_reason = client.post(url, {"decision": "reject"}, format="json")
    assert no_reason.status_code == 400 and no_reason.json()["code"] == "invalid_review"
    done = client.post(url, {"decision": "reject", "reason": "Contradicts the text."},
                       format="json")
    assert done.status_code == 200
    assert (done.json()["state"], done.json()["reason"]) == ("rejected", "Contradicts the text.")
    one = client.get(url).json()
    assert (one["id"], one["state"], one["reason"]) == (ids[0], "rejected",
                                                        "Contradicts the text.")
    rejected = client.get(reverse("api-review-answers", args=[study.pk]),
                          {"state": "rejected"}).json()
    assert [r["id"] for r in rejected["results"]] == [ids[0]]
    undone = client.post(reverse("api-review-undo", args=[study.pk, ids[0]]))
    assert undone.status_code == 200 and undone.json()["state"] == "undone"
    again = client.post(reverse("api-review-undo", args=[study.pk, ids[0]]))
    assert again.status_code == 409 and again.json()["code"] == "nothing_to_undo"
    item = client.get(reverse("api-review-item", args=[study.pk, one["item_id"]])).json()
    assert ids[0] in [a["id"] for a in item["answers"]]
    assert "gold" not in str(item).lower()
    # exactly what the labeller saw and who answered: no gold, holdout or prediction field
    assert set(item["item"]) == {"id", "external_id", "text", "options", "context"}
    assert set(item["answers"][0]) == {
        "id", "item_id", "item", "item_text", "asked", "answer", "detail", "by", "at",
        "state", "reason", "reviewed_by", "reviewed_at"}


def test_the_schema_documents_the_review_endpoints(client):
    schema = client.get("/api/schema/").content.decode()
    for path in ("/api/studies/{study_id}/review/answers/",
                 "/api/studies/{study_id}/review/answers/{answer_id}/",
                 "/api/studies/{study_id}/review/answers/{answer_id}/undo/",
                 "/api/studies/{study_id}/review/disagreements/",
                 "/api/studies/{study_id}/review/items/{item_id}/"):
        assert path in schema
    assert "ReviewDecisionInput" in schema


# --- the pages -----------------------------------------------------------------------------

@pytest.mark.parametrize("who", ROLES)
def test_page_permissions(two_studies, client, who):
    study, ids, other, _ = two_studies
    user = _who(study, other, who)
    if user is not None:
        client.force_login(user)
    item_id = Query.objects.get(pk=ids[0]).item_id
    for url in (reverse("review", args=[study.pk]),
                reverse("review-item", args=[study.pk, item_id])):
        status = client.get(url).status_code
        if who == "anonymous":
            assert status == 302
        else:
            assert status == (200 if who in ("reviewer", "researcher") else 403), url
    posted = client.post(reverse("review-decide", args=[study.pk, ids[0]]),
                         {"decision": "reject", "reason": "no"})
    assert AnswerReview.objects.filter(study=study).exists() is (
        who in ("reviewer", "researcher"))
    if who in ("specialist", "manager", "stranger", "other-reviewer"):
        assert posted.status_code == 403


def test_page_decisions_by_form_and_by_htmx(two_studies, client):
    study, ids, _other, other_ids = two_studies
    client.force_login(reviewer_of(study))
    page = client.get(reverse("review", args=[study.pk]))
    assert page.status_code == 200 and f'id="answer-{ids[0]}"' in page.content.decode()
    decide = reverse("review-decide", args=[study.pk, ids[0]])
    swapped = client.post(decide, {"decision": "reject", "reason": ""}, HTTP_HX_REQUEST="true")
    assert "Say why the answer is rejected." in swapped.content.decode()
    swapped = client.post(decide, {"decision": "reject", "reason": "Off by one."},
                          HTTP_HX_REQUEST="true")
    html = swapped.content.decode()
    assert "<strong class=\"error\">Rejected</strong>" in html and "Off by one." in html
    assert 'data-testid="undo"' in html and "<html" not in html
    back = client.post(decide, {"decision": "undo", "next": "https://evil.example/"})
    assert back.status_code == 302 and "evil" not in back["Location"]
    assert AnswerReview.objects.get().state == "undone"
    assert client.post(reverse("review-decide", args=[study.pk, other_ids[0]]),
                       {"decision": "accept"}).status_code == 404
    assert client.get(reverse("review-answer", args=[study.pk, ids[0]])).status_code == 302


def _flagged_partitioned():
    study, _model, ids = partitioned_answered()
    user = specialist(study, 0, 0)
    q = Query.objects.filter(study=study, answered_by=user).first()
    flag_item(study=study, user=user, public_id=q.public_id, reason="ambiguous",
              note="B and C both fit.")
    return study, q, user


def test_the_flag_queue_and_a_flag_in_context_with_fix_withdraw_dismiss(client):
    study, q, flagger = _flagged_partitioned()
    client.force_login(role_user(study, "researcher"))
    queue = client.get(reverse("review", args=[study.pk]), {"show": "flags"}).content.decode()
    item_url = reverse("review-item", args=[study.pk, q.item_id])
    assert item_url in queue and "B and C both fit." in queue and flagger.username in queue
    page = client.get(item_url).content.decode()
    assert q.item.text[:40] in page and "B and C both fit." in page
    assert f"flagged by <strong>{flagger.username}</strong>" in page
    assert f'id="answer-{q.pk}"' in page  # the answers it has
    assert 'data-testid="resolve-withdrawn"' in page and 'data-testid="resolve-fixed"' in page
    # a reviewer reads the flags but resolves nothing (researchers do)
    reviewer = reviewer_of(study)
    client.force_login(reviewer)
    assert 'data-testid="flag-actions"' not in client.get(item_url).content.decode()
    resolve = reverse("review-flag-resolve", args=[study.pk, q.item_id])
    assert client.post(resolve, {"resolution": "dismissed"}).status_code == 403
    assert ItemFlag.objects.get().resolution == ""
    client.force_login(role_user(study, "researcher"))
    done = client.post(resolve, {"resolution": "withdrawn", "next": item_url}, follow=True)
    assert "1 flag withdrawn" in done.content.decode()
    assert ItemFlag.objects.get().resolution == "withdrawn"
    assert query_lease_next(study=study, user=specialist(study, 0, 0)) is None or (
        Query.objects.filter(item_id=q.item_id, status="leased").count() == 0)


def test_the_admin_flag_queue_is_two_columns_each_item_opening_in_context(client):
    study, q, flagger = _flagged_partitioned()
    client.force_login(role_user(study, "researcher"))
    page = client.get("/admin/annotations/itemflag/", {"study__id__exact": study.pk})
    html = page.content.decode()
    assert page.status_code == 200
    assert reverse("review-item", args=[study.pk, q.item_id]) in html
    assert "B and C both fit." in html and flagger.username in html and "Ambiguous" in html
    heads = html.split('<thead>')[1].split('</thead>')[0]
    assert heads.count('<th scope="col"') == 3  # the checkbox, the flag, the item
