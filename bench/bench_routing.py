"""Next query + answer through the REST API behind gunicorn, many specialists at once.

    .venv/bin/python bench/bench_routing.py --items 100000 --specialists 20 --seconds 20

Seeds a K-class study with ``--items`` items (real import and routing services) in a scratch
PostgreSQL database, starts gunicorn on it and runs ``--specialists`` client threads, each a
specialist with its own token looping "next query" → "answer" (``--think`` ms between the
two). Runs once with Celery eager (recompute inside the answer request) and once with a
real Celery worker on Redis (``--modes`` picks). Prints p50/p95/p99/max latency of both
calls, throughput, and the audit: every query handed out to exactly one specialist, every
answer stored exactly once.
Budget (issue 2): p95 of "next query" ≤ 50 ms with 100 000 items and 20 specialists, zero
double assignments.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import multiprocessing
import random
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import (  # noqa: E402
    PORT,
    api_call,
    percentile,
    scratch_database,
    start_server,
    stop_server,
)


def seed(args: argparse.Namespace) -> tuple[int, list[str]]:
    from rest_framework.authtoken.models import Token

    from annotations.models import User
    from annotations.services.imports import items_import
    from annotations.services.studies import membership_add, study_create, study_open

    t0 = time.perf_counter()
    classes = [f"C{i}" for i in range(args.k)]
    study = study_create(name="bench-routing", classes=classes, queries_per_item=1,
                         gold_rate=args.gold_rate)
    rng = random.Random(1)
    lines = [json.dumps({"id": f"i{i}", "text": f"item {i}", "stratum": f"s{i % 4}"})
             for i in range(args.items)]
    lines += [json.dumps({"id": f"g{i}", "text": f"gold {i}", "gold": rng.randrange(args.k),
                          "quality_check": True}) for i in range(args.gold_items)]
    items_import(study=study, source=io.StringIO("\n".join(lines)), name="bench.jsonl",
                 fmt="jsonl")
    t1 = time.perf_counter()
    routed = study_open(study=study)
    t2 = time.perf_counter()
    tokens = []
    for s in range(args.specialists):
        user = User.objects.create_user(username=f"spec{s}", password="x")
        membership_add(study=study, user=user, role="specialist", class_index=s % args.k)
        tokens.append(Token.objects.create(user=user).key)
    from django.db import connection

    with connection.cursor() as cur:  # steady state: autovacuum would do this in the background
        cur.execute("VACUUM ANALYZE")
    print(f"seeded {args.items:,} items + {args.gold_items} gold: import {t1 - t0:.1f} s, "
          f"routing {routed:,} queries {t2 - t1:.1f} s")
    return study.pk, tokens


@dataclass
class Specialist:
    """One simulated specialist, run in its own process (so that client-side GIL waits do
    not inflate the measured latencies): next query → think → answer, until ``stop_at``."""

    token: str
    study_id: int
    stop_at: float
    think: float  # seconds, mean
    warmup: int
    next_ms: list[float] = field(default_factory=list)
    answer_ms: list[float] = field(default_factory=list)
    received: list[str] = field(default_factory=list)  # public query ids
    answered: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def call(self, conn, path: str, body: dict | None = None) -> tuple[int, dict | None, float]:
        return api_call(conn, "POST", path, self.token, body or {})

    def run(self) -> Specialist:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        rng = random.Random(self.token)
        done = 0
        while time.monotonic() < self.stop_at:
            status, data, ms = self.call(conn, f"/api/studies/{self.study_id}/queries/next/")
            done += 1
            measured = done > self.warmup  # the first calls open connections, warm caches
            if measured:
                self.next_ms.append(ms)
            if status == 204:
                break
            if status != 200:
                self.errors.append(f"next {status}: {data}")
                break
            self.received.append(data["id"])
            if self.think:
                time.sleep(self.think * rng.uniform(0.5, 1.5))
            answer = rng.choice(["yes", "no", "no", "no", "unsure"])
            status, data, ms = self.call(conn, f"/api/queries/{self.received[-1]}/answer/",
                                         {"answer": answer})
            if measured:
                self.answer_ms.append(ms)
            if status not in (200, 201):
                self.errors.append(f"answer {status}: {data}")
                break
            self.answered.append(self.received[-1])
        return self


def _run_specialist(specialist: Specialist) -> Specialist:
    return specialist.run()


def run_mode(mode: str, url: str, study_id: int, tokens: list[str], args) -> None:
    from django.db import connection

    broker = args.broker if mode == "worker" else None
    procs = start_server(url, workers=args.workers, threads=args.threads, broker=broker)
    try:
        stop_at = time.monotonic() + args.seconds
        specialists = [Specialist(t, study_id, stop_at, args.think / 1000, args.warmup)
                       for t in tokens]
        with multiprocessing.get_context("fork").Pool(len(tokens)) as pool:
            clients = pool.map(_run_specialist, specialists)
    finally:
        stop_server(procs)
    next_ms = [m for c in clients for m in c.next_ms]
    answer_ms = [m for c in clients for m in c.answer_ms]
    holders: dict[int, set[int]] = defaultdict(set)
    for i, c in enumerate(clients):
        for q in c.received:
            holders[q].add(i)
    doubles = sum(1 for h in holders.values() if len(h) > 1)
    sent = [q for c in clients for q in c.answered]
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM annotations_query WHERE public_id = ANY(%s) "
                    "AND status = 'answered'", [sent])
        stored = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM annotations_queryevent e JOIN annotations_query q "
                    "ON q.id = e.query_id WHERE e.kind = 'answered' AND q.public_id = ANY(%s)",
                    [sent])
        events = cur.fetchone()[0]
    errors = [e for c in clients for e in c.errors]
    print(f"\n[{mode}] {len(tokens)} specialists, {args.seconds} s, think {args.think} ms, "
          f"gunicorn {args.workers}×{args.threads} gthread")
    for name, values in (("next query", next_ms), ("answer", answer_ms)):
        print(f"  {name:<10} n={len(values):>6}  p50 {statistics.median(values):6.1f} ms  "
              f"p95 {percentile(values, 95):6.1f} ms  p99 {percentile(values, 99):6.1f} ms  "
              f"max {max(values):6.1f} ms")
    print(f"  throughput {len(sent) / args.seconds:.0f} answers/s; "
          f"double assignments {doubles}; answers sent {len(sent)} (distinct "
          f"{len(set(sent))}), stored {stored}, audit rows {events}; errors {len(errors)}")
    for e in errors[:5]:
        print("   ", e)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--gold-items", type=int, default=200)
    parser.add_argument("--gold-rate", type=float, default=0.02)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--specialists", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--think", type=float, default=0, help="ms between next and answer")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per client")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--modes", default="eager,worker")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--db", default="oversight_bench_routing")
    args = parser.parse_args()
    with scratch_database(args.db) as url:
        study_id, tokens = seed(args)
        for mode in args.modes.split(","):
            run_mode(mode, url, study_id, tokens, args)


if __name__ == "__main__":
    main()
