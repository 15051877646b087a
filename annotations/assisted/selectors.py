"""Reads for the assisted pages and API: the only object a rater's sentence is serialised
from (no gold, no AI rating, no stratum, no metadata, no database id), and the researcher's
overview of a study."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q

from annotations.assisted.models import (
    Arm,
    AssistedSettings,
    RaterAssignment,
    Rating,
    RatingTask,
    Sentence,
)
from annotations.core.models import Study, StudyMembership
from annotations.core.words import counted
from assistants.models import SamplingRun


@dataclass(frozen=True)
class SentenceForRater:
    """Exactly what a rater sees of a task's sentence: the prompt, the response split
    around the target sentence (``before``, ``target``, ``after``; ``found`` False when the
    target is not a substring of the response, then it is shown on its own)."""

    id: str  # the task's public id
    prompt: str
    response: str
    target: str
    before: str
    after: str
    found: bool
    lease_expires_at: object
    issued_at: object


def sentence_for_rater(*, task: RatingTask, sentence: Sentence | None = None) -> SentenceForRater:
    """What the rater sees of ``task``'s sentence (``sentence``: the caller's copy of it,
    with prompt, response and target loaded, spares the read)."""
    s = sentence or Sentence.objects.only("prompt", "response", "target").get(
        pk=task.sentence_id)
    at = s.response.find(s.target)
    found = at >= 0
    before = s.response[:at] if found else ""
    after = s.response[at + len(s.target):] if found else ""
    return SentenceForRater(id=task.public_id, prompt=s.prompt, response=s.response,
                            target=s.target, before=before, after=after, found=found,
                            lease_expires_at=task.lease_expires_at, issued_at=task.issued_at)


@dataclass(frozen=True)
class ArmRow:
    arm: Arm
    raters: int
    ratings: int
    pending: int


def study_overview(*, study: Study) -> dict:
    """Counts for the researcher's study page: sentences by route and AI status, arms with
    their raters, ratings and pending tasks, the latest sampling run."""
    sentences = Sentence.objects.filter(study=study).aggregate(
        total=Count("id"), waiting=Count("id", filter=Q(route="waiting")),
        human=Count("id", filter=Q(route="human")), ai=Count("id", filter=Q(route="ai")),
        no_ai=Count("id", filter=Q(ai_source="")),
        gold=Count("id", filter=~Q(gold="")))
    raters = dict(RaterAssignment.objects.filter(study=study).values_list("arm_id")
                  .annotate(n=Count("id")))
    ratings = dict(Rating.objects.filter(study=study).values_list("arm_id")
                   .annotate(n=Count("id")))
    pending = dict(RatingTask.objects.filter(study=study, status=RatingTask.Status.PENDING)
                   .values_list("arm_id").annotate(n=Count("id")))
    arms = [ArmRow(a, raters.get(a.pk, 0), ratings.get(a.pk, 0), pending.get(a.pk, 0))
            for a in Arm.objects.filter(study=study).order_by("position", "pk")]
    run = SamplingRun.objects.filter(study=study).first()
    settings = AssistedSettings.objects.filter(study=study).first()
    members = dict(StudyMembership.objects.filter(study=study).values_list("role")
                   .annotate(n=Count("id")))
    return {"sentences": sentences, "arms": arms, "run": run, "settings": settings,
            "missing": _missing(sentences, arms, settings, members)}


def _missing(sentences: dict, arms: list[ArmRow], settings: AssistedSettings | None,
             members: dict[str, int]) -> list[str]:
    """The study page's "Still missing" list, as the partitioned checklist words it: what
    opening refuses without (``services.routing.assisted_study_open``) and whom the study
    needs (raters, a manager); empty when ready."""
    missing = []
    active = [row.arm for row in arms if row.arm.is_active]
    if not active:
        missing.append("an active arm (Arms, below)")
    if not sentences["total"]:
        missing.append("sentences (Import sentences)")
    ai_needed = any(not arm.is_baseline for arm in active) or (
        settings is not None and settings.routing != AssistedSettings.Routing.ALL)
    if sentences["no_ai"] and ai_needed:
        missing.append(f"an AI rating for {counted(sentences['no_ai'], 'sentence')} (Import "
                       "AI traces, or Sample traces from the endpoint)")
    if not members.get(StudyMembership.Role.ANNOTATOR):
        missing.append("raters (Members)")
    if not members.get(StudyMembership.Role.MANAGER):
        missing.append("a manager to read the dashboard")
    return missing


@dataclass(frozen=True)
class BonusRow:
    rater: str
    arm: str
    n_ratings: int  # all ratings
    n_scored: int  # on sentences with a gold label, "Doesn't require attribution" left out
    n_correct: int
    accuracy: float | None
    eligible: bool


def rater_bonuses(*, study: Study) -> list[BonusRow]:
    """The accuracy bonus rule (paper 001 A.3.2): a rater earns it with at least
    ``bonus_min_ratings`` scored ratings and accuracy ≥ ``bonus_min_accuracy`` on them.
    Scored: ratings of sentences with a gold label, except "Doesn't require attribution";
    correct: binarised rating = binarised gold (only Accurate is Accurate; "Can't
    confidently assess" is wrong). For researchers only (gold never reaches raters)."""
    settings = AssistedSettings.objects.get(study=study)
    rows: dict[int, list] = {}
    ratings = (Rating.objects.filter(study=study)
               .values_list("rater_id", "rater__username", "arm__name", "label",
                            "sentence__gold"))
    for rater_id, name, arm, label, gold in ratings:
        row = rows.setdefault(rater_id, [name, arm, 0, 0, 0])
        row[2] += 1
        if not gold or label == Rating.Label.NO_ATTRIBUTION:
            continue
        row[3] += 1
        if label != Rating.Label.CANT_ASSESS and (label == "accurate") == (gold == "accurate"):
            row[4] += 1
    out = []
    for name, arm, n, scored, correct in sorted(rows.values()):
        accuracy = correct / scored if scored else None
        eligible = (settings.bonus_enabled and scored >= settings.bonus_min_ratings
                    and accuracy is not None and accuracy >= settings.bonus_min_accuracy)
        out.append(BonusRow(name, arm, n, scored, correct, accuracy, eligible))
    return out


def rating_comments(*, study: Study):
    """The ratings of ``study`` that carry a rater's comment, newest first, with the
    sentence, arm and rater they concern (for the study's researchers and managers only:
    ``views.rater_comments`` checks who reads them)."""
    return (Rating.objects.filter(study=study).exclude(comment="")
            .select_related("sentence", "arm", "rater").order_by("-created_at", "-id"))
