"""Simulated critique studies through the real services (the ``serve`` demo and end-to-end
tests): a study made from ``estimators.critique.simulation`` (planted per-level accuracies), its AI
outputs imported from JSONL, its annotators working through the real assignment rule and
answer service.

The simulator decides what each output says; the platform decides who writes it and in
which order. Each human task answered is matched to the simulated output with the same
(question, level, slot) — slots are the simulator's creation order within a level, which is
the tree's (slots 0 and 1 are the chain) — and its choice is translated from the simulator's
stored pair (0 = slot 0 better) to the order the task showed its inputs in.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from django.utils import timezone

from annotations.core import engine
from annotations.core.models import Study, User
from annotations.core.task_models import TaskEventKind
from annotations.critique.models import CritiqueOutput
from annotations.critique.services.ai_outputs import critique_ai_outputs_import
from annotations.critique.services.answers import CritiqueAnswer, critique_answer
from annotations.critique.services.assignment import CRITIQUE_KIND, critique_task_next
from annotations.critique.services.questions import critique_questions_import
from estimators.critique.simulation import SimulatedCritique

Key = tuple[int, int, int]  # (simulated question index, level, slot)


@dataclass(frozen=True)
class SimulatedRun:
    answered: int
    rounds: int


def _slots(records, *, author: str) -> dict[Key, object]:
    """The simulated outputs of one author kind by (question, level, slot)."""
    grouped: dict[tuple[int, int], list] = defaultdict(list)
    for r in records:
        if r.author == author:
            grouped[(r.question, r.level)].append(r)
    out: dict[Key, object] = {}
    for (q, lv), rows in grouped.items():
        for slot, r in enumerate(sorted(rows, key=lambda r: r.id)):
            out[(q, lv, slot)] = r
    return out


def questions_jsonl(sim: SimulatedCritique, *, subjects: dict[str, str] | None = None) -> str:
    """The simulated questions as an import file (ids "q<index>", gold as a letter)."""
    questions, _ = sim.records
    k = sim.design.n_options
    lines = []
    for q in questions:
        topic = (subjects or {}).get(q.domain or "", q.domain or "general")
        record = {"id": f"q{q.id}", "domain": q.domain or "",
                  "text": f"[{topic}] Simulated question {q.id}: which option is correct?",
                  "options": [f"Option {chr(65 + j)} of question {q.id}" for j in range(k)]}
        if q.gold is not None:
            record["gold"] = chr(65 + q.gold)
        lines.append(json.dumps(record))
    return "\n".join(lines)


def ai_outputs_jsonl(sim: SimulatedCritique, *, levels: list[int], seed: int,
                     model: str = "simulated-ai") -> str:
    """The simulated AI outputs of ``levels`` as an import file: inputs in a random order
    (choice translated to it), an explicit final answer, the text ending in its answer."""
    _, outputs = sim.records
    rng = np.random.default_rng(seed)
    by_id = {r.id: r for r in outputs}
    lines = []
    for r in sorted((r for r in outputs if r.author == "ai" and r.level in levels),
                    key=lambda r: (r.level, r.id)):
        final = None if r.final is None else chr(65 + r.final)
        record = {"id": f"ai{r.id}", "question": f"q{r.question}", "level": r.level,
                  "model": model, "final": final,
                  "text": f"Simulated level-{r.level} output.\nAnswer: {final or '?'}"}
        if r.level:
            pair = [f"ai{r.parent_a}", f"ai{r.parent_b}"]
            swapped = bool(rng.integers(0, 2))
            record["inputs"] = pair[::-1] if swapped else pair
            choice = {None: "neither", 0: "first", 1: "second"}[r.choice]
            if swapped and choice != "neither":
                choice = "second" if choice == "first" else "first"
            record["choice"] = choice
            assert by_id[r.parent_a].level == r.level - 1
        lines.append(json.dumps(record))
    return "\n".join(lines)


def study_from_simulation(*, study: Study, sim: SimulatedCritique, ai_levels: list[int],
                          seed: int = 0, subjects: dict[str, str] | None = None) -> None:
    """Import the simulated questions (and AI outputs of ``ai_levels``) into ``study``
    through the real import services."""
    text = questions_jsonl(sim, subjects=subjects)
    critique_questions_import(study=study, source=io.StringIO(text),
                              name="simulated-questions.jsonl", fmt="jsonl")
    if ai_levels:
        critique_ai_outputs_import(study=study, name="simulated-ai-outputs.jsonl",
                                   source=io.StringIO(ai_outputs_jsonl(sim, levels=ai_levels,
                                                                       seed=seed)))


def _first_level(study: Study, user: User, settings) -> int | None:
    """The level the level rule would offer ``user`` first (None: no level has a task)."""
    from annotations.critique.services.assignment import level_order, levels_state

    done, ready = levels_state(study, user, settings.human_levels)
    return next((lv for lv in level_order(settings, done) if lv in ready), None)


def annotators_work(*, study: Study, sim: SimulatedCritique, annotators: list[User],
                    seed: int = 0, max_answers: int | None = None,
                    people: dict[User, int] | None = None,
                    min_answers: int | None = None) -> SimulatedRun:
    """Simulated annotators take tasks through ``critique_task_next`` (the level rule, the
    blocks, the engine) in a shuffled order each round and answer them with the simulated
    output of the same (question, level, slot), until no annotator gets a task (or
    ``max_answers``). Time on task is the simulated one; the caller recomputes once at the
    end.

    ``people`` (account → level) are accounts kept for visitors, one per level. After each
    answer, an account the level rule would offer a level above its own takes and answers
    that task as a simulated annotator would (levels it has written then score higher, and
    ties go to the higher level, so the rule comes to offer its own level first). Once
    ``min_answers`` tasks are answered, the work stops as soon as the rule offers every
    account its own level first (else at ``max_answers``, as without ``people``)."""
    from annotations.critique.models import CritiqueSettings

    _, outputs = sim.records
    human = _slots(outputs, author="human")
    index = {q.pk: int(q.external_id[1:]) for q in study.critique_questions.all()}
    settings = CritiqueSettings.objects.get(study=study)
    rng = np.random.default_rng(seed)
    answered = rounds = 0

    def answer(user: User, above: int | None = None) -> bool:
        task = critique_task_next(study=study, user=user)
        if task is None:
            return False
        if above is not None and task.level <= above:  # blocked above: give it back
            engine.task_hand_back(CRITIQUE_KIND, task, user=user,
                                  event=TaskEventKind.RECLAIMED)
            return False
        r = human[(index[task.question_id], task.level, task.slot)]
        choice = ""
        if task.level:
            first_slot = CritiqueOutput.objects.values_list("slot", flat=True).get(
                pk=task.first_id)
            choice = {None: "neither", 0: "first" if first_slot == 0 else "second",
                      1: "second" if first_slot == 0 else "first"}[r.choice]
        critique_answer(
            public_id=task.public_id, user=user, now=timezone.now(), recompute=False,
            time_on_task_ms=int(r.time_ms), answer=CritiqueAnswer(
                reasoning=f"Simulated level-{task.level} reasoning.", final=r.final,
                confidence=int(round(r.confidence)), choice=choice))
        return True

    def people_settled() -> bool:
        """Let the accounts offered a level above their own answer it; True when the rule
        offers each its own level."""
        nonlocal answered
        settled = True
        for user, level in (people or {}).items():
            first = _first_level(study, user, settings)
            while first is not None and first > level and answer(user, above=level):
                answered += 1
                first = _first_level(study, user, settings)
            settled = settled and first == level
        return settled

    while max_answers is None or answered < max_answers:
        rounds += 1
        progress = False
        for i in rng.permutation(len(annotators)):
            if not answer(annotators[int(i)]):
                continue
            answered += 1
            progress = True
            if people and people_settled() and answered >= (min_answers or 0):
                return SimulatedRun(answered=answered, rounds=rounds)
            if max_answers is not None and answered >= max_answers:
                break
        if not progress:
            break
    return SimulatedRun(answered=answered, rounds=rounds)
