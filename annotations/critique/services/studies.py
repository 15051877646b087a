"""A critique study's life cycle: create it with its settings, change settings and prompt
templates, open it (its first tasks are made), close it."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from annotations.core.errors import InvalidStudy
from annotations.core.models import Study, StudyMembership, User
from annotations.critique.models import DEFAULT_COUNTS, MAX_LEVEL, CritiqueMode, CritiqueSettings
from assistants.egress import key_after_change
from assistants.endpoints import ai_endpoint_check

TEMPLATE_FIELDS = ("response_system", "response_template", "critique_system",
                   "critique_template")
# The study's own AI endpoint (empty: the server's OVERSIGHT_AI_* settings).
ENDPOINT_FIELDS = ("ai_base_url", "ai_model", "ai_api_key")
# Settings that decide the tree: fixed once the study opens.
TREE_FIELDS = ("top_level", "counts", "mode")


def default_counts_for(top_level: int) -> list[int]:
    """The paper's tree (7, 5, 3, 1) cut at L; levels past it get 1 output."""
    return [DEFAULT_COUNTS[lv] if lv < len(DEFAULT_COUNTS) else 1
            for lv in range(top_level + 1)]


def counts_check(counts: Sequence, top_level: int) -> list[int]:
    """The sampling counts as integers, or InvalidStudy naming the problem: L + 1 values,
    at least 2 below the top level (the next level critiques two), at least 1 at it."""
    if not 1 <= int(top_level) <= MAX_LEVEL:
        raise InvalidStudy(f"top_level: {top_level}; L goes from 1 to {MAX_LEVEL}.",
                           field="top_level")
    if isinstance(counts, str | bytes) or not isinstance(counts, Sequence):
        raise InvalidStudy("counts: a list of numbers, one per level.", field="counts")
    if len(counts) != top_level + 1:
        raise InvalidStudy(f"counts: {len(counts)} values for levels 0…{top_level}; give "
                           f"{top_level + 1} (one per level).", field="counts")
    out = []
    for level, value in enumerate(counts):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 50:
            raise InvalidStudy(f"counts: level {level}: '{value}' is not a whole number from "
                               "1 to 50.", field="counts")
        if level < top_level and value < 2:
            raise InvalidStudy(f"counts: level {level} needs at least 2 outputs (level "
                               f"{level + 1} critiques two of them).", field="counts")
        out.append(int(value))
    return out


def templates_check(values: dict[str, str]) -> None:
    """Refuse a template the provider could not render (InvalidStudy naming the field and
    every problem: unknown or missing placeholders, stray ``{{``)."""
    from assistants.prompts import PromptTemplate, TemplateError, validate_template

    for kind in ("response", "critique"):
        template = PromptTemplate(kind=kind, user=values[f"{kind}_template"],
                                  system=values[f"{kind}_system"])
        try:
            validate_template(template)
        except TemplateError as exc:
            raise InvalidStudy(f"{kind} template: {'; '.join(exc.problems)}",
                               field=f"{kind}_template") from None


@transaction.atomic
def critique_study_create(*, name: str, top_level: int = 2, counts: Sequence[int] | None = None,
                          mode: str = CritiqueMode.HUMANS, time_limit_minutes: int = 20,
                          description: str = "", guidelines: str = "",
                          seed: int | None = None, created_by: User | None = None,
                          **texts: str) -> Study:
    """A draft critique study (``Study.kind = critique``) with its settings. ``counts``
    defaults to the paper's tree cut at L; ``texts`` may set the four template fields and
    the AI endpoint (``ENDPOINT_FIELDS``). ``created_by`` (not a superuser) becomes its
    researcher; the name is unique among their studies."""
    if mode not in CritiqueMode.values:
        raise InvalidStudy(f"mode: '{mode}' is not one of {', '.join(CritiqueMode.values)}.",
                           field="mode")
    counts = counts_check(list(counts) if counts is not None else default_counts_for(top_level),
                          top_level)
    if not 1 <= time_limit_minutes <= 240:
        raise InvalidStudy("time_limit_minutes: from 1 to 240.", field="time_limit_minutes")
    unknown = set(texts) - {*TEMPLATE_FIELDS, *ENDPOINT_FIELDS}
    if unknown:
        raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
    ai_endpoint_check(texts.get("ai_base_url", ""))
    extra = {"seed": seed} if seed is not None else {}
    study = Study(name=name, kind=Study.Kind.CRITIQUE, description=description,
                  guidelines=guidelines, lease_minutes=min(time_limit_minutes, 240),
                  status=Study.Status.DRAFT, created_by=created_by, **extra)
    from annotations.core.services.studies import membership_add, study_name_check

    study_name_check(study=study)
    study.save()
    settings = CritiqueSettings(study=study, top_level=top_level, counts=counts, mode=mode,
                                time_limit_minutes=time_limit_minutes, **texts)
    templates_check({f: getattr(settings, f) for f in TEMPLATE_FIELDS})
    settings.save()
    if created_by is not None and not created_by.is_superuser:
        membership_add(study=study, user=created_by, role=StudyMembership.Role.RESEARCHER)
    return study


