"""Recompute of every estimate of a study with N answered queries and S AI systems.

    .venv/bin/python bench/bench_recompute.py --answers 1000000 --systems 20
    .venv/bin/python bench/bench_recompute.py --answers 1000000 --queries 4   # clustered
    .venv/bin/python bench/bench_recompute.py --bands 3 --banded 20,2   # + confidence bands

Seeds with bulk SQL (generate_series) into a scratch PostgreSQL database it creates and drops
(``BENCH_DATABASE_URL`` overrides the default on 127.0.0.1), then
times the aggregation alone and the whole ``study_recompute`` (median of 5 runs).
Budget (issue 2): 1 s on PostgreSQL for 1 000 000 answered queries and 20 systems.

``--bands B``: afterwards, ``--banded`` systems (each count of a comma list in turn) get
confidence bands (B bands; random band bits on every answered query) and the same is timed
again (partitioned.selectors.study_label_counts_banded; on PostgreSQL its "arrays" strategy:
one pass over the rows counted in numpy; ``--strategy grouped|sums`` times the SQL ones).
``--keep``: keep the scratch database and reuse its seeded study (and band bits) next time.
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
    parser.add_argument("--bands", type=int, default=0,
                        help="then time again with this many confidence bands (2..7)")
    parser.add_argument("--banded", default=None,
                        help="systems with confidence bands, e.g. 20,2 (default: all)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch database afterwards, and reuse the study a "
                             "previous --keep run seeded with the same sizes (no reseeding)")
    parser.add_argument("--strategy", choices=("arrays", "grouped", "sums"), default=None,
                        help="the banded counts' strategy (default: the recompute's choice; "
                             "partitioned.selectors.study_label_counts_banded)")
    args = parser.parse_args()
    with scratch_database(args.db, keep=args.keep, reuse=args.keep):
        run(args)


def run(args: argparse.Namespace) -> None:
    from annotations.models import Study
    from assistants.models import AISystem

    if args.strategy:
        _force_strategy(args.strategy)

    name = f"bench {args.answers} × {args.systems} systems, K = {args.k}, {args.queries} per item"
    seeded = Study.objects.filter(name=name, created_by__isnull=True)  # never a researcher's
    study = seeded.first() if args.keep else None
    if study is None:
        seeded.delete()
        study = _seed(args, name)
    else:
        print(f"reusing the seeded study '{name}'")
        AISystem.objects.filter(study=study).update(band_edges=[], band_stats=[])
    ordinals = list(range(args.systems))
    _time(study, ordinals, "no confidences")
    for banded in (args.banded or str(args.systems)).split(",") if args.bands else ():
        banded = int(banded)
        edges = [(j + 1) / args.bands for j in range(args.bands - 1)]
        _band(study, banded, edges, args.bands, bits=not _banded_already(study, banded))
        _time(study, ordinals, f"{banded} systems × {args.bands} confidence bands")


def _force_strategy(strategy: str) -> None:
    """Make the recompute count bands with ``strategy``."""
    import functools

    from annotations.partitioned.selectors import study_label_counts_banded
    from annotations.partitioned.services import estimates

    estimates.study_label_counts_banded = functools.partial(
        study_label_counts_banded, strategy=strategy)


def _banded_already(study, banded: int) -> bool:
    """A reused study whose queries already carry random band bits for ``banded`` systems."""
    from django.db.models import Max

    top = study.queries.aggregate(top=Max("band_bit0"))["top"]
    return top is not None and top.bit_length() == banded


def _band(study, banded: int, edges: list[float], n_bands: int, bits: bool) -> None:
    """Give the first ``banded`` systems ``edges`` and (``bits``) every query random band
    bits."""
    from django.db import connection

    from assistants.models import AISystem

    AISystem.objects.filter(study=study).update(band_edges=[], band_stats=[])
    AISystem.objects.filter(study=study, ordinal__lt=banded).update(
        band_edges=edges, band_stats=[{"n": 1, "mean_confidence": 0.5}] * n_bands)
    if not bits:
        return
    mask = (1 << banded) - 1
    with connection.cursor() as cur:  # a band index 0..7 per banded system and query
        cur.execute(
            """UPDATE annotations_query SET
                   band_bit0 = (random() * 9.2e18)::bigint & %s,
                   band_bit1 = (random() * 9.2e18)::bigint & %s,
                   band_bit2 = (random() * 9.2e18)::bigint & %s
               WHERE study_id = %s""", [mask, mask, mask, study.pk])
        cur.execute("VACUUM ANALYZE annotations_query")


def _seed(args: argparse.Namespace, name: str):
    """A study of ``args.answers`` answered queries over ``args.systems`` AI systems."""
    from django.db import connection

    from annotations.core.services.studies import study_create
    from annotations.models import Study
    from annotations.partitioned.services.imports import study_stratum_sizes_refresh
    from annotations.partitioned.services.predictions import system_create

    study = study_create(name=name, classes=[f"C{i}" for i in range(args.k)],
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
    return study


def _time(study, ordinals: list[int], label: str) -> None:
    from annotations.partitioned.selectors import study_label_counts
    from annotations.partitioned.services import estimates

    agg, full, banded = [], [], []
    counts_banded = estimates.study_label_counts_banded

    def timed(**kwargs):  # the banded counts inside the recompute
        t0 = time.perf_counter()
        out = counts_banded(**kwargs)
        banded.append(time.perf_counter() - t0)
        return out

    estimates.study_label_counts_banded = timed
    try:
        for _ in range(5):
            t0 = time.perf_counter()
            study_label_counts(study=study, ordinals=ordinals)
            agg.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            snapshot = estimates.study_recompute(study_id=study.pk)
            full.append(time.perf_counter() - t0)
    finally:
        estimates.study_label_counts_banded = counts_banded
    print(f"[{label}]")
    print(f"aggregation SQL: {_stats(agg)}"
          + (" (the plain one; the recompute runs the banded one)" if banded else ""))
    if banded:
        print(f"banded counts:   {_stats(banded)} (inside the recompute)")
    print(f"full recompute:  {_stats(full)}; snapshot n_answered={snapshot.n_answered:,}")


def _stats(seconds: list[float]) -> str:
    return (f"median {statistics.median(seconds) * 1000:.0f} ms "
            f"(min {min(seconds) * 1000:.0f}, max {max(seconds) * 1000:.0f})")


if __name__ == "__main__":
    main()
