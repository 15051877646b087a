"""Queueing an audit's next chunk of work (issue 27). A module of its own: ``runs`` (a start,
the next chunk) and ``verify`` (the answer that closes a wave of questions) both queue runs,
and neither imports the other.

With a broker the run task goes to the ``audits`` queue (``CELERY_TASK_ROUTES``), which the
workers consume beside ``default`` and ``estimates``: a study's recompute never waits behind
an audit. On the embedded defaults (no broker) a web request does not wait for a run: it
runs in a thread (tests, with no debounce, run it inline), chunk after chunk.
"""

from __future__ import annotations

import threading

from django.conf import settings

from annotations.core.queue import task

# the run task's registered name (annotations/audit/tasks.py; core.queue)
RUN_TASK = "annotations.audit_tasks.audit_run_task"
SWEEP_TASK = "annotations.audit_tasks.audits_sweep_task"
QUEUE = "audits"


def run_enqueue(audit_id: int) -> None:
    """Start (or carry on) the audit's run: the Celery task on the ``audits`` queue, or in
    the embedded mode a thread (inline when tests set no debounce)."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        if settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS > 0:
            threading.Thread(target=_run_in_thread, args=(audit_id,), daemon=True).start()
        else:
            task(RUN_TASK).apply(args=(audit_id,))
        return
    task(RUN_TASK).apply_async(args=(audit_id,), queue=QUEUE)


def _run_in_thread(audit_id: int) -> None:
    from django.db import connections

    try:
        task(RUN_TASK).apply(args=(audit_id,))
    finally:
        connections.close_all()
