"""What each recruiting platform sends on its entry link and where a participant goes back
to — every parameter checked against a strict pattern before anything reads it (a
recruitment URL is typed by strangers).

* Prolific: ``PROLIFIC_PID``, ``STUDY_ID``, ``SESSION_ID`` (24 hexadecimal characters
  each, as Prolific issues them; letters and digits up to 64 accepted); back to
  ``https://app.prolific.com/submissions/complete?cc=<code>``.
* Amazon Mechanical Turk (an ExternalQuestion HIT): ``assignmentId`` (the literal
  ``ASSIGNMENT_ID_NOT_AVAILABLE`` while the worker only previews the HIT), ``hitId``,
  ``workerId``, ``turkSubmitTo`` — one of :data:`MTURK_ORIGINS`, nothing else; back by a
  form posted to ``<turkSubmitTo>/mturk/externalSubmit``.
* Generic: the link's own id parameter; back to the link's completion URL with ``{code}``
  and ``{participant}`` replaced (URL-quoted)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from django.utils.translation import gettext as _

from annotations.core.recruitment_models import RecruitmentLink

Platform = RecruitmentLink.Platform
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
PLATFORM_ID = re.compile(r"[A-Za-z0-9]{1,64}")
CODE = re.compile(r"[A-Za-z0-9_-]{1,40}")
PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
MTURK_ORIGINS = ("https://www.mturk.com", "https://workersandbox.mturk.com")
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
PROLIFIC_COMPLETE = "https://app.prolific.com/submissions/complete?cc="


@dataclass(frozen=True)
class Arrival:
    """An entry link's parameters, checked: the participant's id, the platform's session
    and study (or HIT), MTurk's submit origin, whether it is an MTurk preview, and every
    problem found (each names its parameter)."""

    external_id: str = ""
    session_id: str = ""
    platform_study: str = ""
    submit_to: str = ""
    preview: bool = False
    problems: list[str] = field(default_factory=list)


def _one(params, name: str, pattern: re.Pattern, problems: list[str], *,
         required: bool = True) -> str:
    values = params.getlist(name) if hasattr(params, "getlist") else [params.get(name)]
    values = [v for v in values if v is not None]
    if not values or values == [""]:
        if required:
            problems.append(_("The link has no %(name)s: open the study from the "
                              "platform's page, not a copied address.") % {"name": name})
        return ""
    if len(values) > 1:
        problems.append(_("%(name)s is given %(n)s times.") % {"name": name, "n": len(values)})
        return ""
    if not pattern.fullmatch(values[0]):
        problems.append(_("%(name)s is not a valid id (letters and digits, at most 64).")
                        % {"name": name})
        return ""
    return values[0]


def arrival(link: RecruitmentLink, params) -> Arrival:
    """The link's parameters in ``params`` (a QueryDict or mapping), checked."""
    problems: list[str] = []
    if link.platform == Platform.PROLIFIC:
        return Arrival(external_id=_one(params, "PROLIFIC_PID", PLATFORM_ID, problems),
                       platform_study=_one(params, "STUDY_ID", PLATFORM_ID, problems),
                       session_id=_one(params, "SESSION_ID", PLATFORM_ID, problems),
                       problems=problems)
    if link.platform == Platform.MTURK:
        assignment = params.get("assignmentId", "")
        if assignment == MTURK_PREVIEW:
            return Arrival(preview=True)
        submit_to = params.get("turkSubmitTo", "")
        if submit_to.rstrip("/") not in MTURK_ORIGINS:
            problems.append(_("turkSubmitTo is not Amazon Mechanical Turk's (or its "
                              "sandbox's) address."))
        return Arrival(external_id=_one(params, "workerId", PLATFORM_ID, problems),
                       session_id=_one(params, "assignmentId", PLATFORM_ID, problems),
                       platform_study=_one(params, "hitId", PLATFORM_ID, problems),
                       submit_to=submit_to.rstrip("/"), problems=problems)
    return Arrival(external_id=_one(params, link.id_parameter or "participant", ID, problems),
                   problems=problems)


def link_problems(link: RecruitmentLink) -> dict[str, str]:
    """What is wrong with a link's settings, by field (the admin form shows them)."""
    out: dict[str, str] = {}
    for name in ("completion_code", "screened_out_code"):
        value = getattr(link, name)
        if value and not CODE.fullmatch(value):
            out[name] = "Letters, digits, '-' and '_' only, at most 40."
    if link.platform == Platform.PROLIFIC and not link.completion_code:
        out["completion_code"] = "Prolific needs the study's completion code."
    if link.platform == Platform.GENERIC:
        if link.id_parameter and not PARAMETER.fullmatch(link.id_parameter):
            out["id_parameter"] = "A parameter name: letters, digits and '_', at most 40."
        if not link.completion_url:
            out["completion_url"] = "A generic link needs the URL participants go back to."
    for name in ("completion_url", "screened_out_url"):
        value = getattr(link, name)
        if value and urlsplit(value).scheme != "https":
            out[name] = "An https:// address."
    if link.quiz:
        problem = quiz_problem(link.quiz)
        if problem:
            out["quiz"] = problem
    return out


def quiz_problem(quiz) -> str:
    """The first problem of a screening quiz's JSON ('' when it is well formed)."""
    if not isinstance(quiz, list):
        return "A list of questions."
    for i, q in enumerate(quiz, start=1):
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            return f"Question {i}: an object with a 'question' text."
        options = q.get("options")
        if not isinstance(options, list) or len(options) < 2 or not all(
                isinstance(o, str) and o for o in options):
            return f"Question {i}: 'options', a list of at least two texts."
        answer = q.get("answer")
        if not isinstance(answer, int) or isinstance(answer, bool) or not (
                0 <= answer < len(options)):
            return f"Question {i}: 'answer', the 0-based index of the right option."
    return ""


def completion_target(link: RecruitmentLink, external_id: str, *, screened_out: bool = False
                      ) -> str:
    """Where a participant goes back to (Prolific and generic links; '' when the link has
    none for this case: a page asks them to return the study)."""
    code = link.screened_out_code if screened_out else link.completion_code
    if link.platform == Platform.PROLIFIC:
        return PROLIFIC_COMPLETE + quote(code, safe="") if code else ""
    if link.platform == Platform.GENERIC:
        template = link.screened_out_url if screened_out else link.completion_url
        return (template.replace("{code}", quote(code, safe=""))
                .replace("{participant}", quote(external_id, safe=""))) if template else ""
    return ""


def mturk_submit_url(submit_to: str) -> str:
    """MTurk's external submit address for a checked ``turkSubmitTo``."""
    if submit_to not in MTURK_ORIGINS:
        raise ValueError("not an MTurk origin")
    return f"{submit_to}/mturk/externalSubmit"
