"""Rating tasks as a kind of the task engine (``RATING_KIND``): lease, heartbeat, skip and
answer, through ``annotations.core.engine`` only.

A rater's pool: pending tasks of their arm in their study whose sentence they have
neither answered, held nor skipped — so no rater rates a sentence twice (also a unique
constraint on answered tasks and on ratings). Order: the study's one random order
(``shared``: ascending ``rank``, a 62-bit hash per task), or each rater's own
(``per_rater``): every lease starts at a fresh uniformly random point u of that rank space
and takes the first task of the pool at or after u (wrapping round to the start), so each
next sentence is a random one of those left to the rater, drawn independently of anything
about the sentence, and raters' sequences differ. The engine's one statement leases the
task, skipping rows other transactions hold; both orders read the pending-queue index
(study, arm, rank), so a lease costs the same at 100 or 100 000 sentences (sorting the whole
pool per rater, as a hashed per-rater permutation would, grows with it). The order each
rater actually saw is in the task audit (``issued`` events).
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from annotations.assisted.models import (
    AssistedSettings,
    Exposure,
    RaterAssignment,
    Rating,
    RatingSkip,
    RatingTask,
    RatingTaskEvent,
)
from annotations.assisted.services.design import settings_of
from annotations.assisted.services.ranks import RANK_BITS
from annotations.assisted.services.raters import rater_join, rater_ready_check
from annotations.assisted.services.signals import rating_recorded
from annotations.core import engine
from annotations.core.engine import lease_length
from annotations.core.errors import (
    AlreadyAnswered,
    DomainError,
    NotLeaseHolder,
    NotPermitted,
    StudyNotOpen,
    UndoRefused,
)
from annotations.core.models import ItemFlag, Study, StudyMembership, User
from annotations.core.reviews.exclusions import exclusions_catch
from annotations.core.services.recompute import study_recompute_schedule
from annotations.core.words import no_longer_accepted

_random = random.SystemRandom()
MAX_COMMENT = 5000


def may_still_work(task: RatingTask, user: User) -> None:
    """The study is open, the user is still one of its raters, and the task is of their
    arm (closing the study or removing the member stops answers, heartbeats and skips)."""
    if task.study.status != Study.Status.OPEN:
        raise StudyNotOpen(no_longer_accepted(task.study, task.study.status, ratings=True))
    member = StudyMembership.objects.filter(study_id=task.study_id, user=user,
                                            role=StudyMembership.Role.ANNOTATOR)
    row = (RaterAssignment.objects.filter(study_id=task.study_id, user=user)
           .values_list("arm_id", Exists(member)).first())
    if not (row[1] if row is not None else member.exists()):
        raise NotPermitted(gettext("You are no longer a rater in this study; ask a "
                                   "researcher if this is a mistake."))
    if row is None or row[0] != task.arm_id:
        raise NotPermitted(gettext("This task belongs to another arm."))


RATING_KIND = engine.task_kind_register(engine.TaskKind(
    name="rating", model=RatingTask, event_model=RatingTaskEvent, event_task_field="task",
    lease_for=lambda task: lease_length(task.study), noun="sentence",
    may_still_work=may_still_work, locked_related=("study", "arm"),
    item_field="sentence",
))


def _pool(study: Study, assignment: RaterAssignment, user: User) -> tuple[str, list]:
    tasks, skips = RatingTask._meta.db_table, RatingSkip._meta.db_table
    return (f"q.study_id = %s AND q.arm_id = %s AND NOT EXISTS (SELECT 1 FROM {tasks} o "
            f"WHERE o.sentence_id = q.sentence_id AND (o.answered_by_id = %s OR "
            f"o.holder_id = %s)) AND NOT EXISTS (SELECT 1 FROM {skips} s WHERE s.user_id = %s "
            f"AND s.sentence_id = q.sentence_id)",
            [study.pk, assignment.arm_id, user.pk, user.pk, user.pk])


def _starts(order: str) -> list[int | None]:
    """Lower bounds on ``rank`` to try in turn: the shared order starts at the beginning;
    a rater's own starts at a random point, then wraps round to the beginning."""
    if order == AssistedSettings.ItemOrder.SHARED:
        return [None]
    return [_random.getrandbits(RANK_BITS), None]


