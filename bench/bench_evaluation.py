"""One evaluation of 10 000 predictions on a partitioned study with 100 000 labelled items
(issue 20; budget 150 ms server time on PostgreSQL).

    .venv/bin/python bench/bench_evaluation.py [--items 100000] [--predictions 10000]

Seeds a scratch PostgreSQL database (``bench/_scratch.py``; ``BENCH_DATABASE_URL`` overrides
the default on 127.0.0.1) with one answered query per item, K = 5, then times the whole
request in-process (Django's test client: JSON parsing, token lookup, checks, the label read,
the engine, the log row) — the Ladder off (every figure released) and on — median of 7 runs;
also the service's own time as its log rows record it (``EvaluationCall.duration_ms``: from
the body's checks to the log row, without Django's request handling and JSON parsing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import scratch_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--predictions", type=int, default=10_000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--db", default="oversight_bench_evaluation")
    args = parser.parse_args()
    with scratch_database(args.db):
        run(args)


def _seed(args):
    from django.db import connection

    from annotations.core.services.studies import study_create
    from annotations.models import Study

    study = study_create(name="bench evaluation", classes=[f"C{i}" for i in range(args.k)])
    Study.objects.filter(pk=study.pk).update(status="open")
    order = json.dumps(list(range(args.k)))
    started = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO annotations_item (study_id, external_id, text, options, option_order,
                   class_order, metadata, stratum, is_quality_check, created_at)
               SELECT %s, 'i' || g, 'item', '[]', %s, '[0]', '{}', '', false, now()
               FROM generate_series(1, %s) g""", [study.pk, order, args.items])
        cur.execute(
            """INSERT INTO annotations_query (study_id, public_id, item_id, k, sequence, rank,
                   stratum, is_quality_check, status, answer, answered_at, times_issued,
                   match_mask, present_mask)
               SELECT i.study_id, substr(md5(random()::text || i.id::text), 1, 16), i.id,
                      (random() * %s)::int %% %s, 0, (random() * 1e15)::bigint, '', false,
                      'answered', CASE WHEN random() < %s THEN 'yes' ELSE 'no' END, now(), 1,
                      0, 0
               FROM annotations_item i WHERE i.study_id = %s""",
            [args.k, args.k, 1 / args.k, study.pk])
        cur.execute("VACUUM ANALYZE annotations_query")
        cur.execute("VACUUM ANALYZE annotations_item")
    print(f"seeded {args.items:,} items with an answered query each in "
          f"{time.perf_counter() - started:.1f} s")
    return study


def run(args) -> None:
    import numpy as np
    from django.test import Client

    from annotations.evaluation.models import EvaluationCall
    from annotations.evaluation.services.tokens import token_create

    study = _seed(args)
    rng = np.random.default_rng(0)
    chosen = rng.choice(args.items, size=args.predictions, replace=False) + 1
    body = json.dumps({"candidate": "bench", "predictions": [
        {"item": f"i{i}", "index": int(rng.integers(args.k))} for i in chosen]})
    for ladder in (False, True):
        _, raw = token_create(study=study, name=f"bench ladder={ladder}", ladder=ladder,
                              daily_budget=1000)
        client = Client(HTTP_AUTHORIZATION=f"Evaluation {raw}", SERVER_NAME="localhost")
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            response = client.post(f"/api/studies/{study.pk}/evaluations/", body,
                                   content_type="application/json")
            times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 201, response.content[:300]
        out = response.json()
        logged = list(EvaluationCall.objects.filter(token__name=f"bench ladder={ladder}")
                      .values_list("duration_ms", flat=True))
        print(f"[ladder {'on' if ladder else 'off'}] {args.predictions:,} predictions on "
              f"{args.items:,} labelled items: request median {statistics.median(times):.0f} ms "
              f"(min {min(times):.0f}, max {max(times):.0f}); the service (logged "
              f"duration_ms) median {statistics.median(logged):.0f} ms (min {min(logged):.0f})"
              f"; items used {out['items_used']}, score {out['score']:.3f}")


if __name__ == "__main__":
    main()
