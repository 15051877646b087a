"""Making critique tasks level by level as their inputs exist (the paper's sampling tree,
Figure 4, with the study's counts).

For each level l that annotators write (``CritiqueSettings.human_level``):

* level 0: ``counts[0]`` response tasks per question, once;
* level l ≥ 1: once the question's *chain pair* of level l − 1 exists — its outputs in
  slots 0 and 1, written by annotators or imported/generated AI outputs — ``counts[l]``
  critique tasks of that pair.

A question's ``generated_level`` is claimed with one ``UPDATE … WHERE generated_level < l
RETURNING id`` before its tasks are made, so concurrent generations (the Celery sweep and
an answer completing a pair) never make a level twice. Every draw is stored with the task:
its queue ``rank`` and the order its two inputs are shown in (uniform, independent per
task), from a hash of (study seed, question, level, slot) (``draws``). Each new task records who
may not receive it (``CritiqueTaskBlock``): every annotator who wrote an output of its
chain. Rows go in with COPY on PostgreSQL (``services.bulk.rows_insert``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from django.db import connection, transaction

from annotations.core.models import Study
from annotations.core.services.bulk import IN_LIST_MAX, rows_insert
from annotations.critique.models import (
    CritiqueOutput,
    CritiqueQuestion,
    CritiqueSettings,
    CritiqueTask,
    CritiqueTaskBlock,
)

RANK_MAX = 2**62
DRAW_STREAM = 10  # the stream of task draws, hashed with (study seed, question, level, slot)
ANALYZE_AFTER = 5000


@dataclass(frozen=True)
class Generated:
    """Tasks made, by level."""

    by_level: dict[int, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_level.values())


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 arrays (wrapping arithmetic): a bijection whose
    outputs look independent and uniform for distinct inputs."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def draws(study_seed: int, question_ids: np.ndarray, level: int, count: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """(ranks, swapped), each (questions × count): every task's random queue position in
    [0, 2^62) and whether it shows the chain pair as (slot 1, slot 0) instead of (slot 0,
    slot 1) — each order with probability ½, independently. A hash of (study seed, stream,
    question, level, slot): the same task gets the same draws whatever else is generated
    with it, and no generator is built per question (1 000 questions in a few ms)."""
    with np.errstate(over="ignore"):
        base = _mix(np.full(1, (study_seed ^ DRAW_STREAM) & (2**64 - 1), dtype=np.uint64))
        q = _mix(base ^ np.asarray(question_ids, dtype=np.uint64))
        lv = _mix(q ^ np.uint64(level))
        h = _mix(lv[:, None] ^ np.arange(count, dtype=np.uint64)[None, :])
        ranks = (h >> np.uint64(2)).astype(np.int64)
        swapped = (_mix(h) >> np.uint64(63)).astype(bool)
    return ranks, swapped


def task_draws(study_seed: int, question_id: int, level: int, count: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """The draws of one question's ``count`` tasks at ``level`` (``draws``)."""
    ranks, swapped = draws(study_seed, np.array([question_id]), level, count)
    return ranks[0], swapped[0]


def _claim(study: Study, level: int, question_ids: list[int] | None) -> list[int]:
    """Mark questions ready for ``level`` as generated (``generated_level = level``) and
    return them: level 0 — every question not yet generated; level l — those whose chain
    pair of level l − 1 exists."""
    questions = CritiqueQuestion._meta.db_table
    outputs = CritiqueOutput._meta.db_table
    sql = f"UPDATE {questions} SET generated_level = %s WHERE study_id = %s " \
          "AND generated_level < %s"
    params: list = [level, study.pk, level]
    if level > 0:
        sql += (f" AND id IN (SELECT o.question_id FROM {outputs} o WHERE o.study_id = %s "
                "AND o.level = %s AND o.slot < 2 GROUP BY o.question_id "
                "HAVING COUNT(*) = 2)")
        params += [study.pk, level - 1]
    if question_ids is not None:
        sql += f" AND id IN ({', '.join(['%s'] * len(question_ids))})"
        params += list(question_ids)
    sql += " RETURNING id"
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return sorted(row[0] for row in cur.fetchall())


