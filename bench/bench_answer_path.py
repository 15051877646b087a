"""The answer path in-process: SQL statements and time per "answer + next query" cycle.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/oversight_resid_bench \\
        .venv/bin/python bench/bench_answer_path.py --cycles 2000 [--profile 25]

Seeds a K-class study (``--items`` items, ``--systems`` AI systems with predictions, a
``--gold-rate`` of quality checks) in a scratch PostgreSQL database (the name at the end of
DATABASE_URL, created fresh and dropped after), then runs ``--cycles`` cycles of the REST
API's "answer" → "next query" calls, through Django's test client (token authentication,
throttling, serialisers, the services; no HTTP server), round-robin over ``--specialists``
specialists. Answers are drawn "yes"/"no" at random, so follow-ups are routed when
``--queries-per-item`` > 1. Prints the SQL statements per cycle (by the first words of each
statement, so a redundant one shows) and the time per cycle (median and p90 of the cycles).
and this process's CPU time per cycle (less sensitive to a busy shared machine). With
``--profile N`` it also runs the cycles under cProfile and prints the N functions with
the most cumulative time. The recompute scheduled after each answer goes wherever the
settings send it (CELERY_BROKER_URL: Redis, as with a real worker; unset: the embedded
timer thread).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import percentile, scratch_database  # noqa: E402


def seed(args: argparse.Namespace) -> tuple[int, list[str]]:
    from rest_framework.authtoken.models import Token

    from annotations.core.services.studies import membership_add, study_create, study_open
    from annotations.models import User
    from annotations.partitioned.services.imports import items_import
    from annotations.partitioned.services.predictions import predictions_import

    classes = [f"C{i}" for i in range(args.k)]
    study = study_create(name="bench-answer-path", classes=classes,
                         queries_per_item=args.queries_per_item, gold_rate=args.gold_rate)
    rng = random.Random(1)
    items = [{"id": f"i{i}", "text": f"item {i}", "gold_index": rng.randrange(args.k)}
             for i in range(args.items)]
    items += [{"id": f"g{i}", "text": f"gold {i}", "gold_index": rng.randrange(args.k),
               "quality_check": True} for i in range(args.gold_items)]
    items_import(study=study, source=io.StringIO("\n".join(map(json.dumps, items))),
                 name="bench.jsonl", fmt="jsonl")
    predictions = [{"item_id": it["id"], "system": f"m{s}",
                    "prediction": classes[rng.randrange(args.k)]}
                   for it in items for s in range(args.systems)]
    if predictions:
        predictions_import(study=study, source=io.StringIO("\n".join(map(json.dumps,
                                                                         predictions))),
                           name="predictions.jsonl", fmt="jsonl")
    study_open(study=study)
    tokens = []
    for s in range(args.specialists):
        user = User.objects.create_user(username=f"spec{s}", password="x")
        membership_add(study=study, user=user, role="specialist", class_index=s % args.k)
        tokens.append(Token.objects.create(user=user).key)
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE")
    return study.pk, tokens


class StatementCounter:
    """A connection.execute_wrapper counting statements by their first three words."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.total = 0

    def __call__(self, execute, sql, params, many, context):
        self.total += 1
        self.kinds[" ".join(sql.split()[:3])[:60]] += 1
        return execute(sql, params, many, context)


def run_cycles(study_id: int, tokens: list[str], cycles: int, *, counter=None,
               seed_: int = 2) -> list[float]:
    """``cycles`` answer → next cycles; returns each cycle's milliseconds."""
    from django.db import connection
    from django.test import Client

    client = Client()
    rng = random.Random(seed_)
    held: dict[str, str | None] = {}
    for token in tokens:  # each specialist starts holding a query
        held[token] = _next(client, study_id, token)
    times = []
    for c in range(cycles):
        token = tokens[c % len(tokens)]
        if held[token] is None:
            continue
        t0 = time.perf_counter()
        if counter is not None:
            with connection.execute_wrapper(counter):
                held[token] = _cycle(client, study_id, token, held[token], rng)
        else:
            held[token] = _cycle(client, study_id, token, held[token], rng)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _headers(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Token {token}", "content_type": "application/json"}


def _next(client, study_id: int, token: str) -> str | None:
    r = client.post(f"/api/studies/{study_id}/queries/next/", **_headers(token))
    if r.status_code == 204:
        return None
    assert r.status_code == 200, r.content[:300]
    return r.json()["id"]


def _cycle(client, study_id: int, token: str, query_id: str, rng: random.Random) -> str | None:
    answer = "yes" if rng.random() < 0.5 else "no"
    r = client.post(f"/api/queries/{query_id}/answer/", data=json.dumps({"answer": answer}),
                    **_headers(token))
    assert r.status_code == 201, r.content[:300]
    return _next(client, study_id, token)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--gold-items", type=int, default=200)
    parser.add_argument("--gold-rate", type=float, default=0.05)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--queries-per-item", type=int, default=1)
    parser.add_argument("--systems", type=int, default=3)
    parser.add_argument("--specialists", type=int, default=8)
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    args = parser.parse_args()
    os.environ.setdefault("OVERSIGHT_MIN_ANSWER_MS", "0")
    name = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/"
                          "oversight_answer_bench").rsplit("/", 1)[1]
    os.environ["BENCH_DATABASE_URL"] = os.environ.get(
        "DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{name}")
    with scratch_database(name):
        from django.conf import settings

        settings.ALLOWED_HOSTS = ["*"]
        study_id, tokens = seed(args)
        counter = StatementCounter()
        counted = run_cycles(study_id, tokens, min(200, args.cycles), counter=counter)
        per_cycle = counter.total / len(counted)
        print(f"statements per answer+next cycle: {per_cycle:.2f} "
              f"(over {len(counted)} cycles)")
        for kind, n in counter.kinds.most_common():
            print(f"  {n / len(counted):6.2f}  {kind}")
        cpu0 = time.process_time()
        times = run_cycles(study_id, tokens, args.cycles, seed_=3)
        cpu = (time.process_time() - cpu0) * 1000 / max(1, len(times))
        print(f"cycle time over {len(times)} cycles: median {statistics.median(times):.2f} ms, "
              f"p90 {percentile(times, 90):.2f} ms, mean {statistics.fmean(times):.2f} ms; "
              f"this process's CPU {cpu:.2f} ms per cycle (the database's is not included)")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            run_cycles(study_id, tokens, args.cycles, seed_=4)
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(
                args.profile)
            print(out.getvalue())


if __name__ == "__main__":
    main()
