"""Raters of an assisted study: the arm drawn when they join, the tutorial and the
comprehension quiz they must pass before their first task (plus, in assisted arms, the
assistant's warning).

Arms are drawn in permuted blocks: the n-th rater to join (n = 0, 1, …) gets position
n mod A of block ⌊n / A⌋, a permutation of the A active arms (ordered by position, id)
drawn from the study's seed (stream 7, block number). After every full block each arm has
the same number of raters. The draw is stored with the arm's version and components and
never changes (the arm may change later; its raters keep their version).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Exists
from django.utils import timezone

from annotations.assisted.models import Arm, AssistedSettings, QuizAttempt, RaterAssignment
from annotations.assisted.services.design import arms_active, quiz_of, settings_of
from annotations.core.errors import DomainError, InvalidStudy, NotPermitted
from annotations.core.models import Study, StudyMembership, User
from annotations.core.selectors import row_id_possible

ARM_STREAM = 7


class TutorialRequired(DomainError):
    """The rater has not passed the quiz (or seen the assistant's warning) yet."""

    code = "tutorial_required"
    http_status = 409


def rater_membership(*, study: Study, user: User) -> StudyMembership | None:
    return StudyMembership.objects.filter(study=study, user=user,
                                          role=StudyMembership.Role.ANNOTATOR).first()


def rater_assignment(*, study: Study, user: User) -> RaterAssignment | None:
    return (RaterAssignment.objects.select_related("arm", "study__assisted")
            .filter(study=study, user=user).first())


def arm_position(seed: int, sequence: int, n_arms: int) -> int:
    """Index (into the active arms) of the arm of the ``sequence``-th rater to join."""
    block, within = divmod(sequence, n_arms)
    permutation = np.random.default_rng([seed, ARM_STREAM, block]).permutation(n_arms)
    return int(permutation[within])


def rater_join(*, study: Study, user: User) -> RaterAssignment:
    """The rater's arm: drawn at their first call (balanced, seeded; see the module),
    returned as stored afterwards. Only annotators of an assisted study join."""
    existing = rater_assignment(study=study, user=user)
    if existing is not None:
        return existing
    return _rater_draw(study, user)


def rater_for_work(*, study_id: int, user: User) -> RaterAssignment | None:
    """The assignment of an annotator who may work in assisted study ``study_id``, read in
    one statement with its arm, study and the study's settings (``assignment.study.
    assisted``); None when the user has no assignment there yet or is no longer one of its
    annotators (callers then take the slow path: ``rater_membership``, ``rater_join``)."""
    if not row_id_possible(study_id):
        return None
    member = StudyMembership.objects.filter(study_id=study_id, user=user,
                                            role=StudyMembership.Role.ANNOTATOR)
    return (RaterAssignment.objects.select_related("study", "study__assisted")
            .only(*WORK_FIELDS)
            .filter(study_id=study_id, user=user, study__kind=Study.Kind.ASSISTED)
            .filter(Exists(member)).first())


# What the next-task path reads (anything else would cost a query: the API's statement
# count test guards this list).
WORK_FIELDS = ("study_id", "user_id", "arm_id", "arm_version", "components", "quiz_passed_at",
               "warning_seen_at", "study__name", "study__kind", "study__status",
               "study__lease_minutes", "study__assisted__item_order",
               "study__assisted__band_cutoffs")


def rater_place(*, study: Study, user: User, arm: Arm) -> RaterAssignment:
    """Put an annotator of the study in ``arm`` instead of drawing theirs (the demo's raters:
    one in the blind arm, one in an assisted arm, so a visitor can try both). They take the
    next join position as a draw would, so later draws go on from there (the blocks stay
    balanced among the drawn raters); an annotator who has an arm already keeps it."""
    if arm.study_id != study.pk or not arm.is_active:
        raise InvalidStudy(f"Arm '{arm}' is not an active arm of study '{study}'.", field="arm")
    existing = rater_assignment(study=study, user=user)
    if existing is not None:
        return existing
    return _rater_draw(study, user, arm=arm)


@transaction.atomic
def _rater_draw(study: Study, user: User, arm: Arm | None = None) -> RaterAssignment:
    if study.kind != Study.Kind.ASSISTED:
        raise InvalidStudy(f"Study '{study}' is not an assisted study.", field="kind")
    if rater_membership(study=study, user=user) is None:
        raise NotPermitted("You are not a rater (annotator) in this study.")
    settings_of(study)
    settings = AssistedSettings.objects.select_for_update().get(study=study)
    existing = rater_assignment(study=study, user=user)  # joined while we waited
    if existing is not None:
        return existing
    sequence = settings.raters_joined
    if arm is None:
        arms = arms_active(study)
        if not arms:
            raise InvalidStudy("The study has no active arm yet; ask a researcher.",
                               field="arms")
        arm = arms[arm_position(study.seed, sequence, len(arms))]
    settings.raters_joined = sequence + 1
    settings.save(update_fields=["raters_joined"])
    try:
        with transaction.atomic():
            return RaterAssignment.objects.create(
                study=study, user=user, arm=arm, arm_version=arm.version,
                components=arm.components, sequence=sequence)
    except IntegrityError:
        return RaterAssignment.objects.select_related("arm", "study__assisted").get(
            study=study, user=user)


def quiz_for_rater(settings: AssistedSettings) -> list[dict[str, Any]]:
    """The quiz as shown: questions and options, never the answers."""
    return [{"index": i, "question": q["question"], "options": list(q["options"])}
            for i, q in enumerate(quiz_of(settings))]


def quiz_submit(*, study: Study, user: User, answers: list[int | None]) -> tuple[bool, list[dict]]:
    """Check the rater's answers (one 0-based option per question). Every answer right →
    passed (stored; later submissions change nothing). Returns (passed, feedback per
    question: {index, correct, explain}) — the right option is not revealed, only whether
    theirs was right and the explanation."""
    assignment = rater_join(study=study, user=user)
    quiz = quiz_of(settings_of(study))
    if len(answers) != len(quiz):
        raise DomainError(f"answers: {len(quiz)} expected, one per question (got "
                          f"{len(answers)}).", field="answers")
    feedback = []
    for i, (q, given) in enumerate(zip(quiz, answers, strict=True)):
        correct = given is not None and given == q["answer"]
        feedback.append({"index": i, "correct": correct,
                         "explain": q.get("explain", "") if not correct else ""})
    passed = all(f["correct"] for f in feedback)
    with transaction.atomic():
        locked = RaterAssignment.objects.select_for_update().get(pk=assignment.pk)
        QuizAttempt.objects.create(assignment=locked, answers=list(answers), passed=passed)
        locked.quiz_attempts += 1
        fields = ["quiz_attempts"]
        if passed and locked.quiz_passed_at is None:
            locked.quiz_passed_at = timezone.now()
            fields.append("quiz_passed_at")
        locked.save(update_fields=fields)
    return passed, feedback


def warning_acknowledge(*, study: Study, user: User) -> RaterAssignment:
    """The rater of an assisted arm read the assistant's warning (after the quiz)."""
    assignment = rater_join(study=study, user=user)
    if assignment.quiz_passed_at is None:
        raise TutorialRequired("Pass the quiz first.")
    if assignment.warning_seen_at is None:
        assignment.warning_seen_at = timezone.now()
        assignment.save(update_fields=["warning_seen_at"])
    return assignment


def rater_ready_check(assignment: RaterAssignment) -> None:
    if assignment.quiz_passed_at is None:
        raise TutorialRequired("Read the tutorial and pass the quiz before your first "
                               "sentence (on the rating page).")
    if not assignment.ready:
        raise TutorialRequired("Read the warning about the AI assistant before your first "
                               "sentence (on the rating page).")
