"""Answers: idempotent, lease-checked, and never lost or double-counted."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotations.errors import (
    AlreadyAnswered,
    AnsweredTooSoon,
    DomainError,
    LeaseExpired,
    NotLeaseHolder,
    NotPermitted,
    StudyNotOpen,
    UndoRefused,
)
from annotations.models import Query, QueryEvent, Study, StudyMembership
from annotations.services.recompute import (  # noqa: F401 - the scheduling lives there
    background_recomputes_join,
    study_recompute_schedule,
)
from annotations.services.routing import RANK_MAX, lease_length, leases_return, study_rng

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


def query_locked(*, query_id: int | None = None, public_id: str | None = None) -> Query | None:
    """The query (with its study) locked FOR UPDATE, by database id or by the public id that
    specialists see; None if there is no such query."""
    lookup = {"pk": query_id} if public_id is None else {"public_id": public_id}
    return Query.objects.select_for_update().select_related("study").filter(**lookup).first()


def _may_still_work(query: Query, user) -> None:
    """The study is open and ``user`` is still a specialist of the query's class: closing a
    study, removing a membership or moving a specialist to another class stops their
    answers, heartbeats and skips at once."""
    if query.study.status != Study.Status.OPEN:
        raise StudyNotOpen(f"Study '{query.study}' is {query.study.status}; answers are no "
                           "longer accepted.")
    in_class = StudyMembership.objects.filter(
        study_id=query.study_id, user=user, role=StudyMembership.Role.SPECIALIST,
        study_class__index=query.k,
    ).exists()
    if not in_class:
        raise NotPermitted("You no longer answer this class in this study; ask a researcher "
                           "if this is a mistake.")


def _locked_query_for_holder(query: Query | None, user) -> Query:
    """``query`` (locked by the caller) checked to be leased to ``user`` under an unexpired
    lease, in an open study whose specialist of this class they still are."""
    if query is None or query.holder_id != user.pk:
        raise NotLeaseHolder("This query is not leased to you.")
    if query.status == Query.Status.ANSWERED:
        raise AlreadyAnswered(f"You already answered '{query.answer}' to this query; its "
                              "lease has ended.")
    if query.status != Query.Status.LEASED:
        raise NotLeaseHolder("This query is not leased to you.")
    if query.lease_expires_at <= timezone.now():
        raise LeaseExpired("Your lease on this query expired; it went back to the pool.")
    _may_still_work(query, user)
    return query


def _too_soon(query: Query, now) -> None:
    """Refuse an answer to a query rendered less than OVERSIGHT_MIN_ANSWER_MS ago. Leases
    handed out without rendering (simulations, benches, services) have no ``rendered_at``
    and are not held to it."""
    minimum = settings.OVERSIGHT_MIN_ANSWER_MS
    if minimum <= 0 or query.rendered_at is None:
        return
    shown_ms = (now - query.rendered_at).total_seconds() * 1000
    if shown_ms < minimum:
        wait = math.ceil(minimum - shown_ms)
        raise AnsweredTooSoon(
            f"Answered too soon: the query has been on screen for {max(0, int(shown_ms))} ms; "
            f"answers are accepted after {minimum} ms. Read it and answer again in {wait} ms."
        )


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
def label_submit(*, user, answer: str, query_id: int | None = None,
                 public_id: str | None = None) -> SubmitResult:
    """Store the specialist's answer to a query they hold (by database or public id).

    Idempotent: submitting the same answer again returns the stored one (``created=False``);
    a different answer to an answered query is refused. Only the lease holder may answer,
    only before the lease expires, only while the study is open and they still answer the
    query's class, and not before the query has been on screen OVERSIGHT_MIN_ANSWER_MS
    (``AnsweredTooSoon``). Schedules a (debounced) recompute on commit."""
    if answer not in Query.Answer.values:
        raise DomainError(f"Unknown answer '{answer}'; use yes, no or unsure.", field="answer")
    query = query_locked(query_id=query_id, public_id=public_id)
    if query is not None and query.status == Query.Status.ANSWERED:
        if query.answered_by_id == user.pk and query.answer == answer:
            return SubmitResult(query=query, created=False)
        if query.answered_by_id == user.pk:
            raise AlreadyAnswered(f"You already answered '{query.answer}' to this query.")
        raise NotLeaseHolder("This query is not leased to you.")
    query = _locked_query_for_holder(query, user)
    now = timezone.now()
    _too_soon(query, now)
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


@transaction.atomic
def label_undo(*, study: Study, user) -> Query:
    """Take back the user's last answer in the study while nothing depends on it yet, and
    give them that query again under a fresh lease.

    Refused (``UndoRefused``) when they have no answer, when they already undid their last
    answer, or when the follow-up query that a non-'yes' answer routed has been leased
    (another specialist may have seen or answered it). Otherwise, in one transaction: the
    never-leased follow-up is deleted, the answer cleared (so the estimates forget it; a
    recompute is scheduled), the query leased to the user again (their other leases go back
    to the pool, as on expiry), and an ``undone`` audit row records the answer taken back."""
    last = (
        Query.objects.select_for_update().select_related("study", "item")
        .filter(study=study, answered_by=user, status=Query.Status.ANSWERED)
        .order_by("-answered_at", "-pk").first()
    )
    if last is None:
        raise UndoRefused("There is no answer of yours to undo.")
    undone_since = QueryEvent.objects.filter(
        query__study=study, actor=user, kind=QueryEvent.Kind.UNDONE, at__gte=last.answered_at
    ).exists()
    if undone_since:
        raise UndoRefused("Only your last answer can be undone, once; answer the query you "
                          "got back first.")
    _may_still_work(last, user)
    follow_up = None
    if not last.is_quality_check:
        follow_up = (
            Query.objects.select_for_update()
            .filter(item_id=last.item_id, sequence=last.sequence + 1, is_quality_check=False)
            .first()
        )
    if follow_up is not None and (follow_up.status != Query.Status.PENDING
                                  or follow_up.times_issued > 0):
        raise UndoRefused("Too late to undo: the next question about this item has already "
                          "gone to another specialist.")
    now = timezone.now()
    detail = {"answer": last.answer, "answered_at": last.answered_at.isoformat(),
              "follow_up_deleted": follow_up.pk if follow_up is not None else None}
    if follow_up is not None:
        follow_up.delete()
    leases_return(Query.objects.select_for_update().filter(
        study=study, holder=user, status=Query.Status.LEASED), reason="undo")
    last.status = Query.Status.LEASED
    last.holder = user
    last.answer = ""
    last.answered_at = None
    last.answered_by = None
    last.time_on_task_ms = None
    last.qc_correct = None
    last.match_mask = last.present_mask = 0
    last.issued_at = now
    last.rendered_at = None
    last.lease_expires_at = now + lease_length(study)
    last.times_issued += 1
    last.save(update_fields=["status", "holder", "answer", "answered_at", "answered_by",
                             "time_on_task_ms", "qc_correct", "match_mask", "present_mask",
                             "issued_at", "rendered_at", "lease_expires_at", "times_issued"])
    QueryEvent.objects.create(query=last, kind=QueryEvent.Kind.UNDONE, actor=user, detail=detail)
    if not last.is_quality_check and not _recompute_deferred.get():
        transaction.on_commit(lambda: study_recompute_schedule(study.pk))
    return last

