"""The platform client's budgets (issue 30), on PostgreSQL through gunicorn:

* streaming a raw export of 1 000 000 answers with ``Platform.export`` (JSONL, decoded row
  by row) and ``Platform.export_to`` (CSV to a file) — each under 60 s — against ``psql
  \\copy`` of the same rows (the export's query: every answered query with its item and
  specialist, oldest answer first) to a CSV file;
* listing the 50 000 items of a study page by page (``Platform.items``, 1 000 a page) under
  10 s.

Prints the seconds, the ratios, and the client's peak memory (its resident set grows by
what one page or one piece holds, not with the export).

    .venv/bin/python bench/bench_client.py [--answers 1000000] [--items 50000] [--keep]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import PG, PORT, scratch_database, start_server, stop_server  # noqa: E402

K = 5


def _seed(name: str, answers: int, items: int) -> tuple[int, int]:
    """A partitioned study of ``answers`` answered queries (one per item, a specialist per
    class; bulk SQL, the tally triggers off) and one of ``items`` unanswered items."""
    from django.db import connection

    from annotations.core.services.studies import membership_add, study_create
    from annotations.models import Study, StudyMembership, User

    started = time.perf_counter()
    answered = study_create(name=name, classes=[f"C{i}" for i in range(K)])
    listed = study_create(name=name + " items", classes=[f"C{i}" for i in range(K)])
    users = []
    for c in range(K):
        user = User.objects.create_user(f"{answered.pk}-spec{c}", password="pw")
        membership_add(study=answered, user=user, role=StudyMembership.Role.SPECIALIST,
                       class_index=c)
        users.append(user.pk)
    Study.objects.filter(pk=answered.pk).update(status="open")
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")  # no triggers: a bulk load
        for study, n, text in ((answered, answers, "item"),
                               (listed, items, "Which option is right? " * 8)):
            cur.execute(
                """INSERT INTO annotations_item (study_id, external_id, text, options,
                       option_order, class_order, metadata, stratum, is_quality_check,
                       created_at, gold_option)
                   SELECT %s, 'i' || g, %s, '["a", "b", "c", "d", "e"]', '[0,1,2,3,4]',
                          '[0]', '{}', 's' || (g %% 4), false, now(), g %% 5
                   FROM generate_series(1, %s) g""", [study.pk, text, n])
        cur.execute(
            """INSERT INTO annotations_query (study_id, public_id, item_id, k, sequence, rank,
                   stratum, is_quality_check, status, answer, answered_at, answered_by_id,
                   issued_at, times_issued, match_mask, present_mask, time_on_task_ms)
               SELECT i.study_id, substr(md5(random()::text || i.id::text), 1, 16), i.id,
                      i.id %% 5, 0, (random() * 1e15)::bigint, i.stratum, false, 'answered',
                      CASE WHEN random() < 0.25 THEN 'yes' ELSE 'no' END,
                      now() - (i.id || ' seconds')::interval, (%s::int[])[1 + i.id %% 5],
                      now() - (i.id || ' seconds')::interval, 1, 0, 0,
                      (random() * 20000)::int
               FROM annotations_item i WHERE i.study_id = %s""", [users, answered.pk])
        cur.execute("SET session_replication_role = DEFAULT")
        cur.execute("VACUUM ANALYZE annotations_query")
        cur.execute("VACUUM ANALYZE annotations_item")
    print(f"seeded {answers:,} answers and {items:,} items in "
          f"{time.perf_counter() - started:.1f} s")
    return answered.pk, listed.pk


def _copy_seconds(dbname: str, study_id: int, target: Path) -> float:
    """``psql \\copy`` of the export's rows to a CSV file."""
    query = (
        "SELECT q.id, i.external_id, q.stratum, q.k, c.name, q.sequence, q.answer, u.username, "
        "q.is_quality_check, q.qc_correct, q.issued_at, q.rendered_at, q.answered_at, "
        "q.time_on_task_ms, q.times_issued, q.rank, i.option_order, i.class_order, "
        "d.number, d.kind, d.epsilon, q.draw_uniform, q.draw_p, q.draw_targets "
        "FROM annotations_query q JOIN annotations_item i ON i.id = q.item_id "
        "LEFT JOIN annotations_user u ON u.id = q.answered_by_id "
        "LEFT JOIN annotations_routingdesign d ON d.id = q.design_id "
        "LEFT JOIN annotations_studyclass c ON c.study_id = q.study_id AND c.index = q.k "
        f"WHERE q.study_id = {int(study_id)} AND q.status = 'answered' "
        "ORDER BY q.answered_at, q.id")
    started = time.perf_counter()
    subprocess.run(["psql", *PG, "-d", dbname, "-c",
                    f"\\copy ({query}) TO '{target}' CSV HEADER"], check=True,
                   capture_output=True)  # its errors: rerun the query in psql
    return time.perf_counter() - started


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(args: argparse.Namespace, url: str) -> None:
    from rest_framework.authtoken.models import Token

    from annotations.core.models import StudyMembership, User
    from annotations.core.services.studies import membership_add
    from annotations.models import Study
    from oversight_client import Platform

    answered, listed = _seed("bench client", args.answers, args.items)
    researcher = User.objects.create_user("bench-researcher", password="pw", is_staff=True)
    for pk in (answered, listed):
        membership_add(study=Study.objects.get(pk=pk), user=researcher,
                       role=StudyMembership.Role.RESEARCHER)
    token = Token.objects.create(user=researcher).key
    procs = start_server(url, workers=2, threads=2)
    try:
        platform = Platform(f"http://127.0.0.1:{PORT}", token, timeout=300)
        before = _peak_mb()
        started = time.perf_counter()
        rows = sum(1 for _ in platform.export(answered))
        streamed = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            size = platform.export_to(answered, Path(folder) / "labels.csv", fmt="csv")
            to_file = time.perf_counter() - started
            copied = _copy_seconds(url.rsplit("/", 1)[1], answered, Path(folder) / "copy.csv")
            copy_size = (Path(folder) / "copy.csv").stat().st_size
        started = time.perf_counter()
        items = sum(1 for _ in platform.items(listed, page_size=1000))
        listing = time.perf_counter() - started
        peak = _peak_mb()
    finally:
        stop_server(procs)
    assert rows == args.answers and items == args.items, (rows, items)
    print(f"export, JSONL decoded row by row: {rows:,} rows in {streamed:.1f} s "
          f"({rows / streamed:,.0f} rows/s; budget 60 s)")
    print(f"export_to, CSV to a file:        {size / 1e6:,.0f} MB in {to_file:.1f} s")
    print(f"psql \\copy of the same rows:     {copy_size / 1e6:,.0f} MB in {copied:.1f} s "
          f"(export / copy = {streamed / copied:.1f}×, export_to / copy = "
          f"{to_file / copied:.1f}×)")
    print(f"items, 1 000 a page:             {items:,} in {listing:.1f} s (budget 10 s)")
    print(f"client's peak memory:            {peak:.0f} MB (before the downloads: "
          f"{before:.0f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=1_000_000)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    with scratch_database("bench_client", keep=args.keep) as url:
        run(args, url)


if __name__ == "__main__":
    main()
