"""Assisted models: database constraints, arm versions, assignments that never change."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from annotations.assisted.services.design import arm_save, assisted_study_create
from annotations.assisted.services.raters import rater_join
from annotations.assisted.services.rating import RatingInput, rating_lease_next, rating_submit
from annotations.core.errors import InvalidStudy
from annotations.models import (
    Arm,
    AssistedStudy,
    RaterAssignment,
    Rating,
    RatingTask,
    Sentence,
    Study,
)
from tests.annotations.assisted.helpers import add_rater, make_assisted_study

pytestmark = pytest.mark.django_db


def test_created_study_is_assisted_with_settings_and_baseline():
    study = assisted_study_create(name="a1", ratings_per_item=4, threshold=0.5,
                                  routing="threshold")
    assert study.kind == Study.Kind.ASSISTED and study.status == Study.Status.DRAFT
    assert study.assisted.ratings_per_item == 4 and study.assisted.threshold == 0.5
    arm = Arm.objects.get(study=study)
    assert (arm.name, arm.components, arm.is_baseline, arm.version) == ("Baseline", [], True, 1)
    assert list(AssistedStudy.objects.all()) == [study]


def test_unknown_setting_and_threshold_without_t_are_refused():
    with pytest.raises(InvalidStudy, match="colour: not a setting"):
        assisted_study_create(name="a2", colour="blue")
    with pytest.raises(InvalidStudy, match="threshold"):
        assisted_study_create(name="a3", routing="threshold")
    assert not Study.objects.filter(name__in=["a2", "a3"]).exists()


def test_evidence_ticks_search_results_too():
    # issue 17: "evidence implies search results" was refused instead of ticked
    study = assisted_study_create(name="evidence-alone")
    arm = arm_save(arm=Arm(study=study, name="X", show_evidence=True))
    arm.refresh_from_db()
    assert arm.components == ["search", "evidence"]


@pytest.mark.parametrize(("fields", "field"), [
    ({"show_debate": True, "show_confidence": True, "show_search": True}, "show_confidence"),
    ({"show_debate": True}, "show_debate"),
])
def test_arm_component_rules_are_refused_by_service(fields, field):
    study = assisted_study_create(name=f"rules-{field}-{len(fields)}")
    with pytest.raises(InvalidStudy) as exc:
        arm_save(arm=Arm(study=study, name="X", **fields))
    assert exc.value.field == field


@pytest.mark.parametrize("fields", [{"show_evidence": True},
                                    {"show_debate": True, "show_confidence": True}])
def test_arm_component_rules_hold_in_the_database(fields):
    study = assisted_study_create(name=f"db-{len(fields)}")
    with pytest.raises(IntegrityError), transaction.atomic():
        Arm.objects.create(study=study, name="X", **fields)


def test_arm_version_grows_only_when_components_change():
    study = assisted_study_create(name="versions")
    arm = arm_save(arm=Arm(study=study, name="E", show_search=True))
    assert arm.version == 1
    arm.description = "only words"
    assert arm_save(arm=arm).version == 1
    arm.show_evidence = True
    assert arm_save(arm=arm).version == 2
    assert arm.components == ["search", "evidence"]


def test_assignment_keeps_the_version_it_joined_under():
    study = make_assisted_study(arms={"E": ["search"]})
    raters = [add_rater(study) for _ in range(2)]
    arm = Arm.objects.get(study=study, name="E")
    arm.show_evidence = True
    arm_save(arm=arm)
    for user in raters:
        a = RaterAssignment.objects.get(study=study, user=user)
        if a.arm_id == arm.pk:
            assert (a.arm_version, a.components) == (1, ["search"])
        assert rater_join(study=study, user=user) == a  # joining again changes nothing


def test_one_rating_per_rater_and_sentence_in_the_database(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_assisted_study(n_sentences=2)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    rating = rating_submit(user=user, public_id=task.public_id,
                           data=RatingInput("accurate", 3)).rating
    other = RatingTask.objects.filter(sentence=task.sentence).exclude(pk=task.pk).first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Rating.objects.create(task=other, study=study, sentence=task.sentence,
                              arm=task.arm, arm_version=1, rater=user, label="accurate",
                              confidence=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        RatingTask.objects.filter(pk=other.pk).update(answered_by=user)
    assert rating.sentence_id == task.sentence_id


def test_confidence_outside_0_1_is_refused_by_the_database():
    study = assisted_study_create(name="conf")
    with pytest.raises(IntegrityError), transaction.atomic():
        Sentence.objects.create(study=study, external_id="x", prompt="p", response="r",
                                target="t", ai_confidence=1.5)
