"""The task engine: one lease mechanism for every kind of work unit.

Partitioned queries, assisted rating tasks and critique tasks are all ``LeasedTask`` rows
(``annotations.core.task_models``) moved through pending → leased → answered by these functions
and nothing else:

* ``lease_first`` hands out the first pending task of a pool in stored random order, in one
  statement — ``UPDATE … WHERE id = (SELECT … ORDER BY rank LIMIT 1 FOR UPDATE SKIP
  LOCKED) RETURNING *`` — so concurrent requests never get the same task (SQLite, which
  serialises writers, runs it without the lock clause);
* ``lease_current`` resumes a worker's unexpired lease; ``task_for_holder`` checks an
  answer, heartbeat or skip comes from the holder of an unexpired lease who may still work;
* ``task_heartbeat`` extends a lease, ``task_mark_rendered`` records when it was first
  shown, ``answer_too_soon`` refuses answers given before OVERSIGHT_MIN_ANSWER_MS;
* ``task_complete`` closes a lease with an answer, ``task_hand_back`` returns a task for
  someone else (skip), ``leases_return`` / ``leases_reclaim`` return expired or abandoned
  leases to their pool (``leases_reclaim_all`` for every kind: the beat task);
* every change writes an audit row (``task_event``) in the same transaction.

A kind (``TaskKind``) names its models and the hooks where it differs: which rows are
dropped rather than returned, whether the worker may still work on a task (study open,
still a member…), and how long its lease lasts. Each kind's module registers its kind with
``task_kind_register``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone
from django.utils.text import capfirst
from django.utils.translation import gettext as _

from annotations.core.errors import AlreadyAnswered, AnsweredTooSoon, LeaseExpired, NotLeaseHolder
from annotations.core.exclusion_models import Exclusion
from annotations.core.models import ItemFlag, Study
from annotations.core.task_models import LeasedTask, TaskEventKind, TaskStatus
from annotations.core.words import the_noun, this_noun


def _no_check(task: Any, user: Any) -> None:
    return None


@dataclass(frozen=True)
class TaskKind:
    """What the engine needs to know about one kind of task.

    ``event_task_field`` is the name of the audit model's foreign key to the task;
    ``drop_on_return`` selects tasks that are deleted instead of returned to the pool when
    a lease ends (e.g. quality checks made per worker on demand); ``may_still_work(task,
    user)`` raises a ``DomainError`` when the worker may no longer act on the task;
    ``lease_for(task)`` is the length of a lease and of each heartbeat; ``item_field`` names
    the task's foreign key to the study type's item (``Query.item``, ``RatingTask.sentence``,
    ``CritiqueTask.question``): tasks of a withdrawn item (``core.models.ItemFlag``) are
    never leased."""

    name: str
    model: type[LeasedTask]
    event_model: type[models.Model]
    event_task_field: str
    lease_for: Callable[[Any], dt.timedelta]
    noun: str = "task"
    may_still_work: Callable[[Any, Any], None] = _no_check
    drop_on_return: models.Q | None = None
    locked_related: Sequence[str] = field(default_factory=tuple)
    item_field: str = ""


_KINDS: dict[str, TaskKind] = {}


def task_kind_register(kind: TaskKind) -> TaskKind:
    """Make ``kind`` known to ``leases_reclaim_all`` (idempotent). Returns the kind."""
    _KINDS[kind.name] = kind
    return kind


def task_kinds() -> list[TaskKind]:
    return list(_KINDS.values())


def lease_seconds_override() -> dt.timedelta | None:
    """OVERSIGHT_LEASE_SECONDS, when set, overrides every kind's lease length (tests of
    expiry)."""
    seconds = getattr(settings, "OVERSIGHT_LEASE_SECONDS", None)
    return dt.timedelta(seconds=seconds) if seconds else None


# ---------------------------------------------------------------- audit


def task_event(kind: TaskKind, task: LeasedTask | int, event: str, *, actor: Any = None,
               detail: dict | None = None) -> models.Model:
    """Write one audit row for ``task`` (an instance or a primary key); ``actor`` is a user,
    a user's primary key or None."""
    key = kind.event_task_field + ("_id" if isinstance(task, int) else "")
    who = {"actor_id": actor} if actor is None or isinstance(actor, int) else {"actor": actor}
    return kind.event_model.objects.create(**{key: task}, kind=event, **who,
                                           detail=detail or {})


