"""Critique-study pages (htmx): the annotator's work page and the managers' dashboard (the
researchers configure the study in the admin, ``admin.CritiqueStudyAdmin``; the raw exports
are ``core.views.study_export``'s). Views parse, call one service or selector, render —
like ``annotations.partitioned.views``."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from annotations.core.db_router import replica_reads
from annotations.core.errors import DomainError, LeaseExpired, leased_or_message
from annotations.core.guidelines import guidelines_html
from annotations.core.inputs import int_or_none
from annotations.core.live import live_dashboard, session_started_at
from annotations.core.models import Study, StudyMembership
from annotations.core.views import dashboard_study
from annotations.critique.models import CritiqueOutput, CritiqueTask
from annotations.critique.services.answers import (
    CritiqueAnswer,
    InvalidCritiqueAnswer,
    critique_answer,
    critique_answer_taken_back,
    critique_undo,
    critique_undo_offered_until,
)
from annotations.critique.services.assignment import (
    critique_task_next,
    critique_task_skip,
    skipped_count,
    task_current,
    task_mark_rendered,
)
from annotations.critique.services.task_view import letter, level_name, task_view

SESSION_KEY = "critique_session_started"
CONFIDENCE_LEVELS = list(CritiqueOutput.CONFIDENCE_WORDS.items())
NO_TASKS = gettext_lazy("No task is available to you right now: the next levels open as "
                        "other annotators finish theirs (and you never get a task built on "
                        "your own work). Try again in a while.")
EXPIRED = gettext_lazy("Your time on this task ran out, so it went back to the pool for "
                       "another annotator and your answer was not recorded. Press Enter for "
                       "the next task.")


def _annotator_study(request: HttpRequest, study_id: int) -> Study:
    study = get_object_or_404(Study, pk=study_id, kind=Study.Kind.CRITIQUE)
    if not StudyMembership.objects.filter(study=study, user=request.user,
                                          role=StudyMembership.Role.ANNOTATOR).exists():
        raise PermissionDenied(gettext("You are not an annotator of this study."))
    return study


def _since(request: HttpRequest, study: Study):
    return session_started_at(request, study, SESSION_KEY)


def _progress(request: HttpRequest, study: Study) -> dict:
    done = CritiqueTask.objects.filter(study=study, answered_by=request.user)
    since = _since(request, study)
    return {"answered": done.count(), "session": done.filter(answered_at__gte=since).count(),
            "skipped": skipped_count(study=study, user=request.user)}


def _work(request: HttpRequest, study: Study, task: CritiqueTask | None, *, message: str = "",
          recorded: str = "", expired: bool = False, form: dict | None = None,
          errors: dict | None = None, full: bool = False) -> HttpResponse:
    """The work area (or the whole page with ``full``): progress, "Undo" while there is an
    answer to undo, messages and the task (marked rendered: time on task counts from now)
    or the next-task button. ``form`` is what the form holds; without it, a task given back
    by undo holds the answer taken back (``taken_back``: the page says so)."""
    context = {"study": study, "message": message, "recorded": recorded, "expired": expired,
               "progress": _progress(request, study), "form": form or {},
               "errors": errors or {}, "confidence_levels": CONFIDENCE_LEVELS}
    context["undo_until"] = (critique_undo_offered_until(study=study, user=request.user)
                             if context["progress"]["answered"] else None)
    if task is not None:
        if form is None:
            back = critique_answer_taken_back(task=task, user=request.user)
            if back is not None:
                context["form"] = {"reasoning": back.reasoning, "final": back.final,
                                   "confidence": back.confidence, "choice": back.choice}
                context["taken_back"] = True
        task_mark_rendered(task=task)
        context["t"] = task_view(task)
    if full:
        context["study_guidelines"] = guidelines_html(study.guidelines)
        return render(request, "critique/work.html", context)
    return render(request, "critique/_work.html", context)


def _respond(request: HttpRequest, study: Study, task: CritiqueTask | None, **extra):
    """htmx gets the work fragment; a plain form post is redirected to the page (which
    resumes the lease) with the message flashed."""
    if request.htmx:
        return _work(request, study, task, **extra)
    for text in (extra.get("recorded"), extra.get("message")):
        if text:
            messages.info(request, text)
    return redirect("critique-work", study_id=study.pk)


def _next(request: HttpRequest, study: Study) -> tuple[CritiqueTask | None, str]:
    return leased_or_message(lambda: critique_task_next(study=study, user=request.user),
                             NO_TASKS)


@require_GET
@login_required
def critique_work(request: HttpRequest, study_id: int) -> HttpResponse:
    """The annotator's page: resumes their current lease, if any."""
    study = _annotator_study(request, study_id)
    task = (task_current(study=study, user=request.user)
            if study.status == Study.Status.OPEN else None)
    return _work(request, study, task, full=True)


