"""The seeded critique demos (``manage.py seed_demo``, run by ``dev.py serve``): two studies
made through the real services from simulations with planted per-level accuracies
(``estimators.critique.simulation``), most of their tasks answered by simulated annotators, some
left for people to try: one account per level a study's annotators write (``annotator-l0``
… ``annotator-l3``), each preferred at its own level by the level rule: it answered one
task at each level above its own during the simulated work (``annotators_work``), so its own
level is the least written share. The rule offers that level first while the level has a
task the account may take; the simulation stops once each account is offered it (on SQLite,
the embedded default, it is; elsewhere the order in which tasks are handed out may leave a
level without one, and the rule then offers the next level).

* "humans": annotators at every level, L = 3, the paper's tree (7, 5, 3, 1) — the paper's
  Tables 1–2 and 5;
* "AI below, humans at the top": an AI writes responses and critiques (imported from
  JSONL), annotators critique its critiques (L = 2) — the paper's Table 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from annotations.core.models import Study, StudyMembership, User
from annotations.core.services.recompute import background_recomputes_join
from annotations.core.services.studies import membership_add
from annotations.critique.models import CritiqueTask
from annotations.critique.services.analysis import critique_recompute
from annotations.critique.services.simulation import annotators_work, study_from_simulation
from annotations.critique.services.studies import critique_study_create, critique_study_open
from estimators.critique.simulation import CritiqueDesign, simulate_critique

HUMANS_STUDY = "Demo: recursive critique (annotators at every level, L = 3)"
AI_STUDY = "Demo: recursive critique (AI below, annotators at L = 2)"
# Planted accuracies (the demo dashboards should recover them within their intervals).
HUMANS_DESIGN = CritiqueDesign(n_questions=40, counts=(7, 5, 3, 1),
                               accuracy=(0.55, 0.68, 0.76, 0.82), domains=("math", "english"),
                               confidence=(3.0, 3.4, 3.7, 4.0), minutes=(17.0, 15.5, 14.0, 12.5))
AI_DESIGN = CritiqueDesign(n_questions=40, counts=(7, 5, 0), accuracy=(0.5, 0.6, 0.78),
                           mode="human_ai", ai_accuracy=(0.62, 0.68, 0.7),
                           human_counts=(0, 0, 3), domains=("math", "english"),
                           confidence=(3.0, 3.0, 3.6), minutes=(16.0, 15.0, 14.0))
SIMULATED_ANNOTATORS = 10
LEFT_FOR_PEOPLE = 25  # at least, when the accounts per level cannot all be served sooner
LEFT_AT_MOST = 60
GUIDELINES = ("Take your time: each task has 20 minutes. Refer to other outputs by their "
              "names (Response A, Critique B …); nobody sees who wrote what.")


@dataclass
class CritiqueDemo:
    studies: list[Study] = field(default_factory=list)
    # (role, user, password, study, level): an annotator per level of each study
    credentials: list[tuple[str, str, str, Study, int]] = field(default_factory=list)
    answered: int = 0


def level_account(level: int) -> str:
    """The demo account offered critique level ``level`` first (its password is the same)."""
    return f"annotator-l{level}"


def _user(username: str, password: str) -> User:
    user, created = User.objects.get_or_create(username=username)
    if created:
        user.set_password(password)
        user.save()
    return user


def _seed_one(name: str, design: CritiqueDesign, *, mode: str, top_level: int,
              counts: list[int], ai_levels: list[int], seed: int, sim_seed: int,
              description: str, people: list[tuple[User, str]], critics: list[User],
              per_level: dict[User, int]) -> tuple[Study, int]:
    with transaction.atomic():
        study = critique_study_create(name=name, top_level=top_level, counts=counts, mode=mode,
                                      description=description, guidelines=GUIDELINES,
                                      seed=seed)
        sim = simulate_critique(design, seed=sim_seed)
        study_from_simulation(study=study, sim=sim, ai_levels=ai_levels, seed=seed,
                              subjects={"math": "mathematics", "english": "reading"})
        for user, role in people:
            membership_add(study=study, user=user, role=role)
        for user in [*critics, *per_level]:
            membership_add(study=study, user=user, role=StudyMembership.Role.ANNOTATOR)
        critique_study_open(study=study)
    study.refresh_from_db()
    background_recomputes_join()  # the import's in-process recompute (SQLite: one writer)
    total = sum(counts[lv] for lv in range(top_level + 1)
                if study.critique_settings.human_level(lv)) * design.n_questions
    run = annotators_work(study=study, sim=sim, annotators=critics, seed=seed,
                          max_answers=max(0, total - LEFT_FOR_PEOPLE), people=per_level,
                          min_answers=max(0, total - LEFT_AT_MOST))
    critique_recompute(study_id=study.pk)
    return study, run.answered


def critique_demo_seed() -> CritiqueDemo:
    """Create (once) the two critique demo studies and their accounts."""
    background_recomputes_join()  # the partitioned demo's in-process recomputes (SQLite)
    demo = CritiqueDemo()
    admin = User.objects.filter(username="admin").first()
    manager = _user("manager", "manager")
    critics = [_user(f"critic-{i:02d}", f"critic-{i:02d}")
               for i in range(1, SIMULATED_ANNOTATORS + 1)]
    people = [(manager, StudyMembership.Role.MANAGER)]
    if admin is not None:
        people.append((admin, StudyMembership.Role.RESEARCHER))
    plans = [
        (HUMANS_STUDY, HUMANS_DESIGN, "humans", 3, [7, 5, 3, 1], [], 20261201, 2,
         "Simulated annotators with planted accuracies 0.55 (responses), 0.68 (critiques), "
         "0.76 (critiques of critiques) and 0.82 (level 3)."),
        (AI_STUDY, AI_DESIGN, "ai_below", 2, [7, 5, 3], [0, 1], 20261202, 20261202,
         "An AI (planted accuracies 0.62, 0.68) writes responses and critiques; simulated "
         "annotators (planted accuracy 0.78) critique its critiques."),
    ]
    # (simulation seeds: draws whose realised accuracies are typical of the planted ones)
    for name, design, mode, top, counts, ai_levels, seed, sim_seed, description in plans:
        levels = [lv for lv in range(top + 1) if lv not in ai_levels]
        per_level = {_user(level_account(lv), level_account(lv)): lv for lv in levels}
        study = Study.objects.filter(name=name, created_by__isnull=True).first()
        if study is None:
            study, answered = _seed_one(name, design, mode=mode, top_level=top, counts=counts,
                                        ai_levels=ai_levels, seed=seed, sim_seed=sim_seed,
                                        description=description, people=people,
                                        critics=critics, per_level=per_level)
            demo.answered += answered
        else:  # seeded before these accounts existed: they join (without their history)
            for user in per_level:
                membership_add(study=study, user=user, role=StudyMembership.Role.ANNOTATOR)
        demo.studies.append(study)
        demo.credentials += [("annotator", user.username, user.username, study, lv)
                             for user, lv in per_level.items()]
    return demo


def open_tasks(study: Study) -> int:
    return CritiqueTask.objects.filter(study=study, status=CritiqueTask.Status.PENDING).count()
