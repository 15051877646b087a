"""Handing critique tasks to annotators: the task-engine kind and the level rule.

Critique tasks are a kind of the one task engine (``annotations.core.engine``): leased with the
study's time limit (no heartbeat extends it: the limit is per task), returned to their
pool when the lease expires, answered only by the holder of an unexpired lease.

Which level an annotator works at next — the *level rule*. Among the levels annotators
write, an annotator is offered the level where the share of the tree they have written is
smallest: the least ``done[l] / counts[l]`` (answered tasks at level l over the tree's
outputs per question at l); ties go to the higher level (a chain then reaches its top
sooner). So every annotator works at every level, in the tree's proportions (7 : 5 : 3 : 1
by default), rather than some annotators becoming "the critics": who works at a level is
not confounded with the level. When the preferred level has nothing for them, the next
level in that order is tried, then expired leases are reclaimed and the order is tried once
more.

The pool condition (one ``NOT EXISTS`` probe of ``CritiqueTaskBlock``'s (task, user) key per
candidate, inside the engine's ``lease_first`` statement) keeps from an annotator every task
whose chain holds one of their outputs at any depth, and every task of a level of a
question where they wrote another output already (one output per person per sibling group:
a majority vote never counts one person twice).
"""

from __future__ import annotations

import datetime as dt

from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.translation import gettext

from annotations.core import engine
from annotations.core.errors import NotPermitted, StudyNotOpen
from annotations.core.models import Study, StudyMembership, User
from annotations.core.selectors import row_id_possible
from annotations.core.words import no_longer_accepted
from annotations.critique.models import (
    CritiqueSettings,
    CritiqueTask,
    CritiqueTaskBlock,
    CritiqueTaskEvent,
)


def time_limit(settings: CritiqueSettings) -> dt.timedelta:
    """The lease of a critique task: the study's time limit (OVERSIGHT_LEASE_SECONDS
    overrides it, for tests of expiry)."""
    return engine.lease_seconds_override() or dt.timedelta(minutes=settings.time_limit_minutes)


def _lease_for(task: CritiqueTask) -> dt.timedelta:
    return time_limit(CritiqueSettings.objects.only("time_limit_minutes")
                      .get(study_id=task.study_id))


def may_still_work(task: CritiqueTask, user: User) -> None:
    """The study is open and ``user`` is still one of its annotators (one query when
    both hold)."""
    status = (StudyMembership.objects.filter(study_id=task.study_id, user=user,
                                             role=StudyMembership.Role.ANNOTATOR)
              .values_list("study__status", flat=True).first())
    member = status is not None
    if not member:
        status = Study.objects.values_list("status", flat=True).get(pk=task.study_id)
    if status != Study.Status.OPEN:
        raise StudyNotOpen(no_longer_accepted(task.study, status))
    if not member:
        raise NotPermitted(gettext("You are no longer an annotator of this study; ask a "
                                   "researcher if this is a mistake."))


CRITIQUE_KIND = engine.task_kind_register(engine.TaskKind(
    name="critique", model=CritiqueTask, event_model=CritiqueTaskEvent, event_task_field="task",
    lease_for=_lease_for, noun="task", may_still_work=may_still_work,
    # the study joined into the task's FOR UPDATE is read, not locked (``FOR UPDATE OF`` the
    # task): locking it would make every answer of a study wait for the others (the answer
    # locks the task's question instead)
    locked_related=("study",), item_field="question",
))


def annotator_settings(study: Study, user: User) -> CritiqueSettings:
    """The study's settings, read in the same query that checks ``user`` annotates it
    (NotPermitted otherwise)."""
    if study.kind != Study.Kind.CRITIQUE:
        raise NotPermitted(f"Study '{study}' is not a critique study.")
    settings = _annotated(study.pk, user).first()
    if settings is None:
        raise NotPermitted("You are not an annotator of this study.")
    settings.study = study
    return settings


def annotator_settings_by_id(study_id: int, user: User) -> CritiqueSettings | None:
    """The settings of critique study ``study_id`` with the study itself (``.study``), in
    one query that also checks ``user`` annotates it; None otherwise (the caller tells
    "no such study" from "not yours")."""
    if not row_id_possible(study_id):
        return None
    return _annotated(study_id, user).select_related("study").first()


def _annotated(study_id: int, user: User):
    return CritiqueSettings.objects.filter(
        study_id=study_id, study__kind=Study.Kind.CRITIQUE, study__memberships__user=user,
        study__memberships__role=StudyMembership.Role.ANNOTATOR)


def level_order(settings: CritiqueSettings, done: dict[int, int]) -> list[int]:
    """The levels to offer, best first: least share of the tree written (done[l] /
    counts[l]), ties to the higher level."""
    return sorted(settings.human_levels,
                  key=lambda lv: (done.get(lv, 0) / settings.count_at(lv), -lv))


def levels_done(study: Study, user: User) -> dict[int, int]:
    """The annotator's answered tasks per level of the study."""
    return dict(CritiqueTask.objects.filter(study=study, answered_by=user)
                .values_list("level").annotate(n=Count("id")).values_list("level", "n"))


