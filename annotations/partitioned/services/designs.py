"""Routing designs: a researcher picks how the study draws the classes it asks (uniform, the
default; targeted: mostly the classes the AI systems picked) or the order in which it asks
its strata (Neyman: strata whose answers vary more asked more), and may change it between
waves. Every query keeps the design it was drawn under; queries never handed to anyone are
drawn again under the new one (``queries_redraw``), since no one has seen their class.
Probabilities and draws: ``estimators.partitioned.designs``."""

from __future__ import annotations

import numpy as np
from django.db import transaction
from django.utils import timezone

from annotations.core.errors import InvalidStudy
from annotations.core.events import StudyEvent, study_event_kind_register
from annotations.core.models import Item, Study, User
from annotations.core.services.bulk import rows_update
from annotations.core.words import counted
from annotations.partitioned.models import Query, RoutingDesign
from annotations.partitioned.selectors import (
    study_has_allocated_answers,
    study_has_targeted_answers,
)
from annotations.partitioned.services.routing import routing_draw, study_design
from estimators.partitioned.allocation import (
    PILOT_MIN,
    allocation_ratio,
    neyman_rates,
    stratum_spreads,
)
from estimators.partitioned.designs import EPSILON_MIN, check_epsilon

DESIGN_CHANGED = study_event_kind_register("design_changed", "Routing design changed")


def _checked(kind: str, epsilon) -> float | None:
    """The design's ε (None for uniform), or InvalidStudy naming the field."""
    if kind not in RoutingDesign.Kind.values:
        raise InvalidStudy(f"kind: unknown routing design '{kind}' (one of "
                           f"{', '.join(RoutingDesign.Kind.values)}).", field="kind")
    if kind != RoutingDesign.Kind.TARGETED:
        if epsilon not in (None, ""):
            raise InvalidStudy(f"epsilon: only a targeted design has one; leave it empty for "
                               f"the {RoutingDesign.Kind(kind).name.lower()} design.",
                               field="epsilon")
        return None
    if epsilon in (None, ""):
        raise InvalidStudy(f"epsilon: a targeted design needs ε, the share of items asked "
                           f"uniformly (at least {EPSILON_MIN}), so that every class keeps "
                           "a positive probability.", field="epsilon")
    try:
        return check_epsilon(epsilon)
    except ValueError as exc:
        raise InvalidStudy(str(exc), field="epsilon") from None


@transaction.atomic
def routing_design_set(*, study: Study, kind: str, epsilon=None,
                       by: User | None = None) -> RoutingDesign:
    """Make ``kind`` (with ``epsilon`` for a targeted design) the study's routing design from
    now on, and draw again under it the queries no one was ever handed (open study).

    Refused, changing nothing (``InvalidStudy`` naming the field): an unknown kind, a
    targeted design without ε or with ε outside [EPSILON_MIN, 1] (a class of probability 0
    could never be asked and its weight would be infinite), ε given to the uniform design,
    the design the study already has, a closed study, and any query leased right now —
    leased queries finish under the design they were drawn with, so the change waits until
    none is held. Audited as a study event (``design_changed``)."""
    eps = _checked(kind, epsilon)
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.kind != Study.Kind.PARTITIONED:
        raise InvalidStudy("Routing designs belong to partitioned studies.", field="kind")
    if study.status == Study.Status.CLOSED:
        raise InvalidStudy(f"Study '{study}' is closed; its routing can no longer change.",
                           field="kind")
    current = study_design(study)
    now = (current.kind, current.epsilon) if current is not None else (
        RoutingDesign.Kind.UNIFORM, None)
    allocation = None
    if kind == RoutingDesign.Kind.NEYMAN:
        if study_has_targeted_answers(study=study):
            raise InvalidStudy(MIXED, field="kind")
        allocation = neyman_allocation(study)
        if now == (kind, eps) and current.allocation["rates"] == allocation["rates"]:
            raise InvalidStudy("kind: the study already routes with this allocation (its "
                               "pilot has not changed it).", field="kind")
    elif now == (kind, eps):
        raise InvalidStudy("kind: the study already routes with this design.", field="kind")
    elif kind == RoutingDesign.Kind.TARGETED and study_has_allocated_answers(study=study):
        raise InvalidStudy(MIXED, field="kind")
    # an expired lease is no longer being answered (it returns to its pool, with its class,
    # when next reclaimed): only live leases hold the change back
    leased = Query.objects.filter(study=study, status=Query.Status.LEASED,
                                  lease_expires_at__gt=timezone.now()).count()
    if leased:
        raise InvalidStudy(
            f"{counted(leased, 'query')} {'is' if leased == 1 else 'are'} being answered right "
            "now under the current design; change the design when no query is held "
            "(leases end when answered or after the study's lease time).", field="kind")
    number = (current.number + 1) if current is not None else 1
    design = RoutingDesign.objects.create(study=study, number=number, kind=kind, epsilon=eps,
                                          allocation=allocation, created_by=by)
    redrawn = queries_redraw(study=study) if study.status == Study.Status.OPEN else 0
    StudyEvent.objects.create(study=study, kind=DESIGN_CHANGED, actor=by, detail={
        "design": number, "kind": kind, "epsilon": eps, "redrawn": redrawn,
        **({"rates": allocation["rates"]} if allocation else {})})
    return design


