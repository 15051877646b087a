"""The Workers page (``/studies/<id>/workers/``): each worker's quality and time, sortable
(``?sort=&order=desc``), as CSV (``?format=csv``), and — for researchers — the exclusions:
exclude a worker, or answers before or from a time or faster than a threshold, with a
reason; undo. Thin: parse, call one selector or service, render."""

from __future__ import annotations

import datetime as dt

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotations.core.errors import DomainError, NotPermitted
from annotations.core.exclusion_models import Exclusion
from annotations.core.exports import CONTENT_TYPES, rows_chunks
from annotations.core.models import Study
from annotations.core.reviews import workers
from annotations.core.reviews.exclusions import exclusion_add, exclusion_undo
from annotations.core.reviews.registry import reviewable
from annotations.core.services.flags import flaggable


def _study(request: HttpRequest, study_id: int) -> tuple[Study, bool]:
    try:
        return workers.workers_study(user=request.user, study_id=study_id)
    except NotPermitted as exc:
        raise PermissionDenied(exc.message) from exc


@require_GET
@login_required
def workers_page(request: HttpRequest, study_id: int) -> HttpResponse:
    study, may_exclude = _study(request, study_id)
    sort = request.GET.get("sort") if request.GET.get("sort") in workers.SORTS else "name"
    descending = request.GET.get("order") == "desc"
    rows = workers.study_workers(study=study, sort=sort, descending=descending)
    if request.GET.get("format") == "csv":
        response = StreamingHttpResponse(rows_chunks(workers.workers_csv_rows(rows)),
                                         content_type=CONTENT_TYPES["csv"])
        response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-workers.csv"'
        return response
    return render(request, "annotations/review/workers.html", {
        "study": study, "rows": rows, "sort": sort, "descending": descending,
        "may_exclude": may_exclude, "compares": workers.compares_answers(rows),
        "bins": workers.time_bins(), **_exclusions_context(study),
        "kinds": Exclusion.Kind.choices, "answer_noun": reviewable(study.kind).noun,
        "noun": flaggable(study.kind).noun, "now": timezone.now(),
        "form": request.session.pop(f"exclusion-form-{study.pk}", {})})


def _exclusions_context(study: Study) -> dict:
    exclusions = workers.study_exclusions(study=study)
    return {"exclusions": exclusions, "applying": sum(x.applying for x in exclusions)}


@require_GET
@login_required
def workers_exclusions_part(request: HttpRequest, study_id: int) -> HttpResponse:
    """The exclusions list alone (an htmx partial the page polls while a job runs)."""
    study, may_exclude = _study(request, study_id)
    return render(request, "annotations/review/_exclusion_list.html", {
        "study": study, "may_exclude": may_exclude, **_exclusions_context(study),
        "answer_noun": reviewable(study.kind).noun})


@require_GET
@login_required
def workers_compact_part(request: HttpRequest, study_id: int) -> HttpResponse:
    """The dashboard's compact Workers table (an htmx partial; ``workers.workers_compact``)."""
    study, _ = _study(request, study_id)
    return render(request, "annotations/_workers_compact.html", {
        "study": study, "compact": workers.workers_compact(study=study),
        "answer_noun": reviewable(study.kind).noun})


def _at(value: str) -> dt.datetime | None:
    """A time typed in the form (``YYYY-MM-DDTHH:MM[:SS]``, read as UTC); None when empty."""
    value = (value or "").strip()
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise DomainError(f"'{value[:40]}' is not a time (YYYY-MM-DD HH:MM, UTC).",
                          field="at") from exc
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=dt.UTC)


def _seconds(value: str) -> float | None:
    value = (value or "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError as exc:
        raise DomainError(f"'{value[:40]}' is not a number of seconds.",
                          field="faster_than_seconds") from exc


@require_POST
@login_required
def workers_exclude(request: HttpRequest, study_id: int) -> HttpResponse:
    study, _ = _study(request, study_id)
    post = request.POST
    back = reverse("workers", args=[study.pk]) + "#exclusions"
    try:
        rule = exclusion_add(study=study, by=request.user, kind=post.get("kind", ""),
                             reason=post.get("reason", ""),
                             worker_id=post.get("worker") or None, at=_at(post.get("at", "")),
                             faster_than_seconds=_seconds(post.get("faster_than_seconds", "")))
    except NotPermitted as exc:
        raise PermissionDenied(exc.message) from exc
    except DomainError as exc:
        request.session[f"exclusion-form-{study.pk}"] = {
            **{k: post.get(k, "")[:2000] for k in ("kind", "worker", "at",
                                                   "faster_than_seconds", "reason")},
            "error": exc.message, "field": exc.field or ""}
        return redirect(back)
    noun = reviewable(study.kind).noun
    leases = (f" {rule.released} lease{'' if rule.released == 1 else 's'} released."
              if rule.released else "")
    rule.refresh_from_db(fields=["answers", "applying"])  # a job may have run meanwhile
    if rule.applying:
        messages.success(request, f"Excluding {rule.describe()}: the {noun}s are being taken "
                                  f"out in the background (this page shows when it is done)."
                                  + leases)
    else:
        messages.success(request, f"Excluded {rule.answers} {noun}"
                                  f"{'' if rule.answers == 1 else 's'}: {rule.describe()}."
                                  + leases)
    return redirect(back)


@require_POST
@login_required
def workers_exclusion_undo(request: HttpRequest, study_id: int, exclusion_id: int
                           ) -> HttpResponse:
    study, _ = _study(request, study_id)
    try:
        rule = exclusion_undo(study=study, exclusion_id=exclusion_id, by=request.user,
                              reason=request.POST.get("reason", ""))
    except NotPermitted as exc:
        raise PermissionDenied(exc.message) from exc
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        rule.refresh_from_db(fields=["applying"])
        noun = reviewable(study.kind).noun
        messages.success(request, f"Exclusion undone: {rule.describe()}."
                                  + (f" Its {noun}s are being put back in the background."
                                     if rule.applying else ""))
    return redirect(reverse("workers", args=[study.pk]) + "#exclusions")
