"""Designing an assisted study: create it with its settings and baseline arm, compose arms
(components and versions), check the routing and quiz settings (opening it:
``routing.assisted_study_open``)."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext, gettext_noop

from annotations.assisted.models import COMPONENT_ORDER, Arm, AssistedSettings
from annotations.core.errors import InvalidStudy
from annotations.core.models import Study, User
from annotations.core.services.studies import study_name_check
from assistants.endpoints import ai_endpoint_check
from assistants.systems import ai_rater_system

DEFAULT_BAND_CUTOFFS = (0.7, 0.9)

DEFAULT_TUTORIAL = gettext_noop("""\
**Why this matters.** AI models sometimes write things that are false, inaccurate or
misleading. People may act on them, so every sentence an AI writes should be checked.
Your ratings show where the AI is right and where it is not.

**Your task.** You see a prompt, an AI's full response, and one **target sentence** of that
response (highlighted). Decide whether the target sentence is factually accurate, using
your own online research (and, if your screen shows one, an AI fact-checking assistant):

* **Accurate** — every factual claim in the sentence is accurate: no reputable source
  contradicts it (opinions and recommendations: reasonable and widely held).
* **Inaccurate** — at least one claim is false.
* **Unsupported** — you found no reputable evidence for a claim.
* **Disputed** — reputable sources disagree.
* **Doesn't require attribution** — the sentence makes no factual claim.
* **Can't confidently assess** — only when you cannot decide; please try to avoid it.
* **Skip** — only when you cannot understand the sentence; the sentence goes to someone else.

Then say how confident you are in your rating. Quality matters more than quantity: take
the time you need for each sentence.
""")

DEFAULT_ASSISTED_WARNING = gettext_noop("""\
**An AI fact-checking assistant.** Above each sentence you will see information from an
experimental AI fact-verification assistant in a blue box. The assistant is still learning
and **makes mistakes**: its search results may be irrelevant, its evidence insufficient or
untrustworthy, its reasoning misleading, and its predicted verdicts and confidence wrong.
Quoted text is guaranteed to come from the linked web page, but even then it may not
settle the question. Be critical: use the assistant only as far as you judge it valid, and
check it yourself. You will also tell us how helpful it was.
""")

DEFAULT_QUIZ: list[dict[str, Any]] = [
    {"question": gettext_noop("Which part of the response do you rate?"),
     "options": [gettext_noop("The whole response"),
                 gettext_noop("Only the highlighted target sentence"),
                 gettext_noop("Only the prompt")],
     "answer": 1,
     "explain": gettext_noop("You rate only the target sentence; the prompt and response "
                             "give context.")},
    {"question": gettext_noop("One claim of the sentence is accurate, another is false. The "
                              "sentence is…"),
     "options": [gettext_noop("Accurate"), gettext_noop("Inaccurate"),
                 gettext_noop("Doesn't require attribution")],
     "answer": 1,
     "explain": gettext_noop("A sentence is accurate only when all of its factual claims "
                             "are.")},
    {"question": gettext_noop("When should you choose \"Can't confidently assess\" or Skip?"),
     "options": [gettext_noop("Whenever the sentence looks hard"),
                 gettext_noop("Only when you really cannot decide or cannot understand the "
                              "sentence"),
                 gettext_noop("Never: they are not allowed")],
     "answer": 1,
     "explain": gettext_noop("Both exist, but try to avoid them: research the sentence "
                             "first.")},
    {"question": gettext_noop("What matters most?"),
     "options": [gettext_noop("Rating as many sentences as possible"),
                 gettext_noop("Getting each rating right")],
     "answer": 1,
     "explain": gettext_noop("Quality matters more than quantity: take the time you need.")},
]


def settings_of(study: Study) -> AssistedSettings:
    """The study's assisted settings (created with defaults if missing)."""
    if study.kind != Study.Kind.ASSISTED:
        raise InvalidStudy(f"Study '{study}' is not an assisted study.", field="kind")
    try:
        return study.assisted
    except AssistedSettings.DoesNotExist:
        settings, _ = AssistedSettings.objects.get_or_create(study=study)
        return settings


def quiz_of(settings: AssistedSettings) -> list[dict[str, Any]]:
    """The study's quiz, or the platform's in the page's language (the researcher's own is
    shown as written)."""
    if settings.quiz:
        return settings.quiz
    return [{**q, "question": gettext(q["question"]), "explain": gettext(q["explain"]),
             "options": [gettext(o) for o in q["options"]]} for q in DEFAULT_QUIZ]


def tutorial_of(settings: AssistedSettings) -> str:
    return settings.tutorial or gettext(DEFAULT_TUTORIAL)


def assisted_warning_of(settings: AssistedSettings) -> str:
    return settings.assisted_warning or gettext(DEFAULT_ASSISTED_WARNING)


