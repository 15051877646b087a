"""Celery tasks of audits (gathered by ``annotations.tasks``): take ids, re-fetch, call one
service; safe to run twice."""

from __future__ import annotations

from celery import shared_task

from annotations.audit.services.runs import RUN_TASK


@shared_task(name=RUN_TASK, acks_late=True)
def audit_run_task(audit_id: int) -> None:
    """Run one audit (``services.runs.audit_run``): progress on the row, cancellable."""
    from annotations.audit.services.runs import audit_run

    audit_run(audit_id=audit_id)