def rating_current_lease(*, study: Study, user: User,
                         now: dt.datetime | None = None) -> RatingTask | None:
    return engine.lease_current(RATING_KIND, RatingTask.objects.filter(study=study),
                                user=user, now=now)


@transaction.atomic
def rating_lease_next(*, study: Study, user: User, assignment: RaterAssignment | None = None,
                      rendered: bool = False) -> RatingTask | None:
    """The rater's current task, else the next of their pool under a lease (None: nothing
    left for them). Joins the rater (draws their arm) on first call; refused until the
    quiz is passed (``TutorialRequired``). ``assignment``: the rater's, when the caller
    has read it (``rater_for_work``); ``rendered``: the caller shows a new lease in this
    request (``engine.lease_first``)."""
    if study.status != Study.Status.OPEN:
        raise StudyNotOpen(f"Study '{study}' is not open.")
    assignment = assignment or rater_join(study=study, user=user)
    rater_ready_check(assignment)
    now = timezone.now()
    current = rating_current_lease(study=study, user=user, now=now)
    if current is not None:
        return current
    pool_sql, params = _pool(study, assignment, user)
    starts = _starts(settings_of(study).item_order)
    expires = now + lease_length(study)
    for attempt in range(2):
        for start in starts:
            bounded = (f"q.rank >= %s AND {pool_sql}", [start, *params])
            sql, args = (pool_sql, params) if start is None else bounded
            task = engine.lease_first(RATING_KIND, pool_sql=sql, pool_params=args, user=user,
                                      now=now, expires=expires, rendered=rendered)
            if task is not None:
                return task
        if attempt == 0 and not engine.leases_reclaim(RATING_KIND, now=now, study=study,
                                                      arm_id=assignment.arm_id):
            break
    return None


def rating_task_for_holder(*, user: User, public_id: str) -> RatingTask:
    task = engine.task_locked(RATING_KIND, public_id=public_id)
    return engine.task_for_holder(RATING_KIND, task, user,
                                  describe_answer=lambda t: t.rating.get_label_display())


@transaction.atomic
def rating_heartbeat(*, user: User, public_id: str) -> RatingTask:
    """Extend the rater's lease while they work (refused like an answer)."""
    return engine.task_heartbeat(RATING_KIND, rating_task_for_holder(user=user,
                                                                     public_id=public_id))


def rating_mark_rendered(*, task: RatingTask) -> None:
    engine.task_mark_rendered(RATING_KIND, task)


def _last_exposure(task: RatingTask, user: User) -> Exposure | None:
    return (Exposure.objects.filter(task=task, rater=user, lease=task.times_issued)
            .order_by("-shown_at", "-pk").first())


def _time_on_task(task: RatingTask, now: dt.datetime) -> int | None:
    started = task.rendered_at or task.issued_at
    return int((now - started).total_seconds() * 1000) if started else None


@transaction.atomic
def rating_skip(*, user: User, public_id: str) -> RatingSkip:
    """Hand the task back to its pool for another rater of the arm; the sentence is never
    offered to this rater again (``RatingSkip``, with time on task and what was shown)."""
    task = rating_task_for_holder(user=user, public_id=public_id)
    skip = RatingSkip.objects.create(
        task=task, sentence_id=task.sentence_id, user=user, arm_id=task.arm_id,
        exposure=_last_exposure(task, user), time_on_task_ms=_time_on_task(task, timezone.now()))
    engine.task_hand_back(RATING_KIND, task, user=user)
    return skip


@dataclass(frozen=True)
class RatingInput:
    label: str
    confidence: int | None
    helpfulness: int | None = None
    comment: str = ""


