"""What a rater was shown (``Exposure``) and what they did with it (``Interaction``).

The panel of a task is built from the sentence's displayed (or debate) trace samples and
the components recorded in the rater's assignment (``assistants.panels``); the page
renders it once, hashes the HTML and stores the exposure with the trace ids; the API
hashes the JSON it sends. Interactions posted by the page (a section expanded or
collapsed, a link opened) are stored with the server's clock, and only for sections and
links the exposure actually contained.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from annotations.assisted.models import (
    AssistedSettings,
    Exposure,
    Interaction,
    RaterAssignment,
    RatingTask,
    Sentence,
)
from annotations.assisted.selectors import SentenceForRater, sentence_for_rater
from annotations.assisted.services.design import band_cutoffs_of
from annotations.assisted.services.rating import RATING_KIND, rating_task_for_holder
from annotations.core import engine
from annotations.core.errors import DomainError
from annotations.core.models import User
from assistants.models import TraceSample
from assistants.panels import (
    DEBATE,
    Panel,
    StoredTrace,
    confidence_shown,
    panel_build,
    panel_html,
    panel_sha256,
)

MAX_TARGET = 300


def panel_for(*, sentence: Sentence, components: list[str], settings: AssistedSettings,
              flip: bool = False) -> Panel | None:
    """The panel of ``sentence`` for an arm with ``components`` (None: baseline). A
    debate's two sides are shown accurate-first, or inaccurate-first with ``flip``."""
    if not components:
        return None
    samples = TraceSample.objects.filter(sentence=sentence).filter(
        Q(is_displayed=True) | ~Q(debate_side="")).only("pk", "trace", "debate_side",
                                                        "is_displayed")
    displayed = None
    debate: list[StoredTrace] = []
    for s in samples:
        if s.trace is None:
            continue
        if s.is_displayed:
            displayed = StoredTrace(s.pk, s.trace)
        if s.debate_side:
            debate.append(StoredTrace(s.pk, s.trace, s.debate_side))
    debate.sort(key=lambda t: (t.side != "accurate") != flip)
    confidence = confidence_shown(n_agree=sentence.ai_n_agree, n_verified=sentence.ai_n_verified,
                                  confidence=sentence.ai_confidence,
                                  cutoffs=band_cutoffs_of(settings))
    return panel_build(components, displayed=displayed, debate=debate, confidence=confidence)


@dataclass(frozen=True)
class ShownTask:
    """A task as sent to its holder: the sentence, the panel of their arm (None: baseline)
    as HTML (page) or as JSON (``data``, API), and the exposure recorded for it."""

    sentence: SentenceForRater
    panel: Panel | None
    html: str
    data: dict | None
    exposure: Exposure


SHOWN_SENTENCE_FIELDS = ("prompt", "response", "target", "ai_n_agree", "ai_n_verified",
                         "ai_confidence")


def _assignment(task: RatingTask, user: User) -> RaterAssignment:
    return RaterAssignment.objects.select_related("study__assisted").get(
        study_id=task.study_id, user=user)


def task_panel(*, task: RatingTask, user: User, assignment: RaterAssignment | None = None,
               sentence: Sentence | None = None) -> Panel | None:
    """The panel ``user`` is shown for ``task`` (their assignment's components; None: the
    baseline). ``assignment`` (read with its study's settings, as every reader of
    assignments here does) and ``sentence`` (with ``SHOWN_SENTENCE_FIELDS``) spare their
    reads when the caller has them."""
    assignment = assignment or _assignment(task, user)
    if not assignment.components:
        return None
    settings = assignment.study.assisted
    sentence = sentence or Sentence.objects.only(*SHOWN_SENTENCE_FIELDS).get(pk=task.sentence_id)
    return panel_for(sentence=sentence, components=list(assignment.components),
                     settings=settings, flip=bool(task.rank & 1))


def exposure_record(*, task: RatingTask, user: User, panel: Panel | None, digest: str,
                    via: str, assignment: RaterAssignment | None = None) -> Exposure:
    """Store (once per distinct panel per lease) what ``user`` was shown of ``task``: one
    ``INSERT … ON CONFLICT (task, rater, lease, via, panel_sha256) DO UPDATE … RETURNING
    id``, so a second showing of the same panel under the same lease returns the stored
    row's id and writes nothing new (the returned instance carries this call's other
    values; only its id is the stored row's)."""
    assignment = assignment or _assignment(task, user)
    exposure = Exposure(task=task, rater=user, lease=task.times_issued, via=via,
                        panel_sha256=digest, arm_id=assignment.arm_id,
                        arm_version=assignment.arm_version,
                        components=list(assignment.components),
                        trace_ids=panel.trace_ids if panel is not None else [])
    Exposure.objects.bulk_create([exposure], update_conflicts=True,
                                 unique_fields=EXPOSURE_KEY, update_fields=["lease"])
    return exposure


