"""With a real Redis, Celery worker and beat: answering survives Redis going down, and the
beat sweeper brings the dashboard up to date when Redis is back or when a worker died
holding the delayed recompute.

The machine's shared Redis is never stopped: each test starts its own throw-away
``redis-server`` on ``OWN_PORT`` (no persistence), a worker and a beat process pointed at
it, and points this process's cache and Celery app there too."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import EstimateSnapshot, Query, RecomputeState
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from oversight_site.settings.parallel import worker_index
from tests.conftest import ROOT, celery_env
from tests.factories import make_study, specialist

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

OWN_PORT = 6391 + worker_index()  # pytest-xdist: one per test process
OWN_URL = f"redis://127.0.0.1:{OWN_PORT}/0"
SWEEP_SECONDS = 2


def _redis_up() -> None:
    subprocess.run(["redis-server", "--port", str(OWN_PORT), "--save", "", "--appendonly", "no",
                    "--daemonize", "yes", "--pidfile", f"/tmp/oversight-test-redis-{OWN_PORT}.pid"],
                   check=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ping = subprocess.run(["redis-cli", "-p", str(OWN_PORT), "ping"], capture_output=True,
                              text=True)
        if ping.stdout.strip() == "PONG":
            return
        time.sleep(0.1)
    raise RuntimeError(f"redis-server on port {OWN_PORT} did not start")


def _redis_down() -> None:
    subprocess.run(["redis-cli", "-p", str(OWN_PORT), "shutdown", "nosave"],
                   capture_output=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ping = subprocess.run(["redis-cli", "-p", str(OWN_PORT), "ping"], capture_output=True,
                              text=True)
        if ping.stdout.strip() != "PONG":
            return
        time.sleep(0.1)
    raise RuntimeError(f"redis-server on port {OWN_PORT} did not stop")


def _celery(*args: str, name: str) -> subprocess.Popen:
    env = celery_env(CELERY_BROKER_URL=OWN_URL, REDIS_URL=OWN_URL,
                     OVERSIGHT_CATCH_UP_SECONDS=str(SWEEP_SECONDS))
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "oversight_site", *args],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(f"/tmp/oversight-test-{name}.log", "w"))  # noqa: SIM115


def _worker(name: str) -> subprocess.Popen:
    return _celery("worker", "-Q", "default,estimates", "--pool", "solo", "--loglevel",
                   "WARNING", "-n", f"{name}-{os.getpid()}@%h", name=name)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for_worker(app, name_part: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5) or []
        if any(name_part in name for reply in replies for name in reply):
            return
    raise RuntimeError("the worker did not answer a ping")


def _point_app(app, url: str) -> None:
    """Send this process's tasks and control messages to ``url``: drop the connection
    pools (and the control mailbox's producer pool) made for the previous broker. (Celery
    reads CELERY_BROKER_URL from the environment before its configuration.)"""
    from kombu import pools

    os.environ["CELERY_BROKER_URL"] = url
    app.conf.broker_url = url
    pools.reset()  # kombu keeps one pool per URL across apps: its connections died with Redis
    app._after_fork()
    app.__dict__.pop("control", None)


@pytest.fixture
def own_pipeline(settings, tmp_path):
    """Throw-away Redis + beat, this process's cache and Celery app pointed at them; the
    test starts (and may kill) its workers with ``start_worker``."""
    yield from _pipeline(settings, tmp_path, beat=True)


@pytest.fixture
def own_pipeline_without_beat(settings, tmp_path):
    """:func:`own_pipeline` with no beat: nothing sweeps but what the workers do."""
    yield from _pipeline(settings, tmp_path, beat=False)


def _pipeline(settings, tmp_path, *, beat: bool):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    from oversight_site.celery import app

    _redis_up()
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 0.3
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": OWN_URL}}
    old_url = os.environ["CELERY_BROKER_URL"]
    _point_app(app, OWN_URL)
    processes: dict[str, subprocess.Popen] = {}

    def start_beat() -> subprocess.Popen:
        return _celery("beat", "--schedule", str(tmp_path / "beat-schedule"), "--loglevel",
                       "WARNING", name="beat")

    def start_worker(name: str) -> subprocess.Popen:
        processes[name] = _worker(name)
        _wait_for_worker(app, name)
        return processes[name]

    def supervise() -> None:
        """What docker-compose's ``restart: unless-stopped`` does: start again whatever
        exited (a worker no longer exits when its Redis goes away: oversight_site/worker.py,
        tests/security/test_worker_recovery.py)."""
        for name, proc in list(processes.items()):
            if proc.poll() is not None and proc.returncode != -signal.SIGKILL:
                processes[name] = start_beat() if name == "beat" else _worker(name)

    if beat:
        processes["beat"] = start_beat()
    try:
        yield app, start_worker, supervise
    finally:
        for proc in processes.values():
            _stop(proc)
        _redis_down()
        _point_app(app, old_url)


def _wait_for_snapshot(study, n_answered: int, timeout: float, supervise=None) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if EstimateSnapshot.objects.filter(study=study, n_answered=n_answered).exists():
            return time.monotonic() - started
        if supervise is not None:
            supervise()
        time.sleep(0.1)
    raise AssertionError(f"no snapshot with {n_answered} answers within {timeout} s")


def test_answering_survives_redis_down_and_the_dashboard_catches_up(own_pipeline):
    app, start_worker, supervise = own_pipeline
    start_worker("s4-worker")
    study = make_study(k=3, n_items=30, systems={"m": 0.7}, seed=501)
    first = specialist(study, 0)
    q = query_lease_next(study=study, user=first)
    label_submit(query_id=q.pk, user=first, answer="no")
    _wait_for_snapshot(study, 1, timeout=15)
    _redis_down()
    api_user, page_user = specialist(study, 1), specialist(study, 2)
    api, page = Client(), Client()
    api.force_login(api_user)
    page.force_login(page_user)
    q1 = query_lease_next(study=study, user=api_user)
    q2 = query_lease_next(study=study, user=page_user)
    by_api = api.post(reverse("api-answer", args=[q1.public_id]), {"answer": "no"},
                      content_type="application/json")
    by_htmx = page.post(reverse("label-answer", args=[study.pk, q2.public_id]), {"answer": "yes"},
                        HTTP_HX_REQUEST="true")
    assert (by_api.status_code, by_htmx.status_code) == (201, 200)
    assert Query.objects.filter(study=study, status="answered").count() == 3
    assert RecomputeState.objects.get(study=study).dirty_since is not None
    time.sleep(2)
    assert not EstimateSnapshot.objects.filter(study=study, n_answered=3).exists()
    _redis_up()  # back, empty: no task was queued while it was down
    elapsed = _wait_for_snapshot(study, 3, timeout=60, supervise=supervise)
    print(f"caught up {elapsed:.1f} s after Redis came back")
    # the task stores the snapshot, then marks the study caught up (its own commit, a
    # moment later): the health turns clean and stays so
    deadline = time.monotonic() + 10
    state = RecomputeState.objects.get(study=study)
    while state.dirty_since is not None and time.monotonic() < deadline:
        time.sleep(0.05)
        state = RecomputeState.objects.get(study=study)
    assert (state.dirty_since, state.failed_at) == (None, None)


def _wait_until_a_worker_holds_the_recompute(seconds: float = 3.0) -> None:
    """Until the delayed recompute sits unacknowledged in a worker (beside it, a beat task
    the worker is running may be unacknowledged for a moment)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        unacked = subprocess.run(["redis-cli", "-p", str(OWN_PORT), "hvals", "unacked"],
                                 capture_output=True, text=True).stdout
        if "study_recompute_task" in unacked:
            return
        time.sleep(0.05)
    raise AssertionError(f"no worker held the delayed recompute within {seconds} s")


