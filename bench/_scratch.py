"""A scratch PostgreSQL database for a benchmark: created fresh, migrated, dropped after."""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = ["-h", "127.0.0.1", "-U", "postgres"]


def database_url(name: str) -> str:
    return os.environ.get("BENCH_DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{name}")


@contextlib.contextmanager
def scratch_database(name: str, *, keep: bool = False) -> Iterator[str]:
    """Create ``name`` (dropping a leftover), point Django at it, migrate; yield its URL."""
    url = database_url(name)
    dbname = url.rsplit("/", 1)[1]
    subprocess.run(["dropdb", *PG, "--if-exists", dbname], check=True)
    subprocess.run(["createdb", *PG, dbname], check=True)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oversight_site.settings.local")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    try:
        yield url
    finally:
        connections.close_all()
        if not keep:
            subprocess.run(["dropdb", *PG, "--if-exists", "--force", dbname], check=True)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


PORT = int(os.environ.get("BENCH_PORT", "8765"))  # checkouts side by side: pick another


def start_server(url: str, *, workers: int = 3, threads: int = 4,
                 broker: str | None = None) -> list[subprocess.Popen]:
    """gunicorn (gthread) on ``url``'s database at 127.0.0.1:PORT, plus a real Celery worker
    when ``broker`` is given (else tasks run in-process, the embedded default). The caller
    terminates the returned processes."""
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="oversight_site.settings.local",
               DJANGO_DEBUG="0", LOG_LEVEL="WARNING", OVERSIGHT_RECOMPUTE_DEBOUNCE="0.3")
    # The clients are programs answering at once, not people reading: no minimum time on
    # screen unless the caller sets one.
    env.setdefault("OVERSIGHT_MIN_ANSWER_MS", "0")
    env.pop("CELERY_BROKER_URL", None)
    env.pop("REDIS_URL", None)
    procs = []
    if broker:
        env["CELERY_BROKER_URL"] = broker
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "oversight_site", "worker", "-Q",
             "default,estimates", "-c", "1", "--loglevel", "WARNING", "-n", "bench@%h"],
            cwd=ROOT, env=env))
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "oversight_site.wsgi", "-b", f"127.0.0.1:{PORT}",
         "-k", "gthread", "-w", str(workers), "--threads", str(threads),
         "--log-level", "warning"], cwd=ROOT, env=env))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status in (200, 503):
                return procs
        except OSError:
            time.sleep(0.2)
    stop_server(procs)
    raise SystemExit("gunicorn did not come up")


def stop_server(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=30)


def api_call(conn: http.client.HTTPConnection, method: str, path: str, token: str,
             body: dict | None = None) -> tuple[int, dict | None, float]:
    """One token-authenticated JSON request: (status, parsed body, elapsed ms)."""
    import json

    t0 = time.perf_counter()
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Authorization": f"Token {token}", "Content-Type": "application/json"})
    response = conn.getresponse()
    raw = response.read()
    elapsed = (time.perf_counter() - t0) * 1000
    return response.status, (json.loads(raw) if raw else None), elapsed
