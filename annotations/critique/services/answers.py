"""An annotator's answer to a critique task: the output it creates, and what follows.

``critique_answer`` locks the task's question (answers to one question run one after the
other), checks the lease (holder, not expired, study open, still an annotator, shown for at
least OVERSIGHT_MIN_ANSWER_MS), validates the answer, closes the
task through the engine (time on task, audit row) and stores the ``CritiqueOutput``. Then,
in the same transaction: the annotator is blocked from the other tasks of the same level of
the question (one output per person per sibling group), and when the output completes its
level's chain pair, the next level's tasks of that question are made (annotators never wait
for a worker). After commit the study's analysis is scheduled (``services.recompute``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Q, Subquery
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from annotations.core import engine
from annotations.core.errors import DomainError, UndoRefused
from annotations.core.models import Study, User
from annotations.core.reviews.exclusions import exclusions_catch
from annotations.critique.models import (
    CritiqueChoice,
    CritiqueOutput,
    CritiqueQuestion,
    CritiqueTask,
    CritiqueTaskBlock,
    CritiqueTaskEvent,
)
from annotations.critique.services.assignment import CRITIQUE_KIND, task_for_holder

MAX_TEXT = 20_000
CHOICES = (CritiqueChoice.FIRST, CritiqueChoice.SECOND, CritiqueChoice.NEITHER)


class InvalidCritiqueAnswer(DomainError):
    """An answer with a missing or impossible field (``field`` names it)."""

    code = "invalid_answer"
    http_status = 400


@dataclass(frozen=True)
class CritiqueAnswer:
    """What an annotator gives: the reasoning (response) or rationale (critique), the final
    option (0-based), which input is better (critiques: first/second/neither, in the order
    shown) and a confidence from 1 to 5."""

    reasoning: str
    final: int | None
    confidence: int | None
    choice: str = ""


def answer_check(task: CritiqueTask, answer: CritiqueAnswer) -> dict[str, str]:
    """Problems by field (empty when the answer is complete)."""
    problems: dict[str, str] = {}
    text = (answer.reasoning or "").strip()
    if not text:
        problems["reasoning"] = (_("Write your reasoning.") if task.level == 0
                                 else _("Write your rationale."))
    elif len(text) > MAX_TEXT:
        problems["reasoning"] = _("At most %(max)s characters (this is %(n)s).") % {
            "max": MAX_TEXT, "n": len(text)}
    n = len(task.question.options)
    if answer.final is None or isinstance(answer.final, bool) or not 0 <= answer.final < n:
        problems["final"] = _("Choose your final answer.")
    if task.level > 0 and answer.choice not in CHOICES:
        problems["choice"] = _("Say which input is better (or neither).")
    if task.level == 0 and answer.choice:
        problems["choice"] = _("A response has no inputs to choose from.")
    if (answer.confidence is None or isinstance(answer.confidence, bool)
            or not 1 <= answer.confidence <= 5):
        problems["confidence"] = _("Rate your confidence from 1 to 5.")
    return problems


def _question_lock(public_id: str) -> CritiqueQuestion | None:
    """Lock the task's question before its task (one statement): answers to one question
    run one after the other. Two annotators finishing the two outputs of a chain pair at
    once then never both miss the other's output (the second sees the first and makes the
    next level), and their transactions never wait for each other's rows in opposite
    orders. Returns the question (None: no such task)."""
    task = CritiqueTask.objects.filter(public_id=public_id).values("question_id")[:1]
    return CritiqueQuestion.objects.select_for_update().filter(pk=Subquery(task)).first()


def _repeated(public_id: str, user: User, answer: CritiqueAnswer) -> CritiqueOutput | None:
    """The output ``user`` stored for the task when it is this same answer (its task
    answered by them), marked ``repeated``; None otherwise."""
    output = (CritiqueOutput.objects.filter(task__public_id=public_id, author=user,
                                            task__status=CritiqueTask.Status.ANSWERED,
                                            task__answered_by=user).first())
    if output is None or (output.reasoning, output.final, output.confidence, output.choice) != (
            (answer.reasoning or "").strip(), answer.final, answer.confidence,
            answer.choice if output.level else ""):
        return None
    output.repeated = True
    return output


def _block_siblings(task: CritiqueTask, user: User) -> None:
    """One statement: ``user`` may not receive the other unanswered tasks of the task's
    level of its question (one output per person per sibling group)."""
    table, blocks = CritiqueTask._meta.db_table, CritiqueTaskBlock._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {blocks} (task_id, user_id, reason) SELECT t.id, %s, %s FROM "
            f"{table} t WHERE t.question_id = %s AND t.level = %s AND t.id <> %s AND "
            "t.status <> %s ON CONFLICT (task_id, user_id) DO NOTHING",
            [user.pk, CritiqueTaskBlock.Reason.SIBLING, task.question_id, task.level, task.pk,
             CritiqueTask.Status.ANSWERED])


def _next_level(task: CritiqueTask) -> None:
    """Make the question's next-level tasks when this output completed the chain pair."""
    from annotations.critique.services.generation import critique_generate

    if task.slot >= 2:
        return
    pair = CritiqueOutput.objects.filter(question_id=task.question_id, level=task.level,
                                         slot__lt=2).count()
    if pair == 2:
        critique_generate(study=task.study, question_ids=[task.question_id])


