"""A scratch PostgreSQL database for a benchmark: created fresh, migrated, dropped after."""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

ROOT = Path(__file__).resolve().parent.parent
PG = ["-h", "127.0.0.1", "-U", "postgres"]


def database_url(name: str) -> str:
    return os.environ.get("BENCH_DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{name}")


@contextlib.contextmanager
def scratch_database(name: str, *, keep: bool = False, reuse: bool = False) -> Iterator[str]:
    """Create ``name`` (dropping a leftover), point Django at it, migrate; yield its URL.
    ``keep``: leave it afterwards; ``reuse``: a leftover is kept as it is (migrated)."""
    url = database_url(name)
    dbname = url.rsplit("/", 1)[1]
    exists = subprocess.run(["psql", *PG, "-d", dbname, "-c", "SELECT 1"],
                            capture_output=True).returncode == 0
    if not (reuse and exists):
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


def load_arguments(parser, *, think: float, modes: str, broker: str) -> None:
    """The options every load benchmark takes: how long (``--seconds``), the think time
    between taking a task and answering it (``--think``, ms), untimed calls per client
    (``--warmup``), gunicorn's ``--workers`` × ``--threads``, the deployments to measure
    (``--modes``) and the Redis ``--broker`` of the worker modes."""
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--think", type=float, default=think,
                        help="ms between taking a task and answering it (0: back to back)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per client")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--modes", default=modes)
    parser.add_argument("--broker", default=broker)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# As docker-compose.yml starts the worker: background work yields the CPU to requests.
WORKER_NICENESS = int(os.environ.get("BENCH_WORKER_NICENESS", "10"))
PORT = int(os.environ.get("BENCH_PORT", "8765"))  # checkouts side by side: pick another


def start_server(url: str, *, workers: int = 3, threads: int = 4,
                 broker: str | None = None, worker: bool = True) -> list[subprocess.Popen]:
    """gunicorn (gthread) on ``url``'s database at 127.0.0.1:PORT, plus a real Celery worker
    when ``broker`` is given (else tasks run in-process, the embedded default; ``worker``
    False: tasks are queued on the broker and nobody runs them — the request path alone).
    The caller terminates the returned processes."""
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
    if broker and worker:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "oversight_site", "worker", "-Q",
             "default,estimates", "-c", "1", "--loglevel", "WARNING", "-n", "bench@%h"],
            cwd=ROOT, env=env, preexec_fn=lambda: os.nice(WORKER_NICENESS)))
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "oversight_site.wsgi", "-b", f"127.0.0.1:{PORT}",
         "-k", "gthread", "-w", str(workers), "--threads", str(threads),
         "--log-level", "warning"], cwd=ROOT, env=env))
    deadline = time.monotonic() + 90  # a loaded machine boots slowly
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


def clients_run(url: str, make_clients, run, *, workers: int, threads: int,
                broker: str | None, worker: bool = True) -> list:
    """Serve ``url``'s database (``start_server``), then make the clients
    (``make_clients()``, called once the server is up, so their time limit counts from
    there), run each in its own forked process (``run(client)`` returns the finished client
    with its timings), stop the server, and return the finished clients."""
    import multiprocessing

    procs = start_server(url, workers=workers, threads=threads, broker=broker, worker=worker)
    try:
        clients = make_clients()
        with multiprocessing.get_context("fork").Pool(len(clients)) as pool:
            return pool.map(run, clients)
    finally:
        stop_server(procs)


@dataclass
class LoopClient:
    """One simulated worker, run in its own process (so client-side GIL waits do not
    inflate the measured latencies): next task → think → answer, until ``stop_at``. A
    bench subclasses it with its paths and answer body; ``on_empty`` None stops at the
    first 204 (nothing left), a number waits that many seconds and asks again."""

    token: str
    study_id: int
    stop_at: float
    think: float  # seconds, mean (each wait drawn from 0.5–1.5 × think)
    warmup: int  # untimed first calls (they open connections and warm caches)
    next_ms: list[float] = field(default_factory=list)
    answer_ms: list[float] = field(default_factory=list)
    received: list[str] = field(default_factory=list)  # public task ids
    answered: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    on_empty: ClassVar[float | None] = None
    answered_status: ClassVar[tuple[int, ...]] = (200, 201)

    def next_path(self) -> str:
        raise NotImplementedError

    def answer_path(self, task_id: str) -> str:
        raise NotImplementedError

    def answer_body(self, task: dict, rng: random.Random) -> dict:
        raise NotImplementedError

    def seen(self, task: dict) -> None:
        """Hook: note something about a received task."""

    def run(self) -> LoopClient:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        rng = random.Random(self.token)
        done = 0
        while time.monotonic() < self.stop_at:
            status, task, ms = api_call(conn, "POST", self.next_path(), self.token, {})
            done += 1
            measured = done > self.warmup
            if measured:
                self.next_ms.append(ms)
            if status == 204 and self.on_empty is not None:
                time.sleep(self.on_empty)
                continue
            if status == 204:
                break
            if status != 200:
                self.errors.append(f"next {status}: {task}")
                break
            self.received.append(task["id"])
            self.seen(task)
            if self.think:
                time.sleep(self.think * rng.uniform(0.5, 1.5))
            status, data, ms = api_call(conn, "POST", self.answer_path(task["id"]), self.token,
                                        self.answer_body(task, rng))
            if measured:
                self.answer_ms.append(ms)
            if status not in self.answered_status:
                self.errors.append(f"answer {status}: {data}")
                break
            self.answered.append(task["id"])
        return self


def loop_client_run(client: LoopClient) -> LoopClient:
    """``client.run()`` (a module-level function: what the process pool pickles)."""
    return client.run()


@dataclass
class Gathered:
    """The finished clients' timings and audit inputs, pooled."""

    next_ms: list[float]
    answer_ms: list[float]
    sent: list[str]  # task ids answered
    doubles: int  # task ids more than one client received
    errors: list[str]

    def latencies_print(self, names: tuple[str, str], width: int = 10) -> None:
        for name, values in zip(names, (self.next_ms, self.answer_ms), strict=True):
            latency_print(name, values, width=width)

    def errors_print(self) -> None:
        for e in self.errors[:5]:
            print("   ", e)


def clients_gather(clients: list[LoopClient]) -> Gathered:
    return Gathered(next_ms=[m for c in clients for m in c.next_ms],
                    answer_ms=[m for c in clients for m in c.answer_ms],
                    sent=[t for c in clients for t in c.answered],
                    doubles=double_assignments(clients),
                    errors=[e for c in clients for e in c.errors])


def double_assignments(clients: list) -> int:
    """Task ids that more than one client received (each client lists its ``received``)."""
    holders: dict = {}
    for i, c in enumerate(clients):
        for task in c.received:
            holders.setdefault(task, set()).add(i)
    return sum(1 for h in holders.values() if len(h) > 1)


def latency_print(name: str, values: list[float], width: int = 10) -> None:
    """One line: n, p50, p95, p99 and max of ``values`` (ms), or 'no calls'."""
    import statistics

    if not values:
        print(f"  {name}: no calls")
        return
    print(f"  {name:<{width}} n={len(values):>6}  p50 {statistics.median(values):6.1f} ms  "
          f"p95 {percentile(values, 95):6.1f} ms  p99 {percentile(values, 99):6.1f} ms  "
          f"max {max(values):6.1f} ms")
