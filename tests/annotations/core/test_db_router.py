"""A read replica for dashboards and raw exports (annotations/core/db_router.py): their
reads go to the ``replica`` connection, who-may-read and every write to the primary, and
nothing else ever touches the replica. The replica here is the test mirror of the primary
(the same database through a second connection), so each request's SQL shows which
connection served it; the tests run in committed transactions, which the second
connection sees."""

from __future__ import annotations

import re

import pytest
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotations.core.db_router import (
    REPLICA,
    ReplicaRouter,
    replica_down_forget,
    replica_reads_within,
)
from annotations.models import EstimateSnapshot, Query, Study, StudyMembership, User
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.factories import make_study, role_user, specialist

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", REPLICA])

WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|CREATE|ALTER|DROP)\b", re.IGNORECASE)


@pytest.fixture
def routed(settings):
    settings.OVERSIGHT_REPLICA_READS = True
    settings.OVERSIGHT_MIN_ANSWER_MS = 0


def _answered_study() -> Study:
    study = make_study(k=3, n_items=12, systems={"m": 0.8}, seed=411)
    for k in range(3):
        user = specialist(study, k)
        label_submit(query_id=query_lease_next(study=study, user=user).pk, user=user,
                     answer="yes" if k == 0 else "no")
    study_recompute(study_id=study.pk)
    return study


def _served(client: Client, url: str):
    with CaptureQueriesContext(connections["default"]) as primary, \
            CaptureQueriesContext(connections[REPLICA]) as replica:
        response = client.get(url)
        # a streamed export reads as it is sent: read it whole here, as a download does
        response.body = response.getvalue() if response.streaming else response.content
    return response, [q["sql"] for q in primary], [q["sql"] for q in replica]


def test_dashboards_figures_and_exports_read_from_the_replica_and_who_may_read_from_the_primary(
        routed, settings):
    study = _answered_study()
    manager = Client()
    manager.force_login(role_user(study, "manager"))
    snapshot = EstimateSnapshot._meta.db_table
    queries = Query._meta.db_table
    members = StudyMembership._meta.db_table
    urls = {
        "dashboard": (reverse("dashboard", args=[study.pk]), snapshot),
        "figure": (reverse("figure-csv", args=[study.pk, "estimates"]), snapshot),
        "export": (reverse("study-export", args=[study.pk]) + "?format=jsonl", queries),
        "api export": (reverse("api-export", args=[study.pk]) + "?format=csv", queries),
        "api estimates": (reverse("api-estimates", args=[study.pk]), snapshot),
    }
    bodies = {}
    for name, (url, table) in urls.items():
        response, primary, replica = _served(manager, url)
        assert response.status_code == 200, name
        bodies[name] = response.body
        assert any(table in sql for sql in replica), (name, replica)
        assert not [sql for sql in replica if WRITE.match(sql)], name
        # who may read — the session, the account, the membership — from the primary only
        # (the replica may join the accounts' names into what it shows)
        for who in ("django_session", User._meta.db_table, members):
            read = f'FROM "{who}"'
            assert any(read in sql for sql in primary), (name, who)
            assert not any(read in sql for sql in replica), (name, who)
        assert not any(table in sql for sql in primary), (name, "read twice")
    # the same bytes as from the primary alone
    settings.OVERSIGHT_REPLICA_READS = False
    for name in ("figure", "export", "api export", "api estimates"):
        response, _, replica = _served(manager, urls[name][0])
        assert replica == [] and response.body == bodies[name], name


def test_a_labellers_pages_and_answers_never_touch_the_replica(routed):
    study = _answered_study()
    user = specialist(study, 1)
    labeller = Client()
    labeller.force_login(user)
    with CaptureQueriesContext(connections[REPLICA]) as replica:
        page = labeller.get(reverse("label", args=[study.pk]))
        leased = labeller.post(reverse("label-next", args=[study.pk]), HTTP_HX_REQUEST="true")
        query = Query.objects.get(study=study, holder=user, status="leased")
        answered = labeller.post(reverse("label-answer", args=[study.pk, query.public_id]),
                                 {"answer": "no"}, HTTP_HX_REQUEST="true")
    assert (page.status_code, leased.status_code, answered.status_code) == (200, 200, 200)
    assert Query.objects.get(pk=query.pk).status == "answered"
    assert replica.captured_queries == []


