"""The human verifier (issue 19, beyond the paper; docs/audit.md "Specialists as the
verifier"): each criterion check of the EV protocol becomes a yes/no question — "does this
criterion hold for this datapoint?" — put to the study's workers through the task engine.

How a run proceeds. The protocol is sequential (a round is checked only when the previous one
passed), so the questions come in waves. ``audit_run`` plays the whole algorithm with a
``HumanVerifier`` that knows the answers given so far: a check whose answers are all known
passes or fails as the programmatic verifier would on those answers (the challenge, 1 or 2,
compares every criterion of x with x′: the platform's criteria are linear and the relevant
substring is the whole datapoint, so both challenges compare the same bits); a check with a
missing answer records the questions it needs (every criterion for x and for x′) and stops
that datapoint for this pass. When some were missing, the missing questions become
``VerifierQuestion`` tasks and the audit waits (``Audit.Status.WAITING``, nothing stored);
the answer that closes the last open question queues the audit again, and the next pass —
identical up to there (imported commitments and seeded challenges) — goes one round further.
When no answer is missing the outcomes are stored as for any audit.

Questions: one per (datapoint, criterion) per audit (a datapoint offered as x′ many times is
asked once), answered once, by one worker; a worker sees the datapoint and the question only
— never the evaluator, its label, the challenge, or whether the datapoint is x or an x′.
Only imported commitments can be verified by people (an AI evaluator would be asked again at
each pass).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from typing import Any

from django.db import transaction
from django.http import Http404
from django.utils import timezone

from annotations.audit.models import Audit, VerifierQuestion, VerifierQuestionEvent
from annotations.audit.services.enqueue import run_enqueue
from annotations.core import engine
from annotations.core.errors import DomainError
from annotations.core.models import Study, StudyMembership, User
from annotations.core.services.flags import worker_role
from estimators.nodata.protocol import PASS, Challenge, Verdict

PENDING = "waiting for the specialists' answers"
DEFAULT_LEASE = dt.timedelta(minutes=10)


def _lease_for(task: VerifierQuestion) -> dt.timedelta:
    return engine.lease_seconds_override() or DEFAULT_LEASE


def _may_still_work(task: VerifierQuestion, user: User) -> None:
    study = Study.objects.get(pk=task.study_id)
    if not StudyMembership.objects.filter(study=study, user=user,
                                          role=worker_role(study)).exists():
        raise DomainError("You no longer work on this study.")


VERIFY_KIND = engine.task_kind_register(engine.TaskKind(
    name="verify", model=VerifierQuestion, event_model=VerifierQuestionEvent,
    event_task_field="question", lease_for=_lease_for, noun="question",
    may_still_work=_may_still_work))


def datapoint_key(x: Any) -> str:
    """The datapoint's identity for its questions: SHA-256 of its canonical JSON."""
    text = json.dumps(x, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def question_text(description: str) -> str:
    return f"Does this datapoint satisfy: {description}?"[:700]


class HumanVerifier:
    """``estimators.nodata.protocol.Verifier`` on the answers given so far (module
    docstring). ``needed`` collects (key, criterion) → (datapoint, question) still to ask."""

    def __init__(self, rubric, answers: dict[tuple[str, str], bool]) -> None:
        self.rubric = rubric
        self.answers = answers
        self.needed: dict[tuple[str, str], tuple[Any, str]] = {}

    def _answer(self, x: Any, criterion) -> bool | None:
        key = (datapoint_key(x), criterion.name)
        found = self.answers.get(key)
        if found is None:
            self.needed[key] = (x, question_text(criterion.description or criterion.name))
        return found

    def check(self, challenge: Challenge, x: Any, similar: Any) -> Verdict:
        pairs = [(c, self._answer(x, c), self._answer(similar, c))
                 for c in self.rubric.criteria]
        if any(a is None or b is None for _, a, b in pairs):
            return Verdict(False, "", PENDING)
        for c, a, b in pairs:
            if a != b:
                return Verdict(False, c.name, f"specialists: {c.name} is "
                                              f"{'yes' if a else 'no'} for x, "
                                              f"{'yes' if b else 'no'} for x′")
        return PASS


def answers_of(audit: Audit) -> dict[tuple[str, str], bool]:
    return {(k, c): a for k, c, a in VerifierQuestion.objects.filter(
        audit=audit, status=VerifierQuestion.Status.ANSWERED)
        .values_list("key", "criterion", "answer")}


def questions_create(*, audit: Audit, needed: dict[tuple[str, str], tuple[Any, str]]) -> int:
    """The ``needed`` questions the audit does not have yet, as pending tasks (random queue
    order), each audited ``routed``. Returns how many were created."""
    have = set(VerifierQuestion.objects.filter(audit=audit).values_list("key", "criterion"))
    new = [VerifierQuestion(study_id=audit.study_id, audit=audit, key=k, criterion=c,
                            datapoint=x, question=q, rank=secrets.randbits(62))
           for (k, c), (x, q) in needed.items() if (k, c) not in have]
    VerifierQuestion.objects.bulk_create(new)
    ids = VerifierQuestion.objects.filter(public_id__in=[q.public_id for q in new]) \
        .values_list("pk", flat=True)
    engine.task_events_bulk(VERIFY_KIND, [(pk, "routed", None, {}) for pk in ids])
    return len(new)


def open_questions(audit: Audit) -> int:
    return VerifierQuestion.objects.filter(audit=audit).exclude(
        status=VerifierQuestion.Status.ANSWERED).count()


# ------------------------------------------------------------------- the workers' side


def verifier_study(*, user: User, study_id: int) -> Study:
    """The study whose questions ``user`` answers; Http404 unless they are its worker."""
    study = Study.objects.filter(pk=study_id).first()
    if study is None or not user.is_authenticated or not StudyMembership.objects.filter(
            study=study, user=user, role=worker_role(study)).exists():
        raise Http404("No such study.")
    return study


@transaction.atomic
def question_next(*, study: Study, user: User) -> VerifierQuestion | None:
    """The worker's current question, else the next pending one of the study's waiting
    audits (random order), else None."""
    now = timezone.now()
    mine = VerifierQuestion.objects.filter(study=study)
    current = engine.lease_current(VERIFY_KIND, mine, user=user, now=now)
    if current is not None:
        return current
    audits = Audit._meta.db_table
    pool = (f"q.study_id = %s AND EXISTS (SELECT 1 FROM {audits} a WHERE a.id = q.audit_id "
            "AND a.status = %s)")
    return engine.lease_first(VERIFY_KIND, pool_sql=pool,
                              pool_params=[study.pk, Audit.Status.WAITING], user=user,
                              now=now, expires=now + _lease_for(None), rendered=True)


def question_answer(*, user: User, public_id: str, answer: bool) -> VerifierQuestion:
    """Store the holder's yes/no. The answer that closes an audit's last open question
    queues the audit's next pass (after commit)."""
    with transaction.atomic():
        task = engine.task_locked(VERIFY_KIND, public_id=public_id)
        task = engine.task_for_holder(VERIFY_KIND, task, user)
        now = timezone.now()
        engine.answer_too_soon(VERIFY_KIND, task, now)
        engine.task_complete(VERIFY_KIND, task, user=user, now=now,
                             fields={"answer": bool(answer)})
        resumed = (open_questions(task.audit) == 0 and Audit.objects.filter(
            pk=task.audit_id, status=Audit.Status.WAITING).update(
                status=Audit.Status.QUEUED) == 1)
        if resumed:
            audit_id = task.audit_id
            transaction.on_commit(lambda: run_enqueue(audit_id))
    return task


def questions_progress(audit: Audit) -> tuple[int, int]:
    """(answered, asked) questions of the audit."""
    qs = VerifierQuestion.objects.filter(audit=audit)
    return qs.filter(status=VerifierQuestion.Status.ANSWERED).count(), qs.count()

