"""The seeded demo: K = 5 multiple-choice study, three AI systems of known accuracy,
simulated specialists answering through the real routing service."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import numpy as np
from django.db import transaction

from annotations.core.models import Study, StudyMembership, User
from annotations.core.services.studies import membership_add, study_create, study_open
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.simulation import SimulationResult, study_simulate

DEMO_STUDY = "Demo: partitioned supervision (K = 5)"
DEMO_CLASSES = [(c, f"Specialist who recognises option {c} as the answer") for c in "ABCDE"]
DEMO_SYSTEMS = {"frontier-model": 0.86, "mid-size-model": 0.68, "small-model": 0.42}
SUBJECTS = ["algebra", "biology", "history", "law", "medicine"]


@dataclass
class DemoAccounts:
    credentials: list[tuple[str, str, str]] = field(default_factory=list)  # (role, user, pw)


def _user(username: str, password: str, *, staff: bool = False, superuser: bool = False) -> User:
    user, _ = User.objects.get_or_create(username=username)
    user.is_staff, user.is_superuser = staff or superuser, superuser
    user.set_password(password)
    user.save()
    return user


def demo_items(n_items: int, n_checks: int, rng: np.random.Generator) -> tuple[list, list]:
    """Synthetic multiple-choice items (gold = original option 0..4) and predictions of the
    demo systems: right with their true accuracy, else a uniformly drawn wrong option; the
    small model leaves 3 % of answers unparseable. Each prediction states a confidence."""
    items, predictions = [], []
    for i in range(n_items + n_checks):
        subject = SUBJECTS[i % len(SUBJECTS)]
        gold = int(rng.integers(0, 5))
        ext = f"q{i:05d}" if i < n_items else f"check{i - n_items:03d}"
        items.append({
            "id": ext,
            "text": f"[{subject}] Demo question {i}: which statement is correct?",
            "options": [f"Statement {i}.{j}" for j in range(5)],
            "gold_index": gold, "stratum": subject, "quality_check": i >= n_items,
        })
        if i >= n_items:
            continue
        for name, acc in DEMO_SYSTEMS.items():
            if name == "small-model" and rng.random() < 0.03:
                pred = "I am not sure"
            elif rng.random() < acc:
                pred = gold
            else:
                pred = int(rng.choice([j for j in range(5) if j != gold]))
            field = "prediction" if isinstance(pred, str) else "prediction_index"
            # stated confidence (dashboard: accuracy per confidence band): informative for
            # the two larger models, the same whether right or wrong for the small one
            a, b = (3, 2) if name == "small-model" else (8, 2) if pred == gold else (4, 4)
            predictions.append({"item_id": ext, "system": name, field: pred,
                                "confidence": round(float(rng.beta(a, b)), 2)})
    return items, predictions


def demo_seed(*, n_items: int = 3000, n_checks: int = 40, answers: int = 1500,
              seed: int = 20261123) -> tuple[Study, DemoAccounts, SimulationResult | None]:
    """Create (once) the demo accounts and study, then answer ``answers`` queries."""
    from annotations.partitioned.services.predictions import predictions_import

    accounts = DemoAccounts()
    with transaction.atomic():
        admin = _user("admin", "admin", superuser=True)
        accounts.credentials.append(("admin + researcher", "admin", "admin"))
        manager = _user("manager", "manager")
        accounts.credentials.append(("manager", "manager", "manager"))
        study = Study.objects.filter(name=DEMO_STUDY, created_by__isnull=True).first()
        created = study is None
        if created:
            study = study_create(
                name=DEMO_STUDY, classes=DEMO_CLASSES, gold_rate=0.05, seed=seed,
                description="Synthetic multiple-choice items; three AI systems with true "
                "accuracies 0.86, 0.68 and 0.42. Simulated specialists answer 'is it "
                "option k?' for a uniformly drawn k.",
            )
            rng = np.random.default_rng(seed)
            items, predictions = demo_items(n_items, n_checks, rng)
            items_import(study=study, source=io.StringIO("\n".join(map(json.dumps, items))),
                         name="demo-items.jsonl", fmt="jsonl")
            predictions_import(study=study, name="demo-predictions.jsonl", fmt="jsonl",
                               source=io.StringIO("\n".join(map(json.dumps, predictions))))
        membership_add(study=study, user=admin, role=StudyMembership.Role.RESEARCHER)
        membership_add(study=study, user=manager, role=StudyMembership.Role.MANAGER)
        for cls in study.classes.order_by("index"):
            name = f"specialist-{cls.name.lower()}"
            user = _user(name, name)
            membership_add(study=study, user=user, role=StudyMembership.Role.SPECIALIST,
                           class_index=cls.index)
            accounts.credentials.append((f"specialist, class {cls.name}", name, name))
        if study.status == Study.Status.DRAFT:
            study_open(study=study)
    result = None
    if created and answers:
        result = study_simulate(study=study, answers=answers, seed=1)
    return study, accounts, result


# Specialists see the study's name: it says nothing of the design (the description does,
# for researchers and managers).
TARGETED_DEMO_STUDY = "Demo: partitioned supervision, second wave (K = 5)"


def targeted_demo_seed(*, n_items: int = 800, answers: int = 400,
                       seed: int = 20261129) -> Study:
    """Create (once) a second partitioned demo whose routing design is targeted (ε = 0.2):
    the same three AI systems, the same accounts as the first demo (its admin, manager and
    class specialists, made by :func:`demo_seed` first), ``answers`` simulated answers. The
    dashboard then leads with the design-weighted estimate and what the design saved."""
    from annotations.partitioned.services.designs import routing_design_set
    from annotations.partitioned.services.predictions import predictions_import

    study = Study.objects.filter(name=TARGETED_DEMO_STUDY, created_by__isnull=True).first()
    if study is not None:
        return study
    with transaction.atomic():
        study = study_create(
            name=TARGETED_DEMO_STUDY, classes=DEMO_CLASSES, seed=seed,
            description="The first demo's setting under a targeted routing design: most "
            "items are asked about the options the AI systems picked, a random fifth as "
            "under the uniform design. Specialists see the same question either way.")
        items, predictions = demo_items(n_items, 0, np.random.default_rng(seed))
        items_import(study=study, source=io.StringIO("\n".join(map(json.dumps, items))),
                     name="demo-items.jsonl", fmt="jsonl")
        predictions_import(study=study, name="demo-predictions.jsonl", fmt="jsonl",
                           source=io.StringIO("\n".join(map(json.dumps, predictions))))
        routing_design_set(study=study, kind="targeted", epsilon=0.2)
        for username, role in (("admin", StudyMembership.Role.RESEARCHER),
                               ("manager", StudyMembership.Role.MANAGER)):
            user = User.objects.filter(username=username).first()
            if user is not None:
                membership_add(study=study, user=user, role=role)
        for cls in study.classes.order_by("index"):
            user = User.objects.filter(username=f"specialist-{cls.name.lower()}").first()
            if user is not None:
                membership_add(study=study, user=user, role=StudyMembership.Role.SPECIALIST,
                               class_index=cls.index)
        study_open(study=study)
    if answers:
        study_simulate(study=study, answers=answers, seed=1)
    return study
