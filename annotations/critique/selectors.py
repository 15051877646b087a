"""Reads of critique studies for the researchers' screens (the admin's study page)."""

from __future__ import annotations

from annotations.core.models import Study
from annotations.critique.models import CritiqueQuestion, CritiqueRun, CritiqueSettings
from annotations.critique.services.ai_runs import ACTIVE, provider_config, run_progress


def study_overview(*, study: Study) -> dict:
    """What the study's admin page shows: its settings, how many questions it has, its last
    20 AI runs (each with its progress line), whether one is still under way, and the AI
    endpoint it would call ("" when none is configured)."""
    settings = CritiqueSettings.objects.get(study=study)
    runs = list(CritiqueRun.objects.filter(study=study)[:20])
    config = provider_config(settings)
    return {"settings": settings,
            "n_questions": CritiqueQuestion.objects.filter(study=study).count(),
            "runs": [(run, run_progress(run)) for run in runs],
            "active": any(run.status in ACTIVE for run in runs),
            "endpoint": f"{config.model or '(no model)'} at {config.endpoint}"
            if config.base_url else ""}