@require_POST
@login_required
def critique_next(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _annotator_study(request, study_id)
    task, message = _next(request, study)
    return _respond(request, study, task, message=message)


@require_POST
@login_required
def critique_submit(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    """Store the answer, then hand out the next task in the same response. An incomplete
    answer shows the same task again with what was typed and what is missing."""
    study = _annotator_study(request, study_id)
    post = request.POST
    answer = CritiqueAnswer(reasoning=post.get("reasoning", ""),
                            final=int_or_none(post.get("final")),
                            confidence=int_or_none(post.get("confidence")),
                            choice=post.get("choice", ""))
    try:
        output = critique_answer(public_id=public_id, user=request.user, answer=answer)
    except InvalidCritiqueAnswer as exc:
        task = task_current(study=study, user=request.user)
        form = {"reasoning": answer.reasoning, "final": answer.final,
                "confidence": answer.confidence, "choice": answer.choice}
        problems = getattr(exc, "problems", {exc.field: exc.message})
        return _respond(request, study, task, form=form, errors=problems,
                        message=gettext("Not recorded yet:") + " " + _missing(problems))
    except DomainError as exc:
        return _refused(request, study, exc)
    recorded = gettext("Recorded: %(level)s, final answer %(letter)s") % {
        "level": gettext(level_name(output.level).lower()), "letter": letter(output.final)}
    task, message = _next(request, study)
    return _respond(request, study, task, message=message, recorded=recorded)


FORM_ORDER = ("choice", "reasoning", "final", "confidence")  # as the form shows them


def _missing(problems: dict[str, str]) -> str:
    """Every problem of an incomplete answer, in the order of the form's fields."""
    order = {name: i for i, name in enumerate(FORM_ORDER)}
    return " ".join(problems[name] for name in sorted(problems,
                                                      key=lambda n: order.get(n, len(order))))


def _refused(request: HttpRequest, study: Study, exc: DomainError) -> HttpResponse:
    """A refused answer or skip: the lease ended (say so), or another refusal (say why,
    with the annotator's current lease if any)."""
    if isinstance(exc, LeaseExpired):
        return _respond(request, study, None, message=EXPIRED, expired=True)
    current = (task_current(study=study, user=request.user)
               if study.status == Study.Status.OPEN else None)
    return _respond(request, study, current, message=exc.message)


@require_POST
@login_required
def critique_undo_view(request: HttpRequest, study_id: int) -> HttpResponse:
    """Take back the last answer; its task is shown again under a fresh time limit."""
    study = _annotator_study(request, study_id)
    try:
        task = critique_undo(study=study, user=request.user)
    except DomainError as exc:
        return _refused(request, study, exc)
    return _respond(request, study, task,
                    message=gettext("Undone: your last answer was taken back and is in the "
                                    "form again. Correct it and submit it again."))


@require_POST
@login_required
def critique_skip(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    """Hand the task back for another annotator (never offered to this one again), then
    the next task in the same response."""
    study = _annotator_study(request, study_id)
    try:
        critique_task_skip(public_id=public_id, user=request.user)
    except DomainError as exc:
        return _refused(request, study, exc)
    task, message = _next(request, study)
    return _respond(request, study, task, message=message,
                    recorded=gettext("Skipped: the task went back to the pool for someone "
                                     "else"))


@require_POST
@login_required
def critique_lease(request: HttpRequest, study_id: int, public_id: str) -> HttpResponse:
    """The lease line of the page (its countdown's deadline, from the server). The time
    limit is per task: this never extends it. 409 once the lease has ended."""
    study = _annotator_study(request, study_id)
    task = (CritiqueTask.objects.filter(study=study, public_id=public_id, holder=request.user,
                                        status=CritiqueTask.Status.LEASED,
                                        lease_expires_at__gt=timezone.now()).first())
    if task is None:
        return HttpResponse("This task is no longer yours.", status=409)
    return render(request, "critique/_lease.html", {"study": study, "t": {
        "id": task.public_id, "lease_expires_at": task.lease_expires_at}})


def _may_configure(request: HttpRequest, study: Study) -> bool:
    from annotations.core.services.studies import researcher_may_configure

    return researcher_may_configure(user=request.user, study=study)


@require_GET
@login_required
@replica_reads
def critique_dashboard(request: HttpRequest, study_id: int) -> HttpResponse:
    """Managers' live dashboard (``?domain=&author=`` choose the rows; kept in the URL). The
    live region polls with ``since=<snapshot>&health=<token>`` and gets 204 until a newer
    snapshot exists or the recompute's health changes."""
    return critique_dashboard_page(request, dashboard_study(request, study_id,
                                                            Study.Kind.CRITIQUE))


def critique_dashboard_page(request: HttpRequest, study: Study) -> HttpResponse:
    """The dashboard of a critique study whose reader was checked (here, or by
    ``core.views.dashboard`` at ``/studies/<id>/dashboard/``)."""
    from django.conf import settings

    from annotations.critique.dashboard import dashboard_context

    domain, author = request.GET.get("domain", ""), request.GET.get("author", "all")

    def context() -> dict:
        return {**dashboard_context(study, domain=domain, author=author),
                "poll_seconds": settings.OVERSIGHT_DASHBOARD_POLL_SECONDS,
                "can_export": _may_configure(request, study)}

    return live_dashboard(request, study, page="critique/dashboard.html",
                          live="critique/_dashboard_live.html", context=context)


@require_GET
def critique_manage(request: HttpRequest, study_id: int) -> HttpResponse:
    """The old researchers' page: a critique study is configured in the admin, as every
    study type is (``admin.CritiqueStudyAdmin``: open/close, imports, AI runs)."""
    return redirect("admin:annotations_critiquesettings_change", study_id, permanent=True)