@transaction.atomic
def critique_answer(*, public_id: str, user: User, answer: CritiqueAnswer,
                    now: dt.datetime | None = None, time_on_task_ms: int | None = None,
                    recompute: bool = True) -> CritiqueOutput:
    """Store ``user``'s answer to the task they hold (module docstring). Idempotent: the
    same answer again to a task ``user`` answered returns the stored output with
    ``repeated`` True (a retried request whose response was lost); a different one is
    refused as answered. Raises the engine's lease errors, AnsweredTooSoon, or
    InvalidCritiqueAnswer (nothing changes). The new output has ``repeated`` False.
    ``now``, ``time_on_task_ms`` and ``recompute=False`` are for simulations (the
    simulated time on task; one recompute at the end instead of one per answer)."""
    now = now or timezone.now()
    question = _question_lock(public_id)
    repeated = _repeated(public_id, user, answer)
    if repeated is not None:
        return repeated
    task = task_for_holder(public_id=public_id, user=user)
    task.question = question  # locked above, read once
    engine.answer_too_soon(CRITIQUE_KIND, task, now)
    problems = answer_check(task, answer)
    if problems:
        field, message = next(iter(problems.items()))
        exc = InvalidCritiqueAnswer(message, field=field)
        exc.problems = problems  # type: ignore[attr-defined]
        raise exc
    fields = {} if time_on_task_ms is None else {"time_on_task_ms": int(time_on_task_ms)}
    detail = {"final": answer.final, "confidence": answer.confidence}
    if task.level:
        detail["choice"] = answer.choice
    engine.task_complete(CRITIQUE_KIND, task, user=user, now=now, fields=fields, detail=detail)
    output = CritiqueOutput.objects.create(
        study_id=task.study_id, question_id=task.question_id, level=task.level, slot=task.slot,
        first_id=task.first_id, second_id=task.second_id, reasoning=answer.reasoning.strip(),
        final=answer.final, choice=answer.choice if task.level else "",
        confidence=answer.confidence, time_ms=task.time_on_task_ms,
        author_kind=CritiqueOutput.Author.HUMAN, author=user,
        source=CritiqueOutput.Source.TASK, task=task)
    output.repeated = False
    exclusions_catch(task.study, [output.pk])
    _block_siblings(task, user)
    _next_level(task)
    study_id = task.study_id
    if recompute:
        transaction.on_commit(lambda: _schedule(study_id))
    return output


