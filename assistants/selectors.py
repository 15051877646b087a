"""Reads of the assistants app."""

from __future__ import annotations

from django.db.models import QuerySet

from annotations.models import Study
from assistants.models import AISystem, Prediction


def study_predictions(*, study: Study) -> QuerySet[Prediction]:
    return (Prediction.objects.filter(system__study=study)
            .select_related("item", "system").order_by("item_id", "system__ordinal"))


def study_systems(*, study: Study) -> QuerySet[AISystem]:
    return AISystem.objects.filter(study=study).order_by("ordinal")