def levels_state(study: Study, user: User, levels: list[int]
                 ) -> tuple[dict[int, int], set[int]]:
    """In one statement: the annotator's answered tasks per level, and which of ``levels``
    have a pending task (one probe of the pending-queue index per level) — empty levels are
    not tried."""
    table = CritiqueTask._meta.db_table
    probe = (f"SELECT -1, %s, 0 WHERE EXISTS (SELECT 1 FROM {table} q WHERE q.study_id = %s "
             "AND q.level = %s AND q.status = 'pending')")
    done = (f"SELECT level, level, COUNT(*) FROM {table} WHERE study_id = %s AND "
            "answered_by_id = %s GROUP BY level")
    sql = " UNION ALL ".join([done] + [probe] * len(levels))
    params = [study.pk, user.pk, *[p for lv in levels for p in (lv, study.pk, lv)]]
    with connection.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.fetchall()
    return ({lv: n for kind, lv, n in rows if kind != -1},
            {lv for kind, lv, _ in rows if kind == -1})


def task_current(*, study: Study, user: User, now: dt.datetime | None = None
                 ) -> CritiqueTask | None:
    """The annotator's unexpired lease in the study, if any."""
    return engine.lease_current(CRITIQUE_KIND, CritiqueTask.objects.filter(study=study),
                                user=user, now=now)


def _lease_level(study: Study, level: int, user: User, now: dt.datetime,
                 expires: dt.datetime, rendered: bool) -> CritiqueTask | None:
    blocks = CritiqueTaskBlock._meta.db_table
    pool = ("q.study_id = %s AND q.level = %s AND NOT EXISTS "
            f"(SELECT 1 FROM {blocks} b WHERE b.task_id = q.id AND b.user_id = %s)")
    return engine.lease_first(CRITIQUE_KIND, pool_sql=pool, pool_params=[study.pk, level, user.pk],
                              user=user, now=now, expires=expires, rendered=rendered)


@transaction.atomic
def critique_task_next(*, study: Study, user: User, now: dt.datetime | None = None,
                       settings: CritiqueSettings | None = None,
                       rendered: bool = False) -> CritiqueTask | None:
    """The annotator's current lease, else a new one by the level rule (module docstring),
    else None when no task is available to them. ``now`` is for simulations; ``settings``:
    the study's, when the caller read them with the membership check
    (``annotator_settings_by_id``); ``rendered``: the caller shows a new lease in this
    request (``engine.lease_first``)."""
    settings = settings or annotator_settings(study, user)
    if study.status != Study.Status.OPEN:
        raise StudyNotOpen(f"Study '{study}' is not open.")
    now = now or timezone.now()
    current = task_current(study=study, user=user, now=now)
    if current is not None:
        return current
    done, ready = levels_state(study, user, settings.human_levels)
    order = level_order(settings, done)
    expires = now + time_limit(settings)
    for attempt in range(2):
        if attempt:
            ready = levels_state(study, user, order)[1]
        for level in (lv for lv in order if lv in ready):
            task = _lease_level(study, level, user, now, expires, rendered)
            if task is not None:
                return task
        if attempt == 0 and not engine.leases_reclaim(CRITIQUE_KIND, now=now, study=study):
            break
    return None


def task_for_holder(*, public_id: str, user: User) -> CritiqueTask:
    """The task locked and checked to be held by ``user`` under an unexpired lease, in an
    open study they still annotate (NotLeaseHolder, LeaseExpired, AlreadyAnswered…)."""
    task = engine.task_locked(CRITIQUE_KIND, public_id=public_id)
    return engine.task_for_holder(CRITIQUE_KIND, task, user)


@transaction.atomic
def critique_task_skip(*, public_id: str, user: User) -> CritiqueTask:
    """Hand the task ``user`` holds back to its pool for another annotator; it is never
    offered to them again (a ``skipped`` block). Audited as a skip; raises what
    :func:`task_for_holder` raises (not theirs, lease ended, answered, study closed)."""
    task = task_for_holder(public_id=public_id, user=user)
    CritiqueTaskBlock.objects.get_or_create(
        task=task, user=user, defaults={"reason": CritiqueTaskBlock.Reason.SKIPPED})
    return engine.task_hand_back(CRITIQUE_KIND, task, user=user)


def skipped_count(*, study: Study, user: User) -> int:
    """Tasks of the study ``user`` skipped."""
    return CritiqueTaskBlock.objects.filter(task__study=study, user=user,
                                            reason=CritiqueTaskBlock.Reason.SKIPPED).count()


def task_mark_rendered(*, task: CritiqueTask) -> None:
    """Record (once per lease) when the task was first shown: time on task counts from
    here."""
    engine.task_mark_rendered(CRITIQUE_KIND, task)


def leases_reclaim(*, study: Study | None = None, now: dt.datetime | None = None) -> int:
    """Return the expired leases (of ``study``, or every critique study) to their pools."""
    filters = {} if study is None else {"study": study}
    return engine.leases_reclaim(CRITIQUE_KIND, now=now, **filters)
