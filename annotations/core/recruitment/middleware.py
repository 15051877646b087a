"""``ParticipantGate``: what a participant's session may open. A participant (signed in by
their entry link: ``session["participant"]``) reaches their study's pages only while
working; otherwise — and for any other page of the site — they are sent to their step
(``/join/<token>/step/``; an htmx request gets ``HX-Redirect``). When their work is done
(the link's task count reached, or nothing left) their next page is that step, which
offers the completion. An MTurk participant's pages may be framed by MTurk's origins only
(``frame_for_mturk``); every other page keeps ``frame-ancestors 'none'``. Sessions without
a participant pay one dictionary lookup."""

from __future__ import annotations

import re

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from annotations.core.recruitment.platforms import MTURK_ORIGINS
from annotations.core.recruitment_models import Participant, RecruitmentLink

FREE = ("/join/", "/static/", "/help/", "/accounts/logout/", "/healthz", "/favicon.ico",
        "/i18n/", "/jsi18n/")
STUDY_PATH = re.compile(r"/studies/(\d+)/")


def frame_for_mturk(response: HttpResponse) -> HttpResponse:
    """Let MTurk's pages (and its sandbox's) frame this response, and nobody else."""
    response._csp_replace = {"frame-ancestors": list(MTURK_ORIGINS)}
    response.xframe_options_exempt = True
    return response


def session_participant(request: HttpRequest) -> Participant | None:
    """The signed-in participant of this session (None: not a participant's session)."""
    pk = request.session.get("participant") if hasattr(request, "session") else None
    if pk is None or not request.user.is_authenticated:
        return None
    return (Participant.objects.select_related("link", "study")
            .filter(pk=pk, user_id=request.user.pk).first())


def _to_step(request: HttpRequest, participant: Participant) -> HttpResponse:
    url = reverse("join-step", args=[participant.link.token])
    if getattr(request, "htmx", False):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return HttpResponseRedirect(url)


class ParticipantGate:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.session.get("participant") is None:
            return self.get_response(request)
        participant = session_participant(request)
        if participant is None:
            return self.get_response(request)
        request.participant = participant
        mturk = participant.link.platform == RecruitmentLink.Platform.MTURK
        if not request.path.startswith(FREE):
            from annotations.core.recruitment.services import participant_state

            study = STUDY_PATH.match(request.path)
            working = participant.status == Participant.Status.WORKING
            if not (study and int(study.group(1)) == participant.study_id and working):
                return self._framed(_to_step(request, participant), mturk)
            state = participant_state(participant)
            if state.done or participant.status != Participant.Status.WORKING:
                return self._framed(_to_step(request, participant), mturk)
            request.participant_state = state
        response = self.get_response(request)
        if request.method == "POST" and not request.path.startswith(FREE) and (
                response.status_code < 400):
            from annotations.core.recruitment.services import participant_state

            if participant_state(participant).done:
                response = _to_step(request, participant)
            elif getattr(request, "htmx", False) and "HX-Trigger" not in response:
                response["HX-Trigger"] = "participant-progress"
        return self._framed(response, mturk)

    @staticmethod
    def _framed(response: HttpResponse, mturk: bool) -> HttpResponse:
        return frame_for_mturk(response) if mturk else response
