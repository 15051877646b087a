"""Factories as fixtures, and the real Celery worker for the second CI pass."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.assistants.standin import StandinServer

ROOT = Path(__file__).resolve().parent.parent
ON_POSTGRES = os.environ.get("DATABASE_URL", "").startswith("postgres")
WITH_BROKER = bool(os.environ.get("CELERY_BROKER_URL"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "postgres" in item.keywords and not ON_POSTGRES:
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: runs in CI's second pass"))
        if "worker" in item.keywords and not WITH_BROKER:
            item.add_marker(pytest.mark.skip(reason="needs Redis + a Celery worker: CI's second pass"))


@pytest.fixture
def make_study(db):
    from tests.factories import make_study as factory

    return factory


@pytest.fixture
def study(db):
    from tests.factories import make_study

    return make_study()


@pytest.fixture
def standin():
    """``standin(script)`` or ``standin(responder=fn)`` → a started StandinServer, closed
    after the test."""
    servers: list[StandinServer] = []

    def start(script=None, *, responder=None) -> StandinServer:
        server = StandinServer(list(script or []), responder=responder).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def celery_env(**extra: str) -> dict[str, str]:
    """The environment of a Celery process the tests start: the test database (PostgreSQL
    pass), the test settings, and ``extra`` (a broker URL of its own, sweep intervals …)."""
    db = settings.DATABASES["default"]
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "oversight_site.settings.test",
            "DATABASE_URL": (f"postgres://{db['USER'] or 'postgres'}@{db['HOST']}:{db['PORT']}/"
                             f"{db['NAME']}"), **extra}


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real ``celery worker`` process on the test database (PostgreSQL + Redis pass)."""
    if not WITH_BROKER:
        pytest.skip("needs CELERY_BROKER_URL")
    env = celery_env()
    name = f"test-{os.getpid()}@{socket.gethostname()}"  # what %h would expand to
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "oversight_site", "worker", "-Q",
         "default,estimates,audits", "-c", "2", "--loglevel", "WARNING", "-n", name],
        cwd=ROOT, env=env,
    )
    from oversight_site.celery import app

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if app.control.ping(timeout=0.5):
            break
        if proc.poll() is not None:
            raise RuntimeError("the Celery worker exited at start")
    else:
        proc.terminate()
        raise RuntimeError("the Celery worker did not answer a ping within 30 s")
    _WORKERS.append(name)
    yield proc
    _WORKERS.clear()
    proc.terminate()
    proc.wait(timeout=20)


_WORKERS: list[str] = []  # the name of this process's real worker, once it runs


@pytest.fixture(autouse=True)
def _worker_idle_before_flush(request):
    """After a test on a real database (``transaction=True`` or a live server), wait
    (≤ 30 s) until nothing else is writing to it before its flush truncates every table:
    this process's real worker has finished the tasks the test set off — running, reserved,
    and scheduled (a paced recompute waits in the worker with a countdown, then runs) — and,
    on PostgreSQL, no other session of the test database is inside a transaction (a live
    server's request a closed page left running). A writer holding row locks while the
    flush takes its table locks deadlocks it, and a failed flush leaves the test class's
    database guards in place for every later test of the process."""
    yield
    marker = request.node.get_closest_marker("django_db")
    if not ("transactional_db" in request.fixturenames
            or "live_server" in request.fixturenames
            or (marker and marker.kwargs.get("transaction"))):
        return
    deadline = time.monotonic() + 30
    if _WORKERS:
        from oversight_site.celery import app

        while time.monotonic() < deadline:
            busy = app.control.inspect(destination=_WORKERS, timeout=0.5)
            queues = (busy.active() or {}, busy.reserved() or {}, busy.scheduled() or {})
            if not any(any(q.values()) for q in queues):
                break
            time.sleep(0.2)
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND pid <> pg_backend_pid() AND "
                           "backend_type = 'client backend' AND xact_start IS NOT NULL")
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)


def chromium_path() -> str | None:
    return shutil.which("chromium") or (
        "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None
    )
