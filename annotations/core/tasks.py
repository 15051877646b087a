"""Celery tasks: take ids, re-fetch, call one service; safe to run twice."""

from __future__ import annotations

import contextlib
import time

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from annotations.core.queue import (
    EXCLUSION_APPLY_TASK,
    EXCLUSIONS_CATCH_UP_TASK,
    IMPORT_JOB_TASK,
    LEASES_RECLAIM_TASK,
    RECOMPUTE_TASK,
    RECOMPUTES_CATCH_UP_TASK,
)


@shared_task(name=RECOMPUTE_TASK, bind=True, autoretry_for=(Exception,), retry_backoff=True,
             max_retries=3,
             acks_late=True)
def study_recompute_task(self, study_id: int) -> int | None:
    """Recompute a study's snapshot — estimates, or the assisted analysis, by the study's
    kind (``recompute.study_recompute_any``) — (debounced by the scheduler).

    Every attempt's outcome is recorded in the study's ``RecomputeState``: a failure with
    its time and short error (then Celery retries with backoff), a success clears it."""
    from annotations.core.models import Study
    from annotations.core.services.recompute import (
        pending_key,
        recompute_cost_record,
        recompute_failed,
        recompute_start_record,
        recompute_started,
        recompute_succeeded,
        study_recompute_any,
    )

    # Redis down: the key expires by itself, the recompute matters more
    with contextlib.suppress(Exception):
        cache.delete(pending_key(study_id))
    if not Study.objects.filter(pk=study_id).exists():
        return None
    started_at = timezone.now()
    recompute_start_record(study_id)  # paces a recompute scheduled while this one runs
    clock = time.monotonic()
    seq = recompute_started(study_id=study_id)
    try:
        snapshot = study_recompute_any(study_id=study_id)  # by the study's kind
    except Exception as exc:
        recompute_failed(study_id=study_id, exc=exc)
        raise
    recompute_succeeded(study_id=study_id, seq=seq, started_at=started_at)
    recompute_cost_record(study_id, time.monotonic() - clock)  # paces the next one
    return snapshot.pk if snapshot is not None else None


@shared_task(name=RECOMPUTES_CATCH_UP_TASK)
def recomputes_catch_up_task() -> list[int]:
    """Beat sweeper: recompute studies whose snapshot has been behind their answers for a
    while (Redis was down, or a worker died holding the delayed task)."""
    from annotations.core.services.recompute import recomputes_catch_up

    return recomputes_catch_up()


@shared_task(name=LEASES_RECLAIM_TASK)
def leases_reclaim_task() -> int:
    """Beat sweeper: return expired leases to their pools, and time out crowd participants
    past their deadline (their leases go back too: ``recruitment.services``)."""
    from annotations.core.engine import leases_reclaim_all  # kinds registered in apps.ready
    from annotations.core.recruitment.services import participants_time_out

    return sum(leases_reclaim_all().values()) + participants_time_out()


@shared_task(name=IMPORT_JOB_TASK, acks_late=True,
             time_limit=settings.OVERSIGHT_IMPORT_TIME_LIMIT + 30,
             soft_time_limit=settings.OVERSIGHT_IMPORT_TIME_LIMIT)
def import_job_task(job_id: int) -> str | None:
    """Run a queued import job (all or nothing; its row records progress and outcome).
    Not retried: a failed import is reported on the job. Running it twice is harmless (a
    job that is no longer queued is left alone); returns the job's final status."""
    from annotations.core.services.import_jobs import import_job_run

    job = import_job_run(job_id=job_id)
    return None if job is None else job.status



@shared_task(name=EXCLUSION_APPLY_TASK, acks_late=True,
             time_limit=settings.OVERSIGHT_IMPORT_TIME_LIMIT + 30,
             soft_time_limit=settings.OVERSIGHT_IMPORT_TIME_LIMIT)
def exclusion_apply_task(exclusion_id: int) -> bool:
    """Take out (or, once undone, put back) the answers of a large exclusion
    (``exclusions.exclusion_apply``). Safe twice: a rule no longer applying is left alone."""
    from annotations.core.reviews.exclusions import exclusion_apply

    return exclusion_apply(exclusion_id=exclusion_id)


@shared_task(name=EXCLUSIONS_CATCH_UP_TASK)
def exclusions_catch_up_task() -> list[int]:
    """Beat sweeper: queue again the jobs of exclusions still applying a while after they
    were made or undone (``exclusions.exclusions_catch_up``)."""
    from annotations.core.reviews.exclusions import exclusions_catch_up

    return exclusions_catch_up()