def _by_question(model, study: Study, level: int, question_ids: list[int], fields: Iterable[str],
                 **filters) -> dict[int, list[tuple]]:
    """Rows of ``model`` at ``level`` for the given questions, grouped by question (an IN
    list when short, else the study's whole level filtered here)."""
    qs = model.objects.filter(study=study, level=level, **filters)
    wanted = set(question_ids)
    if len(question_ids) <= IN_LIST_MAX:
        qs = qs.filter(question_id__in=question_ids)
    grouped: dict[int, list[tuple]] = defaultdict(list)
    for row in qs.values_list("question_id", *fields):
        if row[0] in wanted:
            grouped[row[0]].append(row[1:])
    return grouped


def chain_authors(study: Study, level: int, question_ids: list[int]) -> dict[int, set[int]]:
    """Annotators who wrote an output of each question's chain below ``level`` (slots 0
    and 1 of every level l < ``level``)."""
    authors: dict[int, set[int]] = defaultdict(set)
    wanted = set(question_ids)
    qs = CritiqueOutput.objects.filter(study=study, level__lt=level, slot__lt=2,
                                       author__isnull=False)
    if len(question_ids) <= IN_LIST_MAX:
        qs = qs.filter(question_id__in=question_ids)
    for question_id, author_id in qs.values_list("question_id", "author_id"):
        if question_id in wanted:
            authors[question_id].add(author_id)
    return authors


def _tasks_create(study: Study, settings: CritiqueSettings, level: int,
                  question_ids: list[int]) -> int:
    """``counts[level]`` tasks for each (claimed) question, with their draws and blocks."""
    if not question_ids:
        return 0
    count = settings.count_at(level)
    pairs: dict[int, dict[int, int]] = {}
    if level > 0:
        for question_id, rows in _by_question(CritiqueOutput, study, level - 1, question_ids,
                                              ("slot", "id"), slot__lt=2).items():
            pairs[question_id] = dict(rows)
    rows = []
    all_ranks, all_swapped = draws(study.seed, np.asarray(question_ids), level, count)
    for question_id, ranks, swapped in zip(question_ids, all_ranks.tolist(),
                                           all_swapped.tolist(), strict=True):
        pair = pairs.get(question_id)
        for slot in range(count):
            row = {"study_id": study.pk, "question_id": question_id, "level": level,
                   "slot": slot, "rank": ranks[slot]}
            if pair is not None:
                a, b = pair[0], pair[1]
                row["first_id"], row["second_id"] = (b, a) if swapped[slot] else (a, b)
            rows.append(row)
    rows_insert(CritiqueTask, rows)
    if level > 0:
        authors = chain_authors(study, level, question_ids)
        if authors:
            made = _by_question(CritiqueTask, study, level, question_ids, ("id",))
            rows_insert(CritiqueTaskBlock, [
                {"task_id": task_id, "user_id": user_id,
                 "reason": CritiqueTaskBlock.Reason.CHAIN}
                for question_id, users in authors.items()
                for (task_id,) in made.get(question_id, ())
                for user_id in sorted(users)])
    if connection.vendor == "postgresql" and len(rows) >= ANALYZE_AFTER:
        with connection.cursor() as cur:  # the planner must know the queue is no longer empty
            cur.execute(f"ANALYZE {CritiqueTask._meta.db_table}")
            cur.execute(f"ANALYZE {CritiqueTaskBlock._meta.db_table}")
    return len(rows)


@transaction.atomic
def critique_generate(*, study: Study, question_ids: list[int] | None = None) -> Generated:
    """Make every task of an open study whose inputs exist and that does not exist yet
    (for ``question_ids`` only, when given), level by level; safe to run twice or
    concurrently. Returns the tasks made per level (nothing for a draft or closed study)."""
    status = Study.objects.filter(pk=study.pk).values_list("status", flat=True).first()
    if status != Study.Status.OPEN:
        return Generated()
    settings = CritiqueSettings.objects.get(study_id=study.pk)
    made: dict[int, int] = {}
    for level in settings.human_levels:
        claimed = _claim(study, level, question_ids)
        n = _tasks_create(study, settings, level, claimed)
        if n:
            made[level] = n
    return Generated(made)
