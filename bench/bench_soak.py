"""Soak: many labellers on several web and worker hosts, one of each killed mid-run.

    sudo .venv/bin/python bench/bench_soak.py                 # 300 labellers, 10 minutes
    sudo .venv/bin/python bench/bench_soak.py --short         # 60 labellers, CI (≤ 3 min)

Builds the hosts of ``bench/hosts.py`` (two web hosts, two worker hosts, each in its own
network namespace; HAProxy, PgBouncer in transaction pooling, Redis and beat in the root
namespace) on a scratch PostgreSQL database (``--db``), seeded in bulk through the
project's services with one open study of each type — partitioned (items import, routing),
assisted (the demo's simulated study with spare rating slots, raters joined with the quiz
passed), critique (questions import, tasks made on opening) — and one token per labeller.
``--labellers`` clients (a third per study type) each loop next → think (``--think`` ms,
each wait 0.5–1.5 × it) → answer through HAProxy for ``--minutes``; a 5xx or a lost
connection is retried (next resumes the held lease; answers are idempotent), a 204 waits
a second. At ``--kill-at`` of the run the bench SIGKILLs the process groups of ``web1``
and ``worker1`` (everything in their namespaces), waits ``--down`` seconds and starts them
again.

Checks (exit status 1 when one fails):

* **answers lost: 0** — every answer a client got a 200/201 for is in the database: its
  task answered, by that client's user;
* **double leases: 0** — from the engine's audit rows (``TaskEvent``, written in the
  transaction of every lease change, ``annotations/core/engine.py``), per task in order:
  a lease opens with ``issued`` (or ``undone``) and closes with ``answered``, ``reclaimed``
  or ``skipped``; an ``issued`` while a lease is open (two holders at once), an
  ``answered`` with no open lease (a second answer to one lease) or by someone other than
  the lease's holder, each counts one. Also: no task acknowledged to two clients;
* **5xx only in flight at the kill** — every 5xx (and lost connection) a client saw was a
  request sent before the kill and ended after it, and every 5xx of HAProxy's log came
  from the killed web host, accepted before the kill and among the requests it had in
  flight then;
* **dashboards fresh within 10 s of the restart** — for each study, a snapshot whose
  ``n_answered`` covers every answer committed at the restart (the count each study type
  registers for the recompute sweeper) exists within 10 s; and at the end, once the
  clients stop, every study's latest snapshot counts every answer;
* **no other errors** — no 4xx, no client that stopped.

Prints throughput, p50/p95/p99 of next and answer (whole run, and the 30 s after the
kill), the counts above, and memory (RSS per host and service, peak of the samples).
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import io
import json
import multiprocessing
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scratch import latency_print, scratch_database  # noqa: E402
from hosts import PORT, STATE, Cluster, haproxy_status, unavailable  # noqa: E402

TYPES = ("partitioned", "assisted", "critique")
FRESH_SECONDS = 10.0
K = 5  # partitioned classes
CRITIQUE_COUNTS = [7, 5, 3, 1]  # tasks per question per level (0..3)


# ---------------------------------------------------------------- seeding


@dataclass
class Seeded:
    study_ids: dict[str, int]
    tokens: dict[str, list[tuple[str, int]]]  # type → (token, user id)


def _tokens(users) -> list[tuple[str, int]]:
    from rest_framework.authtoken.models import Token

    tokens = [Token(user=u, key=Token.generate_key()) for u in users]
    Token.objects.bulk_create(tokens)
    return [(t.key, t.user_id) for t in tokens]


def _members(study, researcher, role: str, names: list[str], *, classes: int = 0):
    """Accounts and memberships in bulk: the Members page's service (``members_add``)."""
    from annotations.core.services.studies import NewMember, members_add

    added = members_add(study=study, by=researcher, members=[
        NewMember(username=n, role=role, class_index=(i % classes) if classes else None)
        for i, n in enumerate(names)])
    return [a.membership.user for a in added]


