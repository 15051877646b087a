"""Builders for critique-study tests: studies made through the real services."""

from __future__ import annotations

import io
import itertools
import json

import numpy as np

from annotations.core.services.studies import membership_add
from annotations.critique.services.answers import CritiqueAnswer, critique_answer
from annotations.critique.services.assignment import critique_task_next
from annotations.critique.services.questions import critique_questions_import
from annotations.critique.services.studies import critique_study_create, critique_study_open
from annotations.models import Study, StudyMembership, User
from tests.factories import UserFactory

_NAMES = itertools.count(1)


def questions_records(n: int, *, n_options: int = 4, seed: int = 0,
                      domains: tuple[str, ...] = ("math", "english"),
                      gold: bool = True) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"id": f"q{i}", "text": f"Question {i}: which is right?",
             "options": [f"option {i}.{j}" for j in range(n_options)],
             **({"gold": int(rng.integers(0, n_options))} if gold else {}),
             "domain": domains[i % len(domains)]} for i in range(n)]


def jsonl(records: list[dict]) -> io.StringIO:
    return io.StringIO("\n".join(json.dumps(r) for r in records))


def annotators(study: Study, n: int, *, prefix: str = "ann") -> list[User]:
    users = []
    for i in range(n):
        user = UserFactory(username=f"{prefix}{study.pk}-{i}")
        membership_add(study=study, user=user, role=StudyMembership.Role.ANNOTATOR)
        users.append(user)
    return users


def make_critique_study(*, n_questions: int = 4, top_level: int = 2,
                        counts: list[int] | None = None, mode: str = "humans",
                        n_annotators: int = 8, open_: bool = True, seed: int = 5,
                        n_options: int = 4, name: str | None = None,
                        time_limit_minutes: int = 20) -> tuple[Study, list[User]]:
    study = critique_study_create(
        name=name or f"critique-{seed}-{next(_NAMES)}", top_level=top_level,
        counts=counts, mode=mode, seed=seed, time_limit_minutes=time_limit_minutes)
    critique_questions_import(study=study, name="questions.jsonl",
                              source=jsonl(questions_records(n_questions, n_options=n_options,
                                                             seed=seed)))
    users = annotators(study, n_annotators)
    if open_:
        critique_study_open(study=study)
        study.refresh_from_db()
    return study, users


def answer_next(study: Study, user: User, *, final: int = 0, choice: str = "first",
                confidence: int = 3, reasoning: str = "Because."):
    """Lease the user's next task and answer it; returns (task, output) or (None, None)."""
    task = critique_task_next(study=study, user=user)
    if task is None:
        return None, None
    output = critique_answer(public_id=task.public_id, user=user, answer=CritiqueAnswer(
        reasoning=reasoning, final=final, confidence=confidence,
        choice=choice if task.level else ""))
    return task, output
