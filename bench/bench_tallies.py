"""Estimates from maintained statistics: time that grows with the new answers, not the study.

    .venv/bin/python bench/bench_tallies.py                       # 100 000 vs 10 000 000
    .venv/bin/python bench/bench_tallies.py --big 2000000 --keep  # smaller, kept for reuse
    .venv/bin/python bench/bench_tallies.py --queries-per-item 2  # + the clustered sums
    .venv/bin/python bench/bench_tallies.py --targeted --big 1000000  # + the design types

On a scratch PostgreSQL database (``BENCH_DATABASE_URL`` overrides the default), seeds with
bulk SQL (the triggers off while seeding, ``session_replication_role = replica``, as a bulk
load would) three partitioned studies of 20 AI systems, K = 5, one query per item
(``--queries-per-item``: more, each item's classes distinct; the studies then keep the
clustered variance's sums as well; ``--targeted``: under a targeted design, every system
predicting every item — the studies then keep the design-weighted estimate's item types,
``services/tally_designs.py``; the seeded draws are shaped like the design's, for timing,
not drawn by it): "small"
(``--small`` answers), "big" (``--big``) and "rebuild" (``--rebuild`` answers), each with
spare pending queries. Then, in one run, prints:

* **refresh after new answers**: ``--new`` pending queries answered in one statement (the
  triggers write their entries), then ``study_recompute`` (fold + read + estimates +
  snapshot) timed, median of ``--reps``; for small and big, and their ratio (budget ≤ 1.2);
* **full rebuild** of the "rebuild" study's statistics from its queries
  (``tallies_build``) against the bare ``GROUP BY stratum, k, answer`` count of the same
  rows, median of 3 (budget ≤ 2×), and the full recompute from the answers for reference;
* **answer → snapshot** on the big study through a real Celery worker process (Redis
  ``--broker``; the default debounce): a specialist's answer (``label_submit``) until the
  snapshot that counts it exists, median of ``--reps`` (budget: ≤ 2 s to the dashboard,
  which polls every second);
* disk (the queries' table, the log, the groups) and memory (this process's and the
  worker's peak resident set).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import ROOT, scratch_database  # noqa: E402

SYSTEMS = 20
K = 5
QPI = 1  # --queries-per-item
TARGETED = False  # --targeted
EPSILON = 0.3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--big", type=int, default=10_000_000)
    parser.add_argument("--rebuild", type=int, default=1_000_000)
    parser.add_argument("--new", type=int, default=1000, help="answers per refresh")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--db", default="oversight_bench_tallies")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--parts", default="refresh,rebuild,answer",
                        help="which measurements (comma-separated; disk and memory always)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch database and reuse its seeded studies")
    parser.add_argument("--queries-per-item", type=int, default=1,
                        help="queries per item (> 1: the studies keep the clustered "
                             "variance's sums too, services/tally_moments.py)")
    parser.add_argument("--targeted", action="store_true",
                        help="under a targeted design, with every system's predictions (the "
                             "studies keep the design types too, services/tally_designs.py)")
    args = parser.parse_args()
    global QPI, TARGETED
    QPI, TARGETED = args.queries_per_item, args.targeted
    os.environ["CELERY_BROKER_URL"] = args.broker  # answers queue their recompute, as live
    with scratch_database(args.db, keep=args.keep, reuse=args.keep) as url:
        run(args, url)


def _seed(name: str, answers: int, spare: int):
    """A study of ``answers`` answered queries and ``spare`` pending ones (bulk SQL, the
    tally triggers off), with a specialist per class."""
    from django.db import connection

    from annotations.core.services.studies import membership_add, study_create
    from annotations.models import Study, StudyMembership, User
    from annotations.partitioned.services.imports import study_stratum_sizes_refresh
    from annotations.partitioned.services.predictions import system_create

    name += (f" q{QPI}" if QPI > 1 else "") + (" targeted" if TARGETED else "")
    study = Study.objects.filter(name=name).first()
    if study is not None:
        print(f"reusing '{name}'")
        Study.objects.filter(pk=study.pk).update(status="open")
        study.refresh_from_db()
        _pending_add(study, spare)
        return study
    started = time.perf_counter()
    study = study_create(name=name, classes=[f"C{i}" for i in range(K)],
                         queries_per_item=QPI)
    for s in range(SYSTEMS):
        system_create(study=study, name=f"system-{s}")
    for c in range(K):
        user = User.objects.create_user(f"{study.pk}-spec{c}", password="pw")
        membership_add(study=study, user=user, role=StudyMembership.Role.SPECIALIST,
                       class_index=c)
    Study.objects.filter(pk=study.pk).update(status="open")
    n = -(-(answers + spare) // QPI)  # items
    full = (1 << SYSTEMS) - 1
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")  # no triggers: a bulk load
        cur.execute(
            """INSERT INTO annotations_item (study_id, external_id, text, options, option_order,
                   class_order, metadata, stratum, is_quality_check, created_at)
               SELECT %s, 'i' || g, 'item', '[]', '[0,1,2,3,4]', '[0]', '{}',
                      's' || (g %% 4), false, now()
               FROM generate_series(1, %s) g""", [study.pk, n])
        cur.execute(
            """INSERT INTO annotations_query (study_id, public_id, item_id, k, sequence, rank,
                   stratum, is_quality_check, status, answer, answered_at, times_issued,
                   match_mask, present_mask)
               SELECT i.study_id, substr(md5(random()::text || i.id::text || q.seq), 1, 16),
                      i.id, (i.base + q.seq) %% 5, q.seq, (random() * 1e15)::bigint,
                      i.stratum, false, s.status, s.answer, s.at, s.issued, s.match, s.present
               FROM (SELECT id, study_id, stratum, floor(random() * 5)::int AS base,
                            row_number() OVER (ORDER BY id) AS r
                     FROM annotations_item WHERE study_id = %s) i
               CROSS JOIN generate_series(0, %s - 1) q(seq)
               CROSS JOIN LATERAL (SELECT
                   CASE WHEN i.r <= %s THEN 'answered' ELSE 'pending' END AS status,
                   CASE WHEN i.r > %s THEN '' WHEN random() < 0.25 THEN 'yes'
                        WHEN random() < 0.05 THEN 'unsure' ELSE 'no' END AS answer,
                   CASE WHEN i.r <= %s THEN now() END AS at,
                   CASE WHEN i.r <= %s THEN 1 ELSE 0 END AS issued,
                   (random() * 9.2e18)::bigint & %s AS match,
                   %s & ~((random() * 9.2e18)::bigint & (random() * 9.2e18)::bigint
                          & (random() * 9.2e18)::bigint & (random() * 9.2e18)::bigint
                          & (random() * 9.2e18)::bigint) AS present
                   WHERE i.id > q.seq - %s) s""",
            [study.pk, QPI, *[answers // QPI] * 4, full, full, QPI])
        cur.execute("UPDATE annotations_query SET match_mask = match_mask & present_mask "
                    "WHERE study_id = %s AND match_mask & ~present_mask <> 0", [study.pk])
        if TARGETED:
            _target(study)
        cur.execute("SET session_replication_role = DEFAULT")
        cur.execute("VACUUM ANALYZE annotations_query")
        cur.execute("VACUUM ANALYZE annotations_item")
    study_stratum_sizes_refresh(study=study)
    study.refresh_from_db()
    print(f"seeded '{name}': {answers:,} answered + {spare:,} pending queries × {SYSTEMS} "
          f"systems in {time.perf_counter() - started:.1f} s")
    return study


def _pending_add(study, n: int) -> None:
    """``n`` more pending queries, ``--queries-per-item`` per new item (the triggers on:
    logged as open)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO annotations_item (study_id, external_id, text, options, option_order,
                   class_order, metadata, stratum, is_quality_check, created_at)
               SELECT %s, 'p' || g || '-' || md5(random()::text), 'item', '[]',
                      '[0,1,2,3,4]', '[0]', '{}', 's' || (g %% 4), false, now()
               FROM generate_series(1, %s) g RETURNING id""", [study.pk, -(-n // QPI)])
        ids = [row[0] for row in cur.fetchall()]
        cur.execute(
            """INSERT INTO annotations_query (study_id, public_id, item_id, k, sequence, rank,
                   stratum, is_quality_check, status, answer, times_issued, match_mask,
                   present_mask)
               SELECT study_id, substr(md5(random()::text || id::text || q.seq), 1, 16), id,
                      (id + q.seq) %% 5, q.seq, (random() * 1e15)::bigint, stratum,
                      false, 'pending', '', 0, 0, 0
               FROM annotations_item CROSS JOIN generate_series(0, %s - 1) q(seq)
               WHERE id = ANY(%s)""", [QPI, ids])
    if TARGETED:
        _target(study, ids)


def _target(study, ids: list[int] | None = None) -> None:
    """The study (its items ``ids``, or all) under a targeted design: every system predicts
    each item — its base class with probability 0.75, else one at random — each query
    stores the systems' counts and π of its class (ε/K + (1 − ε) m_k / S, the first
    step's), and a uniform coin with probability ε; the items' class orders follow their
    queries."""
    from django.db import connection

    from annotations.models import RoutingDesign

    design, _ = RoutingDesign.objects.get_or_create(
        study=study, number=1, defaults={"kind": RoutingDesign.Kind.TARGETED,
                                         "epsilon": EPSILON})
    items = "i.study_id = %s" + (" AND i.id = ANY(%s)" if ids is not None else "")
    params = [study.pk] + ([ids] if ids is not None else [])
    with connection.cursor() as cur:
        cur.execute(
            f"""INSERT INTO assistants_prediction (system_id, item_id, option, position, raw,
                   created_at)
               SELECT s.id, i.id, p.c, p.c, '', now() FROM annotations_item i
               JOIN assistants_aisystem s ON s.study_id = i.study_id
               CROSS JOIN LATERAL (SELECT CASE WHEN random() < 0.75 THEN (i.id * 7919) %% {K}
                                   ELSE floor(random() * {K})::int END AS c
                                   WHERE s.id > 0) p
               WHERE {items}""", params)
        cur.execute("ANALYZE assistants_prediction")  # the planner's counts after a bulk load
        cur.execute("ANALYZE annotations_query")
        cur.execute(
            f"""WITH c AS (SELECT p.item_id, p.position, count(*) AS n
                          FROM assistants_prediction p JOIN annotations_item i
                          ON i.id = p.item_id WHERE {items} GROUP BY 1, 2),
                    t AS (SELECT item_id, jsonb_agg(jsonb_build_array(position, n)
                                                    ORDER BY position) AS targets
                          FROM c GROUP BY 1)
               UPDATE annotations_query q SET design_id = %s,
                   draw_uniform = random() < {EPSILON}, draw_targets = t.targets,
                   draw_p = {EPSILON / K} + {1 - EPSILON} * COALESCE((
                       SELECT (e->>1)::float FROM jsonb_array_elements(t.targets) e
                       WHERE (e->>0)::int = q.k), 0) / {SYSTEMS}
               FROM t WHERE t.item_id = q.item_id AND q.study_id = %s""",
            [*params, design.pk, study.pk])
        cur.execute(
            f"""UPDATE annotations_item i SET class_order = o.orders FROM (
                   SELECT item_id, jsonb_agg(k ORDER BY sequence) AS orders
                   FROM annotations_query q WHERE q.study_id = %s GROUP BY 1) o
               WHERE o.item_id = i.id AND {items}""", [study.pk, *params])


def _answer_pending(study, n: int) -> None:
    """``n`` pending queries answered in one statement (the triggers log them)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            """UPDATE annotations_query SET status = 'answered', answered_at = now(),
                   times_issued = 1,
                   answer = CASE WHEN random() < 0.25 THEN 'yes' ELSE 'no' END
               WHERE id IN (SELECT id FROM annotations_query WHERE study_id = %s
                            AND status = 'pending' ORDER BY id LIMIT %s)""", [study.pk, n])


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def _refresh(study, args) -> float:
    from annotations.partitioned.services.estimates import study_recompute

    study_recompute(study_id=study.pk)  # built and folded: the steady state
    times = []
    for _ in range(args.reps):
        _answer_pending(study, args.new)
        t0 = time.perf_counter()
        snapshot = study_recompute(study_id=study.pk)
        times.append(time.perf_counter() - t0)
    print(f"  {study.name}: refresh after {args.new:,} new answers {_ms(_median(times))} "
          f"(median of {args.reps}; {snapshot.n_answered:,} answered)")
    if TARGETED:
        _design_read(study)
    return _median(times)


