"""Large imports end to end through the import job: 200 000 items into an open study, then
200 000 predictions, uploaded to the API as files and followed until the job ends.

    .venv/bin/python bench/bench_imports.py                  # PostgreSQL and SQLite
    .venv/bin/python bench/bench_imports.py --db sqlite --items 50000
    BENCH_BROKER_URL=redis://127.0.0.1:6379/4 .venv/bin/python bench/bench_imports.py --db postgres

Each backend runs in its own process, against gunicorn (``_scratch.start_server``):
* PostgreSQL: a scratch database (``BENCH_DATABASE_URL``, default
  postgres://postgres@127.0.0.1:5432/oversight_bench_imports), created, migrated, dropped;
  Redis (``BENCH_BROKER_URL``, default redis://127.0.0.1:6379/0) and one real Celery worker
  run the jobs (the production shape).
* SQLite: a scratch file under /tmp, the embedded defaults: no broker, the jobs run in the
  web process's import thread (one gunicorn process, 4 threads).

For each file: POST /api/studies/<id>/import-jobs/ (multipart; answered 202 with the job),
then GET the job every 0.2 s until it has ended. Printed: the time from the start of the
upload to the job's end as the poll saw it ("end to end"), how long the upload request took,
the job's own run time (started → finished, on the worker or thread, PostgreSQL's deferred
foreign-key checks included), and the progress the polls saw (distinct percentages while it
ran). BENCH_TIMES=1 also prints when the job was created, started and finished. The request
that uploads never waits for the import, so gunicorn's worker timeout no longer bounds the
size of an import; the task's time limit (OVERSIGHT_IMPORT_TIME_LIMIT, 30 minutes) does.

Measured 2026-11-23 on the 2-core machine at load average 6.3–7.2 (other jobs running):
PostgreSQL + worker: items 37.8 s end to end (upload answered 3.4 s, job 34.2 s),
predictions 11.7 s (0.6 s, 11.0 s); SQLite embedded: items 36.9 s (1.2 s, 35.3 s),
predictions 20.1 s (0.4 s, 19.3 s). The services alone, idle, before the jobs: PostgreSQL
14.4 s / 7.0 s, SQLite 15.0 s / 8.7 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
PG_URL = os.environ.get("BENCH_DATABASE_URL",
                        "postgres://postgres@127.0.0.1:5432/oversight_bench_imports")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/0")
PG = ["-h", "127.0.0.1", "-U", "postgres"]
POLL_SECONDS = 0.2


def files(n_items: int, k: int) -> tuple[bytes, bytes]:
    items = "\n".join(json.dumps({"id": f"i{i}", "text": f"Question {i}?",
                                  "options": [f"answer {i}.{j}" for j in range(k)],
                                  "gold_index": i % k, "stratum": f"s{i % 4}"})
                      for i in range(n_items))
    # option texts, one in ten unparseable (counted in the summary)
    preds = "\n".join(json.dumps({"item_id": f"i{i}", "system": "model-a",
                                  "prediction": "no idea" if i % 10 == 0
                                  else f"answer {i}.{(i * 7) % k}"})
                      for i in range(n_items))
    return items.encode(), preds.encode()


def multipart(fields: dict[str, str], name: str, data: bytes) -> tuple[bytes, str]:
    boundary = "----bench-imports-boundary"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
             .encode() for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                 f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
                 + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def request(method: str, path: str, token: str, body: bytes | None = None,
            content_type: str | None = None) -> tuple[int, dict]:
    from _scratch import PORT

    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=600)
    headers = {"Authorization": f"Token {token}"}
    if content_type:
        headers["Content-Type"] = content_type
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, (json.loads(raw) if raw else {})


def import_through_the_job(study_id: int, token: str, kind: str, name: str,
                           data: bytes) -> dict:
    """Upload, then follow the job; returns the figures."""
    body, content_type = multipart({"kind": kind}, name, data)
    t0 = time.perf_counter()
    code, job = request("POST", f"/api/studies/{study_id}/import-jobs/", token, body,
                        content_type)
    uploaded = time.perf_counter() - t0
    if code != 202:
        raise SystemExit(f"upload answered {code}: {job}")
    path = "/api/import-jobs/{}/".format(job["id"])
    percents: list[int] = []
    while job["status"] not in ("succeeded", "failed"):
        time.sleep(POLL_SECONDS)
        code, job = request("GET", path, token)
        if job["status"] == "running" and job["percent"] is not None:
            percents.append(job["percent"])
    ended = time.perf_counter() - t0
    if job["status"] != "succeeded":
        raise SystemExit(f"{kind} job failed: {job['errors'][:3]}")
    from django.utils.dateparse import parse_datetime

    run = (parse_datetime(job["finished_at"]) - parse_datetime(job["started_at"])).total_seconds()
    if os.environ.get("BENCH_TIMES"):
        import datetime as dt

        start = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=time.perf_counter() - t0)
        for key in ("created_at", "started_at", "finished_at"):
            print(f"  {key}: +{(parse_datetime(job[key]) - start).total_seconds():.2f} s")
    return {"end_to_end": ended, "upload": uploaded, "run": run, "percents": percents,
            "summary": job["summary"]["text"]}


def run_one(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oversight_site.settings.local")
    os.environ.pop("CELERY_BROKER_URL", None)  # this process only prepares the study
    import django

    django.setup()
    from _scratch import start_server, stop_server
    from django.core.management import call_command
    from django.db import connection, connections
    from rest_framework.authtoken.models import Token

    from annotations.core.services.studies import membership_add, study_create, study_open
    from annotations.models import Query, User
    from assistants.models import Prediction

    call_command("migrate", verbosity=0)
    study = study_create(name="bench-imports", classes=[f"C{j}" for j in range(args.k)])
    study_open(study=study)
    researcher = User.objects.create_user("bench-researcher", password="x", is_staff=True)
    membership_add(study=study, user=researcher, role="researcher")
    token = Token.objects.create(user=researcher).key
    vendor = connection.vendor
    url = os.environ["DATABASE_URL"]
    connections.close_all()
    items, preds = files(args.items, args.k)
    if vendor == "postgresql":
        procs = start_server(url, workers=3, threads=4, broker=args.broker)
        where = f"Celery worker ({args.broker})"
    else:
        procs = start_server(url, workers=1, threads=4)
        where = "the web process's import thread (embedded)"
    try:
        print(f"{vendor}: jobs run on {where}; {len(items) / 1e6:.1f} MB of items, "
              f"{len(preds) / 1e6:.1f} MB of predictions", flush=True)
        for kind, name, data in (("items", "items.jsonl", items),
                                 ("predictions", "predictions.jsonl", preds)):
            r = import_through_the_job(study.pk, token, kind, name, data)
            seen = sorted(set(r["percents"]))
            print(f"{vendor:10s} {args.items} {kind:11s}: {r['end_to_end']:6.1f} s end to end "
                  f"(upload answered in {r['upload']:.2f} s; job ran {r['run']:.1f} s; "
                  f"progress seen {len(seen)} steps {seen[:1]}…{seen[-1:]} %) — "
                  f"{r['summary']}", flush=True)
    finally:
        stop_server(procs)
    assert Query.objects.filter(study=study).count() == args.items
    assert Prediction.objects.filter(system__study=study).count() == args.items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--db", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--broker", default=BROKER, help="Redis URL for the PostgreSQL run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_one(args)
        return
    common = [sys.executable, __file__, "--child", "--items", str(args.items), "--k",
              str(args.k), "--broker", args.broker]
    if args.db in ("postgres", "both"):
        name = PG_URL.rsplit("/", 1)[1]
        subprocess.run(["dropdb", *PG, "--if-exists", "--force", name], check=True)
        subprocess.run(["createdb", *PG, name], check=True)
        try:
            subprocess.run(common, env=dict(os.environ, DATABASE_URL=PG_URL), check=True)
        finally:
            subprocess.run(["dropdb", *PG, "--if-exists", "--force", name], check=True)
    if args.db in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/bench.sqlite3"
            subprocess.run(common, env=dict(os.environ, DATABASE_URL=url), check=True)


if __name__ == "__main__":
    main()
