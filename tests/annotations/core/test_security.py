"""Who can reach what, and hidden information never reaching a specialist."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import Query
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from assistants.models import Prediction
from tests.factories import make_study, role_user, specialist

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(django_capture_on_commit_callbacks, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    study = make_study(k=3, n_items=30, systems={"secret-system-x": 0.8, "secret-system-y": 0.4})
    # an answer so that a snapshot exists
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    with django_capture_on_commit_callbacks(execute=True):
        label_submit(query_id=q.pk, user=user, answer="no")
    return study


def _client(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _who(study, role):
    if role == "anonymous":
        return None
    if role == "specialist":
        return specialist(study, 1)
    return role_user(study, role)


ENDPOINTS = [
    # (name, method, url builder, allowed roles)
    ("dashboard", "get", lambda s: reverse("dashboard", args=[s.pk]), {"manager", "researcher"}),
    ("label", "get", lambda s: reverse("label", args=[s.pk]), {"specialist"}),
    ("api-estimates", "get", lambda s: reverse("api-estimates", args=[s.pk]),
     {"manager", "researcher"}),
    ("api-items", "get", lambda s: reverse("api-items", args=[s.pk]), {"researcher"}),
    ("api-predictions", "get", lambda s: reverse("api-predictions", args=[s.pk]),
     {"researcher"}),
    ("api-query-next", "post", lambda s: reverse("api-query-next", args=[s.pk]), {"specialist"}),
    ("api-study", "get", lambda s: reverse("api-study", args=[s.pk]),
     {"specialist", "manager", "researcher"}),
]


@pytest.mark.parametrize("role", ["anonymous", "specialist", "manager", "researcher"])
@pytest.mark.parametrize(("name", "method", "url", "allowed"), ENDPOINTS,
                         ids=[e[0] for e in ENDPOINTS])
def test_permissions_per_endpoint(setup, role, name, method, url, allowed):
    response = getattr(_client(_who(setup, role)), method)(url(setup))
    if role == "anonymous":
        if name.startswith("api"):
            assert response.status_code in (401, 403)
        else:
            assert response.status_code == 302
            assert response["Location"].startswith(reverse("login"))
    elif role in allowed:
        assert response.status_code in (200, 204), response.content[:300]
    else:
        assert response.status_code == 403


@pytest.mark.parametrize("role", ["specialist", "manager"])
def test_non_staff_cannot_reach_the_admin(setup, role):
    response = _client(_who(setup, role)).get("/admin/annotations/study/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_specialist_never_sees_gold_or_predictions_in_html_or_api(setup):
    study = setup
    user = specialist(study, 2)
    client = _client(user)
    page = client.post(reverse("label-next", args=[study.pk]), HTTP_HX_REQUEST="true")
    assert page.status_code == 200
    query = Query.objects.get(holder=user, status="leased")
    api = client.post(reverse("api-query-next", args=[study.pk]))
    assert api.json()["id"] == query.public_id
    forbidden = ["secret-system", "gold", "prediction", "match_mask", "present_mask"]
    raw_predictions = [p.raw for p in Prediction.objects.filter(item=query.item)]
    for body in (page.content.decode(), json.dumps(api.json())):
        for word in forbidden:
            assert word not in body.lower()
        assert set(api.json()) == {"id", "study_id", "item_text", "options", "class_index",
                                   "class_name", "class_description", "lease_expires_at"}
    assert raw_predictions  # the item does have predictions that stayed hidden
    page = client.get(reverse("label", args=[study.pk]))
    assert "secret-system" not in page.content.decode()


def test_specialist_cannot_answer_or_heartbeat_another_class_query(setup):
    study = setup
    owner, other = specialist(study, 0), specialist(study, 1)
    q = query_lease_next(study=study, user=owner)
    client = _client(other)
    r = client.post(reverse("api-answer", args=[q.public_id]), {"answer": "yes"})
    assert r.status_code == 403 and r.json()["code"] == "not_lease_holder"
    r = client.post(reverse("api-heartbeat", args=[q.public_id]))
    assert r.status_code == 403
    q.refresh_from_db()
    assert q.status == "leased" and q.answer == ""


def test_forms_require_csrf(setup):
    client = Client(enforce_csrf_checks=True)
    client.force_login(specialist(setup, 1))
    response = client.post(reverse("label-next", args=[setup.pk]))
    assert response.status_code == 403
    assert not Query.objects.filter(holder=specialist(setup, 1)).exists()


def test_api_answer_flow_is_idempotent_with_token_auth(setup, settings):
    from rest_framework.authtoken.models import Token

    settings.OVERSIGHT_MIN_ANSWER_MS = 0  # answers at once (the minimum has its own tests)
    user = specialist(setup, 1)
    token = Token.objects.create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    nxt = client.post(reverse("api-query-next", args=[setup.pk]))
    assert nxt.status_code == 200
    qid = nxt.json()["id"]
    first = client.post(reverse("api-answer", args=[qid]), {"answer": "yes"},
                        content_type="application/json")
    again = client.post(reverse("api-answer", args=[qid]), {"answer": "yes"},
                        content_type="application/json")
    changed = client.post(reverse("api-answer", args=[qid]), {"answer": "no"},
                          content_type="application/json")
    assert (first.status_code, again.status_code, changed.status_code) == (201, 200, 409)
    assert first.json()["created"] is True and again.json()["created"] is False
    assert Query.objects.filter(public_id=qid, answer="yes").count() == 1


def test_openapi_schema_and_docs_render(setup):
    client = _client(role_user(setup, "researcher"))
    schema = client.get(reverse("schema"), HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert "/api/studies/{study_id}/estimates/" in paths
    assert "/api/queries/{query_id}/answer/" in paths
    docs = client.get(reverse("swagger-ui"))
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def test_researchers_configure_only_their_own_studies_in_the_admin(setup):
    mine = setup
    other = make_study(k=3, n_items=3, seed=99, name="someone else's study")
    client = _client(role_user(mine, "researcher"))
    listing = client.get("/admin/annotations/study/").content.decode()
    assert mine.name in listing and other.name not in listing
    assert client.get(f"/admin/annotations/study/{mine.pk}/change/").status_code == 200
    assert client.get(f"/admin/annotations/study/{other.pk}/change/").status_code in (302, 403)
    assert client.get(
        reverse("admin:annotations_study_import_items", args=[other.pk])).status_code == 403
    shown = client.get("/admin/annotations/item/").context["cl"].queryset
    assert set(shown.values_list("study_id", flat=True)) == {mine.pk}
    assert client.get(f"/admin/annotations/item/{other.items.first().pk}/change/"
                      ).status_code in (302, 403)


def test_a_researcher_added_in_the_admin_gets_staff_status(setup):
    from annotations.core.services.studies import membership_add
    from annotations.models import StudyMembership, User

    user = User.objects.create_user(username="new-researcher", password="pw")
    membership_add(study=setup, user=user, role=StudyMembership.Role.RESEARCHER)
    user.refresh_from_db()
    assert user.is_staff and not user.is_superuser


def test_nothing_tells_a_specialist_that_a_query_is_a_quality_check(settings):
    """HTML and API of a quality check: no 'quality'/'check'/'gold' wording, no qc field,
    no database id; the answer response does not say whether the answer was right."""
    from annotations.models import Study

    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_study(k=3, n_items=10, checks=5, seed=61, systems={"secret-system-z": 0.6})
    Study.objects.filter(pk=study.pk).update(gold_rate=1.0)
    user = specialist(study, 0)
    client = _client(user)
    page = client.post(reverse("label-next", args=[study.pk]), HTTP_HX_REQUEST="true")
    query = Query.objects.get(holder=user, status="leased")
    assert query.is_quality_check
    full = client.get(reverse("label", args=[study.pk]))
    api = client.post(reverse("api-query-next", args=[study.pk]))
    answer = client.post(reverse("api-answer", args=[api.json()["id"]]), {"answer": "no"},
                         content_type="application/json")
    assert answer.status_code == 201
    assert set(answer.json()) == {"query_id", "answer", "answered_at", "created"}
    after = client.post(reverse("label-next", args=[study.pk]), HTTP_HX_REQUEST="true")
    for body in (page.content.decode(), full.content.decode(), json.dumps(api.json()),
                 json.dumps(answer.json()), after.content.decode()):
        lowered = body.lower()
        for word in ("quality", "check", "gold", "qc_", "secret-system", "correct"):
            assert word not in lowered, word
        assert f'data-query-id="{query.pk}"' not in body
        assert f'/label/{query.pk}/' not in body
    assert api.json()["id"] == query.public_id