def _design_read(study) -> None:
    """The design-weighted estimate from the kept types against the same from every
    answered step (the reference), back to back, median of 3; and the types kept."""
    from annotations.partitioned.services.design_estimates import design_payload
    from annotations.partitioned.services.tallies import tallies_current
    from assistants.models import AISystem

    systems = list(AISystem.objects.filter(study=study).order_by("ordinal"))
    kept_design = tallies_current(study_id=study.pk).design
    kept, full = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        design_payload(study=study, systems=systems, k=K, confidence=0.95, kept=kept_design)
        kept.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        design_payload(study=study, systems=systems, k=K, confidence=0.95)
        full.append(time.perf_counter() - t0)
    types = kept_design.types
    print(f"    design-weighted estimate: from {len(types.key):,} kept types "
          f"{_ms(_median(kept))}, from the {types.answers:,} steps of {types.items:,} items "
          f"(the reference) {_ms(_median(full))}")


def _rebuild(study) -> None:
    from django.db import connection

    from annotations.partitioned.services.estimates import recompute_payload
    from annotations.partitioned.services.tallies import tallies_build

    bare, build, full = [], [], []
    for _ in range(3):
        t0 = time.perf_counter()
        with connection.cursor() as cur:
            cur.execute("SELECT stratum, k, answer, count(*) FROM annotations_query WHERE "
                        "study_id = %s AND status = 'answered' AND NOT is_quality_check "
                        "GROUP BY 1, 2, 3", [study.pk])
            cur.fetchall()
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tallies_build(study_id=study.pk)
        build.append(time.perf_counter() - t0)
    if TARGETED:
        from annotations.partitioned.services import tally_designs

        t0 = time.perf_counter()
        tally_designs.designs_built(study.pk, tally_designs.signature(study.pk))
        print(f"  of which the design types alone: {_ms(time.perf_counter() - t0)}")
    for _ in range(2):
        t0 = time.perf_counter()
        recompute_payload(study, None)
        full.append(time.perf_counter() - t0)
    print(f"  bare GROUP BY {_ms(_median(bare))}; full rebuild of the statistics "
          f"{_ms(_median(build))} = {_median(build) / _median(bare):.2f}× (budget ≤ 2×); "
          f"the estimates counted from the answers (the reference) {_ms(_median(full))}")


