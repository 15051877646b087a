"""Simulated specialists answering through the real routing and submit services.

Used by the demo and by ``manage.py simulate_study``: truth comes from items' hidden gold
labels, so the dashboard can be watched converging to known accuracies."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from annotations.core.errors import InvalidStudy
from annotations.core.models import Item, Study, StudyMembership, User
from annotations.core.services.studies import membership_add
from annotations.partitioned.models import Query
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.labels import label_submit, recompute_deferred
from annotations.partitioned.services.routing import query_lease_next


@dataclass(frozen=True)
class SimulationResult:
    answered: int
    yes: int
    no: int
    unsure: int
    seconds: float


def simulated_specialists(*, study: Study, per_class: int = 1) -> list[StudyMembership]:
    """Get or create ``per_class`` simulated specialists (unusable passwords) per class;
    their specialist memberships (``.user``, ``.study_class``)."""
    memberships = []
    for cls in study.classes.order_by("index"):
        for i in range(per_class):
            user, created = User.objects.get_or_create(
                username=f"sim-{study.pk}-{cls.index}-{i}",
                defaults={"first_name": "Simulated", "last_name": cls.name},
            )
            if created:
                user.set_unusable_password()
                user.save(update_fields=["password"])
            memberships.append(membership_add(study=study, user=user,
                                              role=StudyMembership.Role.SPECIALIST,
                                              class_index=cls.index))
    return memberships


def simulated_answer(item: Item, k: int, rng: np.random.Generator, error_rate: float,
                     unsure_rate: float) -> str:
    """A specialist who knows the truth, abstains with ``unsure_rate`` and errs with
    ``error_rate`` (independently of the class asked)."""
    if rng.random() < unsure_rate:
        return Query.Answer.UNSURE
    truth = item.position_of(item.gold_option) == k
    if rng.random() < error_rate:
        truth = not truth
    return Query.Answer.YES if truth else Query.Answer.NO


def study_simulate(*, study: Study, answers: int | None = None, error_rate: float = 0.0,
                   unsure_rate: float = 0.0, seed: int = 0, per_class: int = 1,
                   rate: float = 0.0, recompute_every: int = 200,
                   progress: Callable[[int], None] | None = None) -> SimulationResult:
    """Answer up to ``answers`` queries (all pending if None), cycling over simulated
    specialists of every class; ``rate`` > 0 paces answers per second (live demos)."""
    if study.status != Study.Status.OPEN:
        raise InvalidStudy(f"Study '{study}' is {study.status}; open it first.")
    if not Item.objects.filter(study=study, gold_option__isnull=False).exists():
        raise InvalidStudy(f"Study '{study}' has no items with a gold label; a simulation "
                           "needs the truth.", field="gold")
    memberships = simulated_specialists(study=study, per_class=per_class)
    rng = np.random.default_rng([study.seed, 99, seed])
    counts = dict.fromkeys(Query.Answer.values, 0)
    started = time.perf_counter()
    done = 0
    with recompute_deferred():
        # Passes until nothing is left: answers route follow-up queries (several queries
        # per item) into pools whose specialists may already have found them empty.
        progressed = True
        while progressed and (answers is None or done < answers):
            progressed = False
            active = list(memberships)
            while active and (answers is None or done < answers):
                membership = active[done % len(active)]
                user = membership.user
                query = query_lease_next(study=study, user=user, membership=membership)
                if query is None or query.item.gold_option is None:
                    active.remove(membership)  # pool empty (or no truth for this item)
                    continue
                answer = simulated_answer(query.item, query.k, rng, error_rate, unsure_rate)
                label_submit(query_id=query.pk, user=user, answer=answer, undoable=False)
                counts[answer] += 1
                done += 1
                progressed = True
                if progress and done % 100 == 0:
                    progress(done)
                if recompute_every and done % recompute_every == 0:
                    study_recompute(study_id=study.pk)
                if rate > 0:
                    time.sleep(1.0 / rate)
    study_recompute(study_id=study.pk)
    return SimulationResult(answered=done, yes=counts["yes"], no=counts["no"],
                            unsure=counts["unsure"], seconds=time.perf_counter() - started)