def critique_settings(study: Study) -> CritiqueSettings:
    """The study's critique settings; InvalidStudy for a study of another kind."""
    if study.kind != Study.Kind.CRITIQUE:
        raise InvalidStudy(f"Study '{study}' is not a critique study.", field="kind")
    return CritiqueSettings.objects.select_related("study").get(study=study)


@transaction.atomic
def critique_settings_update(*, study: Study, **changes) -> CritiqueSettings:
    """Change settings. The tree (``top_level``, ``counts``, ``mode``) is fixed once the
    study is open; the time limit, the templates and the AI endpoint may change any time
    (templates are validated; a new endpoint is checked, and drops the saved key unless a key
    comes with it: ``services.ai_endpoints``)."""
    settings = CritiqueSettings.objects.select_for_update().get(study=study)
    allowed = {*TREE_FIELDS, *TEMPLATE_FIELDS, *ENDPOINT_FIELDS, "time_limit_minutes"}
    unknown = set(changes) - allowed
    if unknown:
        raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
    locked = Study.objects.get(pk=study.pk)
    tree = [f for f in TREE_FIELDS if f in changes and changes[f] != getattr(settings, f)]
    if tree and locked.status != Study.Status.DRAFT:
        raise InvalidStudy(f"{tree[0]}: the tree is fixed once the study is open.",
                           field=tree[0])
    if "ai_base_url" in changes and changes["ai_base_url"] != settings.ai_base_url:
        ai_endpoint_check(changes["ai_base_url"])
        changes["ai_api_key"] = key_after_change(
            old_url=settings.ai_base_url, new_url=changes["ai_base_url"],
            saved_key=settings.ai_api_key, typed_key=changes.get("ai_api_key", ""))
    for name, value in changes.items():
        setattr(settings, name, value)
    if settings.mode not in CritiqueMode.values:
        raise InvalidStudy(f"mode: '{settings.mode}' is unknown.", field="mode")
    if "top_level" in changes and "counts" not in changes:
        settings.counts = default_counts_for(settings.top_level)
    settings.counts = counts_check(settings.counts, settings.top_level)
    if not 1 <= settings.time_limit_minutes <= 240:
        raise InvalidStudy("time_limit_minutes: from 1 to 240.", field="time_limit_minutes")
    templates_check({f: getattr(settings, f) for f in TEMPLATE_FIELDS})
    settings.save()
    return settings


def critique_study_open(*, study: Study, by=None) -> int:
    """Open a draft (or open) critique study and make every task whose inputs exist
    (``generation.critique_generate``). Returns how many tasks were made. Refused for a
    closed study or one without questions; audited (``studies.study_opening``)."""
    from annotations.core.services.studies import study_opening
    from annotations.critique.services.generation import critique_generate

    critique_settings(study)

    def questions_check(study: Study) -> None:
        if not study.critique_questions.exists():
            raise InvalidStudy(f"Study '{study}' has no questions yet: import them first.",
                               field="questions")

    return study_opening(study=study, by=by, check=questions_check, counted="tasks",
                         first_tasks=lambda study: critique_generate(study=study).total)


def critique_study_close(*, study: Study, by=None) -> None:
    """Close the study: no task is handed out or answered any more (``studies.study_close``,
    audited ``closed``)."""
    from annotations.core.services.studies import study_close

    critique_settings(study)
    study_close(study=study, by=by)
