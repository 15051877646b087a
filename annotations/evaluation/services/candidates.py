"""Register an evaluated candidate as an AI system of its study, so that it shows on the
dashboard (estimates once its predictions are uploaded) while its submission history stays
on the study's evaluation page."""

from __future__ import annotations

from django.db import transaction

from annotations.core.errors import DomainError
from annotations.evaluation.models import EvaluationCall
from annotations.partitioned.services.predictions import system_create
from assistants.models import AISystem

DESCRIPTION = "Evaluation candidate (evaluation service; history: the study's Evaluations page)"


@transaction.atomic
def candidate_register(*, call: EvaluationCall) -> AISystem:
    """The AI system named after ``call``'s candidate (reused when the study has one of that
    name). The service stores no predictions: upload the candidate's predictions to the
    system (admin or predictions import) for its estimates."""
    if not call.accepted or not call.candidate:
        raise DomainError("Only an accepted call's candidate can be registered.")
    found = AISystem.objects.filter(study=call.study, name=call.candidate).first()
    return found or system_create(study=call.study, name=call.candidate,
                                  description=DESCRIPTION)
