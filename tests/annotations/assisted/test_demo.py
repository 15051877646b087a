"""`serve` seeds the assisted demo beside the partitioned one: once, with its analysis,
planted reliance effects visible, members who can open it, and spare slots for visitors."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from annotations.assisted.services.demo import (
    DEMO_ASSISTED_STUDY,
    assisted_study_from_simulation,
)
from annotations.models import (
    EstimateSnapshot,
    Rating,
    RatingTask,
    Study,
    StudyMembership,
)
from estimators.assisted.simulation import AssistedDesign, simulate_assisted

pytestmark = pytest.mark.django_db


def test_seed_demo_creates_the_assisted_study_once():
    out = io.StringIO()
    call_command("seed_demo", "--items", "30", "--answers", "0", stdout=out, stderr=io.StringIO())
    assert DEMO_ASSISTED_STUDY in out.getvalue() and "rater-blind / rater-blind" in out.getvalue()
    study = Study.objects.get(name=DEMO_ASSISTED_STUDY)
    assert study.kind == Study.Kind.ASSISTED and study.status == Study.Status.OPEN
    ratings = Rating.objects.filter(study=study).count()
    snapshots = EstimateSnapshot.objects.filter(study=study).count()
    assert ratings > 0 and snapshots == 1
    roles = set(StudyMembership.objects.filter(study=study, user__username__in=[
        "admin", "manager", "rater-blind", "rater-assisted"]).values_list("user__username",
                                                                          "role"))
    assert roles == {("admin", "researcher"), ("manager", "manager"),
                     ("rater-blind", "annotator"), ("rater-assisted", "annotator")}
    # visitors find work in every arm: one spare slot per sentence and arm
    assert RatingTask.objects.filter(study=study, status="pending").count() >= \
        study.sentences.count() * study.arms.count()
    payload = EstimateSnapshot.objects.get(study=study).payload
    rows = {r["arm"]: r for r in payload["reliance"]["rows"]}
    assert payload["reliance"]["baseline"] == "Baseline"
    assert rows["Full trace"]["over_reliance"] > 0.1  # planted: 0.66 − 0.40
    call_command("seed_demo", "--items", "30", "--answers", "0", stdout=io.StringIO(),
                 stderr=io.StringIO())
    assert Study.objects.filter(name=DEMO_ASSISTED_STUDY).count() == 1
    assert Rating.objects.filter(study=study).count() == ratings
    assert EstimateSnapshot.objects.filter(study=study).count() == snapshots


def test_an_even_number_of_ai_samples_is_refused():
    sim = simulate_assisted(AssistedDesign(n_items=20, n_samples=10, raters_per_arm=2,
                                           items_per_rater=10), seed=1)
    with pytest.raises(ValueError, match="n_samples: 10 is even"):
        assisted_study_from_simulation(name="even", sim=sim, seed=1)
    assert not Study.objects.filter(name="even").exists()
