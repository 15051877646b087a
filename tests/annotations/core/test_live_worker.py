"""With Redis and a real Celery worker process: an answer updates the dashboard quickly."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import EstimateSnapshot
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.factories import make_study, role_user, specialist

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_answer_reaches_the_dashboard_through_the_worker(celery_worker_process):
    study = make_study(k=4, n_items=40, systems={"m": 0.8}, seed=31)
    manager = Client()
    manager.force_login(role_user(study, "manager"))
    user = specialist(study, 1)
    q = query_lease_next(study=study, user=user)
    started = time.monotonic()
    label_submit(query_id=q.pk, user=user, answer="no")
    snapshot = None
    while time.monotonic() - started < 10:
        snapshot = EstimateSnapshot.objects.filter(study=study).first()
        if snapshot is not None:
            break
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    assert snapshot is not None, "the worker wrote no snapshot within 10 s"
    assert snapshot.n_answered == 1
    assert elapsed < 2.0
    live = manager.get(reverse("dashboard", args=[study.pk]), HTTP_HX_REQUEST="true")
    assert live.status_code == 200 and b'data-testid="n-answered">1<' in live.content
    unchanged = manager.get(reverse("dashboard", args=[study.pk]) + f"?since={snapshot.pk}&health=ok",
                            HTTP_HX_REQUEST="true")
    assert unchanged.status_code == 204


def test_healthz_reports_database_broker_and_worker(celery_worker_process):
    from annotations.models import User

    body = Client().get("/healthz").json()
    assert "names" not in body["workers"] and "vendor" not in body["database"]
    staff = Client()
    staff.force_login(User.objects.create_user("ops", password="pw", is_staff=True))
    body = staff.get("/healthz").json()
    assert body["database"]["vendor"] == "postgresql"
    assert len(body["workers"]["names"]) == body["workers"]["count"]
    assert body["broker"]["ok"] is True
    assert body["workers"]["count"] >= 1
    assert body["ok"] is True
