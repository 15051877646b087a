"""An annotator takes back the last answer (issue 17: specialists could, annotators could
not): within the undo window, while nobody critiques it yet."""

from __future__ import annotations

import datetime as dt

import pytest

from annotations.core.errors import UndoRefused
from annotations.critique.services.answers import (
    CritiqueAnswer,
    critique_answer_taken_back,
    critique_undo,
    critique_undo_offered_until,
)
from annotations.critique.services.assignment import critique_task_next
from annotations.models import CritiqueOutput, CritiqueQuestion, CritiqueTask, CritiqueTaskEvent
from tests.annotations.critique.helpers import answer_next, make_critique_study

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _window(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    settings.OVERSIGHT_UNDO_SECONDS = 30


def test_undo_gives_the_task_back_and_a_new_answer_is_taken():
    study, users = make_critique_study(n_questions=2, top_level=1, counts=[3, 1])
    user = users[0]
    with pytest.raises(UndoRefused, match="no answer of yours"):
        critique_undo(study=study, user=user)
    answer_next(study, user, final=0)
    task, output = answer_next(study, user, final=1)
    held = critique_task_next(study=study, user=user)
    back = critique_undo(study=study, user=user)
    assert back.pk == task.pk and back.status == CritiqueTask.Status.LEASED
    assert back.holder == user and back.times_issued == 2
    assert not CritiqueOutput.objects.filter(pk=output.pk).exists()
    if held is not None:
        held.refresh_from_db()
        assert held.status == CritiqueTask.Status.PENDING
    event = CritiqueTaskEvent.objects.get(task=task, kind="undone")
    assert event.actor == user and event.detail["final"] == 1
    with pytest.raises(UndoRefused, match="once"):
        critique_undo(study=study, user=user)
    from annotations.critique.services.answers import CritiqueAnswer, critique_answer

    again = critique_answer(public_id=back.public_id, user=user, answer=CritiqueAnswer(
        reasoning="On second thought.", final=2, confidence=4))
    assert again.final == 2 and again.task_id == task.pk


def test_undo_of_an_answer_that_completed_a_pair_takes_the_next_level_back_too():
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    answer_next(study, users[0])
    task, output = answer_next(study, users[1])  # completes the pair: level 1 is made
    question = CritiqueQuestion.objects.get(study=study)
    assert CritiqueTask.objects.filter(question=question, level=1).count() == 1
    critique_undo(study=study, user=users[1])
    assert not CritiqueTask.objects.filter(question=question, level=1).exists()
    question.refresh_from_db()
    assert question.generated_level == 0
    answer_next(study, users[1])  # the pair completes again: level 1 again
    assert CritiqueTask.objects.filter(question=question, level=1).count() == 1


def test_undo_is_refused_once_someone_critiques_the_answer():
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    answer_next(study, users[0])
    answer_next(study, users[1])
    critique = critique_task_next(study=study, user=users[2])
    assert critique is not None and critique.level == 1
    with pytest.raises(UndoRefused, match="only while nobody critiques it"):
        critique_undo(study=study, user=users[1])
    assert CritiqueOutput.objects.filter(study=study, level=0).count() == 2


def test_undo_is_refused_after_the_window(settings):
    settings.OVERSIGHT_UNDO_SECONDS = 0
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    answer_next(study, users[0])
    with pytest.raises(UndoRefused, match="Too late to undo"):
        critique_undo(study=study, user=users[0])


def test_undo_gives_back_the_whole_answer_to_put_in_the_form_and_is_offered_while_it_can():
    # issue 27: the reasoning box came back empty after an undo
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    answer_next(study, users[0])
    assert critique_undo_offered_until(study=study, user=users[1]) is None  # nothing yet
    task, output = answer_next(study, users[1], final=2, confidence=5,
                               reasoning="Long reasoning.\n\nTwo paragraphs.")
    task.refresh_from_db()
    until = critique_undo_offered_until(study=study, user=users[1])
    assert until == task.answered_at + dt.timedelta(seconds=30)
    assert critique_answer_taken_back(task=task, user=users[1]) is None  # answered, not undone
    back = critique_undo(study=study, user=users[1])
    assert critique_answer_taken_back(task=back, user=users[1]) == CritiqueAnswer(
        reasoning="Long reasoning.\n\nTwo paragraphs.", final=2, confidence=5, choice="")
    assert critique_answer_taken_back(task=back, user=users[0]) is None  # only its holder
    assert critique_undo_offered_until(study=study, user=users[1]) is None  # once


def test_an_undone_critique_gives_back_its_choice():
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    answer_next(study, users[0])
    answer_next(study, users[1])
    task, output = answer_next(study, users[2], final=1, choice="second", confidence=2,
                               reasoning="B is better: A misreads the clause.")
    assert task.level == 1
    back = critique_undo(study=study, user=users[2])
    assert critique_answer_taken_back(task=back, user=users[2]) == CritiqueAnswer(
        reasoning="B is better: A misreads the clause.", final=1, confidence=2,
        choice="second")