def band_cutoffs_of(settings: AssistedSettings) -> tuple[float, float]:
    cutoffs = settings.band_cutoffs or DEFAULT_BAND_CUTOFFS
    return float(cutoffs[0]), float(cutoffs[1])


@transaction.atomic
def assisted_study_create(*, name: str, description: str = "", seed: int | None = None,
                          lease_minutes: int | None = None, baseline: str | None = "Baseline",
                          created_by: User | None = None, **settings: Any) -> Study:
    """A draft assisted study with its settings (``settings``: AssistedSettings fields) and,
    unless ``baseline`` is None, an unassisted baseline arm of that name. ``lease_minutes``
    None: the default of every study (``Study.lease_minutes``, what the admin's form offers
    and the raters' guide states)."""
    extra = {"seed": seed} if seed is not None else {}
    if lease_minutes is None:
        lease_minutes = Study._meta.get_field("lease_minutes").default
    study = Study(name=name, description=description, lease_minutes=lease_minutes,
                  created_by=created_by, **extra)
    return assisted_study_insert(study=study, baseline=baseline, **settings)


@transaction.atomic
def assisted_study_create_with_arms(*, name: str, arms: Sequence[Mapping] = (),
                                    **settings: Any) -> Study:
    """``assisted_study_create`` and then its assisted arms, each {name, components} (the
    panel's components: ``models.Component``), after the baseline arm — what the API's study
    creation takes. An unknown component is refused naming the arm."""
    study = assisted_study_create(name=name, **settings)
    for position, given in enumerate(arms, start=1):
        arm_name = str(given.get("name") or "").strip() if isinstance(given, Mapping) else ""
        components = given.get("components", []) if isinstance(given, Mapping) else None
        if not arm_name or not isinstance(components, list):
            raise InvalidStudy(f"arms[{position - 1}]: an object with a name and a list of "
                               f"components.", field="arms")
        unknown = sorted(set(components) - set(COMPONENT_ORDER))
        if unknown:
            raise InvalidStudy(f"arms[{position - 1}]: unknown components {', '.join(unknown)} "
                               f"(use {', '.join(COMPONENT_ORDER)}).", field="arms")
        arm_save(arm=Arm(study=study, name=arm_name, position=position,
                         **{f"show_{c}": True for c in components}))
    return study


@transaction.atomic
def assisted_study_insert(*, study: Study, baseline: str | None = "Baseline",
                          **settings: Any) -> Study:
    """Save the unsaved ``study`` as a draft assisted study with its settings and baseline
    arm (``assisted_study_create`` builds it from arguments, the admin from its form)."""
    if study.pk is not None:
        raise InvalidStudy(f"Study '{study}' is already saved.", field="name")
    study.kind = Study.Kind.ASSISTED
    study.status = Study.Status.DRAFT
    study_name_check(study=study)
    try:
        study.full_clean(exclude=["seed"])
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise InvalidStudy(f"{field}: {messages[0]}", field=field) from None
    unknown = set(settings) - {f.name for f in AssistedSettings._meta.get_fields()}
    if unknown:
        raise InvalidStudy(f"{sorted(unknown)[0]}: not a setting of assisted studies",
                           field=sorted(unknown)[0])
    ai_endpoint_check(settings.get("ai_base_url", ""))
    study.save()
    record = AssistedSettings(study=study, **settings)
    settings_check(record)
    record.save()
    ai_rater_system(study)  # what its audits link to and its trust gate names
    if baseline:
        arm_save(arm=Arm(study=study, name=baseline, description="No AI assistance."))
    return study


def _components_differ(arm: Arm, before: Arm) -> bool:
    return arm.components != before.components


@transaction.atomic
def arm_save(*, arm: Arm) -> Arm:
    """Save an arm after checking its components (evidence ticks search results too; a
    debate shows no confidence and needs something of its traces). A change of the
    components bumps ``version``; raters keep the version they joined under."""
    try:
        arm.full_clean(exclude=["study"])
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise InvalidStudy(f"{field}: {messages[0]}", field=field) from None
    if arm.study.kind != Study.Kind.ASSISTED:
        raise InvalidStudy(f"Study '{arm.study}' is not an assisted study.", field="study")
    if arm.pk is not None:
        before = Arm.objects.select_for_update().get(pk=arm.pk)
        if before.study_id != arm.study_id:
            raise InvalidStudy("An arm cannot move to another study.", field="study")
        if _components_differ(arm, before):
            arm.version = before.version + 1
    arm.save()
    return arm


def arms_active(study: Study) -> list[Arm]:
    return list(Arm.objects.filter(study=study, is_active=True).order_by("position", "pk"))


