"""The site's own pages, shared by every study type: the home page (each user's studies),
the guides from ``docs/`` and ``/studies/<id>/dashboard/``, which shows the dashboard of
the study's type (registered by each type's ``hooks``). Thin: parse, select, render."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from annotations.core import selectors
from annotations.core.models import Study

_DASHBOARDS: dict[str, Callable[[HttpRequest, int], HttpResponse]] = {}


def dashboard_register(kind: str, view: Callable[[HttpRequest, int], HttpResponse]) -> None:
    """Make ``/studies/<id>/dashboard/`` show ``view`` for studies of ``kind``."""
    _DASHBOARDS[kind] = view


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
    """One dashboard link for every study type: the view its type registered (a type that
    registered none shows the partitioned one)."""
    kind = get_object_or_404(Study.objects.only("kind"), pk=study_id).kind
    view = _DASHBOARDS.get(kind, _DASHBOARDS[Study.Kind.PARTITIONED])
    return view(request, study_id)
