"""The live recompute pipeline: failures are recorded and shown, stale figures say so,
answering never fails because Redis is down, and the sweeper catches up."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotations.core import selectors
from annotations.core.services import recompute as recompute_service
from annotations.core.services.recompute import (
    catch_up_grace_seconds,
    recompute_requested,
    recomputes_catch_up,
)
from annotations.models import EstimateSnapshot, Query, RecomputeState, Study, TallyEntry
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.labels import label_submit, recompute_deferred
from annotations.partitioned.services.routing import query_lease_next
from tests.factories import make_study, role_user, specialist

pytestmark = pytest.mark.django_db

DEAD_REDIS = "redis://127.0.0.1:6390/0"  # nothing listens here


@pytest.fixture(autouse=True)
def _in_process(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # recompute in-process, even with a broker


def _answer(study, k: int, answer: str = "no") -> Query:
    user = specialist(study, k)
    q = query_lease_next(study=study, user=user)
    label_submit(query_id=q.pk, user=user, answer=answer)
    return q


def _manager(study) -> Client:
    client = Client()
    client.force_login(role_user(study, "manager"))
    return client


@pytest.fixture
def failing_recompute(monkeypatch):
    """Fault injection: every input that used to crash the recompute gets fixed, so the
    failure is made here (the wrapper and the pages are the real ones)."""
    def boom(*, study_id):
        raise ValueError("counts do not broadcast\n  File 'estimates.py', line 1")

    # the partitioned study type's registered recompute (its hooks) made to fail
    partitioned = recompute_service._KINDS[Study.Kind.PARTITIONED]
    monkeypatch.setitem(recompute_service._KINDS, Study.Kind.PARTITIONED,
                        dataclasses.replace(partitioned, recompute=boom))


def test_a_failed_recompute_is_recorded_and_shown_with_its_time(failing_recompute,
                                                                django_capture_on_commit_callbacks):
    study = make_study(k=4, n_items=20, systems={"m": 0.7}, seed=301)
    with django_capture_on_commit_callbacks(execute=True):
        q = _answer(study, 1)
    q.refresh_from_db()
    assert q.status == "answered"  # the answer stands
    state = RecomputeState.objects.get(study=study)
    assert state.failed_at is not None
    assert state.error == "ValueError: counts do not broadcast"  # first line, no traceback
    html = _manager(study).get(reverse("dashboard", args=[study.pk])).content.decode()
    assert 'data-testid="recompute-failed"' in html
    assert "The last recompute failed" in html
    assert timezone.localtime(state.failed_at).strftime("%H:%M:%S") in html
    assert "ValueError: counts do not broadcast" in html and "File " not in html
    assert "No estimates yet" not in html  # not silence


def test_a_successful_recompute_clears_the_failure(failing_recompute, monkeypatch,
                                                   django_capture_on_commit_callbacks):
    study = make_study(k=4, n_items=20, systems={"m": 0.7}, seed=302)
    with django_capture_on_commit_callbacks(execute=True):
        _answer(study, 1)
    assert RecomputeState.objects.get(study=study).failed_at is not None
    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=True):
        _answer(study, 2)
    state = RecomputeState.objects.get(study=study)
    assert (state.failed_at, state.error, state.dirty_since) == (None, "", None)
    assert state.computed_seq == state.requested_seq == 2
    html = _manager(study).get(reverse("dashboard", args=[study.pk])).content.decode()
    assert "recompute-failed" not in html and 'data-testid="stale"' not in html
    assert 'data-testid="n-answered">2<' in html


def test_k2_with_two_systems_is_never_silent(django_capture_on_commit_callbacks):
    """K = 2 with two AI systems crashed the recompute and the dashboard stayed empty: after
    an answer there is either a snapshot including it or a recorded failure."""
    study = make_study(k=2, n_items=20, systems={"a": 0.8, "b": 0.6}, seed=303)
    with django_capture_on_commit_callbacks(execute=True):
        _answer(study, 0, "no")
    snapshot = EstimateSnapshot.objects.filter(study=study).first()
    state = RecomputeState.objects.get(study=study)
    assert (snapshot is not None and snapshot.n_answered == 1) or state.failed_at is not None
    html = _manager(study).get(reverse("dashboard", args=[study.pk])).content.decode()
    assert ('data-testid="n-answered">1<' in html) or ("The last recompute failed" in html)


def test_figures_are_stale_after_a_minute_without_a_snapshot(django_capture_on_commit_callbacks):
    study = make_study(k=3, n_items=20, systems={"m": 0.7}, seed=304)
    with django_capture_on_commit_callbacks(execute=True):
        _answer(study, 0)
    with recompute_deferred():  # an answer whose recompute has not run yet
        _answer(study, 1)
    recompute_requested(study_id=study.pk)
    since = RecomputeState.objects.get(study=study).dirty_since
    fresh = selectors.study_recompute_health(study=study, now=since + dt.timedelta(seconds=59))
    assert (fresh.stale, fresh.behind_since) == (False, since)
    stale = selectors.study_recompute_health(study=study, now=since + dt.timedelta(seconds=61))
    assert (stale.stale, stale.stale_since, stale.failed_at) == (True, since, None)
    RecomputeState.objects.filter(study=study).update(
        dirty_since=timezone.now() - dt.timedelta(seconds=90))
    client = _manager(study)
    html = client.get(reverse("dashboard", args=[study.pk])).content.decode()
    assert 'data-testid="stale"' in html and "Stale since" in html
    assert 'data-testid="n-answered">1<' in html  # the old figure, labelled stale
    # the live region swaps in the notice even without a newer snapshot
    snapshot = EstimateSnapshot.objects.filter(study=study).first()
    poll = client.get(reverse("dashboard", args=[study.pk]) + f"?since={snapshot.pk}&health=ok",
                      HTTP_HX_REQUEST="true")
    assert poll.status_code == 200 and b"Stale since" in poll.content
    token = selectors.study_recompute_health(study=study).token
    unchanged = client.get(reverse("dashboard", args=[study.pk])
                           + f"?since={snapshot.pk}&health={token}", HTTP_HX_REQUEST="true")
    assert unchanged.status_code == 204


@pytest.mark.django_db(transaction=True)
def test_answers_succeed_when_redis_is_down_and_the_sweeper_catches_up(settings, caplog):
    """The cache call in the answer's on-commit hook raised: API and htmx answers were
    committed but answered 500."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 0.3
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": DEAD_REDIS}}
    study = make_study(k=3, n_items=20, systems={"m": 0.7}, seed=305)
    api_user, page_user = specialist(study, 0), specialist(study, 1)
    api = Client()
    api.force_login(api_user)
    q1 = query_lease_next(study=study, user=api_user)
    page = Client()
    page.force_login(page_user)
    q2 = query_lease_next(study=study, user=page_user)
    with caplog.at_level(logging.WARNING, logger="annotations.core.services.recompute"):
        by_api = api.post(reverse("api-answer", args=[q1.public_id]), {"answer": "no"},
                          content_type="application/json")
        by_htmx = page.post(reverse("label-answer", args=[study.pk, q2.public_id]), {"answer": "yes"},
                            HTTP_HX_REQUEST="true")
    assert by_api.status_code == 201 and by_api.json()["answer"] == "no"
    assert by_htmx.status_code == 200
    assert "error" not in by_htmx.content.decode().lower()
    assert Query.objects.filter(study=study, status="answered").count() == 2
    assert "not started" in caplog.text and "ConnectionError" in caplog.text
    assert not EstimateSnapshot.objects.filter(study=study).exists()
    state = RecomputeState.objects.get(study=study)
    assert state.requested_seq == 2 and state.dirty_since is not None
    # Redis is back: the beat sweeper recomputes without waiting for another answer
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 0.0
    assert recomputes_catch_up(now=state.dirty_since) == []  # within the grace: not yet
    late = state.dirty_since + dt.timedelta(seconds=catch_up_grace_seconds() + 1)
    assert recomputes_catch_up(now=late) == [study.pk]
    assert EstimateSnapshot.objects.get(study=study).n_answered == 2
    state.refresh_from_db()
    assert (state.computed_seq, state.dirty_since) == (2, None)