EXPOSURE_KEY = ["task", "rater", "lease", "via", "panel_sha256"]


def task_show(*, task: RatingTask, user: User, via: str,
              assignment: RaterAssignment | None = None) -> ShownTask:
    """Send ``task`` to its holder: mark it rendered (once per lease), read its sentence
    once, build the panel of the holder's arm and record the exposure of exactly what is
    sent, in every arm — the SHA-256 of the panel's HTML on the page, of its canonical JSON
    through the API; a blind arm's exposure records that nothing was shown (no components,
    no traces, the hash of the empty panel)."""
    engine.task_mark_rendered(RATING_KIND, task)
    assignment = assignment or _assignment(task, user)
    sentence = Sentence.objects.only(*SHOWN_SENTENCE_FIELDS).get(pk=task.sentence_id)
    view = sentence_for_rater(task=task, sentence=sentence)
    panel = task_panel(task=task, user=user, assignment=assignment, sentence=sentence)
    if via == Exposure.Via.API:
        data = panel.as_dict() if panel is not None else None
        exposure = exposure_record(task=task, user=user, panel=panel, digest=panel_sha256(data),
                                   via=via, assignment=assignment)
        return ShownTask(view, panel, "", data, exposure)
    html = panel_html(panel)
    exposure = exposure_record(task=task, user=user, panel=panel, digest=panel_sha256(html),
                               via=via, assignment=assignment)
    return ShownTask(view, panel, html, None, exposure)


def _allowed_sections(exposure: Exposure) -> set[str]:
    sections = {c for c in exposure.components if c != DEBATE}
    return sections


def _link_allowed(target: str, components: set[str], panel: Panel | None,
                  trace_index: int | None) -> bool:
    kind, _, rest = target.partition(":")
    if kind not in ("evidence", "search") or kind not in components or panel is None:
        return False
    traces = panel.traces if trace_index is None else panel.traces[trace_index:trace_index + 1]
    for t in traces:
        if kind == "evidence" and t.evidence and rest in {str(e["id"]) for e in t.evidence}:
            return True
        if kind == "search" and t.searches:
            i, _, j = rest.partition(":")
            if i.isdigit() and j.isdigit() and int(i) < len(t.searches) and int(j) < len(
                    t.searches[int(i)]["results"]):
                return True
    return False


@transaction.atomic
def interaction_record(*, user: User, public_id: str, kind: str, section: str,
                       target: str = "", trace: int | None = None,
                       client_ms: int | None = None) -> Interaction:
    """Store one interaction of the holder of a task with its panel: ``kind`` expand |
    collapse (``section``: a shown component) or open_link (``target``: ``evidence:<id>``
    or ``search:<query>:<result>`` of a shown trace; ``trace``: which trace of a debate).
    Refused (naming the field) for anything the rater's panel did not contain."""
    task = rating_task_for_holder(user=user, public_id=public_id)
    if kind not in Interaction.Kind.values:
        raise DomainError(f"kind: one of {', '.join(Interaction.Kind.values)}.", field="kind")
    exposure = (Exposure.objects.filter(task=task, rater=user, lease=task.times_issued)
                .order_by("-shown_at", "-pk").first())
    if exposure is None or not exposure.components:
        raise DomainError("section: your arm shows no AI assistance.", field="section")
    components = _allowed_sections(exposure)
    if section not in components:
        raise DomainError(f"section: '{section[:40]}' is not shown to you.", field="section")
    if trace is not None and not 0 <= trace < len(exposure.trace_ids):
        raise DomainError("trace: no such trace on your screen.", field="trace")
    target = (target or "").strip()
    if kind == Interaction.Kind.OPEN_LINK:
        panel = task_panel(task=task, user=user)
        if trace is not None and (panel is None or not 0 <= trace < len(panel.traces)):
            raise DomainError("trace: no such trace on your screen.", field="trace")
        if len(target) > MAX_TARGET or not _link_allowed(target, components, panel, trace):
            raise DomainError("target: not a link on your screen (evidence:<id> or "
                              "search:<query>:<result>).", field="target")
    elif target:
        raise DomainError("target: only for open_link.", field="target")
    if client_ms is not None and (isinstance(client_ms, bool) or not isinstance(client_ms, int)
                                  or not 0 <= client_ms < 2**31):
        raise DomainError("client_ms: milliseconds since the page showed the sentence.",
                          field="client_ms")
    if trace is not None:
        target = f"{target}@{trace}" if target else f"@{trace}"
    return Interaction.objects.create(task=task, exposure=exposure, rater=user, kind=kind,
                                      section=section, target=target, client_ms=client_ms)
