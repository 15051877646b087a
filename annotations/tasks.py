"""Celery tasks: take ids, re-fetch, call one service; safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.core.cache import cache


@shared_task(bind=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=3,
             acks_late=True)
def study_recompute_task(self, study_id: int) -> int | None:
    """Recompute a study's estimates into a new snapshot (debounced by the scheduler)."""
    from annotations.models import Study
    from annotations.services.estimates import study_recompute

    cache.delete(f"recompute-pending:{study_id}")
    if not Study.objects.filter(pk=study_id).exists():
        return None
    return study_recompute(study_id=study_id).pk


@shared_task
def leases_reclaim_task() -> int:
    """Beat sweeper: return expired leases to their class pool."""
    from annotations.services.routing import leases_reclaim

    return leases_reclaim()
