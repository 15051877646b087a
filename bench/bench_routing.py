"""Next query + answer through the REST API behind gunicorn, many specialists at once.

    .venv/bin/python bench/bench_routing.py --items 100000 --specialists 20 --seconds 20
        [--think 200 --baseline 5]

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
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import (  # noqa: E402
    PORT,
    LoopClient,
    api_call,
    clients_gather,
    clients_run,
    latency_print,
    load_arguments,
    loop_client_run,
    percentile,
    scratch_database,
)


def seed(args: argparse.Namespace) -> tuple[int, list[str]]:
    from rest_framework.authtoken.models import Token

    from annotations.core.services.studies import membership_add, study_create, study_open
    from annotations.models import User
    from annotations.partitioned.services.imports import items_import

    t0 = time.perf_counter()
    classes = [f"C{i}" for i in range(args.k)]
    study = study_create(name="bench-routing", classes=classes, queries_per_item=1,
                         gold_rate=args.gold_rate)
    rng = random.Random(1)
    lines = [json.dumps({"id": f"i{i}", "text": f"item {i}", "stratum": f"s{i % 4}"})
             for i in range(args.items)]
    lines += [json.dumps({"id": f"g{i}", "text": f"gold {i}", "gold_index": rng.randrange(args.k),
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
class Specialist(LoopClient):
    """A specialist: next query → think → answer yes / no / unsure."""

    def next_path(self) -> str:
        return f"/api/studies/{self.study_id}/queries/next/"

    def answer_path(self, task_id: str) -> str:
        return f"/api/queries/{task_id}/answer/"

    def answer_body(self, task: dict, rng: random.Random) -> dict:
        return {"answer": rng.choice(["yes", "no", "no", "no", "unsure"])}


@dataclass
class Reader(Specialist):
    """The baseline: a trivial authenticated read (GET the study, what any member may),
    paced by the specialists' think time, alongside them on the same server (``--baseline``
    clients), so both see the same load."""

    def run(self) -> Reader:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        rng = random.Random(self.token)
        done = 0
        while time.monotonic() < self.stop_at:
            if self.think and done:  # paced as a specialist between two calls
                time.sleep(self.think * rng.uniform(0.5, 1.5))
            status, body, ms = api_call(conn, "GET", f"/api/studies/{self.study_id}/",
                                        self.token)
            done += 1
            if status != 200:
                self.errors.append(f"read {status}: {body}")
                break
            if done > self.warmup:
                self.next_ms.append(ms)
        return self


def run_mode(mode: str, url: str, study_id: int, tokens: list[str], args) -> None:
    from django.db import connection

    broker = args.broker if mode == "worker" else None

    def specialists() -> list[Specialist]:
        stop_at = time.monotonic() + args.seconds
        return [Specialist(t, study_id, stop_at, args.think / 1000, args.warmup)
                for t in tokens] + [Reader(t, study_id, stop_at, args.think / 1000,
                                           args.warmup) for t in tokens[:args.baseline]]

    clients = clients_run(url, specialists, loop_client_run, workers=args.workers,
                          threads=args.threads, broker=broker)
    readers = [c for c in clients if isinstance(c, Reader)]
    got = clients_gather([c for c in clients if not isinstance(c, Reader)])
    sent, doubles, errors = got.sent, got.doubles, got.errors
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM annotations_query WHERE public_id = ANY(%s) "
                    "AND status = 'answered'", [sent])
        stored = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM annotations_queryevent e JOIN annotations_query q "
                    "ON q.id = e.query_id WHERE e.kind = 'answered' AND q.public_id = ANY(%s)",
                    [sent])
        events = cur.fetchone()[0]
    print(f"\n[{mode}] {len(tokens)} specialists, {args.seconds} s, think {args.think} ms, "
          f"gunicorn {args.workers}×{args.threads} gthread")
    got.latencies_print(("next query", "answer"))
    print(f"  throughput {len(sent) / args.seconds:.0f} answers/s; "
          f"double assignments {doubles}; answers sent {len(sent)} (distinct "
          f"{len(set(sent))}), stored {stored}, audit rows {events}; errors {len(errors)}")
    got.errors_print()
    if readers:  # the baseline, under the same load
        reads = clients_gather(readers)
        latency_print(f"read ×{len(readers)}", reads.next_ms)
        reads.errors_print()
        print(f"  next-query p95 / read p95 = {percentile(got.next_ms, 95):.1f} / "
              f"{percentile(reads.next_ms, 95):.1f} ms = "
              f"{percentile(got.next_ms, 95) / percentile(reads.next_ms, 95):.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--gold-items", type=int, default=200)
    parser.add_argument("--gold-rate", type=float, default=0.02)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--specialists", type=int, default=20)
    load_arguments(parser, think=0, modes="eager,worker", broker="redis://127.0.0.1:6379/14")
    parser.add_argument("--db", default="oversight_bench_routing")
    parser.add_argument("--baseline", type=int, default=0, metavar="N",
                        help="N more clients (members' tokens) doing a trivial authenticated "
                        "read (GET the study) at the same pace during each run; prints "
                        "next-query p95 / read p95")
    args = parser.parse_args()
    with scratch_database(args.db) as url:
        study_id, tokens = seed(args)
        for mode in args.modes.split(","):
            run_mode(mode, url, study_id, tokens, args)


if __name__ == "__main__":
    main()
