"""The maintained statistics under faults and races, on PostgreSQL (several connections
and a real process; SQLite has one writer at a time, so neither can happen there): a fold
killed with SIGKILL after it wrote the groups leaves the statistics as they were and the
next fold redoes it; a withdrawal or a rejection racing an answer to the same query ends
in the counts of the state both leave, whichever commits first."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from annotations.models import ItemFlag, Query, TallyEntry, TallyGroup
from annotations.partitioned.services.consistency import payload_difference
from annotations.partitioned.services.estimates import recompute_payload
from annotations.partitioned.services.labels import label_submit, recompute_deferred
from annotations.partitioned.services.routing import query_lease_next
from annotations.partitioned.services.tallies import tallies_current, tallies_fold
from tests.conftest import celery_env
from tests.factories import make_study, role_user, specialist

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"),
                       reason="PostgreSQL: needs concurrent writers (CI's second pass)"),
]


def _dsn() -> str:
    db = settings.DATABASES["default"]
    return (f"host={db['HOST']} port={db['PORT']} dbname={db['NAME']} "
            f"user={db['USER'] or 'postgres'}")


def _agree(study) -> None:
    difference, detail = payload_difference(
        recompute_payload(study, tallies_current(study_id=study.pk)),
        recompute_payload(study, None))
    assert not detail, detail


def _lease(study, c: int = 0):
    """(specialist, query) leased by class c's specialist, or the next class's when c has
    no query left."""
    for shift in range(3):
        user = specialist(study, (c + shift) % 3)
        query = query_lease_next(study=study, user=user)
        if query is not None:
            return user, query
    raise AssertionError("no query left")


def _answer(study, c: int, value: str = "yes") -> Query:
    """An answer (recompute deferred: its entries stay in the log)."""
    user, query = _lease(study, c)
    with recompute_deferred():
        label_submit(user=user, answer=value, query_id=query.pk)
    return query


def _groups(study) -> list[tuple]:
    return sorted(TallyGroup.objects.filter(study=study).values_list(
        "stratum", "k", "state", "first", "uniform", "neyman", "rejected", "withdrawn", "n",
        "codes"), key=repr)


def test_a_fold_killed_after_writing_the_groups_changes_nothing():
    study = make_study(k=3, n_items=12, systems={"a": 0.8}, seed=501)
    for c in (0, 1, 2):
        _answer(study, c)
    tallies_fold(study_id=study.pk)
    for c in (0, 1, 2):
        _answer(study, c, "no")
    before_groups = _groups(study)
    before_entries = TallyEntry.objects.filter(study_id=study.pk).count()
    assert before_entries > 0
    blocker = psycopg.connect(_dsn(), autocommit=False)
    fold = None
    try:
        with blocker.cursor() as cur:  # hold one group the fold must update
            cur.execute("SELECT id FROM annotations_tallygroup WHERE study_id = %s AND "
                        "state = 'open' FOR UPDATE", [study.pk])
        fold = subprocess.Popen(
            [sys.executable, "-c", "import django; django.setup(); from annotations."
             "partitioned.services.tallies import tallies_fold; "
             f"tallies_fold(study_id={study.pk})"], cwd=ROOT, env=celery_env())
        deadline = time.monotonic() + 30
        with psycopg.connect(_dsn(), autocommit=True) as watch:
            while time.monotonic() < deadline:  # the fold deleted its entries, now waits
                row = watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE 'UPDATE \"annotations_tallygroup\"%%'").fetchone()
                if row[0]:
                    break
                assert fold.poll() is None, "the fold ended before it was blocked"
                time.sleep(0.05)
            else:
                pytest.fail("the fold never reached the groups' update")
        fold.send_signal(signal.SIGKILL)
        fold.wait(timeout=10)
    finally:
        blocker.rollback()
        blocker.close()
        if fold is not None and fold.poll() is None:
            fold.kill()
    deadline = time.monotonic() + 10  # the killed fold's transaction ends on the server
    while TallyEntry.objects.filter(study_id=study.pk).count() != before_entries:
        assert time.monotonic() < deadline, "the killed fold's deletions were kept"
        time.sleep(0.1)
    assert _groups(study) == before_groups
    assert tallies_fold(study_id=study.pk) == before_entries  # redone in full
    _agree(study)


def _race(first, second, study) -> None:
    """Run ``first`` (SQL on its own connection, not committed), then ``second`` (its own
    connection, in a thread: it waits on ``first``'s row locks or not), commit ``first``,
    then ``second``."""
    a = psycopg.connect(_dsn(), autocommit=False)
    b = psycopg.connect(_dsn(), autocommit=False)
    try:
        a.execute(*first)
        done = threading.Event()

        def run_second():
            b.execute(*second)
            done.set()

        thread = threading.Thread(target=run_second)
        thread.start()
        done.wait(0.5)  # blocked, or done: both orders are legal
        a.commit()
        thread.join(10)
        assert not thread.is_alive()
        b.commit()
    finally:
        a.close()
        b.close()


ANSWER = ("UPDATE annotations_query SET status = 'answered', answer = %s, answered_at = "
          "now(), holder_id = NULL, lease_expires_at = NULL WHERE id = %s")
WITHDRAW = ("UPDATE annotations_itemflag SET resolution = 'withdrawn', resolved_at = now() "
            "WHERE study_id = %s AND item_id = %s")


@pytest.mark.parametrize("answer_first", [True, False])
def test_a_withdrawal_racing_an_answer_ends_in_the_counts_of_both(answer_first):
    study = make_study(k=3, n_items=9, systems={"a": 0.8}, seed=502 + answer_first)
    tallies_fold(study_id=study.pk)
    user, query = _lease(study)
    ItemFlag.objects.create(study=study, item_id=query.item_id, user=user,
                            reason=ItemFlag.Reason.BROKEN)
    answer = (ANSWER, ["yes", query.pk])
    withdraw = (WITHDRAW, [study.pk, query.item_id])
    _race(answer, withdraw, study) if answer_first else _race(withdraw, answer, study)
    query.refresh_from_db()
    assert query.status == "answered"
    assert ItemFlag.objects.get(item_id=query.item_id).resolution == "withdrawn"
    _agree(study)


@pytest.mark.parametrize("answer_first", [True, False])
def test_a_rejection_racing_a_prediction_refresh_ends_in_the_counts_of_both(answer_first):
    """A review's rejection and a rewrite of the same answered query's AI bits (what a
    prediction import does) at once."""
    from django.contrib.contenttypes.models import ContentType

    study = make_study(k=3, n_items=9, systems={"a": 0.8}, seed=504 + answer_first)
    query = _answer(study, 0)
    tallies_fold(study_id=study.pk)
    content_type = ContentType.objects.get_for_model(Query)
    reject = ("INSERT INTO annotations_answerreview (study_id, answer_type_id, answer_id, "
              "state, reason, reviewed_at, reviewed_by_id) VALUES (%s, %s, %s, 'rejected', "
              "'x', now(), %s)", [study.pk, content_type.pk, query.pk,
                                  role_user(study, "researcher").pk])
    refresh = ("UPDATE annotations_query SET match_mask = match_mask # 1, present_mask = 1 "
               "WHERE id = %s", [query.pk])
    _race(refresh, reject, study) if answer_first else _race(reject, refresh, study)
    _agree(study)


def test_two_first_builds_of_one_study_at_once_both_end_built():
    """The hourly check of two web processes (the embedded sweeper of each gunicorn worker)
    building a study's statistics for the first time at once: the second's snapshot began
    before the first's state row was committed, so its insert fails on the key — it builds
    again in a new snapshot instead of failing (seen in bench_client)."""
    from django.db import connections

    from annotations.models import TallyState
    from annotations.partitioned.services.tallies import tallies_build

    study = make_study(k=3, n_items=12, systems={"a": 0.8}, seed=611)
    TallyState.objects.filter(study=study).delete()
    first = psycopg.connect(_dsn(), autocommit=False)
    failure: list[BaseException] = []

    def second_build():
        try:
            tallies_build(study_id=study.pk)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failure.append(exc)
        finally:
            connections.close_all()

    try:
        first.execute("INSERT INTO annotations_tallystate (study_id, entries_folded, "
                      "check_detail) VALUES (%s, 0, '')", [study.pk])
        thread = threading.Thread(target=second_build)
        thread.start()
        deadline = time.monotonic() + 10  # the second build waits on the first's key
        with psycopg.connect(_dsn(), autocommit=True) as probe:
            while not probe.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE 'INSERT INTO \"annotations_tallystate\"%%'").fetchone()[0]:
                assert time.monotonic() < deadline, "the second build never met the key"
                time.sleep(0.05)
        first.commit()
        thread.join(30)
        assert not thread.is_alive()
    finally:
        first.close()
    assert failure == []
    assert TallyState.objects.get(study=study).built_at is not None
    _agree(study)
