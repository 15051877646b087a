"""HTML views (htmx): parse, call one service or selector, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotations import selectors
from annotations.charts import convergence_chart, interval_chart
from annotations.errors import DomainError
from annotations.models import Query, Study
from annotations.services.labels import label_submit
from annotations.services.routing import (
    query_current_lease,
    query_heartbeat,
    query_lease_next,
    query_mark_rendered,
)

SESSION_START_KEY = "label_session_started"


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    rows = selectors.studies_for_user(user=request.user)
    return render(request, "annotations/home.html", {"rows": rows})


def _specialist_study(request: HttpRequest, study_id: int) -> Study:
    study = get_object_or_404(Study, pk=study_id)
    if selectors.specialist_membership(user=request.user, study=study) is None:
        raise PermissionDenied("You are not a specialist in this study.")
    return study


def _session_since(request: HttpRequest, study: Study):
    key = f"{SESSION_START_KEY}:{study.pk}"
    if key not in request.session:
        request.session[key] = timezone.now().isoformat()
    return timezone.datetime.fromisoformat(request.session[key])


def _render_query(request: HttpRequest, study: Study, query: Query | None,
                  message: str = "", *, full: bool = False) -> HttpResponse:
    context = {"study": study, "message": message,
               "progress": selectors.specialist_progress(
                   user=request.user, study=study, since=_session_since(request, study))}
    if query is not None:
        query_mark_rendered(query=query)
        context["q"] = selectors.query_for_specialist(query=query, study=study)
    template = "annotations/label.html" if full else "annotations/_query.html"
    if full:
        context["membership"] = selectors.specialist_membership(user=request.user, study=study)
    return render(request, template, context)


NO_QUERIES_LEFT = "No queries left for your class. Thank you!"


def _lease_next(request: HttpRequest, study: Study) -> tuple[Query | None, str]:
    """Lease the specialist's next query; the message says why there is none."""
    try:
        query = query_lease_next(study=study, user=request.user)
    except DomainError as exc:
        return None, exc.message
    return query, "" if query is not None else NO_QUERIES_LEFT


def _respond(request: HttpRequest, study: Study, query: Query | None, message: str) -> HttpResponse:
    """htmx gets the work fragment; a plain form post (no JavaScript) is redirected to the
    labelling page, which resumes the lease just taken, with the message flashed."""
    if request.htmx:
        return _render_query(request, study, query, message=message)
    if message:
        messages.info(request, message)
    return redirect("label", study_id=study.pk)


@require_GET
@login_required
def label_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """The labelling page: resumes the specialist's current lease, if any."""
    study = _specialist_study(request, study_id)
    query = None
    if study.status == Study.Status.OPEN:
        query = query_current_lease(study=study, user=request.user)
    return _render_query(request, study, query, full=True)


