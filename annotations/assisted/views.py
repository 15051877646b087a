"""Pages of assisted studies. Raters (htmx, keyboard-first): tutorial and quiz, the AI
assistant's warning, the rating page, and the posts it makes (answer, skip, heartbeat,
interactions). Managers and researchers: the live dashboard and the CSV of every figure.
Views parse, call one service or selector, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.safestring import mark_safe
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from annotations.assisted.dashboard import assisted_dashboard_context
from annotations.assisted.models import Exposure, Rating, RatingTask
from annotations.assisted.services.design import (
    assisted_warning_of,
    settings_of,
    tutorial_of,
)
from annotations.assisted.services.exposure import interaction_record, task_show
from annotations.assisted.services.raters import (
    quiz_for_rater,
    quiz_submit,
    rater_join,
    rater_membership,
    warning_acknowledge,
)
from annotations.assisted.services.rating import (
    RatingInput,
    rater_progress,
    rating_current_lease,
    rating_heartbeat,
    rating_lease_next,
    rating_skip,
    rating_submit,
    rating_taken_back,
    rating_undo,
    rating_undo_offered_until,
)
from annotations.core.db_router import replica_reads
from annotations.core.errors import DomainError, LeaseExpired, leased_or_message
from annotations.core.exports import figure_response
from annotations.core.guidelines import guidelines_html
from annotations.core.inputs import BodyRejected, int_or_none, request_json
from annotations.core.live import live_dashboard
from annotations.core.models import Study
from annotations.core.views import dashboard_study

NONE_LEFT = gettext_lazy("No sentences left for you in this study. Thank you!")
EXPIRED = gettext_lazy("Your time on this sentence ran out, so it went back to the pool for "
                       "another rater and your rating was not recorded. Press Enter for the "
                       "next sentence.")

# (value, label, key) of each scale, in display order; keys are unique across the page.
LABEL_CHOICES = [(value, Rating.Label(value).label, key) for value, key in (
    ("inaccurate", "i"), ("unsupported", "u"), ("disputed", "d"), ("accurate", "a"),
    ("no_attribution", "n"), ("cant_assess", "c"))]
CONFIDENCE_CHOICES = [(v, label, str(v + 1)) for v, label in Rating.Confidence.choices]
HELPFULNESS_CHOICES = [(v, label, str(v + 7)) for v, label in Rating.Helpfulness.choices]
SECTION_KEYS = [
    ("r", "reasoning", gettext_lazy("Expand or collapse the claims and reasoning")),
    ("j", "judgments", gettext_lazy("Expand or collapse the predicted verdict")),
    ("v", "evidence", gettext_lazy("Expand or collapse the selected evidence")),
    ("g", "search", gettext_lazy("Expand or collapse the search queries and results")),
    ("f", "confidence", gettext_lazy("Expand or collapse the explanation of confidence"))]


def _rater_study(request: HttpRequest, study_id: int) -> Study:
    study = get_object_or_404(Study, pk=study_id)
    if study.kind != Study.Kind.ASSISTED or rater_membership(study=study,
                                                             user=request.user) is None:
        raise PermissionDenied(gettext("You are not a rater in this study."))
    return study


def _context(request: HttpRequest, study: Study, task: RatingTask | None, *, message: str = "",
             recorded: str = "", expired: bool = False, form: RatingInput | None = None) -> dict:
    """The rating page's context: progress, "Undo" while there is a rating to undo, the
    message, and the task with what its form holds (``form``: what the rater sent, after a
    refusal; else, a sentence given back by undo holds the rating taken back)."""
    assignment = rater_join(study=study, user=request.user)
    assisted = bool(assignment.components)
    context = {"study": study, "message": message, "recorded": recorded, "expired": expired,
               "assisted": assisted, "progress": rater_progress(study=study, user=request.user),
               "label_choices": LABEL_CHOICES, "confidence_choices": CONFIDENCE_CHOICES,
               "helpfulness_choices": HELPFULNESS_CHOICES,
               "section_keys": [k for k in SECTION_KEYS if k[1] in assignment.components]}
    context["undo_until"] = (rating_undo_offered_until(study=study, user=request.user)
                             if context["progress"]["rated"] else None)
    if task is not None:
        context["form"] = form or rating_taken_back(task=task, user=request.user)
        shown = task_show(task=task, user=request.user, via=Exposure.Via.PAGE,
                          assignment=assignment)
        context["t"] = shown.sentence
        if assisted:
            context["panel_html"] = mark_safe(shown.html)  # noqa: S308 - our own template
            context["exposure_id"] = shown.exposure.pk
    return context


def _work(request: HttpRequest, study: Study, task: RatingTask | None, **extra) -> HttpResponse:
    if request.htmx:
        return render(request, "assisted/_task.html", _context(request, study, task, **extra))
    for text in (extra.get("recorded") and gettext("Recorded: %(answer)s")
                 % {"answer": extra["recorded"]},
                 extra.get("message")):
        if text:
            messages.info(request, text)
    return redirect("rate", study_id=study.pk)


def _lease_next(request: HttpRequest, study: Study) -> tuple[RatingTask | None, str]:
    return leased_or_message(lambda: rating_lease_next(study=study, user=request.user),
                             NONE_LEFT)


def _refused(request: HttpRequest, study: Study, exc: DomainError,
             form: RatingInput | None = None, sent_for: str = "") -> HttpResponse:
    """A refused post: the lease ended (say so), or another refusal (say why, with the
    rater's current lease; when that is the task ``sent_for``, its form holds ``form``,
    what they sent)."""
    if isinstance(exc, LeaseExpired):
        return _work(request, study, None, message=EXPIRED, expired=True)
    current = None
    if study.status == Study.Status.OPEN:
        current = rating_current_lease(study=study, user=request.user)
    if current is None or current.public_id != sent_for:
        form = None
    return _work(request, study, current, message=exc.message, form=form)


@require_GET
@login_required
def rate_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """The rater's page: the tutorial and quiz until passed, then (assisted arms) the
    assistant's warning, then the rating page resuming their current lease."""
    study = _rater_study(request, study_id)
    assignment = rater_join(study=study, user=request.user)
    settings = settings_of(study)
    if assignment.quiz_passed_at is None:
        return render(request, "assisted/tutorial.html", {
            "study": study, "tutorial": guidelines_html(tutorial_of(settings)),
            "bonus": guidelines_html(settings.bonus_text) if settings.bonus_enabled else "",
            "quiz": quiz_for_rater(settings), "feedback": {}, "answers": {}})
    if not assignment.ready:
        return render(request, "assisted/warning.html", {
            "study": study, "warning": guidelines_html(assisted_warning_of(settings))})
    task = None
    if study.status == Study.Status.OPEN:
        task = rating_current_lease(study=study, user=request.user)
    context = _context(request, study, task)
    context["guidelines"] = guidelines_html(study.guidelines)
    context["tutorial"] = guidelines_html(tutorial_of(settings))
    return render(request, "assisted/rate.html", context)


