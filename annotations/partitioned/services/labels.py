"""Answers: idempotent, lease-checked, and never lost or double-counted."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from annotations.core import engine
from annotations.core.errors import (
    AlreadyAnswered,
    DomainError,
    NotLeaseHolder,
    UndoRefused,
)
from annotations.core.models import Study, StudyMembership
from annotations.core.reviews.exclusions import exclusions_catch
from annotations.core.reviews.services import answer_reviews_forget
from annotations.core.services.recompute import (  # noqa: F401 - the scheduling lives there
    background_recomputes_join,
    study_recompute_schedule,
)
from annotations.partitioned.models import Query, QueryEvent
from annotations.partitioned.services.routing import (
    QUERY_KIND,
    RANK_MAX,
    follow_up_fields,
    leases_return,
    study_rng,
)

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
    return engine.task_locked(QUERY_KIND, pk=query_id, public_id=public_id)


def query_locked_for_answer(*, user, query_id: int | None = None,
                            public_id: str | None = None) -> Query | None:
    """The query locked for an answer, in one statement: the query row FOR UPDATE (only
    it: the study row is read, not locked, so answers of a study do not queue on it — an
    answer that read the study open before a close commits is ordered before the close),
    its study and whether ``user`` is still a specialist of its class (``may_still_work``
    reads it from here). None if there is no such query. (The masks and confidence-band
    bits are read with the item's predictions by ``query_bit_fields``.)"""
    from django.db.models import Exists, OuterRef

    lookup = {"pk": query_id} if public_id is None else {"public_id": public_id}
    in_class = StudyMembership.objects.filter(
        study_id=OuterRef("study_id"), user_id=user.pk, role=StudyMembership.Role.SPECIALIST,
        study_class__index=OuterRef("k"))
    query = (
        Query.objects.select_for_update(of=("self",)).select_related("study")
        .annotate(holder_in_class=Exists(in_class))
        .filter(**lookup).first()
    )
    if query is not None:
        query.in_class_checked_for = user.pk
    return query


def query_masks(query: Query) -> tuple[int, int]:
    """Bit masks over AI-system ordinals: (predicted class k, predicted anything parseable).
    Only systems of the query's own study count (ordinals are per study); bits are OR-ed."""
    fields = query_bit_fields(query)
    return fields["match_mask"], fields["present_mask"]


def query_bit_fields(query: Query) -> dict[str, int | None]:
    """The query's masks and confidence-band bits (``annotations.partitioned.services.banding``),
    from one read
    of its item's predictions."""
    from django.db.models import Q

    from annotations.partitioned.services.banding import band_bits, band_index
    from assistants.models import Prediction

    match = present = 0
    bands: dict[int, int] = {}
    rows = Prediction.objects.filter(
        Q(position__isnull=False) | Q(confidence__isnull=False),
        item_id=query.item_id, system__study_id=query.study_id,
    ).values_list("system__ordinal", "position", "confidence", "system__band_edges")
    for ordinal, position, confidence, edges in rows:
        bands[ordinal] = band_index(confidence, edges)
        if position is None:
            continue
        present |= 1 << ordinal
        if position == query.k:
            match |= 1 << ordinal
    return {"match_mask": match, "present_mask": present, **band_bits(bands)}


def _route_follow_up(query: Query, *, hold_until: dt.datetime | None = None) -> Query | None:
    """After a non-'yes' answer, ask the item's next drawn class (without replacement).

    ``hold_until``: the follow-up is not handed out before then (the answer's undo window;
    a pending query's ``lease_expires_at`` is the time before which it is not leased)."""
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
        stratum=query.stratum, lease_expires_at=hold_until,
        **follow_up_fields(query, order, nxt),
    )
    QueryEvent.objects.create(query=follow, kind=QueryEvent.Kind.ROUTED)
    return follow


