"""Whatever runs the periodic work comes back on its own (issue 15): the worker container's
health check stops a worker that went deaf (the restart policy starts a new one), and the
embedded mode's sweeper loop — the beat schedule in a thread of the web process — restarts
after a sweep fails, after the loop dies and after its thread ended.
The broker outage itself: test_worker_recovery.py."""

from __future__ import annotations

import datetime as dt
import signal
import threading
import time

import pytest
from django.test import Client
from django.utils import timezone

from annotations.core.services.recompute import recompute_requested
from annotations.models import EstimateSnapshot, Query, RecomputeState
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from oversight_site import sweepers
from oversight_site.sweepers import Sweep, SweeperLoop, beat_sweeps
from oversight_site.worker import health_check, main
from tests.factories import make_study, specialist


# --- the worker container's health check ------------------------------------------------------
def _checks(tmp_path, answers, broker=None, kill_after=3, boots=None):
    """Run one health check per entry of ``answers`` (the worker's pong or not); returns the
    checks' results and the signals sent to the worker."""
    sent: list[int] = []
    results = []
    for i, pong in enumerate(answers):
        results.append(health_check(
            ping=lambda pong=pong: pong,
            broker_up=lambda i=i: True if broker is None else broker[i],
            kill_after=kill_after, kill=sent.append, state_file=tmp_path / "health.json",
            boot="b" if boots is None else boots[i]))
    return results, sent


def test_a_worker_that_went_deaf_with_the_broker_up_is_stopped(tmp_path):
    results, sent = _checks(tmp_path, [True, False, False, False, False, False])
    assert results == [True, False, False, False, False, False]
    assert sent == [signal.SIGTERM, signal.SIGQUIT]  # 3rd miss: warm; 5th: cold


def test_a_pong_resets_the_count(tmp_path):
    _, sent = _checks(tmp_path, [True, False, False, True, False, False, True])
    assert sent == []


def test_misses_while_the_broker_is_down_do_not_count(tmp_path):
    # no worker can answer without a broker, and a new one would not either
    _, sent = _checks(tmp_path, [True] + [False] * 8,
                      broker=[True] + [False] * 6 + [True, True])
    assert sent == []


def test_a_worker_that_never_answered_is_left_to_start(tmp_path):
    _, sent = _checks(tmp_path, [False] * 6)
    assert sent == []


def test_a_new_worker_process_starts_with_a_clean_count(tmp_path):
    _, sent = _checks(tmp_path, [True, False, False, False, False],
                      boots=["old", "old", "old", "new", "new"])
    assert sent == []


def test_kill_after_zero_never_stops_the_worker(tmp_path):
    _, sent = _checks(tmp_path, [True] + [False] * 6, kill_after=0)
    assert sent == []


def test_the_health_check_command_needs_its_verb(capsys):
    assert main(["worker.py"]) == 2
    assert "usage" in capsys.readouterr().err


# --- the embedded mode's sweepers -------------------------------------------------------------
def _counting(name: str, every: float, fail_first: type[BaseException] | None = None):
    calls: list[float] = []

    def run():
        calls.append(time.monotonic())
        if fail_first is not None and len(calls) == 1:
            raise fail_first("first run fails")

    return Sweep(name, run, every), calls


def _wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.01)


@pytest.fixture
def loops():
    started: list[SweeperLoop] = []
    yield started
    for loop in started:
        loop.stop()


def test_a_failing_sweep_does_not_stop_the_others(caplog):
    broken, broken_calls = _counting("broken", 60, fail_first=RuntimeError)
    fine, fine_calls = _counting("fine", 60)
    loop = SweeperLoop([broken, fine])
    assert loop.run_due() > 59
    assert (len(broken_calls), len(fine_calls)) == (1, 1)
    assert "embedded sweeper broken failed" in caplog.text


def test_the_sweeper_loop_comes_back_after_it_died(loops, monkeypatch):
    sweep, calls = _counting("reclaim", 0.02)
    loop = SweeperLoop([sweep], restart_pause=0.05)
    loops.append(loop)
    original = loop.run_due
    died = threading.Event()

    def dies_once():
        if not died.is_set():
            died.set()
            raise RuntimeError("the loop itself fails")
        return original()

    monkeypatch.setattr(loop, "run_due", dies_once)
    loop.ensure_running()
    _wait_for(lambda: len(calls) >= 3)
    assert (loop.restarts, loop.starts, loop.alive()) == (1, 1, True)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_sweeper_thread_that_ended_is_started_again_by_the_next_request(
        db, loops, settings, monkeypatch):
    sweep, calls = _counting("reclaim", 0.02, fail_first=SystemExit)  # ends the thread
    settings.OVERSIGHT_EMBEDDED_SWEEPERS = True
    monkeypatch.setattr(sweepers, "beat_sweeps", lambda: [sweep])
    monkeypatch.setattr(sweepers, "_loop", None)
    loop = sweepers.embedded_sweepers_start()
    loops.append(loop)
    _wait_for(lambda: not loop.alive())
    assert len(calls) == 1
    Client().get("/healthz")  # any request
    _wait_for(lambda: len(calls) >= 3)
    assert (loop.starts, loop.alive()) == (2, True)


def test_the_embedded_sweepers_are_off_with_a_broker(settings, monkeypatch):
    settings.OVERSIGHT_EMBEDDED_SWEEPERS = False
    monkeypatch.setattr(sweepers, "_loop", None)
    assert sweepers.embedded_sweepers_start() is None


def test_the_embedded_sweepers_run_the_beat_schedule(db, settings):
    # given the embedded mode, an expired lease and a study left behind its answers
    settings.CELERY_TASK_ALWAYS_EAGER = True
    assert {s.name: s.every for s in beat_sweeps()} == {
        name: entry["schedule"].run_every.total_seconds()
        for name, entry in settings.CELERY_BEAT_SCHEDULE.items()}
    study = make_study(k=3, n_items=10, seed=1515)
    user = specialist(study, 0)
    answered = query_lease_next(study=study, user=user)
    label_submit(query_id=answered.pk, user=user, answer="no")
    held = query_lease_next(study=study, user=user)
    Query.objects.filter(pk=held.pk).update(lease_expires_at=timezone.now() - dt.timedelta(1))
    EstimateSnapshot.objects.filter(study=study).delete()
    recompute_requested(study_id=study.pk)
    RecomputeState.objects.filter(study=study).update(
        dirty_since=timezone.now() - dt.timedelta(minutes=5))
    # when the loop runs its due sweeps once
    SweeperLoop(beat_sweeps()).run_due()
    # then the lease is back in its pool and the study is up to date
    assert Query.objects.get(pk=held.pk).status == "pending"
    state = RecomputeState.objects.get(study=study)
    assert (state.dirty_since, state.failed_at) == (None, None)
    assert EstimateSnapshot.objects.filter(study=study, n_answered=1).exists()
