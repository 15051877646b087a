"""Writes of exclusions (``core.exclusion_models``): a researcher takes a worker's answers —
all of them, those before or from a time, or those faster than a threshold (of one worker or
of everybody) — out of the estimates and the default exports, with a reason; undoes it; and
every answer recorded later that a standing rule matches is taken out in its own
transaction (:func:`exclusions_catch`, called by each type's answer service).

Contract:

* The excluded answers are exactly the study's answers (``Reviewable.answers``) that some
  standing rule matches: one ``ExcludedAnswer`` per answer, naming the oldest standing rule
  that matches it, so undoing one of two rules that hold an answer keeps it out. A new rule
  takes out what it matches and no rule holds (:func:`_take_out`, one ``INSERT … SELECT``);
  an undone rule's rows go to the oldest other rule that matches them or are deleted
  (:func:`_give_back`). Cost: the answers the rule matches, in the database.
* Excluding a worker also ends their leases in the study at once (the tasks go back to the
  pool, ``engine.leases_return``) and the engine leases them nothing more there
  (``engine.lease_first``) until the exclusion is undone.
* A rule over more than ``OVERSIGHT_EXCLUSION_INLINE_MAX`` answers (made, or undone) is
  applied by a job (:func:`exclusion_apply`, ``Exclusion.applying`` until it has run): the
  request saves the rule, ends the leases and counts it as standing at once (answers
  recorded from then on are caught by their own transaction); the job moves the older
  answers. Smaller ones are applied in the request.
* Every change is a ``StudyEvent`` (who, when, why, how many answers) in the transaction
  that moves the answers, and recomputes the study on commit. An answer recorded while a
  rule is being made is caught by its own transaction when it sees the rule, else by a
  second pass after the change commits (an excluded worker's answer in flight: by the
  lock on their leases).
* Who: the study's researchers (``NotPermitted`` otherwise)."""

from __future__ import annotations

import datetime as dt
import logging
from functools import partial

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import connection, models, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from annotations.core import engine
from annotations.core.errors import DomainError, NotPermitted
from annotations.core.events import study_event_kind_register
from annotations.core.exclusion_models import ExcludedAnswer, Exclusion
from annotations.core.models import Study, StudyMembership, User
from annotations.core.queue import EXCLUSION_APPLY_TASK, task
from annotations.core.reviews.registry import reviewable
from annotations.core.selectors import user_roles
from annotations.core.services.flags import flaggable
from annotations.core.services.recompute import short_error, study_recompute_schedule
from annotations.core.services.studies import study_event_record
from annotations.core.task_models import TaskStatus

log = logging.getLogger(__name__)
EXCLUDED = study_event_kind_register("answers_excluded", "Answers excluded")
RESTORED = study_event_kind_register("exclusion_undone", "Exclusion undone")
APPLIED = study_event_kind_register("exclusion_applied", "Exclusion's job done")
FASTER_MAX_SECONDS = 24 * 3600


class InvalidExclusion(DomainError):
    code = "invalid_exclusion"


class NothingToUndo(DomainError):
    code = "nothing_to_undo"
    http_status = 409


def _researcher(study: Study, user: User) -> None:
    if StudyMembership.Role.RESEARCHER not in user_roles(user=user, study=study):
        raise NotPermitted("Only the study's researchers exclude answers.")


def _answers(study: Study) -> tuple[models.QuerySet, str, str, str]:
    """The study's answers (a plain queryset: no joins, no order) and their author, time
    and time-on-task columns."""
    r = reviewable(study.kind)
    return r.answers(study).select_related(None).order_by(), r.worker_field, r.at_field, \
        r.ms_field


def rule_condition(rule: Exclusion, worker: str, at: str, ms: str) -> Q:
    """The answers ``rule`` matches, as a condition on the answer model's columns."""
    who = Q(**{f"{worker}_id": rule.worker_id}) if rule.worker_id else Q()
    if rule.kind == Exclusion.Kind.BEFORE:
        return who & Q(**{f"{at}__lt": rule.at})
    if rule.kind == Exclusion.Kind.AFTER:
        return who & Q(**{f"{at}__gte": rule.at})
    if rule.kind == Exclusion.Kind.FASTER:
        return who & Q(**{f"{ms}__lt": rule.faster_than_ms})
    return who


