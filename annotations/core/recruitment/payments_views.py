"""The Payments page (``/studies/<id>/payments/``), for the study's researchers: each
recruitment link's participants with what they are owed and what is recorded; record the
payments due as a batch; download a batch as Prolific's bulk-bonus CSV or as JSON; send it
to Prolific with the operator's key; mark it paid. Thin: parse, call one service, render."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotations.core.errors import DomainError, NotPermitted
from annotations.core.models import Study, StudyMembership
from annotations.core.recruitment import payments
from annotations.core.recruitment_models import PaymentBatch, RecruitmentLink
from annotations.core.selectors import study_for_roles


def _study(request: HttpRequest, study_id: int) -> Study:
    try:
        return study_for_roles(user=request.user, study_id=study_id,
                               roles=(StudyMembership.Role.RESEARCHER,),
                               refusal="Only the study's researchers see its payments.")[0]
    except NotPermitted as exc:
        raise PermissionDenied(exc.message) from exc


@require_GET
@login_required
def payments_page(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(request, study_id)
    links = [(link, payments.payments_owed(link),
              list(link.batches.prefetch_related("payments")))
             for link in study.recruitment_links.order_by("created_at", "pk")]
    return render(request, "annotations/recruitment/payments.html", {
        "study": study, "links": links,
        "may_send": payments.prolific_sending_configured()})


def _link(study: Study, link_id: int) -> RecruitmentLink:
    return get_object_or_404(RecruitmentLink.objects.select_related("study"), study=study,
                             pk=link_id)


def _batch(study: Study, batch_id: int) -> PaymentBatch:
    return get_object_or_404(PaymentBatch.objects.select_related("link"), link__study=study,
                             pk=batch_id)


@require_POST
@login_required
def payments_record(request: HttpRequest, study_id: int, link_id: int) -> HttpResponse:
    study = _study(request, study_id)
    try:
        batch = payments.payments_record(link=_link(study, link_id), by=request.user)
    except DomainError as exc:
        messages.info(request, exc.message)
    else:
        n = batch.payments.count()
        messages.success(request, f"Batch {batch.pk} recorded: {n} payment"
                                  f"{'' if n == 1 else 's'}.")
    return redirect("payments", study_id=study.pk)


@require_GET
@login_required
def batch_download(request: HttpRequest, study_id: int, batch_id: int, fmt: str
                   ) -> HttpResponse:
    study = _study(request, study_id)
    batch = _batch(study, batch_id)
    if fmt == "csv":
        response = HttpResponse(payments.prolific_bonus_lines(batch),
                                content_type="text/csv; charset=utf-8")
    else:
        response = HttpResponse(json.dumps(payments.batch_rows(batch), indent=1),
                                content_type="application/json")
    response["Content-Disposition"] = (
        f'attachment; filename="study-{study.pk}-payments-{batch.pk}.{fmt}"')
    return response


@require_POST
@login_required
def batch_act(request: HttpRequest, study_id: int, batch_id: int) -> HttpResponse:
    study = _study(request, study_id)
    batch = _batch(study, batch_id)
    try:
        if request.POST.get("action") == "send":
            payments.batch_send(batch=batch)
            messages.success(request, f"Batch {batch.pk} sent to Prolific.")
        else:
            payments.batch_mark_paid(batch=batch)
            messages.success(request, f"Batch {batch.pk} marked paid.")
    except DomainError as exc:
        messages.error(request, exc.message)
    return redirect("payments", study_id=study.pk)