@dataclass(frozen=True)
class RatingResult:
    rating: Rating
    created: bool  # False: the same rating was already stored (replay)


def rating_input_check(data: RatingInput, *, assisted: bool) -> RatingInput:
    """Refuse a rating with a missing or unknown choice, naming the field: label (five-way
    or cant_assess), confidence 0–3 (not asked with cant_assess: whatever was sent, None is
    stored); helpfulness 0–2 required in assisted arms and absent in the baseline; a comment
    in every arm, optional (at most 5 000 characters)."""
    if data.label not in Rating.Label.values:
        raise DomainError(f"label: choose one of {', '.join(Rating.Label.values)} (or skip).",
                          field="label")
    confidence = None if data.label == Rating.Label.CANT_ASSESS else data.confidence
    if data.label != Rating.Label.CANT_ASSESS and confidence not in Rating.Confidence.values:
        raise DomainError("confidence: choose how confident you are (0 not at all … 3 "
                          "completely).", field="confidence")
    comment = (data.comment or "").strip()
    if assisted:
        if data.helpfulness not in Rating.Helpfulness.values:
            raise DomainError("helpfulness: say how helpful the AI assistance was (0 not at "
                              "all, 1 somewhat, 2 extremely).", field="helpfulness")
    elif data.helpfulness is not None:
        raise DomainError("helpfulness: your arm shows no AI assistance to rate.",
                          field="helpfulness")
    if len(comment) > MAX_COMMENT:
        raise DomainError(f"comment: at most {MAX_COMMENT} characters.", field="comment")
    return RatingInput(data.label, confidence, data.helpfulness, comment)


def _same(rating: Rating, data: RatingInput) -> bool:
    return (rating.label, rating.confidence, rating.helpfulness, rating.comment) == (
        data.label, data.confidence, data.helpfulness, data.comment)


@transaction.atomic
def rating_submit(*, user: User, public_id: str, data: RatingInput) -> RatingResult:
    """Store the rater's rating of a task they hold. Idempotent: the same rating again
    returns the stored one; a different one to an answered task is refused. Only the
    holder, before expiry, in an open study, not before OVERSIGHT_MIN_ANSWER_MS on screen.
    The rating records the exposure last shown under this lease and the time on task.
    ``rating_recorded`` is sent after commit (the analysis listens)."""
    task = engine.task_locked(RATING_KIND, public_id=public_id)
    assignment = None if task is None else RaterAssignment.objects.filter(
        study_id=task.study_id, user=user).first()
    if task is not None and task.status == RatingTask.Status.ANSWERED:
        rating = Rating.objects.filter(task=task).first()
        if task.answered_by_id == user.pk and rating is not None and assignment is not None:
            clean = rating_input_check(data, assisted=bool(assignment.components))
            if _same(rating, clean):
                return RatingResult(rating, created=False)
            raise AlreadyAnswered(f"You already rated this sentence "
                                  f"'{rating.get_label_display()}'.")
        raise NotLeaseHolder("This sentence is not leased to you.")
    task = engine.task_for_holder(RATING_KIND, task, user)
    clean = rating_input_check(data, assisted=bool(assignment.components))
    now = timezone.now()
    engine.answer_too_soon(RATING_KIND, task, now)
    exposure = _last_exposure(task, user)
    engine.task_complete(RATING_KIND, task, user=user, now=now, fields={},
                         detail={"label": clean.label})
    rating = Rating.objects.create(
        task=task, study_id=task.study_id, sentence_id=task.sentence_id, arm_id=task.arm_id,
        arm_version=assignment.arm_version, rater=user, label=clean.label,
        confidence=clean.confidence, helpfulness=clean.helpfulness, comment=clean.comment,
        time_on_task_ms=task.time_on_task_ms, exposure=exposure)
    study_id = task.study_id
    exclusions_catch(task.study, [rating.pk])
    transaction.on_commit(lambda: rating_recorded.send(sender=Rating, study_id=study_id,
                                                       rating_id=rating.pk))
    return RatingResult(rating, created=True)