@require_POST
@login_required
def quiz_post(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _rater_study(request, study_id)
    settings = settings_of(study)
    quiz = quiz_for_rater(settings)
    answers: list[int | None] = []
    for q in quiz:
        value = request.POST.get(f"q{q['index']}", "")
        answers.append(int(value) if value.isdigit() else None)
    passed, feedback = quiz_submit(study=study, user=request.user, answers=answers)
    if passed:
        messages.success(request, gettext("Quiz passed."))
        return redirect("rate", study_id=study.pk)
    return render(request, "assisted/tutorial.html", {
        "study": study, "tutorial": guidelines_html(tutorial_of(settings)),
        "bonus": guidelines_html(settings.bonus_text) if settings.bonus_enabled else "",
        "quiz": quiz, "feedback": {f["index"]: f for f in feedback},
        "answers": dict(enumerate(answers)), "failed": True}, status=200)


@require_POST
@login_required
def warning_post(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _rater_study(request, study_id)
    try:
        warning_acknowledge(study=study, user=request.user)
    except DomainError as exc:
        messages.error(request, exc.message)
    return redirect("rate", study_id=study.pk)


@require_POST
@login_required
def rate_next(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _rater_study(request, study_id)
    task, message = _lease_next(request, study)
    return _work(request, study, task, message=message)


@require_POST
@login_required
def rate_answer(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    """Store the rating, then hand out the next sentence in the same response."""
    study = _rater_study(request, study_id)
    data = RatingInput(label=request.POST.get("label", ""),
                       confidence=int_or_none(request.POST.get("confidence")),
                       helpfulness=int_or_none(request.POST.get("helpfulness")),
                       comment=request.POST.get("comment", ""))
    try:
        result = rating_submit(user=request.user, public_id=public_id, data=data)
    except DomainError as exc:
        return _refused(request, study, exc, form=data, sent_for=public_id)
    task, message = _lease_next(request, study)
    return _work(request, study, task, message=message,
                 recorded=result.rating.get_label_display())


@require_POST
@login_required
def rate_skip(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    study = _rater_study(request, study_id)
    try:
        rating_skip(user=request.user, public_id=public_id)
    except DomainError as exc:
        return _refused(request, study, exc)
    task, message = _lease_next(request, study)
    return _work(request, study, task,
                 message=message or gettext("Skipped: the sentence went to another rater."))


@require_POST
@login_required
def rate_undo(request: HttpRequest, study_id: int) -> HttpResponse:
    """Take back the last rating; its sentence is shown again under a fresh lease."""
    study = _rater_study(request, study_id)
    try:
        task = rating_undo(study=study, user=request.user)
    except DomainError as exc:
        return _refused(request, study, exc)
    return _work(request, study, task,
                 message=gettext("Undone: your last rating was taken back and is in the form "
                                 "again. Correct it and submit it again."))


@require_POST
@login_required
def rate_heartbeat(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    study = _rater_study(request, study_id)
    try:
        task = rating_heartbeat(user=request.user, public_id=public_id)
    except DomainError as exc:
        return HttpResponse(exc.message, status=409)
    return render(request, "assisted/_lease.html",
                  {"study": study, "t": {"id": task.public_id,
                                         "lease_expires_at": task.lease_expires_at}})


@require_POST
@login_required
def rate_event(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    """An interaction posted by the page (JSON or form): 204, or 400 naming the field."""
    _rater_study(request, study_id)
    if request.content_type == "application/json":
        try:
            body = request_json(request)  # the guarded parser: depth, NUL, lengths
        except BodyRejected as exc:
            return JsonResponse({"code": exc.code, "detail": exc.detail}, status=exc.status)
        body = {} if body is None else body
        if not isinstance(body, dict):
            return JsonResponse({"code": "invalid", "detail": "a JSON object"}, status=400)
    else:
        body = request.POST.dict()
    trace = body.get("trace")
    client_ms = body.get("client_ms")
    try:
        interaction_record(
            user=request.user, public_id=public_id, kind=str(body.get("kind", "")),
            section=str(body.get("section", "")), target=str(body.get("target") or ""),
            trace=trace if isinstance(trace, int) else int_or_none(trace if isinstance(
                trace, str) else None),
            client_ms=client_ms if isinstance(client_ms, int) else int_or_none(
                client_ms if isinstance(client_ms, str) else None))
    except DomainError as exc:
        return JsonResponse(exc.as_dict(), status=exc.http_status)
    return HttpResponse(status=204)


# The dashboard (managers and researchers): the live page and the CSV of every figure.


def _assisted_study(request: HttpRequest, study_id: int) -> Study:
    study = dashboard_study(request, study_id)
    if study.kind != Study.Kind.ASSISTED:
        raise Http404("Not an assisted study.")
    return study


@require_GET
@login_required
@replica_reads
def assisted_dashboard(request: HttpRequest, study_id: int) -> HttpResponse:
    """The live dashboard (``?rule=individual|majority`` picks the human label; kept in
    the URL). The live region polls with ``since=<snapshot>&health=<token>`` and gets 204
    until a newer snapshot exists or the recompute's health changes."""
    return assisted_dashboard_page(request, _assisted_study(request, study_id))


def assisted_dashboard_page(request: HttpRequest, study: Study) -> HttpResponse:
    """The dashboard of an assisted study whose reader was checked (here, or by
    ``core.views.dashboard`` at ``/studies/<id>/dashboard/``)."""
    rule = request.GET.get("rule", "individual")
    return live_dashboard(request, study, page="assisted_dashboard/dashboard.html",
                          live="assisted_dashboard/_live.html",
                          context=lambda: assisted_dashboard_context(study, rule))


@require_GET
@login_required
@replica_reads
def assisted_figure_csv(request: HttpRequest, study_id: int, figure: str) -> HttpResponse:
    """One figure's data as CSV, from the latest snapshot (404 before the first one): the
    figure CSVs of every dashboard (``core.exports.figure_response``), at the address the
    assisted dashboard has always linked."""
    return figure_response(_assisted_study(request, study_id), figure)


COMMENTS_PER_PAGE = 25


@require_GET
@login_required
def rater_comments(request: HttpRequest, study_id: int) -> HttpResponse:
    """The raters' comments on their ratings, newest first, ``COMMENTS_PER_PAGE`` a page
    (``?page=``), for the study's researchers and managers (as the dashboard)."""
    from django.core.paginator import Paginator

    from annotations.assisted.selectors import rating_comments

    study = _assisted_study(request, study_id)
    page = Paginator(rating_comments(study=study), COMMENTS_PER_PAGE).get_page(
        request.GET.get("page"))
    return render(request, "assisted_dashboard/comments.html", {"study": study, "page": page})