def test_a_worker_killed_in_the_debounce_window_does_not_leave_the_dashboard_stale(
        own_pipeline, settings):
    """The delayed task sits unacknowledged in the dead worker: Redis would hand it to
    another worker only after the visibility timeout (an hour). The sweeper does not wait."""
    app, start_worker, _ = own_pipeline
    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 4.0
    doomed = start_worker("s4-doomed")
    study = make_study(k=3, n_items=30, systems={"m": 0.7}, seed=502)
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    label_submit(query_id=q.pk, user=user, answer="no")
    _wait_until_a_worker_holds_the_recompute()
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    started = time.monotonic()
    start_worker("s4-rescuer")
    elapsed = _wait_for_snapshot(study, 1, timeout=45) + (time.monotonic() - started)
    print(f"dashboard current {elapsed:.1f} s after the worker was killed")
    assert elapsed < 60  # never "stale" (a minute), let alone the visibility timeout


def test_a_worker_that_starts_catches_up_what_a_dead_one_held(own_pipeline_without_beat,
                                                              settings):
    """No beat: the worker that starts queues the catch-up sweeper itself (``worker_ready``,
    oversight_site/celery.py), so the recompute a killed worker held runs once its
    replacement is up — not at the next beat (15 s in production)."""
    app, start_worker, _ = own_pipeline_without_beat
    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 4.0  # the task waits in the doomed worker
    doomed = start_worker("s5-doomed")
    study = make_study(k=3, n_items=30, systems={"m": 0.7}, seed=503)
    user = specialist(study, 0)
    label_submit(query_id=query_lease_next(study=study, user=user).pk, user=user, answer="no")
    _wait_until_a_worker_holds_the_recompute()
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    # past the grace of the workers' sweeper (5 s: catch_up_grace_seconds at their default
    # debounce, not this process's), as a restart takes
    time.sleep(5.5)
    assert not EstimateSnapshot.objects.filter(study=study).exists()
    start_worker("s5-rescuer")
    elapsed = _wait_for_snapshot(study, 1, timeout=20)
    print(f"dashboard current {elapsed:.1f} s after the new worker answered a ping")
    assert EstimateSnapshot.objects.filter(study=study, n_answered=1).exists()

