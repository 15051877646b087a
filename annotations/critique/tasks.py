"""Celery tasks of critique studies (imported by ``annotations.core.tasks``): take ids, re-fetch,
call one service; safe to run twice."""

from __future__ import annotations

from celery import shared_task

from annotations.critique.services.ai_runs import RUN_TASK


@shared_task(name=RUN_TASK, acks_late=True)
def critique_run_task(run_id: int) -> None:
    """One slice of an AI run (an endpoint run queues the next slice itself while work
    remains) or a JSONL import run."""
    from annotations.critique.models import CritiqueRun
    from annotations.critique.services.ai_runs import critique_ai_run_slice, critique_import_run

    run = CritiqueRun.objects.filter(pk=run_id).first()
    if run is None:
        return
    if run.kind == CritiqueRun.Kind.IMPORT:
        critique_import_run(run_id=run_id)
    elif critique_ai_run_slice(run_id=run_id):
        from annotations.critique.services.ai_runs import run_enqueue

        run_enqueue(run_id)  # the next slice