def task_events_bulk(kind: TaskKind, rows: Sequence[tuple[int, str, Any, dict]]) -> None:
    """Audit rows (task pk, event, actor or None, detail) in one INSERT."""
    key = kind.event_task_field + "_id"
    kind.event_model.objects.bulk_create(
        kind.event_model(**{key: pk}, kind=event, actor=actor, detail=detail)
        for pk, event, actor, detail in rows
    )


# ---------------------------------------------------------------- leasing


def lease_first(kind: TaskKind, *, pool_sql: str, pool_params: Sequence[Any], user: Any,
                now: dt.datetime, expires: dt.datetime,
                rendered: bool = False) -> LeasedTask | None:
    """Lease the first pending task of a pool in stored random order (``rank``), in one
    statement, and audit it (``issued``). ``pool_sql`` is a condition on the candidate row
    ``q`` (e.g. ``q.study_id = %s AND q.k = %s``, or exclusions such as the worker's own
    outputs or skipped tasks) with ``pool_params`` for its placeholders. ``rendered``: the
    caller sends the task to its holder in this same request, so the statement also sets
    ``rendered_at`` = ``now`` and both audit rows (``issued``, ``rendered``) go in one
    INSERT — what ``task_mark_rendered`` would record, two statements fewer. Tasks of a
    withdrawn item are passed over (``TaskKind.item_field``), and a worker a standing
    exclusion holds (``core.exclusion_models.Exclusion``) gets none. Returns the leased task, or
    None when the pool is empty."""
    table = kind.model._meta.db_table
    if kind.item_field:
        pool_sql = (f"({pool_sql}) AND "
                    + ItemFlag.not_withdrawn_sql("q.study_id", f"q.{kind.item_field}_id"))
    # a worker a standing exclusion holds is leased nothing more in the study
    pool_sql = (f"({pool_sql}) AND NOT EXISTS (SELECT 1 FROM {Exclusion._meta.db_table} x "
                "WHERE x.study_id = q.study_id AND x.worker_id = %s AND x.kind = %s AND "
                "x.undone_at IS NULL)")
    pool_params = [*pool_params, user.pk, Exclusion.Kind.WORKER.value]
    lock = (" FOR UPDATE SKIP LOCKED"
            if connection.features.has_select_for_update_skip_locked else "")
    sql = (
        f"UPDATE {table} SET status = %s, holder_id = %s, issued_at = %s, rendered_at = %s, "
        f"lease_expires_at = %s, times_issued = times_issued + 1 WHERE id = ("
        f"SELECT q.id FROM {table} q WHERE q.status = %s AND ({pool_sql}) "
        f"ORDER BY q.rank LIMIT 1{lock}) RETURNING *"
    )
    params = [TaskStatus.LEASED, user.pk, now, now if rendered else None, expires,
              TaskStatus.PENDING, *pool_params]
    rows = list(kind.model.objects.raw(sql, params))
    if not rows:
        return None
    task = rows[0]
    if rendered:
        task_events_bulk(kind, [(task.pk, TaskEventKind.ISSUED, user, {}),
                                (task.pk, TaskEventKind.RENDERED, user, {})])
    else:
        task_event(kind, task, TaskEventKind.ISSUED, actor=user)
    return task


def lease_current(kind: TaskKind, tasks: models.QuerySet, *, user: Any,
                  now: dt.datetime | None = None) -> LeasedTask | None:
    """The user's oldest unexpired lease among ``tasks`` (a queryset of the kind's model
    narrowed to one pool or study)."""
    now = now or timezone.now()
    return (tasks.filter(holder=user, status=TaskStatus.LEASED, lease_expires_at__gt=now)
            .order_by("issued_at").first())


