"""Resources of one test process when pytest-xdist runs the suite in several ("gw0", "gw1",
…): what two processes would otherwise share is made their own.

* Redis: the broker's and the cache's database number minus the process's index
  (``redis://…/15`` → 15, 14, 13 …), so that no process's Celery worker takes another's
  tasks and no process flushes another's cache. It is set in the environment before the
  settings read it (Celery reads ``CELERY_BROKER_URL`` from the environment first), with
  ``ISOLATED`` beside it: the processes a test starts (a Celery worker, a health check)
  inherit both and use the URLs as they are, never moving them a second time.
* PostgreSQL: pytest-django gives each process its own test database (``…_gw0``).
* Ports: tests take free ports from the system, or ``base + worker_index()``.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

REDIS_DATABASES = 16  # redis-server's default number of databases
ISOLATED = "OVERSIGHT_TEST_PROCESS_ISOLATED"  # set once the URLs are this process's own


def worker_index(environ=os.environ) -> int:
    """0 outside pytest-xdist and in its first process; n in process "gwn"."""
    name = environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


def own_redis_database(url: str, index: int) -> str:
    """``url`` with its database number lowered by ``index`` (0 when it has none)."""
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    db = base - index
    if not 0 <= db < REDIS_DATABASES:
        raise ValueError(f"{url}: too few Redis databases below {base} for test process "
                         f"{index} (use a higher database number or fewer processes)")
    return urlunsplit(parts._replace(path=f"/{db}"))


def isolate_test_process(environ=os.environ) -> None:
    """Point this test process's Redis URLs at its own databases (module docstring)."""
    index = worker_index(environ)
    if not index or environ.get(ISOLATED):
        return
    for var in ("CELERY_BROKER_URL", "REDIS_URL"):
        url = environ.get(var, "")
        if url.startswith("redis"):
            environ[var] = own_redis_database(url, index)
    environ[ISOLATED] = "1"
