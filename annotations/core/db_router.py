"""Reads of dashboards and raw exports from a read replica (docs/scaling.md, stage 2).

With ``DATABASE_REPLICA_URL`` set, settings add the database alias ``replica`` (a PostgreSQL
hot standby streaming from the primary) and :class:`ReplicaRouter` sends to it the reads made
inside :func:`replica_reads` — the views that only read what the analysis wrote (a study's
dashboard pages, its figures' CSV, its raw exports; ``@replica_reads`` on the view). Every
other read, and every write, goes to the primary (``default``): a labeller's next query and
answer must see their own writes, and a replica may lag by a moment.

Never from the replica, even inside :func:`replica_reads`: who may read (accounts, sessions,
study memberships, permissions) — a member removed a moment ago must not get one more
dashboard from a replica that has not seen the removal; and nothing is migrated there (a
standby copies the primary's schema).

A replica that cannot be reached costs the primary some reads, never a page: the decorator
connects to it first, and on failure logs a warning and serves the view from the primary,
trying the replica again after ``DOWN_SECONDS`` (/healthz reports it, ``replica``).

``OVERSIGHT_REPLICA_READS`` (default: true when the alias exists) turns the routing off
without removing the alias (the test settings keep it off: the replica is a test mirror of
``default`` there, and the tests' transactions are invisible to a second connection).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings
from django.db import DatabaseError, connections

log = logging.getLogger(__name__)

REPLICA = "replica"
DOWN_SECONDS = 30.0  # after a failed connection, reads stay on the primary this long
_down_until = 0.0
# who may read: always from the primary
PRIMARY_APPS = frozenset({"auth", "sessions", "contenttypes", "admin"})
PRIMARY_MODELS = frozenset({("annotations", "user"), ("annotations", "studymembership")})

_reading: ContextVar[bool] = ContextVar("replica_reads", default=False)


def replica_configured() -> bool:
    """The alias exists and the routing is on."""
    return REPLICA in settings.DATABASES and getattr(settings, "OVERSIGHT_REPLICA_READS", True)


def replica_routed() -> bool:
    """Whether reads are being sent to the replica now (inside :func:`replica_reads`, with
    the alias configured and the routing on)."""
    return _reading.get() and replica_configured()


def replica_reachable() -> bool:
    """Connect to the replica (a no-op when connected): False — logged, and remembered for
    ``DOWN_SECONDS`` without trying again — when it cannot be reached."""
    global _down_until
    if time.monotonic() < _down_until:
        return False
    try:
        connections[REPLICA].ensure_connection()
    except DatabaseError as exc:
        _down_until = time.monotonic() + DOWN_SECONDS
        log.warning("read replica unreachable, reading from the primary for %.0f s: %s",
                    DOWN_SECONDS, exc)
        return False
    return True


def replica_down_forget() -> None:
    """Try the replica again at the next read (tests; an operator's fix)."""
    global _down_until
    _down_until = 0.0


@contextmanager
def replica_reads_within() -> Iterator[None]:
    """Reads in this block (of this thread or task) may go to the replica, if it can be
    reached (:func:`replica_reachable`)."""
    if not replica_configured() or not replica_reachable():
        yield
        return
    token = _reading.set(True)
    try:
        yield
    finally:
        _reading.reset(token)


def replica_reads(view: Callable) -> Callable:
    """View decorator: the view's reads may go to the replica (:func:`replica_reads_within`).
    For views that only read; a streamed response (a raw export) reads while it is sent,
    after the view returned, so its content is read within the same block."""

    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        with replica_reads_within():
            response = view(*args, **kwargs)
        if getattr(response, "streaming", False):
            response.streaming_content = _streamed_within(response.streaming_content)
        return response

    return wrapped


def _streamed_within(chunks: Iterable[bytes]) -> Iterator[bytes]:
    with replica_reads_within():
        yield from chunks


class ReplicaRouter:
    """``DATABASE_ROUTERS``' one router (module docstring)."""

    def db_for_read(self, model, **hints) -> str | None:
        if not replica_routed():
            return None
        meta = model._meta
        if meta.app_label in PRIMARY_APPS or (meta.app_label, meta.model_name) in PRIMARY_MODELS:
            return None
        return REPLICA

    def db_for_write(self, model, **hints) -> str | None:
        return None  # the primary

    def allow_relation(self, obj1, obj2, **hints) -> bool | None:
        return True  # one data set on both: an object read from the replica is the primary's

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None,
                      **hints) -> bool | None:
        return db != REPLICA