def leases_return(kind: TaskKind, leases: models.QuerySet, *, reason: str | None = None) -> int:
    """Give the (locked) leased tasks ``leases`` back to their pools, as on expiry: they
    become pending again with a ``reclaimed`` audit row (``reason`` in its detail when
    given); tasks matching ``kind.drop_on_return`` are deleted instead. Call inside a
    transaction. Returns how many leases ended."""
    dropped_q = kind.drop_on_return
    rows = list(leases.values_list("pk", "holder_id"))
    if not rows:
        return 0
    drop = set()
    if dropped_q is not None:
        drop = set(kind.model.objects.filter(dropped_q, pk__in=[pk for pk, _holder in rows])
                   .values_list("pk", flat=True))
    extra = {"reason": reason} if reason else {}
    back = [pk for pk, _ in rows if pk not in drop]
    task_events_bulk(kind, [(pk, TaskEventKind.RECLAIMED, None, {"holder": holder, **extra})
                            for pk, holder in rows if pk not in drop])
    kind.model.objects.filter(pk__in=back).update(
        status=TaskStatus.PENDING, holder=None, lease_expires_at=None, rendered_at=None)
    if drop:
        kind.model.objects.filter(pk__in=drop).delete()
    return len(rows)


def leases_reclaim(kind: TaskKind, *, now: dt.datetime | None = None, **filters: Any) -> int:
    """Return every expired lease of the kind (narrowed by ``filters``, e.g. ``study=…``)
    to its pool, skipping rows another transaction holds. Returns how many."""
    now = now or timezone.now()
    expired = kind.model.objects.filter(status=TaskStatus.LEASED, lease_expires_at__lt=now,
                                        **filters)
    with transaction.atomic():
        return leases_return(kind, expired.select_for_update(skip_locked=True))


def leases_reclaim_all(now: dt.datetime | None = None) -> dict[str, int]:
    """Reclaim expired leases of every registered kind (the periodic beat task)."""
    return {kind.name: leases_reclaim(kind, now=now) for kind in task_kinds()}


# ---------------------------------------------------------------- one held task


def task_locked(kind: TaskKind, *, pk: int | None = None,
                public_id: str | None = None) -> LeasedTask | None:
    """The task locked FOR UPDATE, by database id or by the public id workers see (with
    ``kind.locked_related`` joined, read but not locked: ``FOR UPDATE OF`` the task alone,
    so the tasks of one study never queue on its row); None if there is no such task."""
    lookup = {"pk": pk} if public_id is None else {"public_id": public_id}
    qs = kind.model.objects.select_for_update(of=("self",))
    if kind.locked_related:
        qs = qs.select_related(*kind.locked_related)
    return qs.filter(**lookup).first()


def task_for_holder(kind: TaskKind, task: LeasedTask | None, user: Any,
                    *, describe_answer: Callable[[Any], str] | None = None) -> LeasedTask:
    """``task`` (locked by the caller) checked to be leased to ``user`` under an unexpired
    lease, and ``kind.may_still_work``. Raises ``NotLeaseHolder``, ``AlreadyAnswered`` or
    ``LeaseExpired`` (or the hook's error) with a message naming the kind's noun."""
    this = this_noun(kind.noun)
    if task is None or task.holder_id != user.pk:
        raise NotLeaseHolder(_not_yours(kind))
    if task.status == TaskStatus.ANSWERED:
        said = f" '{describe_answer(task)}'" if describe_answer else ""
        raise AlreadyAnswered(_("You already answered%(said)s to %(this)s; its lease has "
                                "ended.") % {"said": said, "this": this})
    if task.status != TaskStatus.LEASED:
        raise NotLeaseHolder(_not_yours(kind))
    if task.lease_expires_at <= timezone.now():
        raise LeaseExpired(_("Your lease on %(this)s expired; it went back to the pool.")
                           % {"this": this})
    kind.may_still_work(task, user)
    return task