def _worker(url: str, broker: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": broker,
           "DJANGO_SETTINGS_MODULE": "oversight_site.settings.local"}
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "oversight_site", "worker",
                             "-Q", "default,estimates", "-c", "1", "--loglevel", "WARNING",
                             "-n", f"bench-tallies-{os.getpid()}@%h"], cwd=ROOT, env=env)
    from oversight_site.celery import app

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not app.control.ping(timeout=0.5):
        pass
    return proc


def _answer_to_snapshot(study, args, url: str) -> None:
    from django.conf import settings
    from django.db import transaction

    from annotations.models import EstimateSnapshot, User
    from annotations.partitioned.services.labels import label_submit
    from annotations.partitioned.services.routing import query_lease_next

    worker = _worker(url, args.broker)
    try:
        from annotations.partitioned.services.estimates import study_recompute

        study_recompute(study_id=study.pk)
        poll = settings.OVERSIGHT_DASHBOARD_POLL_SECONDS
        every = []
        # the answer comes right after the previous snapshot, or a while later: the pacing
        # (OVERSIGHT_RECOMPUTE_MAX_SHARE) delays the first most
        for gap in (0.0, 0.5, 2.0):
            times = []
            for rep in range(args.reps):
                time.sleep(gap)
                before = EstimateSnapshot.objects.filter(study=study).latest().n_answered
                user = User.objects.get(username=f"{study.pk}-spec{rep % K}")
                query = query_lease_next(study=study, user=user)
                t0 = time.perf_counter()
                with transaction.atomic():
                    label_submit(user=user, answer="yes", query_id=query.pk)
                while not EstimateSnapshot.objects.filter(study=study,
                                                          n_answered__gt=before).exists():
                    if time.perf_counter() - t0 > 60:
                        raise SystemExit("no snapshot counted the answer within 60 s")
                    time.sleep(0.01)
                times.append(time.perf_counter() - t0)
            every += times
            print(f"  answer {gap:.1f} s after the previous snapshot → snapshot: "
                  f"{_ms(_median(times))} median, {_ms(max(times))} worst of {args.reps}")
        print(f"  answer → snapshot at {before + 1:,} answers: {_ms(_median(every))} median, "
              f"{_ms(max(every))} worst of {len(every)} (a real worker); to the screen, the "
              f"dashboard polling every {poll} s: ≤ {_ms(max(every) + poll)} (budget 2 s)")
        rss = subprocess.run(["ps", "-o", "rss=", "--ppid", str(worker.pid), "-p",
                              str(worker.pid)], capture_output=True, text=True).stdout.split()
        print(f"  worker resident memory: {max(int(r) for r in rss) / 1024:,.0f} MB")
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def _disk() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        for table in ("annotations_query", "annotations_item", "annotations_tallyentry",
                      "annotations_tallygroup", "annotations_tallyitem",
                      "assistants_prediction"):
            cur.execute("SELECT pg_total_relation_size(%s)", [table])
            print(f"  {table}: {cur.fetchone()[0] / 2**20:,.0f} MB")


def run(args: argparse.Namespace, url: str) -> None:
    parts = set(args.parts.split(","))
    spare = args.new * (args.reps + 1) + 100 + 3 * args.reps
    big = _seed(f"bench tallies big {args.big}", args.big, spare)
    from annotations.partitioned.services.tallies import tallies_fold

    t0 = time.perf_counter()
    tallies_fold(study_id=big.pk)  # the first fold of a bulk-loaded study builds it
    print(f"  first build of the big study's statistics: {_ms(time.perf_counter() - t0)}")
    if "refresh" in parts:
        small = _seed(f"bench tallies small {args.small}", args.small, spare)
        print("[refresh after new answers]")
        t_small = _refresh(small, args)
        t_big = _refresh(big, args)
        print(f"  ratio big / small: {t_big / t_small:.2f} (budget ≤ 1.2)")
    if "rebuild" in parts:
        rebuild = _seed(f"bench tallies rebuild {args.rebuild}", args.rebuild, 0)
        print(f"[full rebuild at {args.rebuild:,} answers]")
        _rebuild(rebuild)
    if "answer" in parts:
        print("[answer → snapshot]")
        _answer_to_snapshot(big, args, url)
    print("[disk]")
    _disk()
    print(f"[memory] this process's peak resident set: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
