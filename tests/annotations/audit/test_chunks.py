"""Audits in chunks on their own queue (issue 27): a long audit never holds a worker past
Celery's time limit, gives exactly the result of one go, is cancellable between chunks, a
soft time limit is never a criterion's failure, and a run whose worker died is failed by the
sweeper."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

from annotations.audit.models import Audit, AuditOutcome
from annotations.audit.services import evaluators, runs
from annotations.audit.services.rubrics import core_rubric
from annotations.audit.services.runs import (
    audit_cancel,
    audit_progress,
    audit_run,
    audit_run_chunk,
    audit_start,
    audits_sweep,
)
from estimators.nodata.algorithm import no_data_algorithm
from estimators.nodata.protocol import Commitment
from estimators.nodata.verifiers import ProgrammaticVerifier
from tests.annotations.audit.helpers import (
    DATA,
    commitments_file,
    datapoints_file,
    liar,
    make_audit_study,
    make_rubric,
)

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]


def _start(study, rubric, *, seed=3, phi=0.5):
    return audit_start(study=study, rubric=rubric, commitments=commitments_file(liar),
                       commitments_name="c.jsonl", datapoints=datapoints_file(),
                       datapoints_name="d.jsonl", rounds=3, phi=phi, seed=seed)


class RandomEvaluator:
    """An evaluator whose commitments come from its Generator: a chunk must carry the
    Generator's state on, or the result changes."""

    def prepare(self, items):
        return None

    def commit(self, item, x, round_index, rng):
        label = int(rng.integers(2))
        return Commitment(label, x if rng.random() < 0.8 else "1111")


@pytest.fixture
def random_kind(monkeypatch):
    monkeypatch.setitem(evaluators._KINDS, "ai", evaluators.EvaluatorKind(
        check=lambda fields: fields, build=lambda audit, rows: RandomEvaluator()))