def answer_too_soon(kind: TaskKind, task: LeasedTask, now: dt.datetime) -> None:
    """Refuse an answer to a task rendered less than OVERSIGHT_MIN_ANSWER_MS ago
    (``AnsweredTooSoon``, 409). Leases handed out without rendering (simulations, benches,
    services) have no ``rendered_at`` and are not held to it."""
    minimum = settings.OVERSIGHT_MIN_ANSWER_MS
    if minimum <= 0 or task.rendered_at is None:
        return
    shown_ms = (now - task.rendered_at).total_seconds() * 1000
    if shown_ms < minimum:
        wait = math.ceil(minimum - shown_ms)
        raise AnsweredTooSoon(
            _("Answered too soon: %(the)s has been on screen for %(shown)s ms; answers are "
              "accepted after %(minimum)s ms. Read it and answer again in %(wait)s ms.")
            % {"the": the_noun(kind.noun), "shown": max(0, int(shown_ms)),
               "minimum": minimum, "wait": wait})


def task_heartbeat(kind: TaskKind, task: LeasedTask) -> LeasedTask:
    """Extend the lease of a task checked with ``task_for_holder`` by one lease length; a
    task deleted meanwhile (its study removed) is ``NotLeaseHolder``, not a server error."""
    task.lease_expires_at = timezone.now() + kind.lease_for(task)
    if not kind.model.objects.filter(pk=task.pk).update(
            lease_expires_at=task.lease_expires_at):
        raise NotLeaseHolder(_not_yours(kind))
    return task


def _not_yours(kind: TaskKind) -> str:
    return capfirst(_("%(this)s is not leased to you.") % {"this": this_noun(kind.noun)})


def task_mark_rendered(kind: TaskKind, task: LeasedTask) -> None:
    """Record (once per lease) when the server first rendered the task to its holder."""
    if task.rendered_at is not None:
        return
    now = timezone.now()
    with transaction.atomic(savepoint=False):  # the stamp and its audit row together
        if kind.model.objects.filter(pk=task.pk, rendered_at__isnull=True).update(
                rendered_at=now):
            task.rendered_at = now
            task_event(kind, task, TaskEventKind.RENDERED, actor=task.holder_id)


def task_complete(kind: TaskKind, task: LeasedTask, *, user: Any, now: dt.datetime,
                  fields: dict[str, Any], detail: dict | None = None) -> LeasedTask:
    """Close the lease of a task checked with ``task_for_holder`` with its answer: status
    answered, who and when, time on task (from rendering, else from issue), the kind's own
    answer ``fields``; audit row ``answered`` with ``detail``."""
    task.status = TaskStatus.ANSWERED
    task.answered_at = now
    task.answered_by = user
    task.lease_expires_at = None
    started = task.rendered_at or task.issued_at
    task.time_on_task_ms = int((now - started).total_seconds() * 1000) if started else None
    for name, value in fields.items():
        setattr(task, name, value)
    task.save(update_fields=["status", "answered_at", "answered_by", "lease_expires_at",
                             "time_on_task_ms", *fields])
    task_event(kind, task, TaskEventKind.ANSWERED, actor=user, detail=detail)
    return task


def task_hand_back(kind: TaskKind, task: LeasedTask, *, user: Any,
                   event: str = TaskEventKind.SKIPPED) -> LeasedTask:
    """Return a held task (checked with ``task_for_holder``) to its pool now, audited as
    ``event`` (a skip). Keeping it from this worker is the caller's pool condition."""
    task_event(kind, task, event, actor=user)
    task.status = TaskStatus.PENDING
    task.holder = None
    task.lease_expires_at = None
    task.rendered_at = None
    task.save(update_fields=["status", "holder", "lease_expires_at", "rendered_at"])
    return task


def task_relet(kind: TaskKind, task: LeasedTask, *, user: Any, now: dt.datetime,
               clear: dict[str, Any], detail: dict | None = None) -> LeasedTask:
    """Take back an answer (undo): the task is leased again to ``user`` under a fresh lease
    with its answer columns reset (the kind's own ``clear`` values too), audited
    ``undone`` with ``detail`` (what was taken back)."""
    task.status = TaskStatus.LEASED
    task.holder = user
    task.answered_at = None
    task.answered_by = None
    task.time_on_task_ms = None
    task.issued_at = now
    task.rendered_at = None
    task.lease_expires_at = now + kind.lease_for(task)
    task.times_issued += 1
    for name, value in clear.items():
        setattr(task, name, value)
    task.save(update_fields=["status", "holder", "answered_at", "answered_by",
                             "time_on_task_ms", "issued_at", "rendered_at",
                             "lease_expires_at", "times_issued", *clear])
    task_event(kind, task, TaskEventKind.UNDONE, actor=user, detail=detail)
    return task