def _take_out(study: Study, rules, answers: models.QuerySet | None = None) -> int:
    """For each of ``rules`` in age order, one ``INSERT … SELECT`` of the answers (of the
    study, or of ``answers``) it matches that no row holds yet: an answer is held by the
    oldest standing rule that matches it. Returns the rows written. Cost: the answers each
    rule matches, in the database (no row passes through Python)."""
    every, worker, at, ms = _answers(study)
    answers = every if answers is None else answers
    answer_type = ContentType.objects.get_for_model(every.model)
    held = ExcludedAnswer.objects.filter(answer_type=answer_type, answer_id=OuterRef("pk"))
    table = ExcludedAnswer._meta.db_table
    quote = connection.ops.quote_name
    columns = ", ".join(quote(c) for c in ("answer_id", "worker_id", "study_id",
                                           "answer_type_id", "exclusion_id"))
    written = 0
    with connection.cursor() as cursor:
        for rule in rules:
            matched = (answers.filter(rule_condition(rule, worker, at, ms))
                       .exclude(Exists(held)).values_list("pk", f"{worker}_id"))
            select, params = matched.query.get_compiler(connection=connection).as_sql()
            # a row another writer just made for the same answer stays as it is
            cursor.execute(f"INSERT INTO {quote(table)} ({columns}) "  # noqa: S608 - names
                           f"SELECT m.*, %s, %s, %s FROM ({select}) m WHERE true "
                           f"ON CONFLICT DO NOTHING",
                           [study.pk, answer_type.pk, rule.pk, *params])
            written += max(cursor.rowcount, 0)
    return written


def _matched(study: Study, rule: Exclusion) -> models.QuerySet:
    """The study's answers ``rule`` matches."""
    answers, worker, at, ms = _answers(study)
    return answers.filter(rule_condition(rule, worker, at, ms))


def _standing_rules(study: Study) -> models.QuerySet:
    return Exclusion.objects.filter(study=study, undone_at=None).order_by("pk")


def _give_back(study: Study, rule: Exclusion) -> int:
    """The rows ``rule`` (just undone) held: each goes to the oldest standing rule that also
    matches its answer, the others are deleted (their answers are back). Returns how many
    came back."""
    rows = ExcludedAnswer.objects.filter(exclusion=rule)
    for other in _standing_rules(study):
        rows.filter(answer_id__in=_matched(study, other).values("pk")).update(exclusion=other)
    return rows.delete()[0]


def _sync_ids(study: Study, ids: list[int]) -> None:
    """The rows of the answers ``ids`` (just recorded, changed or undone) made exactly what
    the standing rules match."""
    answers, _, _, _ = _answers(study)
    answer_type = ContentType.objects.get_for_model(answers.model)
    ExcludedAnswer.objects.filter(answer_type=answer_type, answer_id__in=ids).delete()
    _take_out(study, _standing_rules(study), answers.filter(pk__in=ids))


def _release(study: Study, worker: User) -> int:
    """End ``worker``'s leases in the study (their tasks go back to the pool)."""
    kind = flaggable(study.kind).task_kind
    leases = kind.model.objects.filter(study=study, holder=worker, status=TaskStatus.LEASED)
    return engine.leases_return(kind, leases.select_for_update(),
                                reason="worker excluded")


def _standing(study: Study, change: int) -> None:
    """Keep ``Study.exclusions_standing`` (what ``exclusions_catch`` reads)."""
    Study.objects.filter(pk=study.pk).update(
        exclusions_standing=F("exclusions_standing") + change)
    study.exclusions_standing += change


def _after_commit(study: Study) -> None:
    transaction.on_commit(partial(_sync_again, study.pk))
    transaction.on_commit(partial(study_recompute_schedule, study.pk))


def _sync_again(study_id: int) -> None:
    """Once the change is committed, take out once more what the standing rules match and
    no row holds: an answer whose transaction read the study's standing rules before this
    change committed, and committed after the change's own pass, is caught here (its window
    is its own transaction's length)."""
    study = Study.objects.filter(pk=study_id).first()
    if study is not None:
        with transaction.atomic():  # a rule whose job has not run is the job's to apply
            _take_out(study, _standing_rules(study).filter(applying=False))


def _reason(reason: str, field: str = "reason") -> str:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidExclusion("Say why the answers are excluded.", field=field)
    if len(reason) > Exclusion.REASON_MAX:
        raise InvalidExclusion(f"The reason has {len(reason)} characters; at most "
                               f"{Exclusion.REASON_MAX}.", field=field)
    return reason


