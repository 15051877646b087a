"""Critique studies on PostgreSQL: generating every task of a 1 000-question study with
L = 3, recomputing its level tables, and "next task" behind gunicorn with 20 annotators.

    .venv/bin/python bench/bench_critique.py --questions 1000 --annotators 20 --seconds 30

1. Generation (budget ≤ 5 s for all levels): a study of ``--questions`` questions, L = 3,
   the paper's tree (7, 5, 3, 1). Opening makes the responses; then, level by level, every
   task of the level below is answered in bulk (not timed: rows as the answer service
   writes them, authors drawn so that nobody writes twice in a chain) and
   ``critique_generate`` makes the next level (timed) — 16 000 tasks and their blocks.
2. Recompute (budget ≤ 1 s): ``critique_recompute`` of that study (16 000 outputs: the
   read, every table, the snapshot row).
3. Pool probe: the lease statement's candidate search when an annotator is blocked from the
   first K pending tasks, with the block side table (NOT EXISTS on its (task, user) key,
   what the platform uses) against an int[] column of blocked users on the task row.
4. Next task (budget p95 ≤ 50 ms): a fresh study of the same size, ``--annotators`` client
   processes with API tokens looping "next task" → think (``--think`` ms, as
   bench_routing's budget run) → "answer" through gunicorn, with Celery
   eager (analysis in the web process) and with a real worker on Redis (``--modes``).
   Audit: no task handed to two annotators, every answer stored once, nobody ever got a
   task whose chain holds their own output.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import (  # noqa: E402
    LoopClient,
    clients_gather,
    clients_run,
    load_arguments,
    loop_client_run,
    percentile,
    scratch_database,
)

COUNTS = [7, 5, 3, 1]


def _study(name: str, questions: int, annotators: int):
    from annotations.core.services.studies import membership_add
    from annotations.critique.services.questions import critique_questions_import
    from annotations.critique.services.studies import critique_study_create
    from annotations.models import User

    study = critique_study_create(name=name, top_level=3, counts=COUNTS, seed=7)
    lines = [json.dumps({"id": f"q{i}", "text": f"Question {i}?", "options": list("wxyz"),
                         "gold": i % 4, "domain": ("math", "english")[i % 2]})
             for i in range(questions)]
    critique_questions_import(study=study, source=io.StringIO("\n".join(lines)),
                              name="bench.jsonl")
    users = []
    for a in range(annotators):
        user, _ = User.objects.get_or_create(username=f"{name}-a{a}")
        membership_add(study=study, user=user, role="annotator")
        users.append(user)
    return study, users


def _answer_level_in_bulk(study, level: int, users, rng: random.Random) -> int:
    """Answer every task of ``level`` as the answer service would store it (task closed,
    output written), authors drawn per question without repeats along the tree."""
    from django.db import connection
    from django.utils import timezone

    from annotations.core.services.bulk import rows_insert, rows_update
    from annotations.models import CritiqueOutput, CritiqueTask

    now = timezone.now()
    offset = sum(COUNTS[:level])
    tasks = list(CritiqueTask.objects.filter(study=study, level=level)
                 .values_list("pk", "question_id", "slot", "first_id", "second_id"))
    perms: dict[int, list[int]] = {}
    outputs, updates = [], []
    for pk, q, slot, first, second in tasks:
        if q not in perms:
            perms[q] = random.Random(q).sample([u.pk for u in users], sum(COUNTS))
        author = perms[q][offset + slot]
        updates.append((pk, "answered", author, now, now, 60000))
        outputs.append({"study_id": study.pk, "question_id": q, "level": level, "slot": slot,
                        "first_id": first, "second_id": second, "reasoning": "bulk",
                        "final": rng.randrange(4), "confidence": rng.randint(1, 5),
                        "choice": rng.choice(["first", "second", "neither"]) if level else "",
                        "time_ms": 60000, "author_kind": "human", "author_id": author,
                        "source": "task", "task_id": pk})
    rows_update(CritiqueTask, ["status", "answered_by_id", "answered_at", "issued_at",
                               "time_on_task_ms"], updates)
    rows_insert(CritiqueOutput, outputs)
    with connection.cursor() as cur:
        cur.execute("ANALYZE annotations_critiqueoutput")
    return len(outputs)


def bench_generation(args) -> object:
    from annotations.critique.services.generation import critique_generate
    from annotations.critique.services.studies import critique_study_open
    from annotations.models import CritiqueTask, CritiqueTaskBlock

    study, users = _study("gen", args.questions, args.annotators)
    rng = random.Random(1)
    t0 = time.perf_counter()
    made = critique_study_open(study=study)
    times = [("level 0", made, time.perf_counter() - t0)]
    for level in (1, 2, 3):
        _answer_level_in_bulk(study, level - 1, users, rng)
        t0 = time.perf_counter()
        made = critique_generate(study=study).total
        times.append((f"level {level}", made, time.perf_counter() - t0))
    _answer_level_in_bulk(study, 3, users, rng)
    total = sum(t for _, _, t in times)
    print(f"\n[generation] {args.questions:,} questions, L = 3, counts {COUNTS}")
    for name, made, seconds in times:
        print(f"  {name}: {made:>6,} tasks in {seconds * 1000:7.1f} ms")
    print(f"  every task: {CritiqueTask.objects.filter(study=study).count():,} tasks, "
          f"{CritiqueTaskBlock.objects.filter(task__study=study).count():,} blocks in "
          f"{total:.2f} s (budget 5 s)")
    return study


def bench_recompute(study, repeats: int) -> None:
    from annotations.critique.services.analysis import critique_recompute
    from annotations.models import CritiqueOutput

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        snapshot = critique_recompute(study_id=study.pk)
        times.append(time.perf_counter() - t0)
    n = CritiqueOutput.objects.filter(study=study).count()
    print(f"\n[recompute] {n:,} outputs: median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms over {repeats} runs (budget 1 s); snapshot "
          f"{len(json.dumps(snapshot.payload)) / 1024:.0f} KiB, {len(snapshot.payload['levels'])}"
          " level rows")


def bench_pool_probe(args) -> None:
    """Candidate search with K blocked tasks in front: side table vs an int[] column."""
    from django.db import connection

    from annotations.critique.services.generation import critique_generate
    from annotations.critique.services.studies import critique_study_open
    from annotations.models import CritiqueTask

    study, users = _study("probe", args.questions, args.annotators)
    critique_study_open(study=study)
    _answer_level_in_bulk(study, 0, users, random.Random(2))
    critique_generate(study=study)
    user = users[0].pk
    ranked = list(CritiqueTask.objects.filter(study=study, level=1, status="pending")
                  .order_by("rank").values_list("pk", flat=True))
    side = ("SELECT q.id FROM annotations_critiquetask q WHERE q.status = 'pending' AND "
            "q.study_id = %s AND q.level = 1 AND NOT EXISTS (SELECT 1 FROM "
            "annotations_critiquetaskblock b WHERE b.task_id = q.id AND b.user_id = %s) "
            "ORDER BY q.rank LIMIT 1")
    array = ("SELECT q.id FROM annotations_critiquetask q WHERE q.status = 'pending' AND "
             "q.study_id = %s AND q.level = 1 AND NOT (%s = ANY(q.blocked)) "
             "ORDER BY q.rank LIMIT 1")
    print(f"\n[pool probe] {len(ranked):,} pending level-1 tasks; one annotator blocked from "
          "the first K in queue order (median of 30, ms)")
    with connection.cursor() as cur:
        cur.execute("ALTER TABLE annotations_critiquetask ADD COLUMN blocked int[] "
                    "NOT NULL DEFAULT '{}'")
        cur.execute("UPDATE annotations_critiquetask t SET blocked = b.users FROM (SELECT "
                    "task_id, array_agg(user_id) users FROM annotations_critiquetaskblock "
                    "GROUP BY task_id) b WHERE b.task_id = t.id")
        for k in (0, 10, 100, 1000, len(ranked)):
            cur.execute("DELETE FROM annotations_critiquetaskblock WHERE user_id = %s AND "
                        "reason = 'bench'", [user])
            cur.execute("INSERT INTO annotations_critiquetaskblock (task_id, user_id, reason) "
                        "SELECT unnest(%s::bigint[]), %s, 'bench' ON CONFLICT DO NOTHING",
                        [ranked[:k], user])
            cur.execute("UPDATE annotations_critiquetask SET blocked = array_remove(blocked, "
                        "%s) WHERE study_id = %s", [user, study.pk])
            cur.execute("UPDATE annotations_critiquetask SET blocked = blocked || %s WHERE "
                        "id = ANY(%s)", [user, ranked[:k]])
            cur.execute("ANALYZE annotations_critiquetask")
            cur.execute("ANALYZE annotations_critiquetaskblock")
            row = []
            for sql in (side, array):
                ms = []
                for _ in range(30):
                    t0 = time.perf_counter()
                    cur.execute(sql, [study.pk, user])
                    got = cur.fetchone()
                    ms.append((time.perf_counter() - t0) * 1000)
                row.append(statistics.median(ms))
                assert (got[0] if got else None) == (ranked[k] if k < len(ranked) else None)
            print(f"  K = {k:>5}: side table {row[0]:6.2f} ms · int[] column {row[1]:6.2f} ms")
        cur.execute("ALTER TABLE annotations_critiquetask DROP COLUMN blocked")


def bench_in_process(args) -> None:
    """The next-task and answer services called directly (no HTTP, one at a time): wall and
    CPU time per call, the server-side cost without queueing."""
    from django.conf import settings
    from django.db import connection, transaction

    from annotations.critique.api import _task_data
    from annotations.critique.services.answers import CritiqueAnswer, critique_answer
    from annotations.critique.services.assignment import critique_task_next, task_mark_rendered
    from annotations.critique.services.studies import critique_study_open

    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    from annotations.core.services import recompute

    enqueue = recompute.recompute_enqueue
    recompute.recompute_enqueue = lambda *a, **k: False  # services only: no analysis thread
    study, users = _study("inproc", args.questions, args.annotators)
    critique_study_open(study=study)
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE")
    rng = random.Random(3)
    timings: dict[str, list[tuple[float, float]]] = {"next task": [], "answer": []}
    for i in range(args.calls):
        user = users[i % len(users)]
        w, c = time.perf_counter(), time.process_time()
        with transaction.atomic():
            task = critique_task_next(study=study, user=user)
            task_mark_rendered(task=task)
            _task_data(task)
        timings["next task"].append(((time.perf_counter() - w) * 1000,
                                     (time.process_time() - c) * 1000))
        w, c = time.perf_counter(), time.process_time()
        critique_answer(public_id=task.public_id, user=user, answer=CritiqueAnswer(
            "because", rng.randrange(4), rng.randint(1, 5),
            rng.choice(["first", "second", "neither"]) if task.level else ""))
        timings["answer"].append(((time.perf_counter() - w) * 1000,
                                  (time.process_time() - c) * 1000))
    recompute.recompute_enqueue = enqueue
    print(f"\n[in process] {args.calls} next task + answer calls, {args.annotators} annotators")
    for name, values in timings.items():
        wall = [v for v, _ in values[20:]]
        cpu = [c for _, c in values[20:]]
        print(f"  {name:<10} wall p50 {statistics.median(wall):5.1f} ms p95 "
              f"{percentile(wall, 95):5.1f} ms · Python CPU p50 {statistics.median(cpu):5.1f} ms "
              f"p95 {percentile(cpu, 95):5.1f} ms")


@dataclass
class Annotator(LoopClient):
    """An annotator: next task → think → answer (a final option, a confidence and, for a
    critique, which input is better); a 204 waits: the next level opens as others
    answer."""

    levels: list[int] = field(default_factory=list)
    on_empty: ClassVar[float | None] = 0.05
    answered_status: ClassVar[tuple[int, ...]] = (201,)

    def next_path(self) -> str:
        return f"/api/studies/{self.study_id}/critique/next/"

    def answer_path(self, task_id: str) -> str:
        return f"/api/critique/tasks/{task_id}/answer/"

    def seen(self, task: dict) -> None:
        self.levels.append(task["level"])

    def answer_body(self, task: dict, rng: random.Random) -> dict:
        body = {"reasoning": "because", "final": rng.randrange(len(task["options"])),
                "confidence": rng.randint(1, 5)}
        if task["level"]:
            body["choice"] = rng.choice(["first", "second", "neither"])
        return body


def bench_next_task(args, url: str, mode: str, index: int) -> None:
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from annotations.critique.services.studies import critique_study_open

    study, users = _study(f"next-{mode}", args.questions, args.annotators)
    critique_study_open(study=study)
    tokens = [Token.objects.get_or_create(user=u)[0].key for u in users]
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE")
    broker = args.broker if mode == "worker" else None

    def annotators() -> list[Annotator]:
        stop_at = time.monotonic() + args.seconds
        return [Annotator(t, study.pk, stop_at, args.think / 1000, args.warmup)
                for t in tokens]

    clients = clients_run(url, annotators, loop_client_run, workers=args.workers,
                          threads=args.threads, broker=broker)
    got = clients_gather(clients)
    sent, doubles, errors = got.sent, got.doubles, got.errors
    levels = defaultdict(int)
    for c in clients:
        for lv in c.levels:
            levels[lv] += 1
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM annotations_critiqueoutput o JOIN "
                    "annotations_critiquetask t ON t.id = o.task_id WHERE t.public_id = ANY(%s)",
                    [sent])
        stored = cur.fetchone()[0]
        # anyone who wrote an output below a task in its chain and then answered the task
        cur.execute("SELECT count(*) FROM annotations_critiqueoutput o JOIN "
                    "annotations_critiqueoutput c ON c.question_id = o.question_id AND "
                    "c.level < o.level AND c.slot < 2 AND c.author_id = o.author_id "
                    "WHERE o.study_id = %s", [study.pk])
        own = cur.fetchone()[0]
    print(f"\n[next task · {mode}] {len(tokens)} annotators, {args.seconds} s, think "
          f"{args.think:.0f} ms, gunicorn {args.workers}×{args.threads} gthread, "
          f"{args.questions:,} questions")
    got.latencies_print(("next task", "answer"))
    print(f"  tasks by level {dict(sorted(levels.items()))}; throughput "
          f"{len(sent) / args.seconds:.0f} answers/s; double assignments {doubles}; answers "
          f"sent {len(sent)}, stored {stored}; own output in a chain {own}; errors "
          f"{len(errors)}")
    got.errors_print()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--annotators", type=int, default=20)
    load_arguments(parser, think=1000, modes="eager,worker", broker="redis://127.0.0.1:6379/9")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--parts", default="generation,recompute,probe,inprocess,next")
    parser.add_argument("--calls", type=int, default=400, help="in-process next/answer pairs")
    parser.add_argument("--db", default="oversight_bench_critique")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    with scratch_database(args.db) as url:
        study = None
        if parts & {"generation", "recompute"}:
            study = bench_generation(args)
        if "recompute" in parts:
            bench_recompute(study, args.repeats)
        if "probe" in parts:
            bench_pool_probe(args)
        if "inprocess" in parts:
            bench_in_process(args)
        if "next" in parts:
            for i, mode in enumerate(args.modes.split(",")):
                bench_next_task(args, url, mode, i)


if __name__ == "__main__":
    main()
