"""Writes of recruitment: a participant arrives through an entry link, consents, takes the
screening quiz, works, and is sent back to their platform — or declines, is screened out,
returns the study or runs out of time.

Contract:

* **Arrival** (:func:`participant_arrive`): every parameter checked first
  (``platforms.arrival``: all problems in one refusal); then, under the link's row lock, the
  same platform id reaches the same participant and account — never a second one — and a
  session id another participant already used is refused; a new participant is admitted
  while the link is active, the study open and the link below its participant limit, gets
  an account (no password: the link's session signs them in) and joins the study in its
  working role through the type's registered join (``participant_join_register``:
  partitioned — the class with the fewest specialists; assisted — an annotator, whose arm
  is drawn at the first rating page as for everyone). A refusal changes nothing.
* **Done** (:func:`participant_state`): a working participant is done at ``max_tasks``
  answers (their tasks answered, quality checks included) or when the study has no task
  left to hand out; their time is up at the deadline (consent + the link's minutes). Either
  ends their leases at once (``engine.leases_return``); so do returning the study and the
  sweep of deadlines (:func:`participants_time_out`, the beat's ``participants-timeout``).
* **Completion** (:func:`participant_complete`): refused (``NotDoneYet``) before the work
  is done; the completion code is given only then, and once completed a participant's
  next visit shows the same page."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from annotations.core import engine
from annotations.core.errors import DomainError
from annotations.core.models import Study, StudyMembership, User
from annotations.core.recruitment import platforms
from annotations.core.recruitment_models import Participant, RecruitmentLink
from annotations.core.services.flags import flaggable
from annotations.core.services.studies import membership_add
from annotations.core.task_models import TaskStatus

Status = Participant.Status

_JOINS: dict[str, Callable[[Study, User], None]] = {}
_WORK_PAGES: dict[str, str] = {}


def participant_join_register(kind: str, join: Callable[[Study, User], None],
                              work_page: str) -> None:
    """How a participant joins a study of ``kind`` (membership in its working role) and the
    URL name of its work page (given the study's id)."""
    _JOINS[kind] = join
    _WORK_PAGES[kind] = work_page


def work_page(kind: str) -> str:
    return _WORK_PAGES[kind]


def annotator_join(study: Study, user: User) -> None:
    """The join of a type whose workers are annotators (assisted raters, critique
    annotators)."""
    membership_add(study=study, user=user, role=StudyMembership.Role.ANNOTATOR)


class RecruitmentRefused(DomainError):
    """The entry link cannot admit this arrival; ``problems`` lists every reason."""

    code = "recruitment_refused"

    def __init__(self, message: str, *, problems: list[str] | None = None,
                 http_status: int = 400) -> None:
        super().__init__(message)
        self.problems = problems or [message]
        self.http_status = http_status


class NotDoneYet(DomainError):
    code = "not_done_yet"
    http_status = 409


def _username(link: RecruitmentLink, external_id: str) -> str:
    return f"{link.platform}-{link.pk}-{external_id}"[:150]


@transaction.atomic
def participant_arrive(*, link_token: str, params) -> tuple[RecruitmentLink, Participant | None,
                                                            platforms.Arrival]:
    """(the link, its participant — None for an MTurk preview —, the checked arrival) for
    an entry link's request parameters; ``RecruitmentRefused`` otherwise (module
    docstring)."""
    link = (RecruitmentLink.objects.select_for_update().select_related("study")
            .filter(token=str(link_token)[:40]).first())
    if link is None:
        raise RecruitmentRefused(_("This link does not exist. Open the study from the "
                                   "platform's page."), http_status=404)
    arrived = platforms.arrival(link, params)
    if arrived.problems:
        raise RecruitmentRefused(_("This link is incomplete or altered."),
                                 problems=arrived.problems)
    if arrived.preview:
        return link, None, arrived
    participant = Participant.objects.filter(link=link, external_id=arrived.external_id).first()
    holder = (Participant.objects.filter(link=link, session_id=arrived.session_id)
              .exclude(external_id=arrived.external_id).exists()
              if arrived.session_id else False)
    if holder:
        raise RecruitmentRefused(_("This session was already used by another "
                                   "participant. Open the study again from the platform's "
                                   "page."), http_status=409)
    if participant is not None:
        if arrived.session_id and participant.session_id != arrived.session_id:
            participant.session_id = arrived.session_id
            participant.save(update_fields=["session_id"])
        return link, participant, arrived
    study = link.study
    if not link.active or study.status != Study.Status.OPEN:
        raise RecruitmentRefused(_("This study is not taking participants now."),
                                 http_status=410)
    if link.max_participants is not None and (
            link.participants.count() >= link.max_participants):
        raise RecruitmentRefused(_("This study is full: every place has been taken. "
                                   "Please return it on the platform."), http_status=409)
    user = User(username=_username(link, arrived.external_id))
    user.set_unusable_password()
    user.save()
    _JOINS[study.kind](study, user)
    participant = Participant.objects.create(
        link=link, study=study, user=user, external_id=arrived.external_id,
        session_id=arrived.session_id, platform_study=arrived.platform_study,
        submit_to=arrived.submit_to,
        status=Status.CONSENT)
    return link, participant, arrived


def _locked(participant: Participant) -> Participant:
    return (Participant.objects.select_for_update().select_related("link", "study")
            .get(pk=participant.pk))


def _release(participant: Participant) -> int:
    kind = flaggable(participant.study.kind).task_kind
    return engine.leases_return(kind, kind.model.objects.filter(
        study_id=participant.study_id, holder_id=participant.user_id,
        status=TaskStatus.LEASED).select_for_update(), reason="participant finished")


def _finish(participant: Participant, status: str, now: dt.datetime | None = None) -> None:
    participant.status = status
    participant.finished_at = now or timezone.now()
    participant.save(update_fields=["status", "finished_at"])
    _release(participant)


@transaction.atomic
def participant_consent(*, participant: Participant, agree: bool) -> Participant:
    """Agree (on to the screening quiz when the link has one, else to work; the time limit
    starts) or decline (the participant is done and asked to return the study)."""
    participant = _locked(participant)
    if participant.status != Status.CONSENT:
        return participant
    if not agree:
        _finish(participant, Status.DECLINED)
        return participant
    now = timezone.now()
    participant.consented_at = now
    minutes = participant.link.time_limit_minutes
    participant.deadline = now + dt.timedelta(minutes=minutes) if minutes else None
    participant.status = Status.SCREENING if participant.link.quiz else Status.WORKING
    participant.save(update_fields=["consented_at", "deadline", "status"])
    return participant


@transaction.atomic
def participant_quiz(*, participant: Participant, answers: list[int | None]) -> Participant:
    """Score the screening quiz: every answer right → working; otherwise another attempt
    while the link allows one, then screened out (leases none yet; the platform's
    screened-out code)."""
    participant = _locked(participant)
    if participant.status != Status.SCREENING:
        return participant
    quiz = participant.link.quiz
    right = len(answers) == len(quiz) and all(
        a == q["answer"] for a, q in zip(answers, quiz, strict=True))
    participant.quiz_attempts += 1
    if right:
        participant.status = Status.WORKING
    elif participant.quiz_attempts >= participant.link.quiz_attempts:
        participant.status = Status.SCREENED_OUT
        participant.finished_at = timezone.now()
    participant.save(update_fields=["quiz_attempts", "status", "finished_at"])
    return participant


def participant_answers(participant: Participant) -> int:
    """The participant's answered tasks in the study (quality checks included)."""
    kind = flaggable(participant.study.kind).task_kind
    return kind.model.objects.filter(study_id=participant.study_id,
                                     answered_by_id=participant.user_id,
                                     status=TaskStatus.ANSWERED).count()


def _study_has_work(participant: Participant) -> bool:
    kind = flaggable(participant.study.kind).task_kind
    return kind.model.objects.filter(study_id=participant.study_id,
                                     status=TaskStatus.PENDING).exists() or (
        kind.model.objects.filter(study_id=participant.study_id, holder_id=participant.user_id,
                                  status=TaskStatus.LEASED).exists())


@dataclass(frozen=True)
class ParticipantState:
    """Where a participant stands: ``answers`` of ``max_tasks``, ``done`` (the work is
    over: the limit reached or nothing left), ``seconds_left`` (None: no limit)."""

    participant: Participant
    answers: int
    max_tasks: int
    done: bool
    seconds_left: int | None


def participant_state(participant: Participant, now: dt.datetime | None = None
                      ) -> ParticipantState:
    """Read a working participant's progress; past the deadline, time them out (their
    leases go back) first."""
    now = now or timezone.now()
    if participant.status == Status.WORKING and participant.deadline and (
            participant.deadline <= now):
        with transaction.atomic():
            locked = _locked(participant)
            if locked.status == Status.WORKING:
                _finish(locked, Status.TIMED_OUT, now)
            participant.status = locked.status
    answers = participant_answers(participant)
    cap = participant.link.max_tasks
    done = participant.status == Status.COMPLETED or (
        participant.status == Status.WORKING
        and (answers >= cap or not _study_has_work(participant)))
    left = (None if participant.deadline is None
            else max(0, int((participant.deadline - now).total_seconds())))
    if done and participant.status == Status.WORKING:
        with transaction.atomic():
            _release(_locked(participant))
    return ParticipantState(participant, answers, cap, done, left)


@transaction.atomic
def participant_complete(*, participant: Participant) -> Participant:
    """Mark the work done and give the completion (the caller sends them back): refused
    with ``NotDoneYet`` while tasks remain."""
    state = participant_state(participant)
    participant = _locked(participant)
    if participant.status == Status.COMPLETED:
        return participant
    if participant.status != Status.WORKING or not state.done:
        raise NotDoneYet(_("Not yet: you have answered %(answers)s of %(total)s tasks. The "
                           "completion code is given when the work is done.")
                         % {"answers": state.answers, "total": state.max_tasks})
    _finish(participant, Status.COMPLETED)
    return participant


@transaction.atomic
def participant_return(*, participant: Participant) -> Participant:
    """The participant stops (returns the study): their leases go back at once."""
    participant = _locked(participant)
    if not participant.finished:
        _finish(participant, Status.RETURNED)
    return participant


def participants_time_out(now: dt.datetime | None = None) -> int:
    """Time out every working participant past their deadline (the beat, every minute):
    their leases go back at once, whether or not they come back. Returns how many."""
    now = now or timezone.now()
    ids = list(Participant.objects.filter(status=Status.WORKING, deadline__lte=now)
               .values_list("pk", flat=True)[:1000])
    for pk in ids:
        with transaction.atomic():
            participant = (Participant.objects.select_for_update().select_related("study")
                           .filter(pk=pk, status=Status.WORKING).first())
            if participant is not None:
                _finish(participant, Status.TIMED_OUT, now)
    return len(ids)