@transaction.atomic
def label_submit(*, user, answer: str, query_id: int | None = None,
                 public_id: str | None = None, undoable: bool = True) -> SubmitResult:
    """Store the specialist's answer to a query they hold (by database or public id).

    Idempotent: submitting the same answer again returns the stored one (``created=False``);
    a different answer to an answered query is refused. Only the lease holder may answer,
    only before the lease expires, only while the study is open and they still answer the
    query's class, and not before the query has been on screen OVERSIGHT_MIN_ANSWER_MS
    (``AnsweredTooSoon``). Schedules a (debounced) recompute on commit.

    The follow-up a non-'yes' answer routes is held back for the undo window
    (``undo_window``, see ``label_undo``); ``undoable=False`` (simulations, whose answers
    are never undone) routes it at once."""
    if answer not in Query.Answer.values:
        raise DomainError(f"Unknown answer '{answer}'; use yes, no or unsure.", field="answer")
    query = query_locked_for_answer(user=user, query_id=query_id, public_id=public_id)
    if query is not None and query.status == Query.Status.ANSWERED:
        if query.answered_by_id == user.pk and query.answer == answer:
            return SubmitResult(query=query, created=False)
        if query.answered_by_id == user.pk:
            raise AlreadyAnswered(f"You already answered '{query.answer}' to this query.")
        raise NotLeaseHolder("This query is not leased to you.")
    query = engine.task_for_holder(QUERY_KIND, query, user, describe_answer=lambda q: q.answer)
    now = timezone.now()
    engine.answer_too_soon(QUERY_KIND, query, now)
    qc_correct = None
    if query.is_quality_check and answer != Query.Answer.UNSURE:
        gold_position = query.item.position_of(query.item.gold_option)
        qc_correct = (answer == Query.Answer.YES) == (gold_position == query.k)
    engine.task_complete(QUERY_KIND, query, user=user, now=now, detail={"answer": answer},
                         fields={"answer": answer, **query_bit_fields(query),
                                 "qc_correct": qc_correct})
    if not query.is_quality_check:
        exclusions_catch(query.study, [query.pk])
    if answer != Query.Answer.YES and not query.is_quality_check:
        window = engine.undo_window() if undoable else None
        _route_follow_up(query, hold_until=now + window if window else None)
    if not query.is_quality_check and not _recompute_deferred.get():
        study_id = query.study_id
        transaction.on_commit(lambda: study_recompute_schedule(study_id))
    return SubmitResult(query=query, created=True)


def label_undo_offered_until(*, study: Study, user) -> dt.datetime | None:
    """Until when the labelling page offers "Undo last answer" (None: there is nothing to
    undo; ``engine.undo_offered_until``)."""
    return engine.undo_offered_until(QUERY_KIND, study, Query.objects.filter(study=study),
                                     user=user)


@transaction.atomic
def label_undo(*, study: Study, user) -> Query:
    """Take back the user's last answer in the study within the undo window
    (OVERSIGHT_UNDO_SECONDS after answering), and give them that query again under a fresh
    lease.

    Why a fixed window: undo must not tell a quality check from a routed query. A routed
    non-'yes' answer (several queries per item) routes a follow-up to another class, and an
    answer that something depends on cannot be taken back; a quality check never has a
    follow-up. Refusing undo "once the follow-up was leased" therefore refused only routed
    answers — a refused undo of a 'no' proved the query was not a check. Instead the
    follow-up is not handed out before the window closes (``label_submit`` holds it), so
    within the window nothing ever depends on the answer and undo succeeds for a check, a
    routed 'yes' and a routed 'no' alike; after it, undo is refused for all of them with the
    same words. What undo returns depends only on the time since the answer and the user's
    own actions. (The guard on a leased follow-up remains for answers given with
    ``undoable=False``; the time is read after the follow-up is locked, so a lease taken at
    the window's end is refused as late, like a check at that moment.)

    Also refused (``UndoRefused``) when they have no answer or already undid their last
    answer. Otherwise, in one transaction: the never-leased follow-up is deleted, the answer
    cleared (so the estimates forget it; a recompute is scheduled), the query leased to the
    user again (their other leases go back to the pool, as on expiry), and an ``undone``
    audit row records the answer taken back."""
    last = engine.undo_target(
        QUERY_KIND, Query.objects.filter(study=study).select_related("study", "item"),
        user=user, noun="answer", again=gettext("answer the query you got back first."))
    follow_up = None
    if not last.is_quality_check:
        follow_up = (
            Query.objects.select_for_update()
            .filter(item_id=last.item_id, sequence=last.sequence + 1, is_quality_check=False)
            .first()
        )
    now = timezone.now()
    window = engine.undo_window()
    seconds = int(window.total_seconds())
    too_late = UndoRefused(ngettext(
        "Too late to undo: an answer can be undone for %(n)s second after it is given.",
        "Too late to undo: an answer can be undone for %(n)s seconds after it is given.",
        seconds) % {"n": seconds})
    if now - last.answered_at >= window:
        raise too_late
    if follow_up is not None and (follow_up.status != Query.Status.PENDING
                                  or follow_up.times_issued > 0):
        raise too_late
    detail = {"answer": last.answer, "answered_at": last.answered_at.isoformat(),
              "follow_up_deleted": follow_up.pk if follow_up is not None else None}
    if follow_up is not None:
        follow_up.delete()
    leases_return(Query.objects.select_for_update().filter(
        study=study, holder=user, status=Query.Status.LEASED), reason="undo")
    # the answer taken back takes its review with it: the next answer starts unreviewed
    answer_reviews_forget(study=study, answer_model=Query, answer_ids=[last.pk])
    engine.task_relet(QUERY_KIND, last, user=user, now=now, detail=detail,
                      clear={"answer": "", "qc_correct": None, "match_mask": 0,
                             "present_mask": 0, "band_bit0": None, "band_bit1": None,
                             "band_bit2": None})
    exclusions_catch(study, [last.pk])
    if not last.is_quality_check and not _recompute_deferred.get():
        transaction.on_commit(lambda: study_recompute_schedule(study.pk))
    return last
