"""Tasks made level by level as their inputs exist: the tree's counts, the stored draws,
no level made twice, the next level when a pair completes, AI levels in the mixed mode."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection

from annotations.core.errors import InvalidStudy
from annotations.critique.services.generation import critique_generate, task_draws
from annotations.critique.services.studies import (
    critique_settings_update,
    critique_study_create,
    critique_study_open,
)
from annotations.models import CritiqueOutput, CritiqueQuestion, CritiqueTask, CritiqueTaskBlock
from tests.annotations.critique.helpers import answer_next, make_critique_study

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_minimum(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0


def test_opening_makes_the_response_tasks_of_every_question_and_nothing_else():
    study, _ = make_critique_study(n_questions=5, top_level=3, counts=[7, 5, 3, 1])
    tasks = CritiqueTask.objects.filter(study=study)
    assert Counter(tasks.values_list("level", flat=True)) == {0: 35}
    for q in CritiqueQuestion.objects.filter(study=study):
        assert sorted(tasks.filter(question=q).values_list("slot", flat=True)) == list(range(7))
        assert q.generated_level == 0
    assert not tasks.exclude(first__isnull=True).exists()


def test_generating_again_makes_nothing_new():
    study, _ = make_critique_study(n_questions=3, top_level=2, counts=[3, 2, 1])
    before = CritiqueTask.objects.filter(study=study).count()
    assert critique_generate(study=study).total == 0
    assert critique_generate(study=study, question_ids=[
        q.pk for q in CritiqueQuestion.objects.filter(study=study)]).total == 0
    assert CritiqueTask.objects.filter(study=study).count() == before


def test_the_next_level_appears_when_its_pair_is_written_with_stored_random_orders():
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[3, 40],
                                       n_annotators=44)
    question = CritiqueQuestion.objects.get(study=study)
    slots_written = []
    for user in users:  # responses are written in random slot order; critiques wait for 0 and 1
        task, _ = answer_next(study, user)
        slots_written.append(task.slot)
        pair_done = {0, 1} <= set(slots_written)
        assert CritiqueTask.objects.filter(study=study, level=1).exists() == pair_done
        if len(slots_written) == 3:
            break
    critiques = list(CritiqueTask.objects.filter(study=study, level=1).order_by("slot"))
    assert len(critiques) == 40
    pair = dict(CritiqueOutput.objects.filter(question=question, level=0, slot__lt=2)
                .values_list("slot", "pk"))
    shown = [(t.first_id, t.second_id) for t in critiques]
    assert set(shown) == {(pair[0], pair[1]), (pair[1], pair[0])}
    _, swapped = task_draws(study.seed, question.pk, 1, 40)
    assert [s == (pair[1], pair[0]) for s in shown] == swapped.tolist()  # the stored draw
    assert 8 <= sum(swapped) <= 32  # each order with probability ½ (P(outside) < 0.001)


def test_chain_authors_are_blocked_on_the_tasks_made():
    study, users = make_critique_study(n_questions=1, top_level=2, counts=[2, 2, 1],
                                       n_annotators=6)
    for user in users:
        answer_next(study, user)
    top = CritiqueTask.objects.get(study=study, level=2)
    chain = set(CritiqueOutput.objects.filter(study=study, level__lt=2, slot__lt=2)
                .values_list("author_id", flat=True))
    blocked = set(CritiqueTaskBlock.objects.filter(task=top, reason="chain")
                  .values_list("user_id", flat=True))
    assert len(chain) == 4 and blocked == chain


def test_in_the_mixed_mode_annotators_get_only_the_top_level_once_the_ai_pair_exists():
    from annotations.critique.services.ai_outputs import critique_ai_outputs_import
    from tests.annotations.critique.helpers import jsonl

    study, _ = make_critique_study(n_questions=2, top_level=1, counts=[2, 3], mode="ai_below")
    assert not CritiqueTask.objects.filter(study=study).exists()
    critique_ai_outputs_import(study=study, name="ai.jsonl", source=jsonl([
        {"id": "r1", "question": "q0", "level": 0, "text": "Because.\nAnswer: B"},
        {"id": "r2", "question": "q0", "level": 0, "text": "Hmm.\nAnswer: C"}]))
    tasks = CritiqueTask.objects.filter(study=study)
    assert Counter(tasks.values_list("level", "question__external_id")) == {(1, "q0"): 3}


def test_counts_and_level_are_checked_and_fixed_once_open():
    with pytest.raises(InvalidStudy, match="level 0 needs at least 2"):
        critique_study_create(name="bad counts", top_level=1, counts=[1, 1])
    with pytest.raises(InvalidStudy, match="3 values for levels 0…1"):
        critique_study_create(name="bad length", top_level=1, counts=[3, 2, 1])
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], open_=False)
    critique_settings_update(study=study, counts=[4, 2])
    critique_study_open(study=study)
    assert CritiqueTask.objects.filter(study=study).count() == 4
    with pytest.raises(InvalidStudy, match="fixed once the study is open"):
        critique_settings_update(study=study, counts=[5, 2])
    critique_settings_update(study=study, time_limit_minutes=5)  # allowed while open


@pytest.mark.postgres
def test_generating_1000_questions_uses_bulk_inserts(django_assert_max_num_queries):
    study = critique_study_create(name="big", top_level=3, counts=[7, 5, 3, 1])
    from annotations.critique.services.questions import critique_questions_import
    from tests.annotations.critique.helpers import jsonl, questions_records

    critique_questions_import(study=study, source=jsonl(questions_records(1000)),
                              name="q.jsonl")
    with django_assert_max_num_queries(20):
        critique_study_open(study=study)
    assert CritiqueTask.objects.filter(study=study).count() == 7000
    assert connection.vendor == "postgresql"
