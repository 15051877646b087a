"""Pages of partitioned studies (htmx): the specialist's labelling page and the posts it
makes (answer, skip, undo, heartbeat), the managers' dashboard and the planning
calculator. Views parse, call one service or selector, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from annotations.core.errors import DomainError, LeaseExpired, leased_or_message
from annotations.core.guidelines import guidelines_html
from annotations.core.live import live_dashboard, session_started_at
from annotations.core.models import Study, StudyMembership
from annotations.core.views import dashboard_study
from annotations.partitioned.dashboard import dashboard_context
from annotations.partitioned.models import Query
from annotations.partitioned.selectors import (
    query_for_specialist,
    specialist_membership_of,
    specialist_progress,
)
from annotations.partitioned.services.labels import label_submit, label_undo_offered_until
from annotations.partitioned.services.labels import label_undo as label_undo_service
from annotations.partitioned.services.routing import (
    query_current_lease,
    query_heartbeat,
    query_lease_next,
    query_mark_rendered,
    query_skip,
)

SESSION_START_KEY = "label_session_started"


def _specialist(request: HttpRequest, study_id: int) -> StudyMembership:
    """The user's specialist membership of the study, with the study and class: read once
    per request (one statement) and passed down to the services, selectors and page."""
    membership = specialist_membership_of(user=request.user,
                                                                study_id=study_id)
    if membership is None:
        get_object_or_404(Study, pk=study_id)
        raise PermissionDenied(gettext("You are not a specialist in this study."))
    return membership


def _session_since(request: HttpRequest, study: Study):
    return session_started_at(request, study, SESSION_START_KEY)


def _render_query(request: HttpRequest, membership: StudyMembership, query: Query | None,
                  message: str = "", *, full: bool = False, recorded: str = "",
                  expired: bool = False) -> HttpResponse:
    """The work area (or the whole page with ``full``): progress, the message, the
    confirmation of the answer just recorded (its label only: "Recorded: No"), "Undo" while
    there is an answer to undo, the query
    (marked rendered: the minimum answer time counts from now) or the next-query button."""
    study = membership.study
    context = {"study": study, "message": message, "recorded": recorded, "expired": expired,
               "progress": specialist_progress(
                   user=request.user, study=study, membership=membership,
                   since=_session_since(request, study), holding=query is not None),
               "undo_until": None}
    if context["progress"]["answered"]:
        context["undo_until"] = label_undo_offered_until(study=study, user=request.user)
    if query is not None:
        query_mark_rendered(query=query)
        context["q"] = query_for_specialist(query=query, study=study)
    elif message == NO_QUERIES_LEFT and context["progress"]["waiting"]:
        context["message"] = MORE_SOON  # follow-ups held for their answer's undo window
    template = "annotations/label.html" if full else "annotations/_query.html"
    if full:
        context["membership"] = membership
        context["study_guidelines"] = guidelines_html(study.guidelines)
        context["class_guidelines"] = guidelines_html(membership.study_class.guidelines)
    return render(request, template, context)


NO_QUERIES_LEFT = gettext_lazy("No queries left for your class. Thank you!")
MORE_SOON = gettext_lazy("No query is free for you right now; more of your class's queries "
                         "will be free shortly. Press Enter to look again.")
EXPIRED = gettext_lazy("Your time on this query ran out, so it went back to the pool for "
                       "another specialist and your answer was not recorded. Press Enter for "
                       "the next query.")


def _lease_next(request: HttpRequest, membership: StudyMembership) -> tuple[Query | None, str]:
    """Lease the specialist's next query; the message says why there is none."""
    return leased_or_message(lambda: query_lease_next(
        study=membership.study, user=request.user, membership=membership), NO_QUERIES_LEFT)


def _respond(request: HttpRequest, membership: StudyMembership, query: Query | None,
             message: str, **extra) -> HttpResponse:
    """htmx gets the work fragment; a plain form post (no JavaScript) is redirected to the
    labelling page, which resumes the lease just taken, with the message flashed."""
    if request.htmx:
        return _render_query(request, membership, query, message=message, **extra)
    for text in (extra.get("recorded") and gettext("Recorded: %(answer)s")
                 % {"answer": extra["recorded"]}, message):
        if text:
            messages.info(request, text)
    return redirect("label", study_id=membership.study_id)


