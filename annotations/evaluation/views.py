"""The study's evaluation page for its researchers: per token the budget spent, and per
candidate its submissions (score against submission number) as a table, a chart and CSV
(``?format=csv``). Anyone else gets 404."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from annotations.core.exports import download, rows_write
from annotations.core.models import Study, StudyMembership
from annotations.core.selectors import user_roles
from annotations.evaluation.selectors import (
    candidate_history,
    evaluation_study,
    registered_candidates,
    study_candidates,
    study_token_usage,
)

HISTORY_FIELDS = ["candidate", "n", "at", "token", "items", "score", "released"]


def _points(history: list[dict], width: int = 300, height: int = 80) -> str:
    """SVG polyline points of the engine's score (0–1) against submission number."""
    scored = [h for h in history if h["score"] is not None]
    if not scored:
        return ""
    step = width / max(1, len(scored) - 1)
    return " ".join(f"{i * step:.1f},{height - h['score'] * height:.1f}"
                    for i, h in enumerate(scored))


@login_required
@require_GET
def evaluations(request: HttpRequest, study_id: int) -> HttpResponse:
    study = evaluation_study(user=request.user, study_id=study_id)  # researchers only (else 404)
    candidates = [(name, candidate_history(study=study, candidate=name))
                  for name in study_candidates(study=study)]
    if request.GET.get("format") == "csv":
        response = download(f"study-{study.pk}-evaluations.csv")
        rows_write(({"candidate": name, **h} for name, history in candidates for h in history),
                   out=response, fields=HISTORY_FIELDS)
        return response
    return render(request, "evaluation/evaluations.html", {
        "study": study, "usage": study_token_usage(study=study),
        "candidates": [(name, history, _points(history)) for name, history in candidates]})


def dashboard_panel(request: HttpRequest, study: Study) -> str:
    """The partitioned dashboard's panel for the study's researchers: each candidate
    registered as an AI system, its score against submission number (chart and table), and
    the link to the Evaluations page. Empty for anyone else and without such candidates."""
    user = getattr(request, "user", None)
    if (study.kind != Study.Kind.PARTITIONED or user is None or not user.is_authenticated
            or StudyMembership.Role.RESEARCHER not in user_roles(user=user, study=study)):
        return ""
    rows = [(name, history, _points(history))
            for name in registered_candidates(study=study)
            if (history := candidate_history(study=study, candidate=name))]
    if not rows:
        return ""
    return render_to_string("evaluation/_dashboard_panel.html",
                            {"study": study, "candidates": rows}, request=request)
