"""Critique-study pages (htmx): the annotator's work page, the managers' dashboard, the
researchers' page (questions, AI outputs, runs, open/close) and the exports. Views parse,
call one service or selector, render — like ``annotations.partitioned.views``."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotations.core.errors import DomainError, LeaseExpired, leased_or_message
from annotations.core.guidelines import guidelines_html
from annotations.core.inputs import accepts_upload, int_or_none
from annotations.core.live import live_dashboard, session_started_at
from annotations.core.models import Study, StudyMembership
from annotations.core.views import dashboard_study
from annotations.core.words import counted
from annotations.critique.models import CritiqueTask
from annotations.critique.services.answers import (
    CritiqueAnswer,
    InvalidCritiqueAnswer,
    critique_answer,
    critique_undo,
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
CONFIDENCE_LEVELS = [(1, "a guess"), (2, "unsure"), (3, "fairly sure"), (4, "confident"),
                     (5, "certain")]
NO_TASKS = ("No task is available to you right now: the next levels open as other "
            "annotators finish theirs (and you never get a task built on your own work). "
            "Try again in a while.")
EXPIRED = ("Your time on this task ran out, so it went back to the pool for another "
           "annotator and your answer was not recorded. Press Enter for the next task.")


def _annotator_study(request: HttpRequest, study_id: int) -> Study:
    study = get_object_or_404(Study, pk=study_id, kind=Study.Kind.CRITIQUE)
    if not StudyMembership.objects.filter(study=study, user=request.user,
                                          role=StudyMembership.Role.ANNOTATOR).exists():
        raise PermissionDenied("You are not an annotator of this study.")
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
    """The work area (or the whole page with ``full``): progress, messages and the task
    (marked rendered: time on task counts from now) or the next-task button."""
    context = {"study": study, "message": message, "recorded": recorded, "expired": expired,
               "progress": _progress(request, study), "form": form or {},
               "errors": errors or {}, "confidence_levels": CONFIDENCE_LEVELS}
    if task is not None:
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
        return _respond(request, study, task, form=form,
                        errors=getattr(exc, "problems", {exc.field: exc.message}),
                        message="Not recorded yet: " + exc.message)
    except DomainError as exc:
        return _refused(request, study, exc)
    recorded = f"Recorded: {level_name(output.level).lower()}, final answer {letter(output.final)}"
    task, message = _next(request, study)
    return _respond(request, study, task, message=message, recorded=recorded)


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
                    message="Undone: your last answer was removed. Answer this task again.")


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
                    recorded="Skipped: the task went back to the pool for someone else")


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


def _manage_context(study: Study) -> dict:
    from annotations.critique.models import CritiqueQuestion, CritiqueRun, CritiqueSettings
    from annotations.critique.services.ai_runs import ACTIVE, provider_config, run_progress

    settings = CritiqueSettings.objects.get(study=study)
    runs = list(CritiqueRun.objects.filter(study=study)[:20])
    config = provider_config(settings)
    return {"study": study, "settings": settings,
            "n_questions": CritiqueQuestion.objects.filter(study=study).count(),
            "runs": [(run, run_progress(run)) for run in runs],
            "active": any(run.status in ACTIVE for run in runs),
            "endpoint": f"{config.model or '(no model)'} at {config.endpoint}"
            if config.base_url else ""}


@accepts_upload  # the questions and AI-outputs files (sizes checked by the guard)
@login_required
def critique_manage(request: HttpRequest, study_id: int) -> HttpResponse:
    """The researchers' page of a critique study: open or close it, import questions and AI
    outputs, run the AI endpoint, follow the runs. Every action is one service call;
    errors (with every bad line of a file) are shown on the page."""
    from annotations.core.errors import ImportFailed
    from annotations.critique.services.ai_runs import (
        critique_ai_run_start,
        critique_import_run_start,
    )
    from annotations.critique.services.questions import critique_questions_import
    from annotations.critique.services.studies import critique_study_close, critique_study_open

    study = get_object_or_404(Study, pk=study_id, kind=Study.Kind.CRITIQUE)
    if not _may_configure(request, study):
        raise PermissionDenied("This page is for the study's researchers.")
    if request.method == "GET" and request.htmx and request.GET.get("runs"):
        return render(request, "critique/_runs.html", _manage_context(study))
    errors: list[str] = []
    if request.method == "POST":
        action = request.POST.get("action", "")
        upload = request.FILES.get("file")
        try:
            if action == "open":
                made = critique_study_open(study=study)
                messages.success(request, f"Opened: {counted(made, 'task')} made.")
            elif action == "close":
                critique_study_close(study=study)
                messages.success(request, "Closed: no task is handed out any more.")
            elif action == "questions" and upload is not None:
                result = critique_questions_import(study=study, source=upload.file,
                                                   name=upload.name)
                messages.success(request, f"Imported {upload.name}: {result.summary()}.")
            elif action == "outputs" and upload is not None:
                run = critique_import_run_start(study=study, data=upload.read(),
                                                name=upload.name, by=request.user)
                messages.info(request, f"Import of {upload.name} started (run #{run.pk}).")
            elif action == "run":
                run = critique_ai_run_start(study=study, by=request.user)
                messages.info(request, f"AI run #{run.pk} started.")
            else:
                errors = ["Choose a file first." if action in ("questions", "outputs")
                          else "Unknown action."]
        except ImportFailed as exc:
            errors = exc.errors
        except DomainError as exc:
            errors = [exc.message]
        if not errors:
            return redirect("critique-manage", study_id=study.pk)
    study.refresh_from_db()
    return render(request, "critique/manage.html", {**_manage_context(study), "errors": errors})
