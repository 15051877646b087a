"""Live routing of an assisted study (METHODS M2 "Hybridization"): which sentences the raters
rate and which take the AI's rating, and the rating tasks that follow.

* ``all``: every sentence goes to every active arm.
* ``threshold``: a sentence whose AI confidence is at or below T goes to every active arm;
  above T it takes the AI rating (``route = ai``, no task).
* ``bands``: band j holds edges[j-1] < confidence ≤ edges[j]; each band goes to its named
  arms or to the AI.

A sentence with no verified sample (the AI gave no rating) counts as confidence 0: it
always goes to humans. A sentence is routed once its AI rating is known (or at once when
routing is ``all`` and no active arm shows AI output) and the study is open. Each routed
(sentence, arm) gets ``ratings_per_item`` tasks with queue ranks drawn from the study's
seed (SplitMix64 of (seed, sentence, arm, slot): the same whatever the batch).

Opening the study (``assisted_study_open``: the design checked, then every routable
sentence routed) creates the first tasks. Changing the routing (``routing_update``)
re-routes only sentences still pending: none of their tasks was ever handed to a rater and
nobody skipped them. Sentences a rater already had keep their route and tasks.

Both refuse routing by confidence (threshold or bands) the study's trust gate does not allow
(``services.gate.routing_gate_check``: no finished audit of the gate's AI system, or its
success rate below the minimum); routing every sentence to the raters is never gated.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from annotations.assisted.models import (
    Arm,
    AssistedSettings,
    RatingSkip,
    RatingTask,
    RoutingChange,
    Sentence,
)
from annotations.assisted.services.design import (
    arms_active,
    band_of,
    settings_check,
    settings_of,
)
from annotations.assisted.services.gate import routing_gate_check
from annotations.assisted.services.ranks import task_rank
from annotations.assisted.services.rating import RATING_KIND
from annotations.core import engine
from annotations.core.errors import InvalidStudy, StudyNotOpen
from annotations.core.models import Study
from annotations.core.services.bulk import rows_insert
from annotations.core.task_models import new_public_id
from annotations.core.words import counted

ANALYZE_AFTER = 5000


@dataclass(frozen=True)
class RouteDecision:
    route: str  # Sentence.Route.HUMAN or AI
    band: int | None
    arm_ids: tuple[int, ...]


def route_decide(settings: AssistedSettings, confidence: float | None,
                 active: Sequence[Arm], by_name: dict[str, Arm]) -> RouteDecision:
    """Where a sentence with this AI confidence goes under ``settings``."""
    c = 0.0 if confidence is None else confidence
    everyone = tuple(a.pk for a in active)
    if settings.routing == AssistedSettings.Routing.ALL:
        return RouteDecision(Sentence.Route.HUMAN, None, everyone)
    if settings.routing == AssistedSettings.Routing.THRESHOLD:
        if c <= settings.threshold:
            return RouteDecision(Sentence.Route.HUMAN, None, everyone)
        return RouteDecision(Sentence.Route.AI, None, ())
    band = band_of(c, settings.band_edges)
    target = settings.band_targets[band]
    if target == "ai":
        return RouteDecision(Sentence.Route.AI, band, ())
    return RouteDecision(Sentence.Route.HUMAN, band, tuple(by_name[n].pk for n in target))


def _routable(study: Study, settings: AssistedSettings, active: Sequence[Arm]) -> Q:
    if settings.routing == AssistedSettings.Routing.ALL and all(a.is_baseline for a in active):
        return Q()
    return ~Q(ai_source="")


def tasks_create(*, study: Study, plan: Iterable[tuple[int, Sequence[int]]],
                 ratings_per_item: int) -> int:
    """Create the missing rating tasks (slots 0 … ratings_per_item − 1) of each (sentence
    id, arm ids) in ``plan``, each audited ``routed``. Returns how many were created."""
    plan = list(plan)
    if not plan:
        return 0
    existing = set(RatingTask.objects.filter(sentence_id__in=[s for s, _ in plan])
                   .values_list("sentence_id", "arm_id", "slot"))
    rows = [
        {"study_id": study.pk, "sentence_id": s, "arm_id": a, "slot": slot,
         "rank": task_rank(study.seed, s, a, slot), "public_id": new_public_id()}
        for s, arm_ids in plan for a in arm_ids for slot in range(ratings_per_item)
        if (s, a, slot) not in existing
    ]
    if not rows:
        return 0
    rows_insert(RatingTask, rows)
    ids = RatingTask.objects.filter(public_id__in=[r["public_id"] for r in rows]) \
        .values_list("pk", flat=True)
    engine.task_events_bulk(RATING_KIND, [(pk, "routed", None, {}) for pk in ids])
    if connection.vendor == "postgresql" and len(rows) >= ANALYZE_AFTER:
        with connection.cursor() as cur:
            cur.execute(f"ANALYZE {RatingTask._meta.db_table}")
    return len(rows)


@transaction.atomic
def sentences_route(*, study: Study, sentences: Iterable[Sentence] | None = None) -> int:
    """Route the study's waiting sentences whose AI rating is known (all of them when no
    active arm shows AI output and routing is ``all``) and create their tasks. Nothing
    happens unless the study is open. Returns how many sentences were routed."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.status != Study.Status.OPEN:
        return 0
    settings = settings_of(study)
    active = arms_active(study)
    by_name = {a.name: a for a in Arm.objects.filter(study=study)}
    qs = Sentence.objects.filter(study=study, route=Sentence.Route.WAITING) \
        .filter(_routable(study, settings, active))
    if sentences is not None:
        qs = qs.filter(pk__in=[s.pk for s in sentences])
    rows = list(qs.values_list("pk", "ai_confidence"))
    return _apply(study, settings, active, by_name, rows)


