"""Retrying a statement that met another connection's table lock in SQLite.

In a shared-cache SQLite database (the test suite's in-memory one) a connection that
meets a table another connection is reading or writing fails at once with "database table
is locked": no busy timeout applies. The embedded import thread and the pages polling its
job meet that way; each side retries its statement briefly instead of failing (a reader
with a 500, the import thread leaving its job "running" for good). A file database waits
on its busy timeout instead, and PostgreSQL never raises it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError

T = TypeVar("T")


def while_sqlite_locked(call: Callable[[], T], *, tries: int = 50, pause: float = 0.1) -> T:
    """``call()``, retried for up to ``tries × pause`` seconds while SQLite reports a table
    locked; any other error, or the last attempt's, is raised."""
    for attempt in range(tries):
        try:
            return call()
        except OperationalError as exc:
            if "locked" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(pause)
    raise AssertionError("unreachable: the last attempt returns or raises")