MIXED = ("kind: a Neyman allocation (items asked by stratum, read through the stratified "
         "estimate) and a targeted design (classes asked by the AI picks, read through the "
         "design-weighted estimate, which weighs every answered item alike) do not combine: "
         "this study has answers under the other one.")


def neyman_allocation(study: Study) -> dict:
    """The Neyman allocation of ``study``'s answers across its strata, from its latest
    estimates as the pilot (``estimators.partitioned.allocation``): each stratum's spread
    S_h from its per-stratum standard errors, the rates r_h, the strata's shares W_h and the
    share of a uniform design's answers it needs (``ratio``). Refused (InvalidStudy) for a
    study whose items are in one stratum, or without pilot answers in any stratum."""
    from annotations.core.selectors import study_latest_snapshot
    from annotations.partitioned.selectors import study_population

    population = {h: n for h, n in study_population(study=study).items() if n > 0}
    if len(population) < 2:
        raise InvalidStudy("kind: Neyman allocation shares the answers among strata, and this "
                           "study's items are in one (give items a stratum when importing "
                           "them).", field="kind")
    strata = sorted(population)
    snapshot = study_latest_snapshot(study=study)
    cells = [[((row.get("strata") or {}).get(h) or {}) for row in snapshot.payload.get(
        "systems") or []] for h in strata] if snapshot is not None else [[] for _ in strata]
    se = np.array([[c.get("se") if c.get("se") is not None else np.nan for c in row]
                   for row in cells], float).reshape(len(strata), -1)
    answers = np.array([[(c.get("n_ord") or 0) + (c.get("n_comp") or 0) for c in row]
                        for row in cells], float).reshape(len(strata), -1)
    spreads = stratum_spreads(se, answers) if se.size else np.full(len(strata), np.nan)
    if not np.isfinite(spreads).all() or spreads.max() <= 0:
        raise InvalidStudy(
            f"kind: Neyman allocation needs a pilot: at least {PILOT_MIN} answers in a stratum "
            "about an AI system's items, to estimate how much that stratum's answers vary "
            "(collect them under the current design, then choose Neyman).", field="kind")
    rates = neyman_rates(spreads)
    weights = np.array([population[h] for h in strata], float)
    return {"rates": {h: round(float(r), 4) for h, r in zip(strata, rates, strict=True)},
            "spreads": {h: float(v) for h, v in zip(strata, spreads, strict=True)},
            "weights": {h: float(w) for h, w in zip(strata, weights / weights.sum(),
                                                    strict=True)},
            "ratio": allocation_ratio(weights, spreads, rates),
            "pilot": int(snapshot.n_answered)}