def _apply(study: Study, settings: AssistedSettings, active: Sequence[Arm],
           by_name: dict[str, Arm], rows: Sequence[tuple[int, float | None]]) -> int:
    now = timezone.now()
    groups: dict[tuple[str, int | None], list[int]] = {}
    plan = []
    for pk, confidence in rows:
        decision = route_decide(settings, confidence, active, by_name)
        groups.setdefault((decision.route, decision.band), []).append(pk)
        if decision.route == Sentence.Route.HUMAN:
            plan.append((pk, decision.arm_ids))
    for (route, band), pks in groups.items():
        for start in range(0, len(pks), 5000):
            Sentence.objects.filter(pk__in=pks[start:start + 5000]).update(
                route=route, band=band, routed_at=now)
    tasks_create(study=study, plan=plan, ratings_per_item=settings.ratings_per_item)
    return len(rows)


def sentences_started() -> Q:
    """Sentences some rater already had: a task of theirs was handed out, or skipped."""
    handed = RatingTask.objects.filter(sentence=OuterRef("pk"), times_issued__gt=0)
    skipped = RatingSkip.objects.filter(sentence=OuterRef("pk"))
    return Q(Exists(handed)) | Q(Exists(skipped))


ROUTING_FIELDS = ("routing", "threshold", "band_edges", "band_targets")


