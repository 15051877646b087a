"""Celery tasks of audits (gathered by ``annotations.tasks``): take ids, re-fetch, call one
service; safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from annotations.audit.services.enqueue import RUN_TASK, SWEEP_TASK


@shared_task(name=RUN_TASK, acks_late=True)
def audit_run_task(audit_id: int) -> None:
    """One chunk of an audit (``services.runs.audit_run_chunk``), then the next one queued
    while work remains; in the embedded mode (no broker) every chunk here, one after the
    other."""
    from annotations.audit.services.enqueue import run_enqueue
    from annotations.audit.services.runs import audit_run_chunk

    while audit_run_chunk(audit_id=audit_id):
        if not settings.CELERY_TASK_ALWAYS_EAGER:
            run_enqueue(audit_id)  # the next chunk, behind what waits on the audits queue
            return


@shared_task(name=SWEEP_TASK)
def audits_sweep_task() -> int:
    """Beat: fail the running audits whose worker died (``services.runs.audits_sweep``)."""
    from annotations.audit.services.runs import audits_sweep

    return audits_sweep()