def test_a_chunked_run_gives_exactly_the_result_of_one_go(settings, monkeypatch, random_kind):
    settings.OVERSIGHT_AUDIT_CHUNK_SECONDS = 0  # one datapoint per chunk
    study, _ = make_audit_study()
    audit = _start(study, make_rubric(study), seed=11, phi=0.6)
    Audit.objects.filter(pk=audit.pk).update(evaluator="ai")
    chunks = []
    real = runs.audit_run_chunk
    monkeypatch.setattr(runs, "audit_run_chunk",
                        lambda **kw: chunks.append(1) or real(**kw))
    audit_run(audit_id=audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.SUCCEEDED and len(chunks) == len(DATA)
    # the same run in one go, straight from the library
    expected = no_data_algorithm(DATA, RandomEvaluator(),
                                 ProgrammaticVerifier(core_rubric(audit.rubric_snapshot)),
                                 rounds=3, phi=0.6, seed=11,
                                 items=[f"d{i}" for i in range(len(DATA))])
    stored = list(AuditOutcome.objects.filter(audit=audit).order_by("position"))
    assert [o.success for o in stored] == expected.success.tolist()
    assert [o.label for o in stored] == [o.label for o in expected.outcomes]
    assert [o.final_label for o in stored] == list(expected.labels)
    assert [o.flipped for o in stored] == expected.flipped.tolist()
    assert [len(o.rounds) for o in stored] == [len(o.rounds) for o in expected.outcomes]
    assert audit.successes == expected.successes and audit.flips == expected.flips
    assert 0 < expected.successes < len(DATA) and expected.flips > 0  # a real test
    assert audit.summary["failures_by_criterion"] == expected.failures_by_criterion()


def test_with_a_broker_each_task_runs_one_chunk_and_queues_the_next_on_the_audits_queue(
        settings, monkeypatch):
    from annotations.audit.services import enqueue
    from annotations.audit.tasks import audit_run_task

    assert settings.CELERY_TASK_ROUTES[enqueue.RUN_TASK] == {"queue": "audits"}
    study, _ = make_audit_study()
    audit = _start(study, make_rubric(study))  # on-commit not run: queued
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.OVERSIGHT_AUDIT_CHUNK_SECONDS = 0
    sent = []

    class Queue:
        def apply_async(self, args, queue):
            sent.append((args, queue))

    monkeypatch.setattr(enqueue, "task", lambda name: Queue())
    audit_run_task(audit.pk)  # what a worker runs for one message
    audit.refresh_from_db()
    assert sent == [((audit.pk,), "audits")]
    assert audit.status == Audit.Status.QUEUED and audit.done == 1
    assert AuditOutcome.objects.filter(audit=audit).count() == 1
    assert audit_progress(audit) == f"Queued: 1/{len(DATA)} datapoints"
    while audit.status != Audit.Status.SUCCEEDED:
        assert len(sent) <= len(DATA)
        audit_run_task(*sent[-1][0])
        audit.refresh_from_db()
    assert len(sent) == len(DATA) - 1  # the last chunk queues nothing
    assert AuditOutcome.objects.filter(audit=audit).count() == len(DATA)


def test_workers_consume_the_audits_queue():
    queues = {"default"} | {r["queue"] for r in django_settings.CELERY_TASK_ROUTES.values()}
    assert "audits" in queues
    compose = (ROOT / "docker-compose.yml").read_text()
    [worker] = re.findall(r"celery -A oversight_site worker -Q (\S+)", compose)
    assert set(worker.split(",")) == queues
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    [test_worker] = re.findall(r'"-Q",\s*"([^"]+)"', conftest)
    assert set(test_worker.split(",")) == queues


def test_a_soft_time_limit_inside_a_criterion_fails_the_run_not_the_criterion(monkeypatch):
    from annotations.audit.services import checks

    def out_of_time(compiled, text):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(checks, "regex_search", out_of_time)
    study, _ = make_audit_study()
    audit = _start(study, make_rubric(study))  # its rubric has a regex criterion
    audit_run(audit_id=audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.FAILED and audit.successes is None
    assert "time limit" in audit.errors[0]
    assert not AuditOutcome.objects.filter(audit=audit).exists()


def test_cancel_between_two_chunks_ends_the_audit_at_once_and_keeps_nothing(settings):
    settings.OVERSIGHT_AUDIT_CHUNK_SECONDS = 0
    study, _ = make_audit_study()
    audit = _start(study, make_rubric(study))
    assert audit_run_chunk(audit_id=audit.pk) is True
    audit.refresh_from_db()
    assert audit.status == Audit.Status.QUEUED and audit.outcomes.count() == 1
    audit_cancel(audit=audit)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.CANCELLED and not audit.outcomes.exists()
    assert audit_run_chunk(audit_id=audit.pk) is False  # the queued chunk does nothing
    audit.refresh_from_db()
    assert audit.status == Audit.Status.CANCELLED and not audit.outcomes.exists()


def test_the_sweeper_fails_a_run_whose_worker_died_and_leaves_live_and_queued_ones(settings):
    settings.OVERSIGHT_AUDIT_CHUNK_SECONDS = 0
    study, _ = make_audit_study()
    rubric = make_rubric(study)
    dead, live, queued = (_start(study, rubric) for _ in range(3))
    for audit in (dead, live, queued):
        assert audit_run_chunk(audit_id=audit.pk) is True
    now = timezone.now()
    limit = settings.CELERY_TASK_TIME_LIMIT
    # the dead one's next chunk started, then its process was killed (no heartbeat since)
    Audit.objects.filter(pk=dead.pk).update(status=Audit.Status.RUNNING,
                                            heartbeat_at=now - dt.timedelta(seconds=limit + 90))
    Audit.objects.filter(pk=live.pk).update(status=Audit.Status.RUNNING,
                                            heartbeat_at=now - dt.timedelta(seconds=5))
    Audit.objects.filter(pk=queued.pk).update(heartbeat_at=now - dt.timedelta(hours=2))
    assert audits_sweep(now=now) == 1
    dead.refresh_from_db()
    assert dead.status == Audit.Status.FAILED and dead.finished_at is not None
    assert dead.errors[0].startswith(f"The run stopped at 1/{len(DATA)} datapoints")
    assert not dead.outcomes.exists()
    assert Audit.objects.get(pk=live.pk).status == Audit.Status.RUNNING
    assert Audit.objects.get(pk=queued.pk).status == Audit.Status.QUEUED
    assert audit_run_chunk(audit_id=dead.pk) is False  # a late message changes nothing
    assert Audit.objects.get(pk=dead.pk).status == Audit.Status.FAILED
    assert audits_sweep(now=now) == 0


def test_the_sweeper_is_on_the_beat_schedule():
    from oversight_site.celery import app

    entry = django_settings.CELERY_BEAT_SCHEDULE["fail-stopped-audits"]
    # beat sends the name: a worker runs only tasks registered under it
    assert entry["task"] == "annotations.audit_tasks.audits_sweep_task"
    assert app.tasks[entry["task"]].name == entry["task"]
    assert entry["schedule"].run_every.total_seconds() <= 60


def test_every_beat_entry_names_a_registered_task():
    from oversight_site.celery import app

    for entry in django_settings.CELERY_BEAT_SCHEDULE.values():
        assert app.tasks[entry["task"]].name == entry["task"]


def test_a_chunk_stays_well_within_the_time_limit():
    assert django_settings.OVERSIGHT_AUDIT_CHUNK_SECONDS * 4 <= (
        django_settings.CELERY_TASK_SOFT_TIME_LIMIT)


def test_a_chunk_stored_by_another_execution_is_not_stored_twice(settings):
    settings.OVERSIGHT_AUDIT_CHUNK_SECONDS = 0
    study, _ = make_audit_study()
    audit = _start(study, make_rubric(study))
    assert audit_run_chunk(audit_id=audit.pk) is True
    audit.refresh_from_db()
    stale_copy = Audit.objects.get(pk=audit.pk)
    assert audit_run_chunk(audit_id=audit.pk) is True  # chunk 2 stored
    # a second delivery of chunk 2's message, read before chunk 2 was stored
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.RUNNING)
    rows = runs.parse_datapoints(datapoints_file(), source="d.jsonl")
    with pytest.raises(runs._Overtaken):
        runs._store_chunk(stale_copy, 1, rows, [], {"position": 2}, needed=None)
    assert list(audit.outcomes.order_by("position").values_list("position", flat=True)) == [0, 1]


@pytest.mark.postgres
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_an_audit_chunk_by_chunk_from_the_audits_queue(settings):
    """A worker that consumes only ``audits`` (one datapoint per chunk here) runs an audit
    to its end: the run task is routed there, each chunk queues the next."""
    import os
    import subprocess
    import sys
    import time

    from oversight_site.celery import app
    from tests.conftest import _WORKERS, celery_env

    settings.CELERY_TASK_ALWAYS_EAGER = False
    if _WORKERS:  # this process's session worker consumes 'audits' too, in longer chunks
        app.control.cancel_consumer("audits", destination=_WORKERS, reply=True)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "oversight_site", "worker", "-Q", "audits",
         "-c", "1", "--loglevel", "WARNING", "-n", f"audits-{os.getpid()}@%h"],
        cwd=ROOT, env=celery_env(OVERSIGHT_AUDIT_CHUNK_SECONDS="0"))
    try:
        study, _ = make_audit_study()
        audit = _start(study, make_rubric(study))  # committed: queued on 'audits'
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            audit.refresh_from_db()
            if audit.status not in (Audit.Status.QUEUED, Audit.Status.RUNNING):
                break
            time.sleep(0.05)
        assert audit.status == Audit.Status.SUCCEEDED, (audit.status, audit.errors)
        assert audit.outcomes.count() == len(DATA) and audit.checkpoint["position"] == len(DATA)
        # chunk by chunk: the outcomes were written by more than two transactions
        # (PostgreSQL's xmin: the last one to write a row; the last chunk's flips rewrite
        # some), not by one run at the end — read from the rows, not from polling the
        # progress, which a fast worker outruns
        with connection.cursor() as cur:
            cur.execute(f"SELECT DISTINCT xmin::text FROM {AuditOutcome._meta.db_table} "
                        "WHERE audit_id = %s", [audit.pk])
            assert len(cur.fetchall()) > 2
    finally:
        worker.terminate()
        worker.wait(timeout=20)
        if _WORKERS:
            app.control.add_consumer("audits", destination=_WORKERS, reply=True)
