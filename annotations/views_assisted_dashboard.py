"""The assisted study's dashboard (managers and researchers): the live page and the CSV of
every figure. Thin: parse, read the latest snapshot, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from annotations import selectors
from annotations.assisted_dashboard import FIGURES, assisted_dashboard_context, figure_csv
from annotations.live import dashboard_unchanged
from annotations.models import Study


def _assisted_study(request: HttpRequest, study_id: int) -> Study:
    study = get_object_or_404(Study, pk=study_id)
    if not selectors.user_can_view_dashboard(user=request.user, study=study):
        raise PermissionDenied("Dashboards are for the study's managers and researchers.")
    if study.kind != Study.Kind.ASSISTED:
        raise Http404("Not an assisted study.")
    return study


@require_GET
@login_required
def assisted_dashboard(request: HttpRequest, study_id: int) -> HttpResponse:
    """The live dashboard (``?rule=individual|majority`` picks the human label; kept in
    the URL). The live region polls with ``since=<snapshot>&health=<token>`` and gets 204
    until a newer snapshot exists or the recompute's health changes."""
    study = _assisted_study(request, study_id)
    rule = request.GET.get("rule", "individual")
    if request.htmx and not request.htmx.history_restore_request:
        if dashboard_unchanged(request, study):
            return HttpResponse(status=204)
        return render(request, "assisted_dashboard/_live.html",
                      assisted_dashboard_context(study, rule))
    return render(request, "assisted_dashboard/dashboard.html",
                  assisted_dashboard_context(study, rule))


@require_GET
@login_required
def assisted_figure_csv(request: HttpRequest, study_id: int, figure: str) -> HttpResponse:
    """One figure's data as CSV, from the latest snapshot (404 before the first one)."""
    study = _assisted_study(request, study_id)
    if figure not in FIGURES:
        raise Http404("No such figure.")
    snapshot = selectors.study_latest_snapshot(study=study)
    if snapshot is None or snapshot.payload.get("kind") != "assisted":
        raise Http404("No analysis yet: it appears once the first rating arrives.")
    response = HttpResponse(figure_csv(snapshot.payload, figure),
                            content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (f'attachment; filename="study-{study.pk}-{figure}-'
                                       f'snapshot-{snapshot.pk}.csv"')
    return response
