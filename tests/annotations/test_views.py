"""The labelling views behave the same with htmx and as plain form posts (no JavaScript)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import Query
from annotations.services.routing import query_lease_next
from tests.factories import make_study, specialist

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def labelling():
    study = make_study(k=3, n_items=12, seed=7)
    user = specialist(study, 0)
    client = Client()
    client.force_login(user)
    return study, user, client


def test_plain_answer_post_stores_the_answer_and_resumes_on_the_next_query(labelling):
    study, user, client = labelling
    first = query_lease_next(study=study, user=user)
    response = client.post(reverse("label-answer", args=[study.pk, first.public_id]), {"answer": "no"})
    assert response.status_code == 302
    assert response["Location"] == reverse("label", args=[study.pk])
    first.refresh_from_db()
    assert (first.status, first.answer) == ("answered", "no")
    held = Query.objects.get(holder=user, status="leased")
    assert held.pk != first.pk
    page = client.get(response["Location"]).content.decode()
    assert f'data-query-id="{held.public_id}"' in page


def test_htmx_answer_returns_the_next_query_fragment(labelling):
    study, user, client = labelling
    first = query_lease_next(study=study, user=user)
    response = client.post(reverse("label-answer", args=[study.pk, first.public_id]), {"answer": "yes"},
                           **HTMX)
    assert response.status_code == 200
    held = Query.objects.get(holder=user, status="leased")
    body = response.content.decode()
    assert f'data-query-id="{held.public_id}"' in body and "<html" not in body


def test_plain_post_on_an_answered_query_flashes_the_reason(labelling):
    study, user, client = labelling
    first = query_lease_next(study=study, user=user)
    url = reverse("label-answer", args=[study.pk, first.public_id])
    client.post(url, {"answer": "no"})
    response = client.post(url, {"answer": "yes"}, follow=True)
    first.refresh_from_db()
    assert first.answer == "no"
    assert "already answered" in response.content.decode().lower()


def test_empty_pool_says_so(labelling):
    study, user, client = labelling
    Query.objects.filter(study=study).delete()
    response = client.post(reverse("label-next", args=[study.pk]), follow=True)
    assert "No queries left for your class" in response.content.decode()