@transaction.atomic
def routing_update(*, study: Study, actor: Any = None, **changes: Any) -> RoutingChange:
    """Change the live routing (``routing``, ``threshold``, ``band_edges``,
    ``band_targets``) and re-route what is still pending: sentences whose tasks were never
    handed out and that nobody skipped. Their never-issued tasks are deleted and they are
    routed again under the new settings (in an open study); sentences a rater already had
    keep their route. Audited as a ``RoutingChange``."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    settings = AssistedSettings.objects.select_for_update().get(study=study)
    unknown = set(changes) - set(ROUTING_FIELDS)
    if unknown:
        raise InvalidStudy(f"{sorted(unknown)[0]}: not a routing setting.",
                           field=sorted(unknown)[0])
    before = {f: getattr(settings, f) for f in ROUTING_FIELDS}
    for name, value in changes.items():
        setattr(settings, name, value)
    settings_check(settings, arm_names=list(Arm.objects.filter(study=study)
                                            .values_list("name", flat=True)))
    routing_gate_check(study=study, settings=settings)  # the trust gate (services.gate)
    settings.routing_changed_at = timezone.now()
    settings.save()
    after = {f: getattr(settings, f) for f in ROUTING_FIELDS}
    change = RoutingChange(study=study, actor=actor if getattr(actor, "pk", None) else None,
                           before=before, after=after)
    routed = Sentence.objects.filter(study=study).exclude(route=Sentence.Route.WAITING)
    change.kept = routed.filter(sentences_started()).count()
    moved = sentences_reroute(study=study, sentence_ids=routed.values_list("pk", flat=True))
    change.to_humans, change.to_ai = moved
    change.save()
    return change


@transaction.atomic
def sentences_reroute(*, study: Study, sentence_ids: Iterable[int]) -> tuple[int, int]:
    """Route again those of ``sentence_ids`` that are still pending (routed or waiting,
    none of their tasks ever handed out, nobody skipped them): their never-issued tasks are
    deleted and they are routed under the current settings and AI ratings (in an open
    study; else they wait). Returns (moved to humans, moved to the AI)."""
    pending = list(Sentence.objects.filter(study=study, pk__in=list(sentence_ids))
                   .exclude(sentences_started()).values_list("pk", "route"))
    if not pending:
        return 0, 0
    pks = [pk for pk, _ in pending]
    was_human = {pk for pk, route in pending if route == Sentence.Route.HUMAN}
    for start in range(0, len(pks), 5000):
        chunk = pks[start:start + 5000]
        RatingTask.objects.filter(sentence_id__in=chunk, times_issued=0,
                                  status=RatingTask.Status.PENDING).delete()
        Sentence.objects.filter(pk__in=chunk).update(route=Sentence.Route.WAITING,
                                                     band=None, routed_at=None)
    sentences_route(study=study, sentences=[Sentence(pk=pk) for pk in pks])
    now_human = set(Sentence.objects.filter(pk__in=pks, route=Sentence.Route.HUMAN)
                    .values_list("pk", flat=True))
    return len(now_human - was_human), len(was_human - now_human)


@transaction.atomic
def tasks_sync(*, study: Study) -> int:
    """After arms or ratings_per_item change: give every human-routed sentence the tasks
    its route now implies (new arms, more slots). Never removes a task. Returns how many
    were created."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.status != Study.Status.OPEN:
        raise StudyNotOpen(f"Study '{study}' is not open.")
    settings = settings_of(study)
    active = arms_active(study)
    by_name = {a.name: a for a in Arm.objects.filter(study=study)}
    plan = []
    for pk, confidence in Sentence.objects.filter(study=study, route=Sentence.Route.HUMAN) \
            .values_list("pk", "ai_confidence"):
        decision = route_decide(settings, confidence, active, by_name)
        if decision.route == Sentence.Route.HUMAN:
            plan.append((pk, decision.arm_ids))
    return tasks_create(study=study, plan=plan, ratings_per_item=settings.ratings_per_item)


@transaction.atomic
def assisted_study_open(*, study: Study, by=None) -> int:
    """Open a draft (or re-route an open) assisted study: at least one active arm; the
    routing settings consistent; when an active arm shows AI output, every sentence must
    have its AI rating (sample or import traces first). Routes every routable sentence and
    returns how many were routed."""
    from annotations.core.services.studies import study_opening

    def design_check(study: Study) -> None:
        settings = settings_of(study)
        arms = arms_active(study)
        if not arms:
            raise InvalidStudy("The study has no active arm: add at least the baseline.",
                               field="arms")
        settings_check(settings, arm_names=[a.name for a in Arm.objects.filter(study=study)])
        routing_gate_check(study=study, settings=settings)  # the trust gate (services.gate)
        if not Sentence.objects.filter(study=study).exists():
            raise InvalidStudy("The study has no sentences: import them first.",
                               field="sentences")
        assisted = [a for a in arms if not a.is_baseline]
        waiting = Sentence.objects.filter(study=study, ai_source="").count()
        if waiting and (assisted or settings.routing != AssistedSettings.Routing.ALL):
            why = (f"arm '{assisted[0].name}' shows AI output" if assisted
                   else "routing by confidence needs it")
            raise InvalidStudy(f"{counted(waiting, 'sentence')} without an AI rating yet, "
                               f"and {why}: sample or import their traces first.",
                               field="sentences")

    return study_opening(study=study, by=by, check=design_check,
                         first_tasks=lambda study: sentences_route(study=study))
