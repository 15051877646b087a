"""Recompute of every estimate of a study with N answered queries and S AI systems.

    .venv/bin/python bench/bench_recompute.py --answers 1000000 --systems 20
    .venv/bin/python bench/bench_recompute.py --answers 1000000 --queries 4   # clustered

Seeds with bulk SQL (generate_series) into a scratch PostgreSQL database it creates and drops
(``BENCH_DATABASE_URL`` overrides the default on 127.0.0.1), then
times the aggregation alone and the whole ``study_recompute`` (median of 5 runs).
Budget (issue 2): 1 s on PostgreSQL for 1 000 000 answered queries and 20 systems.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import scratch_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=1_000_000)
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--db", default="oversight_bench")
    parser.add_argument("--queries", type=int, default=1,
                        help="queries per item (> 1: the recompute also reads every label's "
                             "item for the item-clustered variance)")
    args = parser.parse_args()
    with scratch_database(args.db):
        run(args)


def run(args: argparse.Namespace) -> None:
    from django.db import connection

    from annotations.models import Study
    from annotations.selectors import study_label_counts
    from annotations.services.estimates import study_recompute
    from annotations.services.imports import study_stratum_sizes_refresh
    from annotations.services.studies import study_create
    from assistants.services import system_create

    study = study_create(name="bench", classes=[f"C{i}" for i in range(args.k)],
                         queries_per_item=args.queries)
    Study.objects.filter(pk=study.pk).update(status="open")
    for s in range(args.systems):
        system_create(study=study, name=f"system-{s}")
    n = args.answers
    started = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO annotations_item (study_id, external_id, text, options, option_order,
                   class_order, metadata, stratum, is_quality_check, created_at)
               SELECT %s, 'i' || g, 'item', '[]', '[0,1,2,3,4]', '[0]', '{}',
                      's' || (g %% 4), false, now()
               FROM generate_series(1, %s) g""", [study.pk, -(-n // args.queries)])
        # each system s predicts the asked class with probability depending on s;
        # 3 % of predictions are missing
        cur.execute(
            """INSERT INTO annotations_query (study_id, public_id, item_id, k, sequence, rank,
                   stratum, is_quality_check, status, answer, answered_at, times_issued,
                   match_mask, present_mask)
               SELECT i.study_id, substr(md5(random()::text || i.id::text || q::text), 1, 16),
                      i.id, ((random() * %s)::int + q) %% %s, q,
                      (random() * 1e15)::bigint, i.stratum, false, 'answered',
                      CASE WHEN random() < 0.25 THEN 'yes' ELSE 'no' END, now(), 1,
                      (SELECT COALESCE(SUM(CASE WHEN random() < 0.1 + 0.04 * s
                              THEN (1::bigint << s) ELSE 0 END), 0)
                         FROM generate_series(0, %s - 1) s WHERE i.id > 0),
                      (SELECT COALESCE(SUM(CASE WHEN random() < 0.97
                              THEN (1::bigint << s) ELSE 0 END), 0)
                         FROM generate_series(0, %s - 1) s WHERE i.id > 0)
               FROM annotations_item i CROSS JOIN generate_series(0, %s - 1) q
               WHERE i.study_id = %s""",
            [args.k, args.k, args.systems, args.systems, args.queries, study.pk])
        cur.execute("UPDATE annotations_query SET match_mask = match_mask & present_mask")
        cur.execute("VACUUM ANALYZE annotations_query")
    study_stratum_sizes_refresh(study=study)  # what the item import does
    print(f"seeded {n:,} answered queries × {args.systems} systems in "
          f"{time.perf_counter() - started:.1f} s")
    ordinals = list(range(args.systems))
    agg, full = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        study_label_counts(study=study, ordinals=ordinals)
        agg.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        snapshot = study_recompute(study_id=study.pk)
        full.append(time.perf_counter() - t0)
    print(f"aggregation SQL: median {statistics.median(agg) * 1000:.0f} ms "
          f"(min {min(agg) * 1000:.0f}, max {max(agg) * 1000:.0f})")
    print(f"full recompute:  median {statistics.median(full) * 1000:.0f} ms "
          f"(min {min(full) * 1000:.0f}, max {max(full) * 1000:.0f}); "
          f"snapshot n_answered={snapshot.n_answered:,}")


if __name__ == "__main__":
    main()
