"""Creating AI systems (one mechanism for every study type): the next free ordinal (a
partitioned study's bit in its query masks), and the one AI system an assisted study's AI
rater is — what its audits are linked to and its trust gate names (docs/audit.md)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from annotations.core.errors import ImportFailed
from annotations.core.models import Study
from assistants.models import MAX_SYSTEMS_PER_STUDY, AISystem

AI_RATER_NAME = "AI rater"


def system_create(*, study: Study, name: str, description: str = "") -> AISystem:
    """Create an AI system with the study's next free ordinal (its bit in the query masks)."""
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()
        top = AISystem.objects.filter(study=study).aggregate(m=Max("ordinal"))["m"]
        ordinal = 0 if top is None else top + 1
        if ordinal >= MAX_SYSTEMS_PER_STUDY:
            raise ImportFailed([f"study '{study}': at most {MAX_SYSTEMS_PER_STUDY} AI systems"])
        return AISystem.objects.create(
            study=study, name=name, description=description, ordinal=ordinal
        )


def ai_rater_system(study: Study) -> AISystem:
    """The AI system named "AI rater" of ``study`` (an assisted study's AI rater), created
    when missing."""
    found = AISystem.objects.filter(study=study, name=AI_RATER_NAME).first()
    if found is not None:
        return found
    return system_create(study=study, name=AI_RATER_NAME,
                         description="The study's AI rater (its endpoint and prompt are "
                                     "the study's AI rater settings).")