def test_the_sweeper_finds_answers_whose_hook_never_ran():
    """The web process died between the answer's commit and its on-commit hook: the study's
    log holds a change its snapshot has not seen (a partitioned study; the other types
    compare answered counts, test_analysis), so the sweeper marks and recomputes it; a study
    whose snapshot has seen everything is left alone."""
    study = make_study(k=3, n_items=20, systems={"m": 0.7}, seed=306)
    other = make_study(k=3, n_items=20, systems={"m": 0.7}, seed=307)
    study_recompute(study_id=other.pk)  # folds its log: nothing left unseen
    assert not TallyEntry.objects.filter(study_id=other.pk).exists()
    with recompute_deferred():
        _answer(study, 0)
    assert not RecomputeState.objects.filter(study=study).exists()
    later = timezone.now() + dt.timedelta(seconds=catch_up_grace_seconds() + 1)
    assert recomputes_catch_up() == []  # marked now, recomputed after the grace
    assert RecomputeState.objects.get(study=study).dirty_since is not None
    assert recomputes_catch_up(now=later) == [study.pk]
    assert EstimateSnapshot.objects.get(study=study).n_answered == 1
    assert EstimateSnapshot.objects.filter(study=other).count() == 1  # nothing to do there
    # what a fresh snapshot of each would count (the soak waits for it)
    assert recompute_service.answered_counts_of([study.pk, other.pk]) == {study.pk: 1,
                                                                          other.pk: 0}
    assert not RecomputeState.objects.filter(study=other, dirty_since__isnull=False).exists()