def seed(args: argparse.Namespace) -> Seeded:
    from annotations.assisted.services.demo import assisted_study_from_simulation
    from annotations.assisted.services.design import quiz_of, settings_of
    from annotations.assisted.services.raters import (
        quiz_submit,
        rater_join,
        warning_acknowledge,
    )
    from annotations.core.services.studies import membership_add, study_create, study_open
    from annotations.critique.services.questions import critique_questions_import
    from annotations.critique.services.studies import critique_study_create, critique_study_open
    from annotations.models import User
    from annotations.partitioned.services.imports import items_import
    from estimators.assisted.simulation import AssistedDesign, simulate_assisted

    t0 = time.perf_counter()
    per_type = {t: args.labellers // 3 + (1 if i < args.labellers % 3 else 0)
                for i, t in enumerate(TYPES)}
    # answers one labeller can give in the run, with room to spare
    each = int(args.minutes * 60 / max(args.think / 1000, 0.2) * 1.5) + 20
    researcher = User.objects.create_superuser(username="soak-researcher", password=None)
    ids, tokens = {}, {}

    # partitioned: items through the import service, routed on opening
    n_items = max(500, per_type["partitioned"] * each)
    study = study_create(name="soak-partitioned", classes=[f"C{i}" for i in range(K)],
                         queries_per_item=1, seed=1)
    membership_add(study=study, user=researcher, role="researcher")
    lines = "\n".join(json.dumps({"id": f"i{i}", "text": f"item {i}", "stratum": f"s{i % 4}"})
                      for i in range(n_items))
    items_import(study=study, source=io.StringIO(lines), name="soak.jsonl", fmt="jsonl")
    study_open(study=study)
    users = _members(study, researcher, "specialist",
                     [f"spec{i}" for i in range(per_type["partitioned"])], classes=K)
    ids["partitioned"], tokens["partitioned"] = study.pk, _tokens(users)

    # assisted: the demo's simulated study (sentences, traces, arms) with spare slots
    n_raters = per_type["assisted"]
    sentences = max(200, min(4000, n_raters * each // 3 // 2))
    sim = simulate_assisted(AssistedDesign(n_items=sentences, n_samples=3, raters_per_arm=1,
                                           items_per_rater=1), seed=1)
    study = assisted_study_from_simulation(name="soak-assisted", sim=sim, seed=1,
                                           spare_slots=3, prefix="seed").study
    membership_add(study=study, user=researcher, role="researcher")
    users = _members(study, researcher, "annotator", [f"rater{i}" for i in range(n_raters)])
    quiz = [q["answer"] for q in quiz_of(settings_of(study))]
    for user in users:
        assignment = rater_join(study=study, user=user)
        quiz_submit(study=study, user=user, answers=quiz)
        if assignment.components:
            warning_acknowledge(study=study, user=user)
    ids["assisted"], tokens["assisted"] = study.pk, _tokens(users)

    # critique: questions through the import service, tasks made on opening
    n_ann = per_type["critique"]
    questions = max(100, n_ann * each // sum(CRITIQUE_COUNTS) * 2)
    study = critique_study_create(name="soak-critique", top_level=len(CRITIQUE_COUNTS) - 1,
                                  counts=CRITIQUE_COUNTS, seed=7)
    membership_add(study=study, user=researcher, role="researcher")
    lines = "\n".join(json.dumps({"id": f"q{i}", "text": f"Question {i}?",
                                  "options": list("wxyz"), "gold": i % 4})
                      for i in range(questions))
    critique_questions_import(study=study, source=io.StringIO(lines), name="soak.jsonl")
    users = _members(study, researcher, "annotator", [f"ann{i}" for i in range(n_ann)])
    critique_study_open(study=study)
    ids["critique"], tokens["critique"] = study.pk, _tokens(users)

    from django.db import connection

    with connection.cursor() as cur:  # steady state: autovacuum would do this
        cur.execute("VACUUM ANALYZE")
    print(f"seeded in {time.perf_counter() - t0:.1f} s: partitioned {n_items:,} items, "
          f"assisted {sentences:,} sentences × 3 arms, critique {questions:,} questions; "
          f"labellers {per_type}")
    return Seeded(ids, tokens)


# ---------------------------------------------------------------- clients

PATHS = {
    "partitioned": ("/api/studies/{study}/queries/next/", "/api/queries/{task}/answer/"),
    "assisted": ("/api/studies/{study}/ratings/next/", "/api/ratings/{task}/answer/"),
    "critique": ("/api/studies/{study}/critique/next/", "/api/critique/tasks/{task}/answer/"),
}


def answer_body(kind: str, task: dict, rng: random.Random) -> dict:
    if kind == "partitioned":
        return {"answer": rng.choice(["yes", "no", "no", "no", "unsure"])}
    if kind == "assisted":
        body = {"label": rng.choice(["accurate", "inaccurate"]), "confidence": rng.randrange(4)}
        if "panel" in task:
            body["helpfulness"] = rng.randrange(3)
        return body
    body = {"reasoning": "because", "final": rng.randrange(len(task["options"])),
            "confidence": rng.randint(1, 5)}
    if task["level"]:
        body["choice"] = rng.choice(["first", "second", "neither"])
    return body


@dataclass
class Labeller:
    """One simulated labeller (a thread of a client process): next → think → answer."""

    kind: str
    study_id: int
    token: str
    user_id: int
    stop_at: float  # time.monotonic() (CLOCK_MONOTONIC: the same in every process)
    think: float  # seconds
    calls: list[tuple[str, float, float, int]] = field(default_factory=list)
    # (call, start, end, status; 0: no response) of every request
    broken: list[tuple[str, float, float, str]] = field(default_factory=list)
    # (call, start, end, exception) of every request without a response
    acked: list[str] = field(default_factory=list)  # answered (200/201) task ids
    errors: list[str] = field(default_factory=list)

    def _call(self, conn_box: list, method: str, path: str, body: dict | None, name: str
              ) -> tuple[int, dict | None]:
        """One request, retried while the answer is a 5xx or no answer (reconnecting)."""
        while True:
            t0 = time.monotonic()
            try:
                conn_box[0].request(method, path, body=json.dumps(body or {}), headers={
                    "Authorization": f"Token {self.token}",
                    "Content-Type": "application/json"})
                response = conn_box[0].getresponse()
                raw = response.read()
                status = response.status
            except (OSError, http.client.HTTPException) as exc:
                status, raw = 0, b""
                self.broken.append((name, t0, time.monotonic(), type(exc).__name__))
            self.calls.append((name, t0, time.monotonic(), status))
            if status and status < 500:
                return status, (json.loads(raw) if raw else None)
            conn_box[0].close()
            conn_box[0] = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
            if time.monotonic() > self.stop_at + 60:
                return status, None
            time.sleep(0.2)

    def run(self) -> None:
        rng = random.Random(self.token)
        conn_box = [http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)]
        next_path, answer_path = PATHS[self.kind]
        time.sleep(rng.uniform(0, self.think))  # not all at once
        while time.monotonic() < self.stop_at:
            status, task = self._call(conn_box, "POST", next_path.format(study=self.study_id),
                                      None, "next")
            if status == 204:
                time.sleep(1.0)
                continue
            if status != 200:
                self.errors.append(f"next {status}: {task}")
                return
            time.sleep(self.think * rng.uniform(0.5, 1.5))
            status, data = self._call(conn_box, "POST", answer_path.format(task=task["id"]),
                                      answer_body(self.kind, task, rng), "answer")
            if status not in (200, 201):
                self.errors.append(f"answer {status}: {data}")
                return
            self.acked.append(task["id"])


def client_process(labellers: list[Labeller]) -> list[Labeller]:
    """Run a group of labellers as threads of one process; return them finished."""
    threads = [threading.Thread(target=lab.run) for lab in labellers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return labellers


# ---------------------------------------------------------------- checks


def answers_lost(labellers: list[Labeller]) -> tuple[int, int]:
    """(acknowledged answers, those not stored as answered by their labeller's user)."""
    from annotations.assisted.models import RatingTask
    from annotations.critique.models import CritiqueTask
    from annotations.partitioned.models import Query

    models = {"partitioned": Query, "assisted": RatingTask, "critique": CritiqueTask}
    acked = lost = 0
    for kind, model in models.items():
        want = {(t, lab.user_id) for lab in labellers if lab.kind == kind for t in lab.acked}
        ids = [t for t, _ in want]
        stored = set(model.objects.filter(public_id__in=ids, status="answered")
                     .values_list("public_id", "answered_by_id"))
        acked += len(want)
        lost += len(want - stored)
    return acked, lost


def double_leases(labellers: list[Labeller], since: dt.datetime) -> dict[str, int]:
    """Violations of one-holder-at-a-time in the engine's audit rows (module docstring)
    written from ``since`` (the run's start: the seeded answers are written in bulk with
    no lease), per task kind, plus task ids acknowledged to more than one client."""
    from annotations.core.engine import task_kinds

    out = {}
    for kind in task_kinds():
        field_id = kind.event_task_field + "_id"
        rows = (kind.event_model.objects.filter(at__gte=since).order_by(field_id, "id")
                .values_list(field_id, "kind", "actor_id").iterator(chunk_size=20000))
        bad, task, holder = 0, None, None
        for task_id, event, actor in rows:
            if task_id != task:
                task, holder = task_id, None
            if event in ("issued", "undone"):
                bad += holder is not None
                holder = actor
            elif event == "answered":
                bad += holder is None or holder != actor
                holder = None
            elif event in ("reclaimed", "skipped"):
                holder = None
        out[kind.name] = bad
    holders: dict[str, set] = {}
    for lab in labellers:
        for t in lab.acked:
            holders.setdefault(t, set()).add(lab.token)
    out["acked by two clients"] = sum(1 for h in holders.values() if len(h) > 1)
    return out


def answered_counts(study_ids: dict[str, int]) -> dict[int, int]:
    """Each study's answers as its type counts them for its snapshots' ``n_answered``."""
    from annotations.core.services.recompute import answered_counts_of

    return answered_counts_of(list(study_ids.values()))


def snapshot_counts(study_ids: dict[str, int]) -> dict[int, int]:
    from annotations.core.models import EstimateSnapshot

    out = {}
    for pk in study_ids.values():
        snap = (EstimateSnapshot.objects.filter(study_id=pk).order_by("-computed_at", "-id")
                .values_list("n_answered", flat=True).first())
        out[pk] = snap or 0
    return out


def wait_fresh(study_ids: dict[str, int], target: dict[int, int], start: float,
               limit: float) -> dict[int, float | None]:
    """Seconds from ``start`` until each study's latest snapshot counts ``target`` answers
    (None: not within ``limit``)."""
    from django.db import connections

    done: dict[int, float | None] = dict.fromkeys(study_ids.values())
    while time.monotonic() - start < limit and None in done.values():
        snaps = snapshot_counts(study_ids)
        for pk, n in snaps.items():
            if done[pk] is None and n >= target.get(pk, 0):
                done[pk] = time.monotonic() - start
        time.sleep(0.25)
    connections.close_all()
    return done


def haproxy_5xx(kill_wall: float, kill_end: float, killed: str) -> tuple[list[tuple], int]:
    """HAProxy's 5xx lines (request time, server, status) and how many requests the killed
    host had in flight at the kill (received before the kill ended, ended after it began:
    SIGKILL to a host's processes takes a tenth of a second), from its log."""
    lines, in_flight = [], 0
    for line in (STATE / "haproxy.log").read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) < 9 or not parts[0][:1].isdigit():
            continue
        try:  # the request came the handshake and idle times after the connection
            accepted = float(parts[0]) + (int(parts[1]) + int(parts[2])) / 1000
            server, status, active = parts[3], int(parts[4]), int(parts[5])
        except ValueError:
            continue
        if parts[7] == "/healthz":
            continue
        if server == killed and accepted <= kill_end and accepted + max(active, 0) / 1000 >= (
                kill_wall):
            in_flight += 1
        if status >= 500:
            lines.append((accepted, server, status))
    return lines, in_flight


# ---------------------------------------------------------------- run


def run(args: argparse.Namespace, seeded: Seeded) -> bool:
    from django.db import connections

    connections.close_all()  # the client processes are forked
    # programs answer at once (no minimum time on screen); beat's catch-up sweep every 5 s
    # (default 15): a recompute message held by the killed worker is redelivered only after
    # Redis's visibility timeout, and its debounce key blocks new ones for up to 60 s —
    # the sweep is what brings that study's dashboard back (docs/scaling.md)
    env = {"OVERSIGHT_MIN_ANSWER_MS": "0", "OVERSIGHT_CATCH_UP_SECONDS": "5"}
    with Cluster(database=args.db, web_workers=args.web_workers, threads=args.threads,
                 concurrency=args.concurrency, env=env) as cluster:
        print(f"hosts up: web1, web2 (gunicorn {args.web_workers}×{args.threads} gthread), "
              f"worker1, worker2 (celery -c {args.concurrency}); HAProxy {cluster.url}, "
              f"PgBouncer transaction pooling, Redis, beat")
        duration = args.minutes * 60
        start = time.monotonic()
        run_start = dt.datetime.now(dt.UTC)
        stop_at = start + duration
        labs = [Labeller(kind, seeded.study_ids[kind], token, uid, stop_at, args.think / 1000)
                for kind in TYPES for token, uid in seeded.tokens[kind]]
        random.Random(0).shuffle(labs)
        groups = [labs[i::args.procs] for i in range(args.procs)]
        ctx = multiprocessing.get_context("fork")
        pool = ctx.Pool(len(groups))
        pending = pool.map_async(client_process, groups)
        memory: dict[str, float] = {}

        def sample_memory() -> None:
            for name, mib in cluster.memory().items():
                memory[name] = max(memory.get(name, 0.0), mib)

        kill_at = start + duration * args.kill_at
        while time.monotonic() < kill_at:
            sample_memory()
            time.sleep(min(5.0, max(0.0, kill_at - time.monotonic())))
        kill_wall = time.time()
        t_kill0 = time.monotonic()
        killed = {name: cluster.kill(name) for name in ("web1", "worker1")}
        t_kill1 = time.monotonic()
        print(f"t+{t_kill0 - start:.0f} s: SIGKILL web1 ({killed['web1']} processes), "
              f"worker1 ({killed['worker1']} processes)")
        time.sleep(args.down)
        t_restart = time.monotonic()
        target = answered_counts(seeded.study_ids)  # every answer committed by the restart
        snaps = snapshot_counts(seeded.study_ids)
        cluster.restart("web1")
        cluster.restart("worker1")
        print(f"t+{t_restart - start:.0f} s: web1, worker1 started again")
        fresh = wait_fresh(seeded.study_ids, target, t_restart, limit=30.0)
        cluster.wait_balanced(["web1", "web2"], timeout=60)
        back = time.monotonic() - t_restart
        status = haproxy_status()
        print(f"  web1 back in HAProxy after {back:.1f} s ({status})")
        while not pending.ready():
            sample_memory()
            pending.wait(5.0)
        labs = [lab for group in pending.get() for lab in group]
        pool.close()
        pool.join()
        elapsed = time.monotonic() - start
        final_target = answered_counts(seeded.study_ids)
        final = wait_fresh(seeded.study_ids, final_target, time.monotonic(), limit=60.0)
        lines, in_flight = haproxy_5xx(kill_wall, kill_wall + (t_kill1 - t_kill0), "web1")
    return report(args, seeded, labs, elapsed=elapsed, t_kill=(t_kill0, t_kill1),
                  start=start, fresh=fresh, final=final, lines=lines, in_flight=in_flight,
                  kill_wall=kill_wall, memory=memory, run_start=run_start,
                  target=target, snaps=snaps)


def report(args, seeded: Seeded, labs: list[Labeller], *, elapsed: float, t_kill: tuple,
           start: float, run_start: dt.datetime, target: dict, snaps: dict, fresh: dict,
           final: dict, lines: list, in_flight: int, kill_wall: float, memory: dict) -> bool:
    calls = [c for lab in labs for c in lab.calls]
    ok_calls = [c for c in calls if c[3] and c[3] < 500]
    failed = [c for c in calls if not c[3] or c[3] >= 500]
    k0, k1 = t_kill
    in_flight_fail = [c for c in failed if c[1] <= k1 and c[2] >= k0]
    acked, lost = answers_lost(labs)
    doubles = double_leases(labs, run_start)
    errors = [e for lab in labs for e in lab.errors]
    haproxy_ok = all(s == "web1" and t <= kill_wall + (k1 - k0) for t, s, _ in lines)
    broken = [b for lab in labs for b in lab.broken]
    mix = ", ".join(f"{t} {len(seeded.tokens[t])}" for t in TYPES)
    print(f"\n[soak] {len(labs)} labellers ({mix}), {elapsed:.0f} s, think "
          f"{args.think:.0f} ms; web1 + worker1 killed at t+{k0 - start:.0f} s for "
          f"{args.down:.0f} s")
    print(f"  throughput {acked / elapsed:.1f} answers/s ({acked:,} answers), "
          f"{len(ok_calls) / elapsed:.1f} requests/s")
    for name in ("next", "answer"):
        latency_print(name, [(c[2] - c[1]) * 1000 for c in ok_calls if c[0] == name])
    for name in ("next", "answer"):
        latency_print(f"{name} (30 s from the kill)",
                      [(c[2] - c[1]) * 1000 for c in ok_calls
                       if c[0] == name and k0 <= c[1] <= k0 + 30], width=28)
    per_type = {t: sum(len(lab.acked) for lab in labs if lab.kind == t) for t in TYPES}
    print(f"  answers by type {per_type}")
    checks = {
        "answers lost": (lost, lost == 0),
        "double leases": (doubles, not any(doubles.values())),
        "5xx or no response only in flight at the kill": (
            f"{len(failed) - len(broken)} 5xx + {len(broken)} closed without a response, "
            f"{len(in_flight_fail)} of them sent before the kill and ended after it; HAProxy "
            f"logged {len(lines)} 5xx, all from web1 received before the kill ended: "
            f"{haproxy_ok}; web1 had {in_flight} requests in flight at the kill",
            len(in_flight_fail) == len(failed) and haproxy_ok and len(lines) <= in_flight),
        f"dashboards fresh ≤ {FRESH_SECONDS:.0f} s after the restart": (
            {t: (None if fresh[seeded.study_ids[t]] is None
                 else round(fresh[seeded.study_ids[t]], 1)) for t in TYPES},
            all(v is not None and v <= FRESH_SECONDS for v in fresh.values())),
        "dashboards fresh at the end": (
            {t: (None if final[seeded.study_ids[t]] is None
                 else round(final[seeded.study_ids[t]], 1)) for t in TYPES},
            all(v is not None for v in final.values())),
        "other errors (4xx, stopped clients)": (len(errors), not errors),
    }
    failed_checks = []
    for name, (value, passed) in checks.items():
        print(f"  {'ok  ' if passed else 'FAIL'} {name}: {value}")
        if not passed:
            failed_checks.append(name)
    for e in errors[:5]:
        print("      ", e)
    for name, t0, t1, exc in broken[:10]:
        print(f"       no response: {name} {exc} sent t_kill{t0 - k0:+.2f} s, "
              f"failed t_kill{t1 - k0:+.2f} s")
    print(f"  restart: answers counted at the restart {target}, snapshots then {snaps}")
    total = sum(memory.values())
    print("  memory, peak RSS MiB: " + ", ".join(f"{k} {v:.0f}" for k, v in memory.items())
          + f"; total {total:.0f}")
    if failed_checks:
        print(f"FAILED: {', '.join(failed_checks)}")
    return not failed_checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labellers", type=int, default=300)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--think", type=float, default=10000,
                        help="ms, mean: a person reading an item and deciding")
    parser.add_argument("--kill-at", type=float, default=0.4,
                        help="share of the run at which web1 and worker1 are killed")
    parser.add_argument("--down", type=float, default=10, help="seconds before the restart")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--procs", type=int, default=10, help="client processes")
    parser.add_argument("--db", default="hosts_soak")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--short", action="store_true",
                        help="CI: 60 labellers, 1 minute, think 2 s, down 5 s")
    args = parser.parse_args()
    if args.short:
        args.labellers, args.minutes, args.think, args.down, args.procs = 60, 1.0, 2000, 5, 4
    reason = unavailable()
    if reason:
        raise SystemExit(f"bench_soak: {reason}")
    t0 = time.monotonic()
    with scratch_database(args.db, keep=args.keep) as _url:
        seeded = seed(args)
        ok = run(args, seeded)
    print(f"soak took {time.monotonic() - t0:.0f} s in all "
          f"(until {dt.datetime.now(dt.UTC):%H:%M} UTC)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
