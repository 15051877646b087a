"""Large imports: 200 000 items into an open study, then 200 000 predictions.

    .venv/bin/python bench/bench_imports.py                  # PostgreSQL and SQLite
    .venv/bin/python bench/bench_imports.py --db sqlite --items 50000

PostgreSQL: a scratch database (``BENCH_DATABASE_URL``, default
postgres://postgres@127.0.0.1:5432/oversight_bench_imports) created, migrated and dropped.
SQLite: a scratch file under /tmp. Each backend runs in its own process. The import
services are the ones the admin, the API and the commands call (one transaction each);
the figures are wall-clock seconds including parsing the JSONL bytes.
Budget (issue 8): both imports inside gunicorn's 30 s worker timeout.
Measured 2026-11-23 on the 2-core machine, idle: PostgreSQL items 14.4 s, predictions
7.0 s; SQLite items 15.0 s, predictions 8.7 s. At load average 7–9 (other jobs running):
PostgreSQL items 20.0–28.9 s, predictions 11.2–18.3 s (before the bulk paths: 58.8 s and
53.6 s); SQLite items 20.8–25.6 s, predictions 11.0–17.5 s (before: items 477 s).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("BENCH_DATABASE_URL",
                        "postgres://postgres@127.0.0.1:5432/oversight_bench_imports")
PG = ["-h", "127.0.0.1", "-U", "postgres"]


def files(n_items: int, k: int) -> tuple[bytes, bytes]:
    items = "\n".join(json.dumps({"id": f"i{i}", "text": f"Question {i}?",
                                  "options": [f"answer {i}.{j}" for j in range(k)],
                                  "gold": i % k, "stratum": f"s{i % 4}"})
                      for i in range(n_items))
    # option texts, one in ten unparseable (counted in the summary)
    preds = "\n".join(json.dumps({"item_id": f"i{i}", "system": "model-a",
                                  "prediction": "no idea" if i % 10 == 0
                                  else f"answer {i}.{(i * 7) % k}"})
                      for i in range(n_items))
    return items.encode(), preds.encode()


def run_one(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oversight_site.settings.local")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from annotations.models import Query
    from annotations.services.imports import items_import
    from annotations.services.studies import study_create, study_open
    from assistants.services import predictions_import

    study = study_create(name="bench-imports", classes=[f"C{j}" for j in range(args.k)])
    study_open(study=study)
    items, preds = files(args.items, args.k)
    t0 = time.perf_counter()
    result = items_import(study=study, source=io.BytesIO(items), name="items.jsonl")
    t1 = time.perf_counter()
    presult = predictions_import(study=study, source=io.BytesIO(preds), name="preds.jsonl")
    t2 = time.perf_counter()
    assert result.created == result.routed == args.items
    assert Query.objects.filter(study=study).count() == args.items
    assert presult.created == args.items
    print(f"{connection.vendor:10s} {args.items} items into an open study: {t1 - t0:6.1f} s "
          f"({result.routed} routed)")
    print(f"{connection.vendor:10s} {args.items} predictions: {t2 - t1:6.1f} s "
          f"({getattr(presult, 'unparseable', '?')} unparseable)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--db", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_one(args)
        return
    common = [sys.executable, __file__, "--child", "--items", str(args.items), "--k",
              str(args.k)]
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