@transaction.atomic
def critique_undo(*, study: Study, user: User) -> CritiqueTask:
    """Take back the annotator's last answer in the study within the undo window
    (OVERSIGHT_UNDO_SECONDS, as a specialist's answer or a rating) and give them its task
    again under a fresh lease — a fresh time limit.

    The output may already be an input: when it completed its chain pair, the next level's
    tasks were made at once. Those are deleted with it while nobody has been given one yet
    (they are made again when the pair completes again); once one has been leased, or an AI
    output critiques it, the undo is refused as too late. Also refused (``UndoRefused``)
    with no answer, a second time, after the window, or when the study closed or the user
    is no longer its annotator. Otherwise, in one transaction: the output and the sibling
    blocks it set are deleted, the question is marked as generated no further than the
    output's level, the user's other leases go back to the pool, the task is leased to them
    again, an ``undone`` audit row records what was taken back, and a recompute is
    scheduled."""
    # the question before the task, as critique_answer locks them: in the opposite order an
    # undo and another annotator's answer to the same question could wait for each other
    mine = CritiqueTask.objects.filter(study=study, answered_by=user,
                                       status=CritiqueTask.Status.ANSWERED)
    latest = mine.order_by("-answered_at", "-pk").values("question_id")[:1]
    locked = CritiqueQuestion.objects.select_for_update().filter(pk=Subquery(latest)).first()
    last = engine.undo_target(CRITIQUE_KIND, CritiqueTask.objects.filter(study=study),
                              user=user, noun="answer",
                              again=_("answer the task you got back first."))
    if locked is None or locked.pk != last.question_id:  # they answered again meanwhile
        CritiqueQuestion.objects.select_for_update().filter(pk=last.question_id).first()
    output = CritiqueOutput.objects.filter(task=last).first()
    now = timezone.now()
    window = engine.undo_window()
    seconds = int(window.total_seconds())
    too_late = UndoRefused(ngettext(
        "Too late to undo: an answer can be undone for %(n)s second after it is given, and "
        "only while nobody critiques it yet.",
        "Too late to undo: an answer can be undone for %(n)s seconds after it is given, and "
        "only while nobody critiques it yet.", seconds) % {"n": seconds})
    if now - last.answered_at >= window or output is None:
        raise too_late
    uses = Q(first=output) | Q(second=output)
    # the next level's tasks locked before they are looked at: a lease under way (its row
    # lock) is waited for and then seen; a later one passes them over (SKIP LOCKED)
    made = list(CritiqueTask.objects.select_for_update().filter(uses).order_by("pk"))
    if (any(t.times_issued or t.status != CritiqueTask.Status.PENDING for t in made)
            or CritiqueOutput.objects.filter(uses).exists()):
        raise too_late
    detail = {"final": output.final, "choice": output.choice, "confidence": output.confidence,
              "reasoning": output.reasoning, "answered_at": last.answered_at.isoformat(),
              "tasks_deleted": len(made)}
    if made:
        _unmade([t.pk for t in made], too_late)
        CritiqueQuestion.objects.filter(pk=last.question_id,
                                        generated_level__gt=output.level).update(
            generated_level=output.level)
    output_id = output.pk
    output.delete()
    exclusions_catch(study, [output_id])
    CritiqueTaskBlock.objects.filter(task__question_id=last.question_id,
                                     task__level=last.level, user=user,
                                     reason=CritiqueTaskBlock.Reason.SIBLING).delete()
    engine.leases_return(CRITIQUE_KIND, CritiqueTask.objects.select_for_update().filter(
        study=study, holder=user, status=CritiqueTask.Status.LEASED), reason="undo")
    engine.task_relet(CRITIQUE_KIND, last, user=user, now=now, detail=detail, clear={})
    study_id = study.pk
    transaction.on_commit(lambda: _schedule(study_id))
    return last


def _unmade(ids: list[int], too_late: UndoRefused) -> None:
    """Delete never-issued next-level tasks and their rows. The tasks go in one conditional
    statement (never issued, still pending): when a lease got one after all (a database
    without row locks), fewer rows go than asked and the undo is refused — the transaction
    rolls back whole — instead of failing at commit on the lease's audit row."""
    CritiqueTaskEvent.objects.filter(task_id__in=ids).delete()
    CritiqueTaskBlock.objects.filter(task_id__in=ids).delete()
    table = CritiqueTask._meta.db_table
    marks = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {table} WHERE id IN ({marks}) AND times_issued = 0 "
                    "AND status = %s", [*ids, CritiqueTask.Status.PENDING])
        if cur.rowcount != len(ids):
            raise too_late


def critique_undo_offered_until(*, study: Study, user: User) -> dt.datetime | None:
    """Until when the work page offers "Undo last answer" (None: there is nothing to undo;
    ``engine.undo_offered_until``)."""
    return engine.undo_offered_until(CRITIQUE_KIND, study,
                                     CritiqueTask.objects.filter(study=study), user=user)


def critique_answer_taken_back(*, task: CritiqueTask, user: User) -> CritiqueAnswer | None:
    """The answer ``user`` took back from ``task`` by undo, while they hold it again (None
    otherwise): the work page shows it in the form to correct, not to write again."""
    detail = engine.undone_detail(CRITIQUE_KIND, task, user=user)
    if detail is None:
        return None
    return CritiqueAnswer(reasoning=detail.get("reasoning", ""), final=detail.get("final"),
                          confidence=detail.get("confidence"), choice=detail.get("choice", ""))


def _schedule(study_id: int) -> None:
    from annotations.core.services.recompute import study_recompute_schedule

    study_recompute_schedule(study_id)
