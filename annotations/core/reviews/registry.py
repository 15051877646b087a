"""What each study type's answer is, for reviews: its model, the answers a reviewer may open,
how they read, and which items' answers disagree. Registered by each type's ``hooks.py``
(``reviewable_register``) — the core never imports a study type.

Nothing here shows what a labeller must not see either: no gold option, no holdout, no AI
prediction — a reviewer judges the answer against the item as its labeller saw it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from django.db import models

from annotations.core.models import Study


@dataclass(frozen=True)
class AnswerView:
    """One answer as the Review page and the API show it: ``item_id`` (the flaggable item's
    database id), ``item`` (its external id), ``item_text``, ``asked`` (what the labeller
    was asked), ``answer`` (what they answered, in the page's words), ``detail`` (their
    comment or reasoning), ``by`` (user name), ``at`` (when)."""

    id: int
    item_id: int
    item: str
    item_text: str
    asked: str
    answer: str
    detail: str
    by: str
    at: dt.datetime | None


@dataclass(frozen=True)
class ItemView:
    """An item as its labellers saw it: external id, text, options (in the order shown;
    empty when it has none) and ``context`` lines (e.g. the response a sentence is from)."""

    id: int
    external_id: str
    text: str
    options: Sequence[str] = ()
    context: Sequence[str] = ()


@dataclass(frozen=True)
class Disagreement:
    """An item whose answers disagree: ``summary`` says how (e.g. "Accurate ×2, Inaccurate
    ×1"), ``answer_ids`` the answers involved."""

    item_id: int
    item: str
    item_text: str
    summary: str
    answer_ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class WorkerAnswers:
    """One row per answer workers gave (quality checks included), for the Workers page
    (``core.reviews.workers``, ``core.recruitment.payments``): ``answer`` (the answer's id:
    the answer model's, or for a partitioned quality check its query's), ``worker`` (user
    ids), ``ms`` (time on task; NaN: none),
    ``unit`` (what answers are compared within for agreement — an item, an item in one arm
    or level — as integer codes; −1: the design compares none), ``value`` (the answer as an
    integer code) and ``correct`` (1/0 where the item's answer is known — a quality check,
    a gold label —, NaN elsewhere)."""

    answer: np.ndarray
    worker: np.ndarray
    ms: np.ndarray
    unit: np.ndarray
    value: np.ndarray
    correct: np.ndarray

    @classmethod
    def of(cls, rows: list[tuple]) -> WorkerAnswers:
        """From (answer, worker, ms or None, unit, value, correct or None) tuples."""
        if not rows:
            empty = np.zeros(0)
            ints = empty.astype(np.int64)
            return cls(ints, ints, empty, ints, ints, empty)
        answer, worker, ms, unit, value, correct = zip(*rows, strict=True)
        ints = [np.array(col, dtype=np.int64) for col in (answer, worker, unit, value)]
        # numpy reads None as NaN in a float array (and True/False as 1/0)
        return cls(ints[0], ints[1], np.array(ms, dtype=np.float64), ints[2], ints[3],
                   np.array(correct, dtype=np.float64))


@dataclass(frozen=True)
class Reviewable:
    """A study type's answers, for reviews.

    * ``answer_model`` — the table of answers (``AnswerReview.answer_type``);
    * ``noun`` — its word ("label", "rating", "output");
    * ``answers(study)`` — a queryset of the answers a reviewer may open (answered, written
      by people; quality checks are not the study's answers), newest first;
    * ``views(study, answers)`` — those answers as ``AnswerView`` (in the given order), read
      in a bounded number of queries;
    * ``items(study, item_ids)`` — {id: ``ItemView``} of those of the ids that are the
      study's items, in one query;
    * ``item_answer_ids(study, item_id)`` — ids of the item's answers;
    * ``disagreements(study)`` — the items whose answers disagree (the type's rule, in its
      docstring);
    * ``worker_field``, ``at_field``, ``ms_field`` — the answer model's author (a user),
      when it was given and its time on task in milliseconds (exclusions and the workers
      page: ``core.reviews.exclusions``, ``core.reviews.workers``);
    * ``worker_answers(study)`` — every answer of the study's workers as ``WorkerAnswers``."""

    answer_model: type[models.Model]
    noun: str
    answers: Callable[[Study], models.QuerySet]
    views: Callable[[Study, list], list[AnswerView]]
    items: Callable[[Study, list[int]], dict[int, ItemView]]
    item_answer_ids: Callable[[Study, int], list[int]]
    disagreements: Callable[[Study], list[Disagreement]]
    worker_field: str
    at_field: str
    ms_field: str
    worker_answers: Callable[[Study], WorkerAnswers]


_REVIEWABLE: dict[str, Reviewable] = {}


def reviewable_register(kind: str, reviewable: Reviewable) -> None:
    """Make the answers of studies of ``kind`` reviewable (from the type's ``hooks.py``)."""
    _REVIEWABLE[kind] = reviewable


def reviewable(kind: str) -> Reviewable:
    return _REVIEWABLE[kind]
