"""A scratch PostgreSQL database for a benchmark: created fresh, migrated, dropped after."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = ["-h", "127.0.0.1", "-U", "postgres"]


def database_url(name: str) -> str:
    return os.environ.get("BENCH_DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{name}")


@contextlib.contextmanager
def scratch_database(name: str, *, keep: bool = False) -> Iterator[str]:
    """Create ``name`` (dropping a leftover), point Django at it, migrate; yield its URL."""
    url = database_url(name)
    dbname = url.rsplit("/", 1)[1]
    subprocess.run(["dropdb", *PG, "--if-exists", dbname], check=True)
    subprocess.run(["createdb", *PG, dbname], check=True)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oversight_site.settings.local")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    try:
        yield url
    finally:
        connections.close_all()
        if not keep:
            subprocess.run(["dropdb", *PG, "--if-exists", "--force", dbname], check=True)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]