def _current_lease(request: HttpRequest, membership: StudyMembership) -> Query | None:
    """The lease the specialist still holds in an open study (of their class), if any."""
    if membership.study.status != Study.Status.OPEN:
        return None
    return query_current_lease(study=membership.study, user=request.user,
                               k=membership.study_class.index)


def _refused(request: HttpRequest, membership: StudyMembership,
             exc: DomainError) -> HttpResponse:
    """A refused answer, skip or undo: say why and show what the specialist can do now (the
    query they still hold, or the next-query button)."""
    if isinstance(exc, LeaseExpired):
        return _respond(request, membership, None, EXPIRED, expired=True)
    return _respond(request, membership, _current_lease(request, membership), exc.message)


@require_GET
@login_required
def label_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """The labelling page: resumes the specialist's current lease, if any."""
    membership = _specialist(request, study_id)
    return _render_query(request, membership, _current_lease(request, membership), full=True)


@require_POST
@login_required
def label_next(request: HttpRequest, study_id: int) -> HttpResponse:
    membership = _specialist(request, study_id)
    query, message = _lease_next(request, membership)
    return _respond(request, membership, query, message)


@require_POST
@login_required
def label_answer(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    """Store the answer, then hand out the next query in the same response."""
    membership = _specialist(request, study_id)
    try:
        result = label_submit(public_id=public_id, user=request.user,
                              answer=request.POST.get("answer", ""))
    except DomainError as exc:
        return _refused(request, membership, exc)
    query, message = _lease_next(request, membership)
    return _respond(request, membership, query, message,
                    recorded=Query.Answer(result.query.answer).label)


@require_POST
@login_required
def label_skip(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    """Hand the query back to the class pool, then hand out the next one."""
    membership = _specialist(request, study_id)
    try:
        query_skip(public_id=public_id, user=request.user)
    except DomainError as exc:
        return _refused(request, membership, exc)
    query, message = _lease_next(request, membership)
    return _respond(request, membership, query,
                    message or gettext("Skipped: the query went back to the pool for someone "
                                       "else."))


@require_POST
@login_required
def label_undo(request: HttpRequest, study_id: int) -> HttpResponse:
    """Take back the last answer; its query is shown again under a fresh lease."""
    membership = _specialist(request, study_id)
    try:
        query = label_undo_service(study=membership.study, user=request.user)
    except DomainError as exc:
        return _refused(request, membership, exc)
    return _respond(request, membership, query,
                    gettext("Undone: your last answer was removed. Answer this query again."))


@require_POST
@login_required
def label_heartbeat(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    membership = _specialist(request, study_id)
    try:
        query = query_heartbeat(public_id=public_id, user=request.user)
    except DomainError as exc:
        return HttpResponse(exc.message, status=409)
    return render(request, "annotations/_lease.html",
                  {"study": membership.study, "q": {"id": query.public_id,
                                                    "lease_expires_at": query.lease_expires_at}})


def dashboard_page(request: HttpRequest, study: Study) -> HttpResponse:
    """Managers' live dashboard, at ``/studies/<id>/dashboard/`` (``core.views.dashboard``
    finds the study and checks the reader). ``?method=`` picks the estimator; the choice
    stays in the URL. The live region polls with ``since=<snapshot id>&health=<token>`` and
    gets 204 (nothing to swap) until a newer snapshot exists or the recompute's health
    changes."""
    method = request.GET.get("method", "ml")
    return live_dashboard(request, study, page="annotations/dashboard.html",
                          live="annotations/_dashboard_live.html",
                          context=lambda: dashboard_context(study, method))


@require_GET
@login_required
def plan(request: HttpRequest, study_id: int) -> HttpResponse:
    """Planning calculator: labels needed for a target interval width at a pilot accuracy
    (``?width=0.05&pilot=0.8``); errors name the field."""
    from estimators.partitioned.planning import plan_labels

    study = dashboard_study(request, study_id)
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
            context["plan"] = plan_labels(width, pilot, study.classes.count(),
                                          queries_per_item=study.queries_per_item)
    return render(request, "annotations/_plan.html", context)
