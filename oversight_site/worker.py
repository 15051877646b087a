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
"""

from __future__ import annotations

import contextlib
import logging

from celery.worker.consumer import consumer as celery_consumer

log = logging.getLogger(__name__)
# Celery's bound on the cleanup's socket reads (5.7; before it, none)
COLLECT_SOCKET_TIMEOUT = getattr(celery_consumer, "COLLECT_SOCKET_TIMEOUT", 5.0)


class Consumer(celery_consumer.Consumer):
    def on_connection_error_after_connected(self, exc):
        connection = self.connection
        if connection is not None:
            with contextlib.suppress(Exception):  # as Celery's own cleanup: the socket is dead
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