def queries_redraw(*, study: Study, item_ids: list[int] | None = None) -> int:
    """Draw again, under the study's current design, the class order and queue rank of
    routed items whose only query was never handed to anyone (pending, never issued; of
    ``item_ids`` if given) — a design change, or predictions that arrived after the items
    were routed. A query once shown keeps its class (what a specialist did with it could
    depend on the truth). Call under the study's row lock. Returns the number of items
    drawn again."""
    first = Query.objects.filter(study=study, sequence=0, is_quality_check=False,
                                 status=Query.Status.PENDING, times_issued=0)
    if item_ids is not None:
        first = first.filter(item_id__in=item_ids)
    rows = list(first.order_by("item_id").values_list("pk", "item_id", "stratum"))
    if not rows:
        return 0
    draws = routing_draw(study=study, item_ids=[item for _, item, _ in rows],
                         strata=[stratum for _, _, stratum in rows])
    rows_update(Item, ["class_order"], [(item, order) for (_, item, _), order
                                        in zip(rows, draws.orders, strict=True)])
    fields = ["k", "rank", "design_id", "draw_uniform", "draw_p", "draw_targets"]
    rows_update(Query, fields, [
        (pk, order[0], rank, *(f.get(name) for name in fields[2:]))
        for (pk, _, _), order, rank, f in zip(rows, draws.orders, draws.ranks, draws.fields,
                                               strict=True)])
    return len(rows)


def redraw_after_predictions(*, study: Study, item_ids: list[int] | None = None) -> int:
    """Under a targeted design, predictions that arrive or change after items were routed
    change what the design would draw: the queries no one was handed yet (of ``item_ids``,
    or all) are drawn again (``queries_redraw``). Nothing under the uniform design, or
    before the study opens (opening routes with the predictions of then). Returns the
    number drawn again."""
    design = study_design(study)
    if design is None or design.kind != RoutingDesign.Kind.TARGETED:
        return 0
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.status != Study.Status.OPEN:
        return 0
    return queries_redraw(study=study, item_ids=item_ids)


def design_recommendation(*, study: Study) -> dict | None:
    """The planner's recommended routing design for the study's target width, from its
    latest estimates (the design-weighted ones where the study has them, else ML) as pilot
    accuracies and its own items' AI picks (``estimators.partitioned.design_planning``).
    None before the study has AI predictions and an estimate of each system."""
    from annotations.core.selectors import study_latest_snapshot
    from annotations.partitioned.selectors import study_item_picks
    from assistants.models import AISystem
    from estimators.partitioned.design_planning import design_plan

    snapshot = study_latest_snapshot(study=study)
    systems = list(AISystem.objects.filter(study=study).order_by("ordinal"))
    k = study.classes.count()
    if snapshot is None or not systems or k < 2 or not study.target_ci_width:
        return None
    pilots = []
    for row in snapshot.payload.get("systems") or []:
        cell = row.get("design") or ((row.get("estimates") or {}).get("ml"))
        pilots.append(cell.get("accuracy") if cell else None)
    if len(pilots) != len(systems) or any(p is None for p in pilots):
        return None
    picks = study_item_picks(study=study, ordinals=[s.ordinal for s in systems])
    if not (picks >= 0).any():
        return None
    plan = design_plan(picks, pilots, k, study.target_ci_width, reps=20, n=min(
        len(picks), 1000), seed=study.seed % (2**32))
    return {"width": study.target_ci_width, "pilots": dict(zip(
        [s.name for s in systems], pilots, strict=True)),
        "options": [{"kind": o.kind, "epsilon": o.epsilon, "median": round(o.median),
                     "worst_ratio": o.worst_ratio, "recommended": o is plan.recommended}
                    for o in plan.options],
        "recommended": plan.recommended, "saving": plan.saving}
