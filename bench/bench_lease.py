"""The lease statement alone: how much the skip exclusion costs the hot path.

    .venv/bin/python bench/bench_lease.py --items 100000 --skips 0,20,200 --runs 2000

Fills a scratch PostgreSQL database with a K-class study of ``--items`` pending queries (SQL
``generate_series``, seconds), then times the lease statement's locking sub-select (the
part the skip exclusion changes) ``--runs`` times in a transaction that is rolled back, for
a specialist with each number of ``--skips`` (skipped queries at the head of their class's
queue: the worst case, every skipped one is passed over), with and without the
``NOT EXISTS`` exclusion, alternating the two. Prints p50/p95 in ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import percentile, scratch_database  # noqa: E402

OLD = ("SELECT id FROM annotations_query WHERE study_id = %s AND k = %s AND status = 'pending' "
       "AND NOT is_quality_check ORDER BY rank LIMIT 1 FOR UPDATE SKIP LOCKED")
NEW = ("SELECT id FROM annotations_query q WHERE study_id = %s AND k = %s AND status = "
       "'pending' AND NOT is_quality_check AND NOT EXISTS (SELECT 1 FROM "
       "annotations_queryskip s WHERE s.user_id = %s AND s.query_id = q.id) "
       "ORDER BY rank LIMIT 1 FOR UPDATE SKIP LOCKED")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--skips", default="0,20,200")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--db", default="oversight_bench_lease")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    with scratch_database(args.db, keep=args.keep):
        from django.db import connection, transaction

        from annotations.core.services.studies import study_create
        from annotations.models import User

        study = study_create(name="bench-lease", classes=[f"C{i}" for i in range(args.k)])
        with connection.cursor() as cur:
            cur.execute(
                "INSERT INTO annotations_item (study_id, external_id, text, options, "
                "option_order, class_order, metadata, stratum, is_quality_check, created_at) "
                "SELECT %s, 'i' || g, 'item', '[]', '[0,1,2,3,4]', '[0]', '{}', '', false, "
                "now() FROM generate_series(1, %s) g", [study.pk, args.items])
            cur.execute(
                "INSERT INTO annotations_query (study_id, public_id, item_id, k, sequence, "
                "rank, stratum, is_quality_check, status, answer, times_issued, match_mask, "
                "present_mask) SELECT study_id, substr(md5(random()::text || id::text), 1, 16),"
                " id, id %% %s, 0, (random() * 1e15)::bigint, '', false, 'pending', '', 0, 0, 0"
                " FROM annotations_item WHERE study_id = %s", [args.k, study.pk])
        print(f"{args.items:,} pending queries, K = {args.k}; {args.runs} runs each")
        for n_skips in (int(x) for x in args.skips.split(",")):
            user = User.objects.create_user(username=f"u{n_skips}")
            with connection.cursor() as cur:
                cur.execute(
                    "INSERT INTO annotations_queryskip (query_id, user_id, study_id, k, "
                    "is_quality_check, at) SELECT id, %s, study_id, k, false, now() FROM "
                    "annotations_query WHERE study_id = %s AND k = 0 ORDER BY rank LIMIT %s",
                    [user.pk, study.pk, n_skips])
                cur.execute("VACUUM ANALYZE")
            variants = (("without exclusion", OLD, [study.pk, 0]),
                        ("with exclusion", NEW, [study.pk, 0, user.pk]))
            times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
            for _ in range(args.runs):  # alternate, so that load drifts hit both alike
                for name, sql, params in variants:
                    with transaction.atomic():
                        t0 = time.perf_counter()
                        with connection.cursor() as cur:
                            cur.execute(sql, params)
                            cur.fetchone()
                        times[name].append((time.perf_counter() - t0) * 1000)
                        transaction.set_rollback(True)
            for name, values in times.items():
                print(f"  skips {n_skips:>4}  {name:<18} p50 {statistics.median(values):6.3f} "
                      f"ms  p95 {percentile(values, 95):6.3f} ms")


if __name__ == "__main__":
    main()