@require_POST
@login_required
def label_next(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _specialist_study(request, study_id)
    query, message = _lease_next(request, study)
    return _respond(request, study, query, message)


@require_POST
@login_required
def label_answer(request: HttpRequest, study_id: int, query_id: int) -> HttpResponse:
    """Store the answer, then hand out the next query in the same response."""
    study = _specialist_study(request, study_id)
    try:
        label_submit(query_id=query_id, user=request.user, answer=request.POST.get("answer", ""))
    except DomainError as exc:
        return _respond(request, study, None, exc.message)
    query, message = _lease_next(request, study)
    return _respond(request, study, query, message)


@require_POST
@login_required
def label_heartbeat(request: HttpRequest, study_id: int, query_id: int) -> HttpResponse:
    study = _specialist_study(request, study_id)
    try:
        query = query_heartbeat(query_id=query_id, user=request.user)
    except DomainError as exc:
        return HttpResponse(exc.message, status=409)
    return render(request, "annotations/_lease.html",
                  {"study": study, "q": {"id": query.pk,
                                         "lease_expires_at": query.lease_expires_at}})


def _dashboard_study(request: HttpRequest, study_id: int) -> Study:
    study = get_object_or_404(Study, pk=study_id)
    if not selectors.user_can_view_dashboard(user=request.user, study=study):
        raise PermissionDenied("Dashboards are for the study's managers and researchers.")
    return study


ESTIMATOR_CHOICES = [
    ("ml", "Maximum likelihood"), ("ivw", "IVW (plug-in weights)"),
    ("ivw_pilot", "IVW (closed-form weight)"), ("ivw_fixed", "IVW (w = 0.5)"),
    ("ord", "Ordinary only"), ("comp", "Complementary only"),
]


def _dashboard_context(study: Study, method: str = "ml") -> dict:
    snapshot = selectors.study_latest_snapshot(study=study)
    methods = dict(ESTIMATOR_CHOICES)
    method = method if method in methods else "ml"
    context: dict = {"study": study, "snapshot": snapshot, "method": method,
                     "method_label": methods[method], "choices": ESTIMATOR_CHOICES}
    if snapshot is not None:
        payload = snapshot.payload
        context["payload"] = payload
        context["side_by_side"] = [
            {"name": s["name"], "cells": [s["estimates"].get(m) for m, _ in ESTIMATOR_CHOICES]}
            for s in payload["systems"]
        ]
        context["chosen"] = [
            {"system": s, "est": s["estimates"].get(method) or {},
             "strata": [(h, (v.get("estimates") or {}).get(method, v))
                        for h, v in s.get("strata", {}).items()]}
            for s in payload["systems"]
        ]
        # a method without data is null in the payload: the chart draws no mark for it
        context["interval_chart"] = interval_chart(
            [{**s, "estimates": {m: v or {} for m, v in s["estimates"].items()}}
             for s in payload["systems"]])
        history = selectors.study_snapshot_history(study=study)
        context["convergence_chart"] = convergence_chart(
            [(s.n_answered, s.payload.get("systems", [])) for s in history]
        )
    qc_users, qc_classes = selectors.quality_check_summary(study=study)
    context.update(qc_users=qc_users, qc_classes=qc_classes)
    return context


@require_GET
@login_required
def dashboard(request: HttpRequest, study_id: int) -> HttpResponse:
    """Managers' live dashboard. The live region polls with ``since=<snapshot id>`` and gets
    204 (nothing to swap) until a newer snapshot exists."""
    study = _dashboard_study(request, study_id)
    method = request.GET.get("method", "ml")
    if request.htmx and request.GET.get("since") is not None:
        latest = selectors.study_latest_snapshot(study=study)
        if latest is not None and request.GET["since"] == str(latest.pk):
            return HttpResponse(status=204)
    if request.htmx:
        return render(request, "annotations/_dashboard_live.html",
                      _dashboard_context(study, method))
    return render(request, "annotations/dashboard.html", _dashboard_context(study, method))


@require_GET
@login_required
def plan(request: HttpRequest, study_id: int) -> HttpResponse:
    """Planning calculator: labels needed for a target interval width at a pilot accuracy
    (``?width=0.05&pilot=0.8``); errors name the field."""
    from estimators.planning import plan_labels

    study = _dashboard_study(request, study_id)
    context: dict = {"study": study, "width": request.GET.get("width", ""),
                     "pilot": request.GET.get("pilot", "")}
    try:
        width = float(context["width"])
        pilot = float(context["pilot"])
    except ValueError:
        context["error"] = "width and pilot accuracy: enter numbers, e.g. 0.05 and 0.8"
    else:
        if not 0 < width < 1:
            context["error"] = "width: must lie strictly between 0 and 1"
        elif not 0 < pilot < 1:
            context["error"] = "pilot accuracy: must lie strictly between 0 and 1"
        else:
            context["plan"] = plan_labels(width, pilot, study.classes.count())
    return render(request, "annotations/_plan.html", context)
