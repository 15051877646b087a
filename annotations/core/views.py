"""The site's own pages, shared by every study type: the home page (each user's studies),
the guides from ``docs/`` and ``/studies/<id>/dashboard/``, which shows the dashboard of
the study's type (registered by each type's ``hooks``). Thin: parse, select, render."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods

from annotations.core import selectors
from annotations.core.db_router import replica_reads
from annotations.core.models import Study

_DASHBOARDS: dict[str, Callable[[HttpRequest, Study], HttpResponse]] = {}


def dashboard_register(kind: str, page: Callable[[HttpRequest, Study], HttpResponse]) -> None:
    """Make ``/studies/<id>/dashboard/`` show ``page(request, study)`` for studies of
    ``kind`` (the study found and the reader's permission checked by :func:`dashboard`)."""
    _DASHBOARDS[kind] = page


_DASHBOARD_PANELS: list[Callable[[HttpRequest, Study], str]] = []


def dashboard_panel_register(panel: Callable[[HttpRequest, Study], str]) -> None:
    """Add ``panel(request, study)`` → HTML (empty: nothing) below every dashboard's figures:
    how a package above the study types (the evaluation service) shows its part of a study
    on the dashboard without the study types importing it (idempotent)."""
    if panel not in _DASHBOARD_PANELS:
        _DASHBOARD_PANELS.append(panel)


def dashboard_panels(request: HttpRequest, study: Study) -> list[str]:
    """The registered panels' HTML for ``study`` (each already escaped by its template)."""
    return [html for panel in _DASHBOARD_PANELS if (html := panel(request, study))]


_STUDY_PAGES: dict[str, str] = {}
_STUDY_ADDS: dict[str, tuple[str, str]] = {}
_STUDY_IMPORTS: dict[str, tuple[tuple[str, str], ...]] = {}


def study_page_register(kind: str, url_name: str, *, add: tuple[str, str] | None = None,
                        imports: Sequence[tuple[str, str]] = ()) -> None:
    """Where a study of ``kind`` is configured: the URL name of its page (taking the study's
    id), for the pages every type shares (Members, the one Studies list, home) to link to;
    ``add``: (label, URL name) of the page creating one ("Add assisted study"); ``imports``:
    (label, URL name taking the study's id) of each of its import pages, in their order."""
    _STUDY_PAGES[kind] = url_name
    if add is not None:
        _STUDY_ADDS[kind] = add
    _STUDY_IMPORTS[kind] = tuple(imports)


_STUDY_HOMES: dict[str, str] = {}


def study_home_register(kind: str, template: str) -> None:
    """The links a study of ``kind`` gives its workers on the home page (a template given
    ``study``, ``roles`` and ``spec``: "Label as … specialist", "Rate sentences" …); the
    dashboard and configure links are the same for every type."""
    _STUDY_HOMES[kind] = template


def study_page_url(study: Study) -> str:
    return reverse(_STUDY_PAGES.get(study.kind, "admin:annotations_study_change"),
                   args=[study.pk])


def study_add_links() -> list[tuple[str, str]]:
    """(label, URL) of the page creating a study of each type, in the types' order."""
    return [(label, reverse(name)) for label, name in _STUDY_ADDS.values()]


def study_actions(study: Study) -> list[tuple[str, str]]:
    """(label, URL) of what a researcher does with ``study``, the same steps for every type,
    each its type's own page: configure it, its members, its imports, its dashboard, its
    workers, recruitment links and payments, and its raw export (the type's first, as CSV
    and JSONL)."""
    from annotations.core.exports import exports_of

    actions = [("Configure", study_page_url(study)),
               ("Members", reverse("admin:annotations_study_members", args=[study.pk]))]
    actions += [(label, reverse(name, args=[study.pk]))
                for label, name in _STUDY_IMPORTS.get(study.kind, ())]
    # every type takes evaluation logs (core.services.eval_logs)
    actions.append(("Import an evaluation log",
                    reverse("admin:annotations_study_import_eval_log", args=[study.pk])))
    actions.append(("Dashboard", reverse("dashboard", args=[study.pk])))
    # every type's workers, exclusions, crowd recruitment and payments (core.reviews,
    # core.recruitment)
    actions += [("Workers", reverse("workers", args=[study.pk])),
                ("Recruitment links", reverse("admin:annotations_recruitmentlink_changelist")
                 + f"?study__id__exact={study.pk}"),
                ("Payments", reverse("payments", args=[study.pk]))]
    exports = exports_of(study.kind)
    if exports:
        url = reverse("study-export", args=[study.pk]) + f"?what={exports[0][0]}&format="
        actions += [("Raw export: CSV", url + "csv"), ("JSONL", url + "jsonl")]
    return actions


def dashboard_study(request: HttpRequest, study_id: int, kind: str | None = None) -> Study:
    """The study whose dashboard (or figure, or plan) ``request`` asks for: 404 without such
    a study (of ``kind``, when given), 403 unless the user is one of its managers or
    researchers. Every study type's dashboard pages start here."""
    study = get_object_or_404(Study, pk=study_id, **({"kind": kind} if kind else {}))
    if not selectors.user_can_view_dashboard(user=request.user, study=study):
        raise PermissionDenied(gettext("Dashboards are for the study's managers and researchers."))
    return study


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    rows = [(study, roles, spec, _STUDY_HOMES.get(study.kind))
            for study, roles, spec in selectors.studies_for_user(user=request.user)]
    return render(request, "annotations/home.html", {"rows": rows})


@require_GET
@login_required
def help_index(request: HttpRequest) -> HttpResponse:
    """``/help/``: every role's guide (title and who it is for), then the other guides."""
    from annotations.core.guides import guide_index

    roles, others = guide_index()
    return render(request, "annotations/help_index.html", {"roles": roles, "others": others})


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
@replica_reads
def dashboard(request: HttpRequest, study_id: int) -> HttpResponse:
    """One dashboard link for every study type: the page its type registered (a type that
    registered none shows the partitioned one)."""
    study = dashboard_study(request, study_id)
    page = _DASHBOARDS.get(study.kind, _DASHBOARDS[Study.Kind.PARTITIONED])
    return page(request, study)


@require_GET
@login_required
@replica_reads
def study_export(request: HttpRequest, study_id: int) -> HttpResponse:
    """A raw export of any study type (``?what=`` one of its exports, ``?format=csv|jsonl``,
    ``?excluded=include`` to keep excluded answers with a column saying so), for the study's
    researchers and managers, as they may read its dashboard."""
    from annotations.core.exports import excluded_requested, export_response, requested_format

    study = dashboard_study(request, study_id)
    return export_response(study, request.GET.get("what"), requested_format(request),
                           excluded=excluded_requested(request))


@require_http_methods(["GET", "POST"])
@login_required
def flag(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    """The flag form of a labelling page, every study type's (an htmx partial): GET shows
    it for the task ``public_id``, POST flags the task's item through
    ``core.services.flags.flag_item``. For the study's labellers only; a refusal is shown in
    the form's place (it says no more than the API's)."""
    from annotations.core.errors import DomainError
    from annotations.core.models import ItemFlag, StudyMembership
    from annotations.core.services.flags import flag_item, flaggable, worker_role

    study = get_object_or_404(Study, pk=study_id)
    if not StudyMembership.objects.filter(study=study, user=request.user,
                                          role=worker_role(study)).exists():
        raise PermissionDenied(gettext("Only the study's labellers flag its items."))
    context = {"study": study, "public_id": public_id, "noun": flaggable(study.kind).noun,
               "reasons": ItemFlag.Reason.choices, "form": {}}
    if request.method == "POST":
        try:
            context["flag"], _ = flag_item(
                study=study, user=request.user, public_id=public_id,
                reason=request.POST.get("reason", ""), note=request.POST.get("note", ""))
        except DomainError as exc:
            context.update(error=exc.message, form=request.POST)
    return render(request, "annotations/_flag.html", context)


@require_GET
@login_required
@replica_reads
def figure_csv(request: HttpRequest, study_id: int, figure: str) -> HttpResponse:
    """The CSV of one figure (or table) of any study type's dashboard, from its latest
    snapshot (``core.exports.figure_response``), for those who may read the dashboard."""
    from annotations.core.exports import figure_response

    return figure_response(dashboard_study(request, study_id), figure)
