"""What the pages of every study type share about time: the dashboards' live region (one
``live_dashboard`` answer; its poll gets 204 while nothing changed) and when a labeller's
session on a page began (for the "this session" count of the progress line)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from annotations.core import selectors
from annotations.core.models import Study


def dashboard_unchanged(request: HttpRequest, study: Study) -> bool:
    """True for a live-region poll (``?since=<snapshot id>&health=<token>``) when there is
    no newer snapshot and the recompute's health is the same: the view answers 204 and the
    page keeps what it shows."""
    if request.GET.get("since") is None:
        return False
    latest = selectors.study_latest_snapshot(study=study)
    health = selectors.study_recompute_health(study=study)
    return (request.GET["since"] == (str(latest.pk) if latest else "")
            and request.GET.get("health") == health.token)


def live_dashboard(request: HttpRequest, study: Study, *, page: str, live: str,
                   context: Callable[[], dict]) -> HttpResponse:
    """Every dashboard's answer: the whole ``page`` template; to a poll of its live region
    (htmx, not a history restore) the ``live`` template alone — or ``204`` with nothing to
    swap while ``dashboard_unchanged``. ``context`` builds the figures only when they are
    rendered."""
    if request.htmx and not request.htmx.history_restore_request:
        if dashboard_unchanged(request, study):
            return HttpResponse(status=204)
        return render(request, live, context())
    return render(request, page, context())


def session_started_at(request: HttpRequest, study: Study, key: str) -> dt.datetime:
    """When this browser session first opened the study's labelling page (kept in the
    session under ``key:<study id>``)."""
    name = f"{key}:{study.pk}"
    if name not in request.session:
        request.session[name] = timezone.now().isoformat()
    return dt.datetime.fromisoformat(request.session[name])
