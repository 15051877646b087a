"""Celery tasks: take ids, re-fetch, call one service; safe to run twice."""

from __future__ import annotations

import contextlib

from celery import shared_task
from django.core.cache import cache
from django.utils import timezone


@shared_task(bind=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=3,
             acks_late=True)
def study_recompute_task(self, study_id: int) -> int | None:
    """Recompute a study's estimates into a new snapshot (debounced by the scheduler).

    Every attempt's outcome is recorded in the study's ``RecomputeState``: a failure with
    its time and short error (then Celery retries with backoff), a success clears it."""
    from annotations.models import Study
    from annotations.services.estimates import study_recompute
    from annotations.services.recompute import (
        pending_key,
        recompute_failed,
        recompute_started,
        recompute_succeeded,
    )

    # Redis down: the key expires by itself, the recompute matters more
    with contextlib.suppress(Exception):
        cache.delete(pending_key(study_id))
    if not Study.objects.filter(pk=study_id).exists():
        return None
    started_at = timezone.now()
    seq = recompute_started(study_id=study_id)
    try:
        snapshot = study_recompute(study_id=study_id)
    except Exception as exc:
        recompute_failed(study_id=study_id, exc=exc)
        raise
    recompute_succeeded(study_id=study_id, seq=seq, started_at=started_at)
    return snapshot.pk


@shared_task
def recomputes_catch_up_task() -> list[int]:
    """Beat sweeper: recompute studies whose snapshot has been behind their answers for a
    while (Redis was down, or a worker died holding the delayed task)."""
    from annotations.services.recompute import recomputes_catch_up

    return recomputes_catch_up()


@shared_task
def leases_reclaim_task() -> int:
    """Beat sweeper: return expired leases to their class pool."""
    from annotations.services.routing import leases_reclaim

    return leases_reclaim()
