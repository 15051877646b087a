"""The critique pages count and name levels right: "compare two critiques of critiques"
(was "critique of critiquess"), "1 minute per task" (was "1 minutes"), "1 second"."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import F
from django.urls import reverse

from annotations.core.errors import UndoRefused
from annotations.critique.models import CritiqueTask
from annotations.critique.services.answers import critique_undo
from annotations.critique.services.assignment import critique_task_next
from tests.annotations.critique.helpers import answer_next, make_critique_study

pytestmark = pytest.mark.django_db


def _holder_of_level(study, users, level):
    """Annotators answer by the level rule until one is handed a task of ``level``."""
    for _ in range(40):
        for user in users:
            task = critique_task_next(study=study, user=user)
            if task is not None and task.level == level:
                return user
            if task is not None:
                answer_next(study, user)
    raise AssertionError(f"no task of level {level} came up")


def test_a_critique_of_critiques_of_critiques_names_its_inputs_in_the_plural(client, settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study, users = make_critique_study(n_questions=1, top_level=3, counts=[2, 2, 2, 1],
                                       n_annotators=12, time_limit_minutes=1)
    user = _holder_of_level(study, users, 3)
    client.force_login(user)
    page = client.get(reverse("critique-work", args=[study.pk])).content.decode()
    assert "Level 3: compare two critiques of critiques" in page
    assert "The two critiques of critiques to compare" in page
    assert "critiquess" not in page
    assert "1 minute per task" in page and "1 minutes" not in page


def test_one_second_of_undo_is_said_in_the_singular(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    settings.OVERSIGHT_UNDO_SECONDS = 1
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    task, _ = answer_next(study, users[0])
    CritiqueTask.objects.filter(pk=task.pk).update(
        answered_at=F("answered_at") - dt.timedelta(seconds=5))
    with pytest.raises(UndoRefused, match=r"undone for 1 second after it is given"):
        critique_undo(study=study, user=users[0])