def test_the_router_sends_only_reads_inside_the_block_and_never_migrates_the_replica(routed):
    router = ReplicaRouter()
    assert router.db_for_read(EstimateSnapshot) is None  # outside: the primary
    with replica_reads_within():
        assert router.db_for_read(EstimateSnapshot) == REPLICA
        assert router.db_for_read(Query) == REPLICA
        for model in (User, StudyMembership):
            assert router.db_for_read(model) is None
        assert router.db_for_write(EstimateSnapshot) is None
    assert router.db_for_read(EstimateSnapshot) is None
    assert router.allow_migrate(REPLICA, "annotations") is False
    assert router.allow_migrate("default", "annotations") is True


def test_an_unreachable_replica_costs_the_primary_some_reads_never_a_page(routed, caplog,
                                                                         settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # /healthz: no worker to ask in this test
    study = _answered_study()
    manager = Client()
    manager.force_login(role_user(study, "manager"))
    anonymous = Client()
    health = anonymous.get("/healthz").json()
    assert health["replica"] == {"ok": True} and health["status"] == "ok"
    replica = connections[REPLICA]
    saved = dict(replica.settings_dict)
    replica.close()
    held = replica.connection  # SQLite's close keeps an in-memory database open
    replica.connection = None
    if replica.vendor == "postgresql":
        replica.settings_dict["PORT"] = "1"  # nothing listens there: refused at once
    else:
        replica.settings_dict["NAME"] = "/nonexistent-directory/replica.sqlite3"
    try:
        url = reverse("dashboard", args=[study.pk])
        with caplog.at_level("WARNING", logger="annotations.core.db_router"), \
                CaptureQueriesContext(connections["default"]) as primary:
            response, again = manager.get(url), manager.get(url)
        assert response.status_code == again.status_code == 200
        assert replica.connection is None  # never connected: nothing served from it
        assert any(EstimateSnapshot._meta.db_table in q["sql"] for q in primary)
        assert caplog.text.count("read replica unreachable") == 1  # then left alone a while
        health = anonymous.get("/healthz")
        assert health.status_code == 200  # the site works: degraded, not down
        assert health.json()["replica"] == {"ok": False}
        assert health.json()["status"] == "degraded"
    finally:
        replica.settings_dict.update(saved)
        replica.connection = held
        replica_down_forget()


@pytest.mark.parametrize("kind", ["assisted", "critique"])
def test_the_other_study_types_dashboards_read_from_the_replica_too(routed, kind):
    from annotations.core.services.studies import membership_add
    from tests.annotations.assisted.helpers import make_assisted_study
    from tests.annotations.critique.helpers import answer_next, make_critique_study
    from tests.factories import UserFactory

    if kind == "assisted":
        study = make_assisted_study(n_sentences=2)
        url = reverse("assisted-dashboard", args=[study.pk])
    else:
        study, annotators = make_critique_study(n_questions=2)
        answer_next(study, annotators[0])
        url = reverse("critique-dashboard", args=[study.pk])
    manager = UserFactory()
    membership_add(study=study, user=manager, role=StudyMembership.Role.MANAGER)
    client = Client()
    client.force_login(manager)
    response, primary, replica = _served(client, url)
    assert response.status_code == 200
    assert replica and not [sql for sql in replica if WRITE.match(sql)]
    assert any(f'FROM "{StudyMembership._meta.db_table}"' in sql for sql in primary)
    assert not any(f'FROM "{StudyMembership._meta.db_table}"' in sql for sql in replica)
