"""Exclusions on a large study: the time to take answers out and to put them back.

    .venv/bin/python bench/bench_exclusions.py --answers 1000000 --workers 200

Seeds a partitioned study of ``--answers`` answered queries by ``--workers`` specialists
(bulk SQL into a scratch PostgreSQL database it creates and drops; ``BENCH_DATABASE_URL``
overrides it), each answer with a time on task drawn log-normal around 6 s, then times, as
a researcher would do them one after the other:

* excluding one worker (about answers / workers answers), then undoing it;
* excluding every answer faster than ``--faster`` seconds (about 10 % of them), then
  undoing it;
* recording one more answer while the "faster" rule stands (``exclusions_catch`` of one
  answer: what each answer costs while rules stand);
* the Workers page's rows (``study_workers``) read first (every answer) and again (cached).

Each is the service call (``exclusion_add`` / ``exclusion_undo``) in its transaction — what
the researcher's request waits for — then what runs once it commits: a large rule's job
(over ``--inline-max`` answers, OVERSIGHT_EXCLUSION_INLINE_MAX) and the second pass; wall
times. The printout also gives the answers each took out. ``--keep`` keeps the scratch
database and reuses its study.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import scratch_database  # noqa: E402

K = 4


def _seed(answers: int, workers: int):
    from django.db import connection

    from annotations.core.services.studies import membership_add, study_create
    from annotations.models import Study, StudyMembership, User

    study = Study.objects.filter(name="bench-exclusions").first()
    if study is not None:
        print("reusing the seeded study")
        return study, User.objects.get(username="bench-researcher")
    started = time.perf_counter()
    study = study_create(name="bench-exclusions", classes=[f"C{i}" for i in range(K)])
    researcher = User.objects.create_user("bench-researcher", password="pw")
    membership_add(study=study, user=researcher, role=StudyMembership.Role.RESEARCHER)
    ids = []
    for w in range(workers):
        user = User.objects.create_user(f"bench-spec{w}", password="pw")
        membership_add(study=study, user=user, role=StudyMembership.Role.SPECIALIST,
                       class_index=w % K)
        ids.append(user.pk)
    Study.objects.filter(pk=study.pk).update(status="open")
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")  # no triggers: a bulk load
        cur.execute(
            """INSERT INTO annotations_item (study_id, external_id, text, options, option_order,
                   class_order, metadata, stratum, is_quality_check, created_at)
               SELECT %s, 'i' || g, 'item', '[]', '[0,1,2,3]', '[0]', '{}', '', false, now()
               FROM generate_series(1, %s) g""", [study.pk, answers])
        cur.execute(
            """INSERT INTO annotations_query (study_id, public_id, item_id, k, sequence, rank,
                   stratum, is_quality_check, status, answer, answered_at, answered_by_id,
                   time_on_task_ms, times_issued, match_mask, present_mask)
               SELECT i.study_id, substr(md5(random()::text || i.id::text), 1, 16), i.id,
                      i.id %% %s, 0, (random() * 1e15)::bigint, '', false, 'answered',
                      CASE WHEN random() < 0.3 THEN 'yes' ELSE 'no' END,
                      now() - (random() * interval '30 days'),
                      (%s::bigint[])[1 + (i.id %% %s)],
                      greatest(200, exp(ln(6000) + 0.8 * sqrt(-2 * ln(1 - random()))
                                        * cos(2 * pi() * random())))::int, 1, 0, 0
               FROM annotations_item i WHERE i.study_id = %s""",
            [K, ids, workers, study.pk])
        cur.execute("SET session_replication_role = DEFAULT")
        cur.execute("VACUUM ANALYZE annotations_query")
        cur.execute("VACUUM ANALYZE annotations_item")
    print(f"seeded {answers:,} answers by {workers} workers in "
          f"{time.perf_counter() - started:.1f} s")
    return study, researcher


def _timed(label: str, call):
    """``call`` in its transaction, timed in two parts: the request (up to its commit) and
    what runs once it is committed (a large rule's job, the second pass; the recompute is
    only scheduled)."""
    from django.db import connection, transaction

    started = time.perf_counter()
    with transaction.atomic():
        result = call()
        later = [fn for _, fn, _ in connection.run_on_commit]
        connection.run_on_commit.clear()
    request = time.perf_counter() - started
    started = time.perf_counter()
    for fn in later:
        fn()
    after = time.perf_counter() - started
    print(f"{label:<44} {request * 1000:>9.0f} ms {after * 1000:>12.0f} ms")
    return result


def run(args: argparse.Namespace) -> None:
    from annotations.core.exclusion_models import ExcludedAnswer
    from annotations.core.reviews.exclusions import (
        exclusion_add,
        exclusion_undo,
        exclusions_catch,
    )
    from annotations.models import Query, Study, User

    study, researcher = _seed(args.answers, args.workers)
    print(f"{'':<44} {'request':>12} {'after commit':>15}")
    worker = User.objects.get(username="bench-spec0")
    rule = _timed("exclude one worker", lambda: exclusion_add(
        study=study, by=researcher, kind="worker", worker_id=worker.pk, reason="bench"))
    rule.refresh_from_db()
    print(f"  {rule.answers:,} answers out")
    _timed("undo it", lambda: exclusion_undo(study=study, exclusion_id=rule.pk,
                                             by=researcher, reason="bench"))
    fast = _timed(f"exclude every answer faster than {args.faster:g} s", lambda: exclusion_add(
        study=study, by=researcher, kind="faster", faster_than_seconds=args.faster,
        reason="bench"))
    fast.refresh_from_db()
    print(f"  {fast.answers:,} answers out")
    study = Study.objects.get(pk=study.pk)
    one = Query.objects.filter(study=study).order_by("-pk").values_list("pk", flat=True)[:1]
    catches = []
    for _ in range(20):
        started = time.perf_counter()
        exclusions_catch(study, list(one))
        catches.append(time.perf_counter() - started)
    catches.sort()
    print(f"{'one answer caught while the rule stands':<44} {catches[10] * 1000:>9.1f} ms"
          "   (median of 20)")
    _timed("undo it", lambda: exclusion_undo(study=study, exclusion_id=fast.pk,
                                             by=researcher, reason="bench"))
    assert not ExcludedAnswer.objects.filter(study=study).exists()
    from annotations.core.reviews.workers import study_workers

    for label in ("the Workers page's rows, first read", "the Workers page's rows, again"):
        started = time.perf_counter()
        study_workers(study=study)
        print(f"{label:<44} {(time.perf_counter() - started) * 1000:>9.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--faster", type=float, default=2.5)
    parser.add_argument("--inline-max", type=int, default=None,
                        help="OVERSIGHT_EXCLUSION_INLINE_MAX (default: the settings')")
    parser.add_argument("--db", default="oversight_bench_exclusions")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    with scratch_database(args.db, keep=args.keep, reuse=args.keep):
        if args.inline_max is not None:
            from django.conf import settings

            settings.OVERSIGHT_EXCLUSION_INLINE_MAX = args.inline_max
        run(args)


if __name__ == "__main__":
    main()
