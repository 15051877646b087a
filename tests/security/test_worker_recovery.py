"""A broker outage never kills a worker (issue 15): with Redis stopped while the worker
holds tasks waiting for their countdown, the worker reconnects when Redis is back, and a
study answered during the outage is fresh again within a minute — nobody touches the
worker. Celery 5.7.0's worker used to end with "Unrecoverable error: AttributeError(
'NoneType' object has no attribute 'hostname')" right after "Restoring 2 unacknowledged
message(s)" (oversight_site/worker.py; docs/operations.md, "Worker supervision").

The machine's Redis is never touched: the test starts its own ``redis-server`` on a free
loopback port (no persistence), and a worker and a beat process pointed at it and at the
test database. A hard alarm bounds the whole test; its processes are stopped in any case."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.test import Client

from annotations.models import EstimateSnapshot, Query, RecomputeState
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.conftest import ROOT, celery_env
from tests.factories import make_study, specialist

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

HARD_TIMEOUT_SECONDS = 240
SWEEP_SECONDS = 2  # beat's catch-up sweeper (production: 15 s)
HELD_COUNTDOWN_SECONDS = 600  # the held tasks must not run during the test


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(proc: subprocess.Popen | None, timeout: float = 20) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class OwnRedis:
    """A throw-away redis-server on 127.0.0.1:``port`` that the test stops and starts."""

    def __init__(self, port: int, log: Path) -> None:
        self.port, self.log, self.proc = port, log, None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def up(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no"],
            stdout=self.log.open("a"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not self._ping():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def down(self) -> None:
        _stop(self.proc)
        assert not self._ping()


def _point_app(app, url: str) -> None:
    """Send this process's tasks and control messages to ``url`` (Celery reads
    CELERY_BROKER_URL from the environment before its configuration)."""
    from kombu import pools

    os.environ["CELERY_BROKER_URL"] = url
    app.conf.broker_url = url
    pools.reset()
    app._after_fork()
    app.__dict__.pop("control", None)


def _celery(args: list[str], url: str, log: Path) -> subprocess.Popen:
    env = celery_env(CELERY_BROKER_URL=url, REDIS_URL=url,
                     OVERSIGHT_CATCH_UP_SECONDS=str(SWEEP_SECONDS))
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "oversight_site", *args],
                            cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture
def hard_timeout():
    def expired(signum, frame):
        raise TimeoutError(f"the test ran past its {HARD_TIMEOUT_SECONDS} s limit")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(HARD_TIMEOUT_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def outage_pipeline(settings, tmp_path, hard_timeout):
    """Own Redis, a worker (prefork, as in docker-compose) and beat; this process's cache
    and Celery app pointed at that Redis."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    from oversight_site.celery import app

    redis = OwnRedis(_free_port(), tmp_path / "redis.log")
    old_url = os.environ.get("CELERY_BROKER_URL", "")
    worker = beat = None
    try:
        redis.up()
        settings.CELERY_TASK_ALWAYS_EAGER = False
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                       "LOCATION": redis.url}}
        _point_app(app, redis.url)
        node = f"outage-{os.getpid()}@127.0.0.1"
        worker = _celery(["worker", "-Q", "default,estimates", "-c", "2", "--loglevel", "INFO",
                          "-n", node], redis.url, tmp_path / "worker.log")
        beat = _celery(["beat", "--schedule", str(tmp_path / "beat-schedule"), "--loglevel",
                        "INFO"], redis.url, tmp_path / "beat.log")
        deadline = time.monotonic() + 60
        while not app.control.ping(destination=[node], timeout=0.5):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker did not start:\n" + _tail(tmp_path / "worker.log"))
        yield app, redis, worker, node, tmp_path / "worker.log"
    finally:
        _stop(beat)
        _stop(worker)
        _stop(redis.proc)
        _point_app(app, old_url)


def _health_check(node: str, pid: int, url: str, tmp_path: Path) -> tuple[int, str]:
    """``python -m oversight_site.worker health`` (docker-compose's check) for ``node``."""
    env = {**os.environ, "CELERY_BROKER_URL": url, "OVERSIGHT_WORKER_NODE": node,
           "OVERSIGHT_WORKER_PID": str(pid), "DJANGO_SETTINGS_MODULE": "oversight_site.settings.test",
           "OVERSIGHT_WORKER_HEALTH_STATE": str(tmp_path / "health.json")}
    done = subprocess.run([sys.executable, "-m", "oversight_site.worker", "health"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout.strip()


def _fresh(study, n_answered: int) -> bool:
    state = RecomputeState.objects.filter(study=study).first()
    return (state is not None and (state.dirty_since, state.failed_at) == (None, None)
            and EstimateSnapshot.objects.filter(study=study, n_answered=n_answered).exists())


def _wait(condition, timeout: float, what: str, worker=None, log=None) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            exited = "" if worker is None or worker.poll() is None else (
                f"; the worker exited with {worker.returncode}")
            raise AssertionError(f"{what} not within {timeout} s{exited}\n"
                                 + (_tail(log) if log else ""))
        time.sleep(0.2)
    return time.monotonic() - started


def _answer(study, user) -> None:
    query = query_lease_next(study=study, user=user)
    label_submit(query_id=query.pk, user=user, answer="no")


def _unacked(redis: OwnRedis) -> int:
    out = subprocess.run(["redis-cli", "-p", str(redis.port), "hlen", "unacked"],
                         capture_output=True, text=True, timeout=5).stdout.strip()
    return int(out or 0)


def test_a_worker_holding_waiting_tasks_survives_redis_going_away(outage_pipeline, settings):
    app, redis, worker, node, log = outage_pipeline
    # given two studies, each with an answer whose debounced recompute waits in the worker
    # (a countdown, as a retry's does: an ETA message the worker holds unacknowledged)
    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = HELD_COUNTDOWN_SECONDS
    studies = [make_study(k=3, n_items=20, systems={"m": 0.7}, seed=1500 + i) for i in range(2)]
    for study in studies:
        _answer(study, specialist(study, 0))
    _wait(lambda: _unacked(redis) == 2, 15, "two held messages", worker, log)
    # the sweeper brings the dashboards up to date meanwhile; the held tasks stay held
    for study in studies:
        _wait(lambda s=study: _fresh(s, 1), 30, "a first snapshot", worker, log)
    assert _unacked(redis) == 2

    # when Redis goes away, an answer arrives during the outage, and Redis comes back
    redis.down()
    _answer(studies[0], specialist(studies[0], 1))
    assert Query.objects.filter(study=studies[0], status="answered").count() == 2
    time.sleep(5)
    redis.up()

    # then the same worker process brings the study up to date within a minute
    elapsed = _wait(lambda: _fresh(studies[0], 2), 60, "a fresh snapshot after the outage",
                    worker, log)
    print(f"study fresh {elapsed:.1f} s after Redis came back")
    assert worker.poll() is None, _tail(log)
    assert "Unrecoverable error" not in log.read_text()
    # /healthz counts it again once its control mailbox is back on the new connection
    client = Client()
    _wait(lambda: client.get("/healthz").json()["workers"]["count"] == 1, 20,
          "/healthz counting the worker", worker, log)
    assert client.get("/healthz").json()["recompute"] == {
        "ok": True, "stale_studies": 0, "failed_studies": 0}
    # and the container's health check gets its pong (another node's: none, nothing stopped)
    assert _health_check(node, worker.pid, redis.url, log.parent) == (0, f"{node}: pong")
    assert _health_check("celery@elsewhere", worker.pid, redis.url, log.parent) == (
        1, "celery@elsewhere: no answer")
    assert worker.poll() is None
