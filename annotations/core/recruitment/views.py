"""The participant's pages (``/join/<token>/…``): the entry link, consent, the screening
quiz, the step they are at, completion and returning the study. Every refusal is a page
that says what is wrong and changes nothing. Thin: parse, call one service, render."""

from __future__ import annotations

import functools

from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from annotations.core.recruitment import platforms
from annotations.core.recruitment.middleware import frame_for_mturk, session_participant
from annotations.core.recruitment.services import (
    NotDoneYet,
    RecruitmentRefused,
    participant_arrive,
    participant_complete,
    participant_consent,
    participant_quiz,
    participant_return,
    participant_state,
    work_page,
)
from annotations.core.recruitment_models import Participant, RecruitmentLink

Status = Participant.Status
DEFAULT_CONSENT = gettext_lazy(
    "You are invited to take part in a research study. You will answer questions about "
    "texts; your answers are recorded with the time you take. Your platform id is stored to "
    "pay you and is not published. Taking part is voluntary: you may stop at any time by "
    "returning the study.")


def _page(request: HttpRequest, template: str, context: dict, status: int = 200,
          link: RecruitmentLink | None = None) -> HttpResponse:
    response = render(request, f"annotations/recruitment/{template}", context, status=status)
    if link is not None and link.platform == RecruitmentLink.Platform.MTURK:
        frame_for_mturk(response)
    return response


def _participant(request: HttpRequest, token: str) -> Participant | None:
    """The session's participant when it is link ``token``'s: the one ``ParticipantGate``
    read for this request (read here only where the gate did not run)."""
    participant = (request.participant if hasattr(request, "participant")
                   else session_participant(request))
    return participant if participant is not None and participant.link.token == token else None


@require_GET
def join(request: HttpRequest, token: str) -> HttpResponse:
    """The entry link: admit (or find) the participant, sign them in, go to their step."""
    existing = _participant(request, token)
    if existing is not None and not request.GET:
        return redirect("join-step", token=token)
    try:
        link, participant, arrived = participant_arrive(link_token=token, params=request.GET)
    except RecruitmentRefused as exc:
        link = RecruitmentLink.objects.filter(token=str(token)[:40]).first()
        return _page(request, "refused.html", {"problems": exc.problems,
                                               "message": exc.message},
                     status=exc.http_status, link=link)
    if participant is None:  # an MTurk preview: no account, no lease
        return _page(request, "preview.html", {"link": link, "study": link.study}, link=link)
    login(request, participant.user, backend="django.contrib.auth.backends.ModelBackend")
    request.session["participant"] = participant.pk
    return redirect("join-step", token=token)


def _lost(request: HttpRequest, link: RecruitmentLink | None = None) -> HttpResponse:
    return _page(request, "refused.html", {
        "message": gettext("This page belongs to a participant's session."),
        "problems": [gettext("Open the study from the platform's page: its link starts "
                             "your session.")]}, status=400, link=link)


def _of_participant(view):
    """A page of the signed-in participant of link ``token`` (passed as ``participant``);
    anyone else gets the page that says to open the study from the platform."""
    @functools.wraps(view)
    def wrapped(request: HttpRequest, token: str) -> HttpResponse:
        participant = _participant(request, token)
        if participant is None:
            return _lost(request)
        return view(request, token, participant)
    return wrapped


@require_GET
@_of_participant
def step(request: HttpRequest, token: str, participant: Participant) -> HttpResponse:
    """Where the participant is: consent, the quiz, work, or the end."""
    link = participant.link
    context = {"participant": participant, "link": link, "study": participant.study}
    if participant.status == Status.CONSENT:
        paragraphs = [p.strip() for p in (link.consent or str(DEFAULT_CONSENT)).split("\n\n")
                      if p.strip()]
        return _page(request, "consent.html", {**context, "paragraphs": paragraphs}, link=link)
    if participant.status == Status.SCREENING:
        return _page(request, "quiz.html", {
            **context, "questions": [(i, q) for i, q in enumerate(link.quiz)],
            "attempts_left": link.quiz_attempts - participant.quiz_attempts,
            "tutorial": [p.strip() for p in link.tutorial.split("\n\n") if p.strip()]},
            link=link)
    if participant.status == Status.WORKING:
        state = participant_state(participant)
        if not state.done and participant.status == Status.WORKING:
            return redirect(work_page(participant.study.kind), participant.study_id)
        context["state"] = state
    target = ""
    if participant.status == Status.SCREENED_OUT:
        target = platforms.completion_target(link, participant.external_id, screened_out=True)
    return _page(request, "finished.html", {**context, "target": target}, link=link)


@require_POST
@_of_participant
def consent(request: HttpRequest, token: str, participant: Participant) -> HttpResponse:
    participant_consent(participant=participant, agree=request.POST.get("agree") == "yes")
    return redirect("join-step", token=token)


@require_POST
@_of_participant
def quiz(request: HttpRequest, token: str, participant: Participant) -> HttpResponse:
    answers = []
    for i in range(len(participant.link.quiz)):
        value = request.POST.get(f"q{i}", "")
        answers.append(int(value) if value.isdigit() and len(value) < 4 else None)
    participant_quiz(participant=participant, answers=answers)
    return redirect("join-step", token=token)


@require_GET
@_of_participant
def complete(request: HttpRequest, token: str, participant: Participant) -> HttpResponse:
    """The completion: back to the platform with the code — only once the work is done."""
    link = participant.link
    try:
        participant = participant_complete(participant=participant)
    except NotDoneYet as exc:
        return _page(request, "not_done.html", {
            "participant": participant, "link": link, "message": exc.message,
            "work_url": reverse(work_page(participant.study.kind), args=[participant.study_id])},
            status=409, link=link)
    if link.platform == RecruitmentLink.Platform.MTURK:
        response = _page(request, "mturk_submit.html", {
            "participant": participant, "link": link,
            "action": platforms.mturk_submit_url(participant.submit_to)}, link=link)
        response._csp_update = {"form-action": [participant.submit_to]}
        return response
    target = platforms.completion_target(link, participant.external_id)
    return HttpResponseRedirect(target) if target else _page(
        request, "finished.html", {"participant": participant, "link": link}, link=link)


@require_GET
@_of_participant
def progress(request: HttpRequest, token: str, participant: Participant) -> HttpResponse:
    """The participant's progress (an htmx partial of the top bar)."""
    return render(request, "annotations/recruitment/_progress.html", {
        "participant": participant, "state": participant_state(participant)})


@require_POST
@_of_participant
def leave(request: HttpRequest, token: str, participant: Participant) -> HttpResponse:
    """Return the study: stop now; the participant's leases go back at once."""
    participant_return(participant=participant)
    return redirect("join-step", token=token)