def test_the_sweeper_retries_a_failed_study_only_after_a_pause(failing_recompute,
                                                               django_capture_on_commit_callbacks):
    study = make_study(k=3, n_items=20, systems={"m": 0.7}, seed=308)
    with django_capture_on_commit_callbacks(execute=True):
        _answer(study, 0)
    failed_at = RecomputeState.objects.get(study=study).failed_at
    soon = failed_at + dt.timedelta(seconds=catch_up_grace_seconds() + 1)
    assert recomputes_catch_up(now=soon) == []  # failing on its data: no loop
    assert recomputes_catch_up(now=failed_at + dt.timedelta(minutes=6)) == [study.pk]


def test_a_costly_recompute_waits_longer_before_the_next(settings):
    """The next recompute starts no sooner than c · (1/share − 1) after the end of one that
    took c seconds (a running one: after its expected end), so a study's live analysis takes
    at most OVERSIGHT_RECOMPUTE_MAX_SHARE of a worker; an answer to a study quiet for longer
    than that waits the debounce only."""
    import time

    from django.core.cache import cache

    from annotations.core.services.recompute import cost_key, recompute_delay
    from annotations.core.tasks import study_recompute_task

    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 0.3
    settings.OVERSIGHT_RECOMPUTE_MAX_SHARE = 0.25
    study = make_study(k=3)
    cache.delete(cost_key(study.pk))
    assert recompute_delay(study.pk) == pytest.approx(0.3)  # nothing measured yet
    before = time.time()
    study_recompute_task.apply(args=(study.pk,))
    pace = cache.get(cost_key(study.pk))  # the task records its own duration and end
    assert pace["seconds"] > 0 and before <= pace["started"] <= pace["ended"] <= time.time()

    def after(seconds: float, ended_ago: float | None, started_ago: float = 0.0) -> float:
        now = time.time()
        cache.set(cost_key(study.pk), {
            "seconds": seconds, "started": now - started_ago,
            "ended": None if ended_ago is None else now - ended_ago})
        return recompute_delay(study.pk)

    assert after(2.0, ended_ago=0.0, started_ago=2.0) == pytest.approx(6.0, abs=0.05)
    assert after(2.0, ended_ago=4.0, started_ago=6.0) == pytest.approx(2.0, abs=0.05)
    assert after(2.0, ended_ago=10.0, started_ago=12.0) == pytest.approx(0.3)  # quiet
    # one running (started 0.5 s ago, the last took 2 s): after its expected end, + 6 s
    assert after(2.0, ended_ago=None, started_ago=0.5) == pytest.approx(7.5, abs=0.05)
    assert after(0.01, ended_ago=0.0) == pytest.approx(0.3)  # a cheap one: the debounce
    settings.OVERSIGHT_RECOMPUTE_MAX_SHARE = 1.0  # no cap
    assert after(2.0, ended_ago=0.0) == pytest.approx(0.3)


def test_a_lost_recompute_holds_back_the_next_only_for_its_delay_and_a_grace(settings,
                                                                            monkeypatch):
    """A recompute queued to a worker that then died never runs, so it never clears the
    study's debounce key: the key lives the recompute's delay and
    PENDING_GRACE_SECONDS, after which the next answer queues the recompute again (on a
    live worker) — not the key's full minute, not the next sweep. (The task is a stand-in
    that never runs: the lost one; tests/annotations/core/test_recompute_worker.py kills
    real workers.)"""
    import time

    from django.core.cache import cache

    from annotations.core.services.recompute import cost_key, pending_key, recompute_enqueue

    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 0.5
    monkeypatch.setattr(recompute_service, "PENDING_GRACE_SECONDS", 1)
    queued = []

    class Lost:
        def apply_async(self, *args, **kwargs):
            queued.append(kwargs.get("countdown"))

        def apply(self, *args, **kwargs):
            queued.append("in process")

    monkeypatch.setattr(recompute_service, "task", lambda name: Lost())
    study = make_study(k=3)
    cache.delete_many([pending_key(study.pk), cost_key(study.pk)])  # no pacing: the debounce
    assert recompute_enqueue(study.pk)
    assert not recompute_enqueue(study.pk)  # debounced while the first one is due
    time.sleep(1.2)
    assert not recompute_enqueue(study.pk)  # still within its delay and the grace (2 s)
    time.sleep(1.1)
    assert recompute_enqueue(study.pk)  # the lost one no longer holds the study back
    recompute_service.background_recomputes_join()
    assert len(queued) == 2