def _worker_of(study: Study, worker_id: int | None) -> User | None:
    if worker_id in (None, ""):
        return None
    answers, worker, _, _ = _answers(study)
    user = User.objects.filter(pk=worker_id).first()
    if user is None or not answers.filter(**{f"{worker}_id": user.pk}).exists() and not (
            StudyMembership.objects.filter(study=study, user=user).exists()):
        raise InvalidExclusion("No such worker in this study.", field="worker")
    return user


@transaction.atomic
def exclusion_add(*, study: Study, by: User, kind: str, reason: str,
                  worker_id: int | None = None, at: dt.datetime | None = None,
                  faster_than_seconds: float | None = None) -> Exclusion:
    """Make a standing rule (module docstring) and take out the answers it matches.

    ``kind``: ``worker`` (needs ``worker_id``), ``before``/``after`` (need ``at``, aware),
    ``faster`` (needs ``faster_than_seconds`` > 0, at most a day); ``worker_id`` narrows the
    other kinds to one worker. Refusals: NotPermitted, InvalidExclusion (naming the field)."""
    _researcher(study, by)
    reason = _reason(reason)
    if kind not in Exclusion.Kind.values:
        raise InvalidExclusion(f"Unknown kind '{kind}': one of "
                               f"{', '.join(Exclusion.Kind.values)}.", field="kind")
    worker = _worker_of(study, worker_id)
    rule = Exclusion(study=study, kind=kind, worker=worker, reason=reason, created_by=by)
    if kind == Exclusion.Kind.WORKER and worker is None:
        raise InvalidExclusion("Choose the worker to exclude.", field="worker")
    if kind in (Exclusion.Kind.BEFORE, Exclusion.Kind.AFTER):
        if at is None:
            raise InvalidExclusion("Give the time (UTC).", field="at")
        if timezone.is_naive(at):
            raise InvalidExclusion("Give the time with its time zone.", field="at")
        rule.at = at
    if kind == Exclusion.Kind.FASTER:
        if faster_than_seconds is None or not 0 < faster_than_seconds <= FASTER_MAX_SECONDS:
            raise InvalidExclusion("Give the threshold in seconds: more than 0, at most "
                                   f"{FASTER_MAX_SECONDS}.", field="faster_than_seconds")
        rule.faster_than_ms = max(1, round(faster_than_seconds * 1000))
    rule.save()
    _standing(study, +1)
    if kind == Exclusion.Kind.WORKER:
        # first: locking their leased tasks waits for an answer in flight, which the
        # sync below then sees
        rule.released = _release(study, worker)
    job = _large(_matched(study, rule).count())
    if job:
        _to_job(rule, "released")
    else:
        _apply(study, rule)
    study_event_record(study=study, kind=EXCLUDED, by=by, detail={
        "exclusion": rule.pk, "rule": rule.describe(), "reason": reason,
        "answers": None if job else rule.answers, "leases_released": rule.released,
        "job": job})
    return rule


@transaction.atomic
def exclusion_undo(*, study: Study, exclusion_id: int, by: User, reason: str = "") -> Exclusion:
    """Take back a standing rule: its answers return to the estimates unless another
    standing rule holds them. The rule stays, with who undid it, when and why.
    Refusals: NotPermitted, NothingToUndo (unknown or already undone)."""
    _researcher(study, by)
    rule = (Exclusion.objects.select_for_update().filter(study=study, pk=exclusion_id)
            .first())
    if rule is None or rule.undone_at is not None:
        raise NothingToUndo("That exclusion does not exist or was already undone.")
    reason = (reason or "").strip()[:Exclusion.REASON_MAX]
    rule.undone_at, rule.undone_by, rule.undo_reason = timezone.now(), by, reason
    rule.save(update_fields=["undone_at", "undone_by", "undo_reason"])
    _standing(study, -1)
    # a rule whose job has not run yet: the job now puts back what it finds held
    job = rule.applying or _large(ExcludedAnswer.objects.filter(exclusion=rule).count())
    if job and not rule.applying:
        _to_job(rule)
    back = None if job else _apply(study, rule)
    study_event_record(study=study, kind=RESTORED, by=by, detail={
        "exclusion": rule.pk, "rule": rule.describe(), "reason": reason,
        "answers_back": back, "job": job})
    return rule


