"""Assisted studies: the rating API's "next task" behind gunicorn with many raters at once,
and the analysis recompute of a large study.

    .venv/bin/python bench/bench_rating.py --sentences 3000 --raters 20 --seconds 20
    .venv/bin/python bench/bench_rating.py --phases recompute --ratings 50000

Phase ``rating`` seeds an open assisted study (three arms — baseline, search + evidence,
the full trace — ``--sentences`` sentences with ``--samples`` verified traces each, through
the import services; ``--slots`` rating tasks per sentence and arm) in a scratch PostgreSQL
database, starts gunicorn on it and runs ``--raters`` client processes, each a rater with
its own token who joins (arm drawn by the service), passes the quiz and loops "next task"
(the sentence and, in assisted arms, the AI panel, with its exposure stored) → "rate".
Runs with Celery eager (the analysis recompute in the web process, debounced), with a real
Celery worker on Redis, and "queued" (recomputes queued on Redis, no worker: the request
path alone, without the analysis competing for the CPU) — ``--modes``. Prints
p50/p95/p99/max latency of both calls, throughput, and the audit: every task handed to
one rater, every rating stored once.
Budget (issue 9): p95 of "next task" ≤ 50 ms with 20 concurrent raters.

Phase ``recompute`` seeds a simulated study with about ``--ratings`` ratings
(``estimators.assisted.simulation`` through ``services/demo_assisted``) and times
``assisted_recompute`` (median of 3).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import (  # noqa: E402
    LoopClient,
    clients_gather,
    clients_run,
    load_arguments,
    loop_client_run,
    scratch_database,
)

LABELS = ["accurate", "inaccurate", "unsupported", "disputed", "no_attribution",
          "cant_assess"]


def seed_rating(args: argparse.Namespace) -> tuple[int, list[str]]:
    from rest_framework.authtoken.models import Token

    from annotations.assisted.services.demo import assisted_study_from_simulation
    from annotations.assisted.services.design import quiz_of, settings_of
    from annotations.assisted.services.raters import (
        quiz_submit,
        rater_join,
        warning_acknowledge,
    )
    from annotations.core.services.studies import membership_add
    from annotations.models import User
    from estimators.assisted.simulation import AssistedDesign, simulate_assisted

    t0 = time.perf_counter()
    # a token simulation (one rating per arm) only to get sentences, traces and arms: the
    # rating slots are what the bench's raters work through
    sim = simulate_assisted(AssistedDesign(n_items=args.sentences, n_samples=args.samples,
                                           raters_per_arm=1, items_per_rater=1), seed=1)
    seeded = assisted_study_from_simulation(name="bench-rating", sim=sim, seed=1,
                                            spare_slots=args.slots, prefix="seed")
    study = seeded.study
    t1 = time.perf_counter()
    quiz = quiz_of(settings_of(study))
    tokens = []
    for r in range(args.raters):
        user = User.objects.create_user(username=f"rater{r}", password="x")
        membership_add(study=study, user=user, role="annotator")
        assignment = rater_join(study=study, user=user)
        quiz_submit(study=study, user=user, answers=[q["answer"] for q in quiz])
        if assignment.components:
            warning_acknowledge(study=study, user=user)
        tokens.append(Token.objects.create(user=user).key)
    from django.db import connection

    with connection.cursor() as cur:  # steady state: autovacuum would do this
        cur.execute("VACUUM ANALYZE")
        cur.execute("SELECT count(*) FROM annotations_ratingtask WHERE study_id = %s "
                    "AND status = 'pending'", [study.pk])
        pending = cur.fetchone()[0]
    print(f"seeded {args.sentences:,} sentences × {args.samples} traces, 3 arms, "
          f"{pending:,} pending rating tasks in {t1 - t0:.1f} s; {args.raters} raters joined")
    return study.pk, tokens


@dataclass
class Rater(LoopClient):
    """A rater: next task (the sentence and, in assisted arms, the AI panel, its exposure
    stored) → think → rate."""

    assisted: bool = False

    def next_path(self) -> str:
        return f"/api/studies/{self.study_id}/ratings/next/"

    def answer_path(self, task_id: str) -> str:
        return f"/api/ratings/{task_id}/answer/"

    def seen(self, task: dict) -> None:
        self.assisted = "panel" in task

    def answer_body(self, task: dict, rng: random.Random) -> dict:
        body = {"label": rng.choice(LABELS), "confidence": rng.randrange(4)}
        if self.assisted:
            body["helpfulness"] = rng.randrange(3)
        return body


def run_mode(mode: str, url: str, study_id: int, tokens: list[str], args) -> None:
    from django.db import connection

    broker = args.broker if mode in ("worker", "queued") else None

    def raters() -> list[Rater]:
        stop_at = time.monotonic() + args.seconds
        return [Rater(t, study_id, stop_at, args.think / 1000, args.warmup) for t in tokens]

    clients = clients_run(url, raters, loop_client_run, workers=args.workers, threads=args.threads,
                          broker=broker, worker=mode == "worker")
    got = clients_gather(clients)
    sent, doubles, errors = got.sent, got.doubles, got.errors
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM annotations_rating r JOIN annotations_ratingtask t "
                    "ON t.id = r.task_id WHERE t.public_id = ANY(%s)", [sent])
        stored = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM annotations_exposure e JOIN annotations_ratingtask t "
                    "ON t.id = e.task_id WHERE t.public_id = ANY(%s) AND e.via = 'api'",
                    [sent])
        exposures = cur.fetchone()[0]
    assisted = sum(c.assisted for c in clients)
    print(f"\n[{mode}] {len(tokens)} raters ({assisted} in assisted arms), {args.seconds} s, "
          f"think {args.think} ms, gunicorn {args.workers}×{args.threads} gthread")
    got.latencies_print(("next task", "rate"), width=9)
    print(f"  throughput {len(sent) / args.seconds:.0f} ratings/s; double assignments "
          f"{doubles}; ratings sent {len(sent)} (distinct {len(set(sent))}), stored {stored}, "
          f"API exposures {exposures}; errors {len(errors)}")
    got.errors_print()


def run_recompute(args: argparse.Namespace) -> None:
    from annotations.assisted.services.analysis import assisted_recompute
    from annotations.assisted.services.demo import assisted_study_from_simulation, demo_design
    from annotations.models import Rating
    from estimators.assisted.simulation import simulate_assisted

    per_rater = 100
    raters_per_arm = math.ceil(args.ratings / (3 * per_rater))
    design = demo_design(n_items=args.recompute_sentences, raters_per_arm=raters_per_arm,
                         items_per_rater=per_rater, n_samples=args.samples)
    t0 = time.perf_counter()
    seeded = assisted_study_from_simulation(name="bench-recompute", sim=simulate_assisted(
        design, seed=2), seed=2, prefix="rc")
    n = Rating.objects.filter(study=seeded.study).count()
    print(f"\nseeded {n:,} ratings ({args.recompute_sentences:,} sentences, "
          f"{3 * raters_per_arm} raters) in {time.perf_counter() - t0:.1f} s")
    times = []
    for _ in range(3):
        t = time.perf_counter()
        snapshot = assisted_recompute(study_id=seeded.study.pk)
        times.append(time.perf_counter() - t)
    print(f"assisted recompute: median {statistics.median(times) * 1000:.0f} ms (min "
          f"{min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); snapshot n_answered="
          f"{snapshot.n_answered:,}, payload {len(str(snapshot.payload)) / 1e3:.0f} kB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phases", default="rating,recompute")
    parser.add_argument("--sentences", type=int, default=3000)
    parser.add_argument("--samples", type=int, default=3, help="traces per sentence (odd)")
    parser.add_argument("--slots", type=int, default=3, help="rating tasks per sentence+arm")
    parser.add_argument("--raters", type=int, default=20)
    load_arguments(parser, think=0, modes="queued,eager,worker",
                   broker="redis://127.0.0.1:6379/8")
    parser.add_argument("--ratings", type=int, default=50_000)
    parser.add_argument("--recompute-sentences", type=int, default=2000)
    parser.add_argument("--db", default="oversight_bench_rating")
    args = parser.parse_args()
    phases = args.phases.split(",")
    with scratch_database(args.db) as url:
        if "rating" in phases:
            study_id, tokens = seed_rating(args)
            for mode in args.modes.split(","):
                run_mode(mode, url, study_id, tokens, args)
        if "recompute" in phases:
            run_recompute(args)


if __name__ == "__main__":
    main()
