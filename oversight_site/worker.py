"""The Celery worker's consumer, which survives losing the broker while it holds messages.

Celery 5.7.0 cleans up a lost broker connection in two steps
(``Consumer.on_connection_error_after_connected``, celery/celery#10242, the fix of
celery/celery#9705): ``connection.collect()``, then ``connection.close()``. With the Redis
transport, ``collect()`` tries to close the connection's default channel, which fails on
the dead socket before the channel is marked closed, and then drops the transport's client.
``close()`` closes that channel again; this time it gets as far as restoring the
unacknowledged messages the worker holds — the ETA messages of tasks waiting for their
countdown or retry (``acks_late``) — and the channel reads its connection parameters from
the dropped client: ``AttributeError: 'NoneType' object has no attribute 'hostname'``
(kombu's ``_connparams``; the same error as celery/kombu#582). That is not a connection
error, so it escapes the consumer and the worker stops with "Unrecoverable error" right
after "Restoring N unacknowledged message(s)". An idle worker holds no message, restores
nothing and survives. docs/operations.md, "Worker supervision".

``Consumer`` forgets the default channel once ``collect()`` has dropped the transport, so
the ``close()`` that follows has nothing to close again; the messages stay in Redis's
unacknowledged set, as with Celery 5.6, and the beat sweepers catch up on what they were
for. Any other error of that cleanup is logged instead of ending the worker: the consumer
reconnects with a new connection either way. Installed by ``CELERY_WORKER_CONSUMER``.

``python -m oversight_site.worker health`` is the worker container's health check: it asks
this container's worker for a pong, and stops a worker that has gone deaf so that the
container's restart policy starts a new one (``health_check``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from celery.utils.threads import bound_open_broker_sockets
from celery.worker.consumer import consumer as celery_consumer

log = logging.getLogger(__name__)
# Celery's bound on the cleanup's socket reads (5.7; before it, none)
COLLECT_SOCKET_TIMEOUT = getattr(celery_consumer, "COLLECT_SOCKET_TIMEOUT", 5.0)


class Consumer(celery_consumer.Consumer):
    def on_connection_error_after_connected(self, exc):
        connection = self.connection
        if connection is not None:
            # as Celery's own cleanup: bound the open sockets' reads first (a silent peer
            # would hang them: celery#9705), then collect; the socket is dead
            bound_open_broker_sockets(connection, COLLECT_SOCKET_TIMEOUT)
            with contextlib.suppress(Exception):
                connection.collect(socket_timeout=COLLECT_SOCKET_TIMEOUT)
            # collect() dropped the transport: the channel it could not close must not be
            # closed again through it (the base class's collect() and close() below then
            # find nothing left to do).
            connection._default_channel = None
        try:
            super().on_connection_error_after_connected(exc)
        except Exception:  # noqa: BLE001 - cleaning up a dead connection must not end the worker
            log.exception("cleaning up the lost broker connection failed; reconnecting anyway")
            self.connection = None


# --- the container's health check ----------------------------------------------------------
HEALTH_STATE = Path("/tmp/oversight-worker-health.json")
PING_TIMEOUT_SECONDS = 5.0


def health_check(*, ping: Callable[[], bool], broker_up: Callable[[], bool], kill_after: int,
                 kill: Callable[[int], None], state_file: Path = HEALTH_STATE,
                 boot: str = "") -> bool:
    """One check: healthy when the worker answers ``ping``. A worker that answered before
    and then misses ``kill_after`` checks in a row while the broker answers is deaf (alive,
    but neither consuming nor answering): it is told to stop — SIGTERM, a warm shutdown; two
    misses later SIGQUIT, a cold one — and the restart policy starts a new one. Misses while
    the broker is down do not count: no worker can answer then, nor would a new one.
    ``kill_after`` 0: never stop it (an orchestrator that replaces unhealthy containers).
    ``boot`` identifies the worker process (a new one starts with a clean count)."""
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        state = {}
    if state.get("boot") != boot:
        state = {"boot": boot, "answered": False, "misses": 0}
    healthy = ping()
    if healthy:
        state.update(answered=True, misses=0)
    elif state["answered"] and kill_after > 0 and broker_up():
        state["misses"] += 1
        if state["misses"] == kill_after:
            log.warning("the worker missed %d health checks with the broker up: stopping it",
                        kill_after)
            kill(signal.SIGTERM)
        elif state["misses"] >= kill_after + 2:
            kill(signal.SIGQUIT)
    with contextlib.suppress(OSError):
        state_file.write_text(json.dumps(state))
    return healthy


def _process_start(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot), '' if unknown."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def main(argv: list[str]) -> int:
    """``health``: check this container's worker (``celery@<host name>``, or
    OVERSIGHT_WORKER_NODE) and, after OVERSIGHT_WORKER_HEALTH_KILL_AFTER misses (3), stop
    the container's main process (PID 1, or OVERSIGHT_WORKER_PID); the count is kept in
    OVERSIGHT_WORKER_HEALTH_STATE (/tmp/oversight-worker-health.json). Exit status 0: healthy."""
    if argv[1:] != ["health"]:
        print("usage: python -m oversight_site.worker health", file=sys.stderr)
        return 2
    from oversight_site.celery import app

    node = os.environ.get("OVERSIGHT_WORKER_NODE") or f"celery@{socket.gethostname()}"
    pid = int(os.environ.get("OVERSIGHT_WORKER_PID", "1"))

    def ping() -> bool:
        try:
            return bool(app.control.ping(destination=[node], timeout=PING_TIMEOUT_SECONDS))
        except Exception:  # noqa: BLE001 - no answer, whatever the reason
            return False

    def broker_up() -> bool:
        try:
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
        except Exception:  # noqa: BLE001
            return False
        return True

    healthy = health_check(ping=ping, broker_up=broker_up,
                           kill_after=int(os.environ.get("OVERSIGHT_WORKER_HEALTH_KILL_AFTER",
                                                         "3")),
                           kill=lambda sig: os.kill(pid, sig), boot=_process_start(pid),
                           state_file=Path(os.environ.get("OVERSIGHT_WORKER_HEALTH_STATE",
                                                          HEALTH_STATE)))
    print(f"{node}: {'pong' if healthy else 'no answer'}")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