def _to_job(rule: Exclusion, *fields: str) -> None:
    """Mark ``rule`` applying (saving ``fields`` with it) and queue its job on commit."""
    rule.applying = True
    rule.save(update_fields=[*fields, "applying"])
    transaction.on_commit(partial(_job_start, rule.pk))


def _large(answers: int) -> bool:
    """Whether a change over ``answers`` answers runs as a job (``exclusion_apply``) rather
    than in the request: more than ``OVERSIGHT_EXCLUSION_INLINE_MAX``."""
    return answers > settings.OVERSIGHT_EXCLUSION_INLINE_MAX


def _apply(study: Study, rule: Exclusion) -> int:
    """Take out the answers of a standing ``rule`` — those no rule holds, and those a newer
    rule took while this one waited for its job (an answer is the oldest matching rule's)
    — or put back those of an undone one; sync again and recompute on commit. Returns how
    many answers it took out or put back."""
    if rule.undone_at is None:
        moved = _take_out(study, [rule])
        newer = ExcludedAnswer.objects.filter(study=study, exclusion_id__gt=rule.pk)
        if newer.exists():  # only a rule that waited for its job: no scan otherwise
            moved += newer.filter(answer_id__in=_matched(study, rule).values("pk")).update(
                exclusion=rule)
        rule.answers = ExcludedAnswer.objects.filter(exclusion=rule).count()
    else:
        moved = _give_back(study, rule)
    rule.applying = False
    rule.save(update_fields=["answers", "released", "applying"])
    _after_commit(study)
    return moved


def _job_start(rule_id: int) -> None:
    """Queue the job of a large rule once it is committed: on a worker ("celery" runner),
    else here and now (the embedded defaults, where the web process is the worker). A
    broker that cannot be reached: here and now too (slow, never lost)."""
    if settings.OVERSIGHT_IMPORT_RUNNER == "celery":
        try:
            task(EXCLUSION_APPLY_TASK).apply_async(args=(rule_id,))
            return
        except Exception as exc:  # noqa: BLE001 - Redis down: do it here rather than never
            log.warning("exclusion %s not queued (%s): applied in the request", rule_id,
                        short_error(exc))
    exclusion_apply(exclusion_id=rule_id)


def exclusion_apply(*, exclusion_id: int) -> bool:
    """The job of a large rule (``Exclusion.applying``): take out its answers, or put them
    back once it is undone, in one transaction holding the study's row (exclusion changes
    of a study run one at a time), and record it (``exclusion_applied``: how many moved).
    Returns whether there was anything to do (a rule no longer applying, or gone, is left
    alone: safe twice, and a copy queued by :func:`exclusions_catch_up` while the first
    runs waits for it, then finds nothing)."""
    with transaction.atomic():
        rule = (Exclusion.objects.select_for_update().select_related("study")
                .filter(pk=exclusion_id, applying=True).first())
        if rule is None:
            return False
        study = Study.objects.select_for_update().get(pk=rule.study_id)
        undone = rule.undone_at is not None
        moved = _apply(study, rule)
        study_event_record(study=study, kind=APPLIED, by=None, detail={
            "exclusion": rule.pk, "rule": rule.describe(),
            "answers_back" if undone else "answers": moved})
    return True


def exclusions_catch_up(*, older_than: dt.timedelta = dt.timedelta(minutes=2)) -> list[int]:
    """Beat sweeper: queue again the job of every rule still applying after
    ``older_than`` since it was made or undone (a lost message, a worker that died or a job
    that failed: nothing else would move its answers). Returns the rules queued."""
    cutoff = timezone.now() - older_than
    stuck = list(Exclusion.objects.filter(applying=True).filter(
        Q(undone_at__isnull=True, created_at__lt=cutoff) | Q(undone_at__lt=cutoff))
        .values_list("pk", flat=True))
    for rule_id in stuck:
        _job_start(rule_id)
    return stuck


def exclusions_catch(study: Study, answer_ids: list[int]) -> None:
    """Bring the exclusion of just-recorded (or just-undone) answers up to date, in the
    caller's transaction. No statement at all while the study has no standing rule
    (``Study.exclusions_standing``, read with the study: an answer's task lock joins it) —
    and then it has no excluded answer either."""
    if study.exclusions_standing:
        _sync_ids(study, answer_ids)