def undo_window() -> dt.timedelta:
    """How long an answer can be undone, in every study type (OVERSIGHT_UNDO_SECONDS; 0:
    never)."""
    return dt.timedelta(seconds=max(0, settings.OVERSIGHT_UNDO_SECONDS))


def undo_target(kind: TaskKind, answered: models.QuerySet, *, user: Any, noun: str,
                again: str) -> Any:
    """The task whose answer ``user`` may take back: their latest of ``answered`` (the
    study's tasks they answered; locked), unless they have none (``UndoRefused``: "There is
    no <noun> of yours to undo."), already undid an answer since (``again`` says what to do
    instead), or may no longer work on it (``kind.may_still_work``). Every study type's undo
    starts here; the time limit and what else depends on the answer are the type's."""
    from annotations.core.errors import UndoRefused

    last = (answered.select_for_update().filter(answered_by=user, status=TaskStatus.ANSWERED)
            .order_by("-answered_at", "-pk").first())
    if last is None:
        raise UndoRefused(_("There is no rating of yours to undo.") if noun == "rating"
                          else _("There is no answer of yours to undo."))
    if kind.event_model.objects.filter(**{f"{kind.event_task_field}__study_id": last.study_id},
                                       actor=user, kind=TaskEventKind.UNDONE,
                                       at__gte=last.answered_at).exists():
        raise UndoRefused((_("Only your last rating can be undone, once;") if noun == "rating"
                           else _("Only your last answer can be undone, once;")) + " " + again)
    kind.may_still_work(last, user)
    return last


def undo_offered_until(kind: TaskKind, study: Study, answered: models.QuerySet, *, user: Any,
                       now: dt.datetime | None = None) -> dt.datetime | None:
    """Until when the labelling page offers "Undo" (None: not now). A read in one statement,
    no lock: as ``undo_target`` and the window allow — the study is open, ``user`` has an
    answer among ``answered`` (the study's tasks), has not undone one since, and the window
    has not passed. The page checked that they still work in the study; a type's own later
    refusals (an answer others already build on) still come from its undo service, with
    its message."""
    window = undo_window()
    if not window or study.status != Study.Status.OPEN:
        return None
    undone = kind.event_model.objects.filter(
        **{f"{kind.event_task_field}__study_id": study.pk}, actor=user,
        kind=TaskEventKind.UNDONE, at__gte=models.OuterRef("answered_at"))
    last = (answered.filter(answered_by=user, status=TaskStatus.ANSWERED)
            .order_by("-answered_at", "-pk")
            .values_list("answered_at", models.Exists(undone)).first())
    if last is None or last[0] is None or last[1]:
        return None
    until = last[0] + window
    return until if until > (now or timezone.now()) else None


def undone_detail(kind: TaskKind, task: LeasedTask, *, user: Any) -> dict | None:
    """What ``user`` took back from ``task`` by undo (the ``undone`` audit row's detail),
    while they hold it under the lease the undo gave them (None otherwise): the page puts
    it back into the form, so an undo never costs what was written."""
    if task.status != TaskStatus.LEASED or task.holder_id != getattr(user, "pk", user):
        return None
    event = (kind.event_model.objects
             .filter(**{kind.event_task_field: task}, actor=user, kind=TaskEventKind.UNDONE,
                     at__gte=task.issued_at)
             .order_by("-at", "-pk").first())
    return event.detail if event is not None else None


def lease_length(study: Study) -> dt.timedelta:
    """How long a lease (and each heartbeat) lasts: the study's ``lease_minutes``, unless the
    OVERSIGHT_LEASE_SECONDS setting overrides it (tests of expiry)."""
    return lease_seconds_override() or dt.timedelta(minutes=study.lease_minutes)
