"""What critique studies plug into the core (called from the app's ``ready``): their task
kind (``services.assignment``) and recompute (``services.analysis``), both registered on
import, and their opening. Their dashboard has its own address (``critique-dashboard``)."""

from __future__ import annotations

from annotations.core.models import Study
from annotations.core.services.studies import study_opener_register
from annotations.critique.services import analysis, assignment  # noqa: F401 - registered on import
from annotations.critique.services.studies import critique_study_open


def register() -> None:
    study_opener_register(Study.Kind.CRITIQUE, critique_study_open)
