"""Answers: idempotent, lease-checked, and never lost or double-counted."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotations.errors import AlreadyAnswered, DomainError, LeaseExpired, NotLeaseHolder
from annotations.models import Query, QueryEvent
from annotations.services.routing import RANK_MAX, study_rng

_recompute_deferred: ContextVar[bool] = ContextVar("recompute_deferred", default=False)


@contextmanager
def recompute_deferred() -> Iterator[None]:
    """Within this block answers do not schedule recomputes (bulk simulations recompute
    explicitly when they choose)."""
    token = _recompute_deferred.set(True)
    try:
        yield
    finally:
        _recompute_deferred.reset(token)


@dataclass(frozen=True)
class SubmitResult:
    query: Query
    created: bool  # False when the same answer was already stored (idempotent replay)


def _locked_query_for_holder(query_id: int, user, query: Query | None = None) -> Query:
    """The query locked FOR UPDATE (pass it if already locked), checked to be held by
    ``user`` under an unexpired lease."""
    if query is None:
        query = (
            Query.objects.select_for_update()
            .select_related("study")
            .filter(pk=query_id)
            .first()
        )
    if query is None or query.holder_id != user.pk:
        raise NotLeaseHolder("This query is not leased to you.")
    if query.status == Query.Status.LEASED and query.lease_expires_at <= timezone.now():
        raise LeaseExpired("Your lease on this query expired; it went back to the pool.")
    return query


def query_masks(query: Query) -> tuple[int, int]:
    """Bit masks over AI-system ordinals: (predicted class k, predicted anything parseable).
    Only systems of the query's own study count (ordinals are per study); bits are OR-ed."""
    from assistants.models import Prediction

    match = present = 0
    rows = Prediction.objects.filter(
        item_id=query.item_id, system__study_id=query.study_id, position__isnull=False
    ).values_list("system__ordinal", "position")
    for ordinal, position in rows:
        present |= 1 << ordinal
        if position == query.k:
            match |= 1 << ordinal
    return match, present


def _route_follow_up(query: Query) -> Query | None:
    """After a non-'yes' answer, ask the item's next drawn class (without replacement)."""
    study = query.study
    nxt = query.sequence + 1
    if nxt >= study.queries_per_item:
        return None
    order = query.item.class_order
    if nxt >= len(order):
        return None
    rank = int(study_rng(study, 3, query.item_id, nxt).integers(0, RANK_MAX))
    follow = Query.objects.create(
        study=study, item=query.item, k=order[nxt], sequence=nxt, rank=rank,
        stratum=query.stratum,
    )
    QueryEvent.objects.create(query=follow, kind=QueryEvent.Kind.ROUTED)
    return follow


@transaction.atomic
def label_submit(*, query_id: int, user, answer: str) -> SubmitResult:
    """Store the specialist's answer to a query they hold.

    Idempotent: submitting the same answer again returns the stored one (``created=False``);
    a different answer to an answered query is refused. Only the lease holder may answer,
    and only before the lease expires. Schedules a (debounced) recompute on commit."""
    if answer not in Query.Answer.values:
        raise DomainError(f"Unknown answer '{answer}'; use yes, no or unsure.", field="answer")
    query = Query.objects.select_for_update().select_related("study").filter(pk=query_id).first()
    if query is not None and query.status == Query.Status.ANSWERED:
        if query.answered_by_id == user.pk and query.answer == answer:
            return SubmitResult(query=query, created=False)
        if query.answered_by_id == user.pk:
            raise AlreadyAnswered(f"You already answered '{query.answer}' to this query.")
        raise NotLeaseHolder("This query is not leased to you.")
    query = _locked_query_for_holder(query_id, user, query)
    now = timezone.now()
    query.status = Query.Status.ANSWERED
    query.answer = answer
    query.answered_at = now
    query.answered_by = user
    query.lease_expires_at = None
    started = query.rendered_at or query.issued_at
    query.time_on_task_ms = int((now - started).total_seconds() * 1000) if started else None
    query.match_mask, query.present_mask = query_masks(query)
    if query.is_quality_check and answer != Query.Answer.UNSURE:
        gold_position = query.item.position_of(query.item.gold_option)
        query.qc_correct = (answer == Query.Answer.YES) == (gold_position == query.k)
    query.save(update_fields=["status", "answer", "answered_at", "answered_by",
                              "lease_expires_at", "time_on_task_ms", "match_mask",
                              "present_mask", "qc_correct"])
    QueryEvent.objects.create(query=query, kind=QueryEvent.Kind.ANSWERED, actor=user,
                              detail={"answer": answer})
    if answer != Query.Answer.YES and not query.is_quality_check:
        _route_follow_up(query)
    if not query.is_quality_check and not _recompute_deferred.get():
        study_id = query.study_id
        transaction.on_commit(lambda: study_recompute_schedule(study_id))
    return SubmitResult(query=query, created=True)


def study_recompute_schedule(study_id: int) -> None:
    """Debounce recomputes per study: at most one is queued at a time; the task clears the
    flag when it starts, so answers arriving during a run schedule another."""
    from django.core.cache import cache

    from annotations.tasks import study_recompute_task

    delay = settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS
    if settings.CELERY_TASK_ALWAYS_EAGER and delay <= 0:
        study_recompute_task.apply(args=(study_id,))  # tests: the snapshot exists on return
        return
    if not cache.add(f"recompute-pending:{study_id}", 1, timeout=60):
        return
    if settings.CELERY_TASK_ALWAYS_EAGER:
        # Embedded defaults (no broker): the in-process "worker" is a timer thread, so the
        # answer request does not wait for the recompute.
        timer = threading.Timer(delay, _recompute_in_process, args=(study_id,))
        timer.daemon = True
        _background[:] = [t for t in _background if t.is_alive()]  # forget finished ones
        _background.append(timer)
        timer.start()
    else:
        study_recompute_task.apply_async(args=(study_id,), countdown=delay)


_background: list[threading.Timer] = []


def background_recomputes_join(timeout: float = 30.0) -> int:
    """Wait for the in-process (embedded mode) recomputes scheduled so far; returns how
    many were waited for. For clean shutdowns and tests."""
    waited = 0
    while _background:
        _background.pop().join(timeout)
        waited += 1
    return waited


def _recompute_in_process(study_id: int) -> None:
    from django.db import connections

    from annotations.tasks import study_recompute_task

    try:
        study_recompute_task.apply(args=(study_id,))
    finally:
        connections.close_all()  # this thread's connections
