import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from annotations.models import RecomputeState, User
from tests.factories import make_study, role_user

pytestmark = pytest.mark.django_db


def test_healthz_reports_each_part():
    response = Client().get("/healthz")
    body = response.json()
    assert set(body) == {"ok", "status", "database", "broker", "workers", "recompute",
                         "estimates"}
    assert body["database"] == {"ok": True}  # anonymous: status only
    assert body["recompute"] == {"ok": True, "stale_studies": 0, "failed_studies": 0}
    assert body["estimates"] == {"ok": True, "mismatched_studies": 0}
    if body["broker"].get("mode", "").startswith("in-process"):
        assert response.status_code == 200 and body["ok"] is True and body["status"] == "ok"


def _staff_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_user("ops", password="pw", is_staff=True))
    return client


def test_healthz_reports_stale_studies_without_details_to_anonymous_callers(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # broker and workers in-process: ok
    study = make_study(k=3, n_items=9, seed=401, name="secret-study-name")
    fresh = make_study(k=3, n_items=9, seed=402)
    now = timezone.now()
    RecomputeState.objects.create(study=study, requested_seq=3, computed_seq=1,
                                  dirty_since=now - dt.timedelta(minutes=5), failed_at=now,
                                  error="IndexError: index 1 is out of bounds")
    RecomputeState.objects.create(study=fresh, requested_seq=2, computed_seq=1,
                                  dirty_since=now - dt.timedelta(seconds=10))  # not a minute
    anonymous = Client().get("/healthz")
    body = anonymous.json()
    assert anonymous.status_code == 200 and body["status"] == "degraded"
    assert body["recompute"] == {"ok": False, "stale_studies": 1, "failed_studies": 1}
    text = anonymous.content.decode()
    assert "IndexError" not in text and "secret-study-name" not in text
    assert "vendor" not in text and "names" not in text
    staff = _staff_client().get("/healthz").json()
    assert staff["database"]["vendor"] in {"sqlite", "postgresql"}
    # staff who research no study (every researcher is staff) see counts, no study
    assert staff["recompute"]["studies"] == [] and staff["recompute"]["stale_studies"] == 1
    other = Client()
    other.force_login(role_user(fresh, "researcher"))  # researches the other study only
    assert "secret-study-name" not in other.get("/healthz").content.decode()
    for user in (role_user(study, "researcher"),
                 User.objects.create_superuser("root", password="pw")):
        client = Client()
        client.force_login(user)
        [row] = client.get("/healthz").json()["recompute"]["studies"]
        assert (row["id"], row["name"], row["error"]) == (
            study.pk, "secret-study-name", "IndexError: index 1 is out of bounds")
        assert row["stale_since"] == (now - dt.timedelta(minutes=5)).isoformat()


def test_healthz_hides_broker_errors_from_anonymous_callers(settings, monkeypatch):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    from oversight_site.celery import app

    dead = "redis://127.0.0.1:6390/0"  # nothing listens there
    old = app.conf.broker_url
    # Celery reads CELERY_BROKER_URL from the environment before its configuration
    monkeypatch.setenv("CELERY_BROKER_URL", dead)
    app.conf.broker_url = dead
    app._after_fork()  # forget connections to the real broker
    try:
        anonymous = Client().get("/healthz")
        staff = _staff_client().get("/healthz")
    finally:
        monkeypatch.undo()
        app.conf.broker_url = old
        app._after_fork()
    assert anonymous.status_code == 503
    assert anonymous.json()["broker"] == {"ok": False}
    assert anonymous.json()["status"] == "down"
    assert "Error" in staff.json()["broker"]["error"]


def test_estimators_import_without_django():
    import subprocess
    import sys

    code = ("import sys, estimators.partitioned.accuracy, estimators.partitioned.planning; "
            "assert 'django' not in sys.modules, 'estimators imported django'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_favicon_redirects_to_the_static_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("img/favicon.svg")
    assert 'rel="icon"' in client.get("/accounts/login/").content.decode()


def test_healthz_reports_studies_whose_statistics_differed_from_the_full_recompute(settings):
    from annotations.models import TallyGroup
    from annotations.partitioned.services.consistency import tallies_check
    from annotations.partitioned.services.labels import label_submit
    from annotations.partitioned.services.routing import query_lease_next
    from tests.factories import specialist

    settings.CELERY_TASK_ALWAYS_EAGER = True
    study = make_study(k=3, n_items=9, seed=403, name="checked-study")
    user = specialist(study, 0)
    label_submit(user=user, answer="yes",
                 query_id=query_lease_next(study=study, user=user).pk)
    assert tallies_check(study_id=study.pk).ok
    TallyGroup.objects.filter(study=study, state="yes").update(n=7)  # corrupted
    assert not tallies_check(study_id=study.pk, repair=False).ok
    body = Client().get("/healthz").json()
    assert body["status"] == "degraded"
    assert body["estimates"] == {"ok": False, "mismatched_studies": 1}
    client = Client()
    client.force_login(role_user(study, "researcher"))
    assert client.get("/healthz").json()["estimates"]["studies"] == [study.pk]
    assert tallies_check(study_id=study.pk).ok is False  # reported, then rebuilt
    assert tallies_check(study_id=study.pk).ok
    assert Client().get("/healthz").json()["estimates"]["ok"] is True
