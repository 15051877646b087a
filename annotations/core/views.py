"""The site's own pages, shared by every study type: the home page (each user's studies),
the guides from ``docs/`` and ``/studies/<id>/dashboard/``, which shows the dashboard of
the study's type (registered by each type's ``hooks``). Thin: parse, select, render."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotations.core import selectors
from annotations.core.models import Study

_DASHBOARDS: dict[str, Callable[[HttpRequest, Study], HttpResponse]] = {}


def dashboard_register(kind: str, page: Callable[[HttpRequest, Study], HttpResponse]) -> None:
    """Make ``/studies/<id>/dashboard/`` show ``page(request, study)`` for studies of
    ``kind`` (the study found and the reader's permission checked by :func:`dashboard`)."""
    _DASHBOARDS[kind] = page


_STUDY_PAGES: dict[str, str] = {}


def study_page_register(kind: str, url_name: str) -> None:
    """Where a study of ``kind`` is configured: the URL name of its page (taking the study's
    id), for the pages every type shares (Members) to link back to."""
    _STUDY_PAGES[kind] = url_name


def study_page_url(study: Study) -> str:
    return reverse(_STUDY_PAGES.get(study.kind, "admin:annotations_study_change"),
                   args=[study.pk])


def dashboard_study(request: HttpRequest, study_id: int, kind: str | None = None) -> Study:
    """The study whose dashboard (or figure, or plan) ``request`` asks for: 404 without such
    a study (of ``kind``, when given), 403 unless the user is one of its managers or
    researchers. Every study type's dashboard pages start here."""
    study = get_object_or_404(Study, pk=study_id, **({"kind": kind} if kind else {}))
    if not selectors.user_can_view_dashboard(user=request.user, study=study):
        raise PermissionDenied("Dashboards are for the study's managers and researchers.")
    return study


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    rows = selectors.studies_for_user(user=request.user)
    return render(request, "annotations/home.html", {"rows": rows})


@require_GET
@login_required
def help_page(request: HttpRequest, page: str) -> HttpResponse:
    """A guide from ``docs/`` rendered as a page of the site (``/help/manager/``)."""
    from annotations.core.guides import GUIDES, guide_html

    if page not in GUIDES:
        raise Http404("No such guide.")
    title, html = guide_html(page)
    return render(request, "annotations/help.html", {"title": title, "guide": html})


@require_GET
@login_required
def help_image(request: HttpRequest, name: str) -> FileResponse:
    from annotations.core.guides import guide_image_path

    path = guide_image_path(name)
    if path is None:
        raise Http404("No such picture.")
    return FileResponse(path.open("rb"))


@require_GET
@login_required
def dashboard(request: HttpRequest, study_id: int) -> HttpResponse:
    """One dashboard link for every study type: the page its type registered (a type that
    registered none shows the partitioned one)."""
    study = dashboard_study(request, study_id)
    page = _DASHBOARDS.get(study.kind, _DASHBOARDS[Study.Kind.PARTITIONED])
    return page(request, study)


@require_GET
@login_required
def study_export(request: HttpRequest, study_id: int) -> HttpResponse:
    """A raw export of any study type (``?what=`` one of its exports, ``?format=csv|jsonl``),
    for the study's researchers and managers, as they may read its dashboard."""
    from annotations.core.exports import export_response, requested_format

    study = dashboard_study(request, study_id)
    return export_response(study, request.GET.get("what"), requested_format(request))


@require_GET
@login_required
def figure_csv(request: HttpRequest, study_id: int, figure: str) -> HttpResponse:
    """The CSV of one figure (or table) of any study type's dashboard, from its latest
    snapshot (``core.exports.figure_response``), for those who may read the dashboard."""
    from annotations.core.exports import figure_response

    return figure_response(dashboard_study(request, study_id), figure)