@transaction.atomic
def rating_undo(*, study: Study, user: User) -> RatingTask:
    """Take back the rater's last rating in the study within the undo window
    (OVERSIGHT_UNDO_SECONDS after rating, as a specialist's answer), and give them its
    sentence again under a fresh lease. Nothing depends on a rating (no follow-up is
    routed from it), so the window is the only time limit.

    Refused (``UndoRefused``) when they have no rating, already undid their last one, or the
    window has passed; like an answer, when the study closed or they are no longer its
    rater. Otherwise, in one transaction: the rating is deleted (the analysis forgets it; a
    recompute is scheduled), their other leases go back to the pool, the task is leased to
    them again, and an ``undone`` audit row records the rating taken back."""
    last = engine.undo_target(
        RATING_KIND, RatingTask.objects.filter(study=study).select_related("study", "arm"),
        user=user, noun="rating", again=gettext("rate the sentence you got back first."))
    now = timezone.now()
    window = engine.undo_window()
    if now - last.answered_at >= window:
        seconds = int(window.total_seconds())
        raise UndoRefused(ngettext(
            "Too late to undo: a rating can be undone for %(n)s second after it is given.",
            "Too late to undo: a rating can be undone for %(n)s seconds after it is given.",
            seconds) % {"n": seconds})
    rating = Rating.objects.get(task=last)
    detail = {"label": rating.label, "confidence": rating.confidence,
              "helpfulness": rating.helpfulness, "comment": rating.comment,
              "answered_at": last.answered_at.isoformat()}
    rating_id = rating.pk
    rating.delete()
    exclusions_catch(study, [rating_id])
    engine.leases_return(RATING_KIND, RatingTask.objects.select_for_update().filter(
        study=study, holder=user, status=RatingTask.Status.LEASED), reason="undo")
    engine.task_relet(RATING_KIND, last, user=user, now=now, detail=detail, clear={})
    transaction.on_commit(lambda: study_recompute_schedule(study.pk))
    return last


def rating_undo_offered_until(*, study: Study, user: User) -> dt.datetime | None:
    """Until when the rating page offers "Undo last rating" (None: there is nothing to
    undo; ``engine.undo_offered_until``)."""
    return engine.undo_offered_until(RATING_KIND, study, RatingTask.objects.filter(study=study),
                                     user=user)


def rating_taken_back(*, task: RatingTask, user: User) -> RatingInput | None:
    """The rating ``user`` took back from ``task`` by undo, while they hold it again (None
    otherwise): the rating page shows its choices and comment in the form again."""
    detail = engine.undone_detail(RATING_KIND, task, user=user)
    if detail is None:
        return None
    return RatingInput(label=detail.get("label", ""), confidence=detail.get("confidence"),
                       helpfulness=detail.get("helpfulness"), comment=detail.get("comment", ""))


def rater_progress(*, study: Study, user: User) -> dict[str, int]:
    """What the rating page counts: the rater's ratings and skips, and what remains in
    their arm's pool (pending tasks of sentences they have not had, not withdrawn)."""
    assignment = RaterAssignment.objects.filter(study=study, user=user).first()
    rated = Rating.objects.filter(study=study, rater=user).count()
    skipped = RatingSkip.objects.filter(sentence__study=study, user=user).count()
    remaining = 0
    if assignment is not None:
        had = RatingTask.objects.filter(sentence=OuterRef("sentence_id"), answered_by=user)
        skips = RatingSkip.objects.filter(sentence=OuterRef("sentence_id"), user=user)
        remaining = (RatingTask.objects.filter(study=study, arm_id=assignment.arm_id,
                                               status=RatingTask.Status.PENDING)
                     .exclude(Exists(had)).exclude(Exists(skips))
                     .exclude(sentence_id__in=ItemFlag.withdrawn_ids(study))
                     .values("sentence_id").distinct().count())
    return {"rated": rated, "skipped": skipped, "remaining": remaining}
