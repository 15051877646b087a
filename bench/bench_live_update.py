"""Answer submitted → the dashboard's figures include it, with a real Celery worker.

    .venv/bin/python bench/bench_live_update.py --items 20000 --trials 30

Seeds a K = 5 study with three AI systems' predictions in a scratch PostgreSQL database,
starts gunicorn and a Celery worker on Redis, then ``--trials`` times: a specialist answers
through the API, and a manager client polls the estimates endpoint every 20 ms until a
snapshot counts that answer. The dashboard renders that same latest snapshot and polls every
``OVERSIGHT_DASHBOARD_POLL_SECONDS``, so the figure a manager sees is at most one poll period
later; the worst case printed adds it.
Budget (issue 2): at most 2 s from answer to updated dashboard with a real worker.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import random
import statistics
import sys
import time
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


def seed(n_items: int) -> tuple[int, str, str]:
    from rest_framework.authtoken.models import Token

    from annotations.core.services.studies import membership_add, study_create, study_open
    from annotations.models import User
    from annotations.partitioned.services.imports import items_import
    from annotations.partitioned.services.predictions import predictions_import, system_create

    study = study_create(name="bench-live", classes=list("ABCDE"))
    rng = random.Random(3)
    gold = [rng.randrange(5) for _ in range(n_items)]
    items_import(study=study, name="items.jsonl", fmt="jsonl", source=io.StringIO("\n".join(
        json.dumps({"id": f"i{i}", "text": f"item {i}"}) for i in range(n_items))))
    for name, acc in (("frontier", 0.86), ("mid", 0.68), ("small", 0.42)):
        system_create(study=study, name=name)
        rows = [json.dumps({"item_id": f"i{i}", "system": name,
                            "prediction_index": g if rng.random() < acc else (g + 1) % 5})
                for i, g in enumerate(gold)]
        predictions_import(study=study, source=io.StringIO("\n".join(rows)), name="p.jsonl",
                           fmt="jsonl")
    study_open(study=study)
    spec = User.objects.create_user(username="spec", password="x")
    membership_add(study=study, user=spec, role="specialist", class_index=0)
    manager = User.objects.create_user(username="manager", password="x")
    membership_add(study=study, user=manager, role="manager")
    return study.pk, Token.objects.create(user=spec).key, Token.objects.create(user=manager).key


def call(conn, method: str, path: str, token: str, body: dict | None = None):
    status, data, _ = api_call(conn, method, path, token, body)
    return status, data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between trials")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--db", default="oversight_bench_live")
    args = parser.parse_args()
    with scratch_database(args.db) as url:
        study_id, spec_token, manager_token = seed(args.items)
        from django.conf import settings

        poll = settings.OVERSIGHT_DASHBOARD_POLL_SECONDS
        procs = start_server(url, broker=args.broker)
        try:
            latencies = run_trials(study_id, spec_token, manager_token, args)
        finally:
            stop_server(procs)
    print(f"answer → snapshot including it ({len(latencies)} trials, {args.items:,} items, "
          f"3 systems, real worker): p50 {statistics.median(latencies):.0f} ms, "
          f"p95 {percentile(latencies, 95):.0f} ms, max {max(latencies):.0f} ms")
    print(f"dashboard polls every {poll} s: worst case answer → figure "
          f"{max(latencies) + poll * 1000:.0f} ms (budget 2000 ms)")


def run_trials(study_id: int, spec_token: str, manager_token: str, args) -> list[float]:
    spec = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    manager = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    latencies = []
    for trial in range(args.trials):
        answered = trial + 1
        status, query = call(spec, "POST", f"/api/studies/{study_id}/queries/next/", spec_token)
        assert status == 200, (status, query)
        status, _ = call(spec, "POST", f"/api/queries/{query['id']}/answer/", spec_token,
                         {"answer": "no" if trial % 3 else "yes"})
        assert status == 201, status
        t0 = time.perf_counter()
        while True:
            status, snap = call(manager, "GET", f"/api/studies/{study_id}/estimates/",
                                manager_token)
            if status == 200 and snap["n_answered"] >= answered:
                break
            if time.perf_counter() - t0 > 30:
                raise SystemExit(f"trial {trial}: no snapshot with {answered} answers in 30 s")
            time.sleep(0.02)
        latencies.append((time.perf_counter() - t0) * 1000)
        time.sleep(args.gap)
    return latencies


if __name__ == "__main__":
    main()
