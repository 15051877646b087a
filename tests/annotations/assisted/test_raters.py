"""Raters: balanced, seeded arm draws recorded once; the quiz and the assistant's warning
gate the first task."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from annotations.assisted.services.design import DEFAULT_QUIZ
from annotations.assisted.services.raters import (
    TutorialRequired,
    arm_position,
    quiz_submit,
    rater_join,
    warning_acknowledge,
)
from annotations.assisted.services.rating import rating_lease_next
from annotations.core.errors import DomainError, NotPermitted
from annotations.models import QuizAttempt, RaterAssignment
from tests.annotations.assisted.helpers import add_rater, make_assisted_study
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ARMS = {"Search": ["search"], "Evidence": ["search", "evidence"],
        "Full": ["search", "evidence", "reasoning", "judgments", "confidence"]}


def test_arms_are_balanced_in_every_block_and_follow_the_seed():
    study = make_assisted_study(n_sentences=2, arms=ARMS, seed=5)
    raters = [add_rater(study, ready=False) for _ in range(12)]
    drawn = [RaterAssignment.objects.get(study=study, user=u) for u in raters]
    names = [a.arm.name for a in drawn]
    for block in range(3):  # 4 arms: each block of 4 raters holds each arm once
        assert sorted(names[4 * block:4 * block + 4]) == sorted(["Baseline", *ARMS])
    assert [a.sequence for a in drawn] == list(range(12))
    # the draw is a function of the seed and the join order, nothing else
    arms = ["Baseline", *ARMS]
    assert names == [arms[arm_position(5, n, 4)] for n in range(12)]
    assert len({tuple(np.random.default_rng([5, 7, b]).permutation(4)) for b in range(3)}) > 1


def test_partial_block_stays_within_one_of_balance():
    study = make_assisted_study(n_sentences=2, arms=ARMS, seed=9)
    counts = Counter(RaterAssignment.objects.get(study=study, user=add_rater(
        study, ready=False)).arm.name for _ in range(10))
    assert max(counts.values()) - min(counts.values()) <= 1


def test_joining_needs_the_annotator_role():
    study = make_assisted_study(n_sentences=1)
    with pytest.raises(NotPermitted):
        rater_join(study=study, user=UserFactory())


def test_first_task_needs_the_quiz_then_the_warning_in_assisted_arms():
    study = make_assisted_study(n_sentences=2, arms={"E": ["search", "evidence"]})
    assisted = baseline = None
    while assisted is None or baseline is None:
        user = add_rater(study, ready=False)
        if user.rater_assignments.get().components:
            assisted = assisted or user
        else:
            baseline = baseline or user
    for user in (assisted, baseline):
        with pytest.raises(TutorialRequired, match="quiz"):
            rating_lease_next(study=study, user=user)
    wrong = [(q["answer"] + 1) % len(q["options"]) for q in DEFAULT_QUIZ]
    passed, feedback = quiz_submit(study=study, user=assisted, answers=wrong)
    assert not passed and all(not f["correct"] and f["explain"] for f in feedback)
    right = [q["answer"] for q in DEFAULT_QUIZ]
    for user in (assisted, baseline):
        passed, feedback = quiz_submit(study=study, user=user, answers=right)
        assert passed and all(f["correct"] for f in feedback)
    assert QuizAttempt.objects.filter(assignment__user=assisted).count() == 2
    assert rating_lease_next(study=study, user=baseline) is not None
    with pytest.raises(TutorialRequired, match="warning"):
        rating_lease_next(study=study, user=assisted)
    warning_acknowledge(study=study, user=assisted)
    assert rating_lease_next(study=study, user=assisted) is not None


def test_quiz_answers_must_cover_every_question():
    study = make_assisted_study(n_sentences=1)
    user = add_rater(study, ready=False)
    with pytest.raises(DomainError, match="answers"):
        quiz_submit(study=study, user=user, answers=[1])


def test_a_placed_rater_takes_the_next_position_in_the_arm_given_and_keeps_it():
    from annotations.assisted.services.raters import rater_place
    from annotations.core.errors import InvalidStudy
    from annotations.core.services.studies import membership_add
    from annotations.models import Arm

    study = make_assisted_study(arms={"Evidence": ["search", "evidence"]})
    other = make_assisted_study(n_sentences=1)
    drawn = add_rater(study)
    evidence = Arm.objects.get(study=study, name="Evidence")
    user = UserFactory()
    membership_add(study=study, user=user, role="annotator")
    with pytest.raises(InvalidStudy, match="not an active arm"):
        rater_place(study=study, user=user, arm=Arm.objects.get(study=other,
                                                                name="Baseline"))
    placed = rater_place(study=study, user=user, arm=evidence)
    assert placed.arm == evidence and placed.components == evidence.components
    assert placed.sequence == drawn.rater_assignments.get(study=study).sequence + 1
    baseline = Arm.objects.get(study=study, name="Baseline")
    assert rater_place(study=study, user=user, arm=baseline).pk == placed.pk  # kept
    study.assisted.refresh_from_db()
    assert study.assisted.raters_joined == 2
