"""The Review page (``/studies/<id>/review/``) and an item in context
(``…/review/items/<item>/``): for a study's reviewers and researchers, in the site's layout,
htmx where it helps (a decision swaps its answer's card), every link a real ``href``.
Thin: parse, call one selector or service, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from annotations.core.errors import DomainError, NotPermitted
from annotations.core.models import ItemFlag, Study
from annotations.core.reviews import selectors
from annotations.core.reviews.registry import reviewable
from annotations.core.reviews.services import answer_rejection_undo, answer_review
from annotations.core.services.flags import flag_resolve, flaggable

PAGE_SIZE = 25
SHOWS = ("answers", "disagreements", "flags")


def _study(request: HttpRequest, study_id: int) -> Study:
    try:
        return selectors.review_study(user=request.user, study_id=study_id)
    except NotPermitted as exc:
        raise PermissionDenied(exc.message) from exc


def _int(value: str | None, default: int = 0) -> int:
    try:
        return max(0, int(value or default))
    except ValueError:
        return default


def _words(study: Study) -> dict:
    return {"noun": flaggable(study.kind).noun, "answer_noun": reviewable(study.kind).noun}


@require_GET
@login_required
def review(request: HttpRequest, study_id: int) -> HttpResponse:
    """The queue: ``?show=answers`` (``&state=all|unreviewed|accepted|rejected&page=``),
    ``disagreements`` or ``flags`` (``&flags=open|resolved``)."""
    study = _study(request, study_id)
    show = request.GET.get("show") if request.GET.get("show") in SHOWS else "answers"
    context = {"study": study, "show": show, **_words(study),
               "counts": selectors.study_review_counts(study=study),
               "may_resolve": selectors.may_resolve_flags(user=request.user, study=study)}
    if show == "answers":
        state = request.GET.get("state")
        state = state if state in selectors.REVIEW_FILTERS else "unreviewed"
        page = _int(request.GET.get("page"), 1) or 1
        answers, total = selectors.study_answers(study=study, state=state,
                                                 offset=(page - 1) * PAGE_SIZE, limit=PAGE_SIZE)
        context.update(answers=answers, total=total, state=state, page=page,
                       filters=selectors.REVIEW_FILTERS,
                       next_page=page + 1 if page * PAGE_SIZE < total else None,
                       previous_page=page - 1 if page > 1 else None)
    elif show == "disagreements":
        context["disagreements"] = selectors.study_disagreements(study=study)
    else:
        which = "resolved" if request.GET.get("flags") == "resolved" else "open"
        context.update(flagged=selectors.flag_queue(study=study, state=which), which=which)
    return render(request, "annotations/review/review.html", context)


@require_GET
@login_required
def review_item(request: HttpRequest, study_id: int, item_id: int) -> HttpResponse:
    """One item in context: its text and options (or sentence), every answer it has with
    its review and the decisions, its flags (who, why, the note) and — for researchers —
    fix / withdraw / dismiss."""
    study = _study(request, study_id)
    try:
        context = selectors.item_in_context(study=study, item_id=item_id)
    except DomainError as exc:
        raise Http404(exc.message) from exc
    edit = flaggable(study.kind).edit_url
    model = flaggable(study.kind).item_model
    item_obj = model.objects.filter(pk=item_id).first()
    return render(request, "annotations/review/item.html", {
        "study": study, "context": context, "item": context.item, **_words(study),
        "edit_url": edit(item_obj) if item_obj is not None else None,
        "may_resolve": selectors.may_resolve_flags(user=request.user, study=study),
        "resolutions": [(ItemFlag.Resolution.FIXED, "Fixed"),
                        (ItemFlag.Resolution.WITHDRAWN, "Withdraw"),
                        (ItemFlag.Resolution.DISMISSED, "Dismiss")],
        "next": request.get_full_path()})


@require_GET
@login_required
def review_answer(request: HttpRequest, study_id: int, answer_id: int) -> HttpResponse:
    """One answer: its item in context, scrolled to the answer."""
    study = _study(request, study_id)
    try:
        reviewed = selectors.study_answer(study=study, answer_id=answer_id)
    except DomainError as exc:
        raise Http404(exc.message) from exc
    url = reverse("review-item", args=[study.pk, reviewed.answer.item_id])
    return redirect(f"{url}#answer-{answer_id}")


def _back(request: HttpRequest, default: str) -> str:
    target = request.POST.get("next") or ""
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                       require_https=request.is_secure()):
        return target
    return default


@require_POST
@login_required
def review_decide(request: HttpRequest, study_id: int, answer_id: int) -> HttpResponse:
    """``decision`` accept / reject (with ``reason``) / undo one answer; htmx gets the
    answer's card back, a plain form goes back to ``next``."""
    study = _study(request, study_id)
    decision = request.POST.get("decision", "")
    error = ""
    try:
        if decision == "undo":
            answer_rejection_undo(study=study, answer_id=answer_id, by=request.user)
        elif decision in ("accept", "reject"):
            answer_review(study=study, answer_id=answer_id, accept=decision == "accept",
                          reason=request.POST.get("reason", ""), by=request.user)
        else:
            error = "Choose accept, reject or undo."
    except DomainError as exc:
        if exc.http_status == 404:
            raise Http404(exc.message) from exc
        error = exc.message
    if request.htmx:
        reviewed = selectors.study_answer(study=study, answer_id=answer_id)
        return render(request, "annotations/review/_answer.html", {
            "study": study, "a": reviewed, "error": error, "reason": request.POST.get("reason", ""),
            "next": request.POST.get("next", ""), "show_item": request.POST.get("show_item")})
    if error:
        messages.error(request, error)
    else:
        messages.success(request, {"accept": "Answer accepted.", "reject": "Answer rejected: "
                                   "it is left out of the estimates.",
                                   "undo": "Rejection undone: the answer is back in the "
                                   "estimates."}[decision])
    return redirect(_back(request, reverse("review-answer", args=[study.pk, answer_id])))


@require_POST
@login_required
def review_flag_resolve(request: HttpRequest, study_id: int, item_id: int) -> HttpResponse:
    """Resolve the item's flags (``resolution`` fixed / withdrawn / dismissed), researchers
    only (``flag_resolve``); back to the item."""
    study = _study(request, study_id)
    resolution = request.POST.get("resolution", "")
    try:
        changed = flag_resolve(study=study, item_id=item_id, resolution=resolution,
                               user=request.user)
    except NotPermitted as exc:
        raise PermissionDenied(exc.message) from exc
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        words = {"fixed": "marked fixed", "withdrawn": "withdrawn: no longer handed out and "
                 "left out of the estimates", "dismissed": "dismissed"}[resolution]
        messages.success(request, f"{changed} flag{'s' if changed != 1 else ''} {words}."
                         if changed else "Nothing to resolve: no open flag on this item.")
    return redirect(_back(request, reverse("review-item", args=[study.pk, item_id])))