def settings_check(settings: AssistedSettings, *, arm_names: Sequence[str] | None = None) -> None:
    """Refuse inconsistent settings with the field named: threshold routing without T,
    bands not ascending in (0, 1) or whose targets do not match (one per band: "ai" or a
    list of arm names), confidence cut-offs, a malformed quiz."""
    if settings.routing == AssistedSettings.Routing.THRESHOLD and settings.threshold is None:
        raise InvalidStudy("threshold: routing by threshold needs T (between 0 and 1).",
                           field="threshold")
    if settings.threshold is not None and not 0.0 <= settings.threshold <= 1.0:
        raise InvalidStudy("threshold: must lie between 0 and 1.", field="threshold")
    if settings.routing == AssistedSettings.Routing.BANDS:
        band_routes_check(settings.band_edges, settings.band_targets, arm_names)
    cutoffs = settings.band_cutoffs
    if cutoffs and (not isinstance(cutoffs, list) or len(cutoffs) != 2
                    or not all(isinstance(c, int | float) for c in cutoffs)
                    or not 0 <= cutoffs[0] <= cutoffs[1] <= 1):
        raise InvalidStudy("band_cutoffs: two numbers 0 ≤ low ≤ high ≤ 1, e.g. [0.7, 0.9].",
                           field="band_cutoffs")
    quiz_check(settings.quiz)
    gate_check(settings)


def gate_check(settings: AssistedSettings) -> None:
    """The trust gate's settings (not whether it opens: ``services.gate``): a minimum from
    0 to 1 with the AI system of this study whose audit it reads."""
    minimum = settings.gate_min_success
    if minimum is not None and not 0.0 <= minimum <= 1.0:
        raise InvalidStudy("gate_min_success: a share from 0 to 1, e.g. 0.9.",
                           field="gate_min_success")
    if minimum is not None and settings.gate_system_id is None:
        raise InvalidStudy("gate_system: choose the AI system whose audit the gate reads.",
                           field="gate_system")
    if settings.gate_system_id is not None and settings.study_id is not None and \
            settings.gate_system.study_id != settings.study_id:
        raise InvalidStudy("gate_system: an AI system of this study.", field="gate_system")


def band_routes_check(edges: Any, targets: Any, arm_names: Sequence[str] | None) -> None:
    if not isinstance(edges, list) or not edges or not all(
            isinstance(e, int | float) and not isinstance(e, bool) for e in edges):
        raise InvalidStudy("band_edges: a list of numbers, e.g. [0.5, 0.8].",
                           field="band_edges")
    ascending = all(a < b for a, b in zip(edges, edges[1:], strict=False))
    if any(not 0 < e < 1 for e in edges) or not ascending:
        raise InvalidStudy("band_edges: strictly ascending, each between 0 and 1.",
                           field="band_edges")
    if not isinstance(targets, list) or len(targets) != len(edges) + 1:
        raise InvalidStudy(f"band_targets: one per band ({len(edges) + 1} for "
                           f"{len(edges)} edges).", field="band_targets")
    for j, target in enumerate(targets):
        if target == "ai":
            continue
        if not isinstance(target, list) or not target or not all(
                isinstance(n, str) for n in target):
            raise InvalidStudy(f"band_targets[{j}]: \"ai\" or a list of arm names.",
                               field="band_targets")
        if arm_names is not None:
            missing = [n for n in target if n not in arm_names]
            if missing:
                raise InvalidStudy(f"band_targets[{j}]: no arm named '{missing[0]}'.",
                                   field="band_targets")


def band_of(confidence: float, edges: Sequence[float]) -> int:
    """Band j holds edges[j-1] < confidence ≤ edges[j] (as
    estimators.assisted.hybridization.band_of)."""
    return bisect.bisect_left(list(edges), confidence)


def quiz_check(quiz: Any) -> None:
    if quiz in (None, []):
        return
    if not isinstance(quiz, list):
        raise InvalidStudy("quiz: a list of questions.", field="quiz")
    for i, q in enumerate(quiz):
        where = f"quiz[{i}]"
        if not isinstance(q, dict):
            raise InvalidStudy(f"{where}: an object with question, options, answer.",
                               field="quiz")
        unknown = set(q) - {"question", "options", "answer", "explain"}
        if unknown:
            raise InvalidStudy(f"{where}.{sorted(unknown)[0]}: unknown field.", field="quiz")
        if not isinstance(q.get("question"), str) or not q["question"].strip():
            raise InvalidStudy(f"{where}.question: missing.", field="quiz")
        options = q.get("options")
        if not isinstance(options, list) or len(options) < 2 or not all(
                isinstance(o, str) and o.strip() for o in options):
            raise InvalidStudy(f"{where}.options: at least two non-empty texts.", field="quiz")
        answer = q.get("answer")
        if isinstance(answer, bool) or not isinstance(answer, int) or not (
                0 <= answer < len(options)):
            raise InvalidStudy(f"{where}.answer: the 0-based index of the right option "
                               f"(0..{len(options) - 1}).", field="quiz")
        if "explain" in q and not isinstance(q["explain"], str):
            raise InvalidStudy(f"{where}.explain: text.", field="quiz")
