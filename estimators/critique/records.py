"""The data of a recursive-critique study as the estimators see it (METHODS.md M3).

One :class:`QuestionRecord` per multiple-choice question and one :class:`OutputRecord` per
response (level 0) or critique (level l ≥ 1). :meth:`CritiqueStudy.from_records` checks
them all and holds them as read-only numpy columns; nothing here knows about Django.

Rules a study must satisfy (each violation raises ``ValueError`` naming the record, its id,
the field and the problem):

* ids are unique integers; an output's ``question`` is a question id of the study;
* a response has no parents and no choice; a critique of level l has two distinct parents,
  both outputs of level l − 1 of the same question, and — the protocol's "two outputs that
  share their ancestors" — the two parents share their own parent pair (siblings);
* ``tree`` (optional, default None) numbers the repetitions of a question's sampling tree
  when a study repeats whole trees per question (the paper's design): the outputs of one
  tree share a number. A critique's inputs are of its own tree (a level-1 critique's two
  responses carry the same ``tree``) and a critique's own ``tree``, if given, is its
  responses'. Without numbers (None) all outputs of a question form one tree — the
  platform's studies, which grow one tree per question;
* ``annotator`` (optional, default None) identifies the person who wrote the output (an
  integer ≥ 0; None for the AI's outputs or when unknown): the intervals cluster by it as
  well as by question (``estimators.numerics.crossed``);
* ``final`` and ``gold`` are option indices ≥ 0 or None; ``choice`` is 0 (parent_a is
  better), 1 (parent_b) or None (neither); ``confidence`` is in [1, 5] or None;
  ``time_ms`` is finite and ≥ 0 or None; ``author`` is "human" or "ai".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from estimators.critique.tree import Chains, chains, rows_of

AUTHORS = ("human", "ai")


class QuestionRecord(NamedTuple):
    """A question: ``gold`` = 0-based index of the correct option (None: not scored)."""

    id: int
    gold: int | None
    domain: str | None


class OutputRecord(NamedTuple):
    """A response or critique. ``choice`` indexes the stored pair (0 = parent_a, 1 =
    parent_b, None = neither), not the order the inputs were shown in. ``tree``: which
    repetition of the question's tree the output belongs to (None: the question's one
    tree); ``annotator``: who wrote it (None: the AI, or unknown). Records may omit the
    trailing optional fields (ten or eleven fields)."""

    id: int
    question: int
    level: int
    parent_a: int | None
    parent_b: int | None
    final: int | None
    choice: int | None
    confidence: float | None
    time_ms: float | None
    author: str
    tree: int | None = None
    annotator: int | None = None


OPTIONAL_FIELDS = ("tree", "annotator")  # trailing fields a record may omit (None)
_INT_TYPES = (int, np.integer)
_REAL_TYPES = (int, float, np.integer, np.floating)


def _columns(records: Iterable[Any], names: tuple[str, ...], what: str,
             optional: tuple[str, ...] = ()) -> list[list[Any]]:
    """The records' fields as columns. Tuples (NamedTuples, ``values_list`` rows) take a
    fast path, mappings (``values`` rows) another; anything else is an error naming the
    record. ``optional``: trailing names a record may omit (their value is then None)."""
    rows = list(records)
    if not rows:
        return [[] for _ in names]
    required = len(names) - len(optional)
    sizes = " or ".join(str(k) for k in range(required, len(names) + 1))

    def wrong_size(i: int, r: Any) -> ValueError:
        return ValueError(f"{what}[{i}]: expected {sizes} fields ({', '.join(names)}), got "
                          f"{len(r)}")

    row_types = set(map(type, rows))
    if row_types == {dict}:  # the common mapping: fast path
        try:
            return [[r[n] for r in rows] if n not in optional else [r.get(n) for r in rows]
                    for n in names]
        except KeyError:
            pass  # the loop below names the record
    elif all(issubclass(t, tuple) for t in row_types):
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        bad = np.flatnonzero((lengths < required) | (lengths > len(names)))
        if bad.size:
            raise wrong_size(int(bad[0]), rows[int(bad[0])])
        if (lengths == len(names)).all():
            return [list(c) for c in zip(*rows, strict=True)]
        pad = (None,) * len(optional)
        return [list(c) for c in zip(*((r + pad)[:len(names)] for r in rows), strict=True)]
    for i, r in enumerate(rows):
        if isinstance(r, Mapping):
            missing = [n for n in names if n not in r and n not in optional]
            if missing:
                raise ValueError(f"{what}[{i}]: missing field {missing[0]!r}")
        elif not (isinstance(r, Sequence) and not isinstance(r, str | bytes)):
            raise ValueError(f"{what}[{i}]: a record is a mapping or a tuple, got "
                             f"{type(r).__name__}")
        elif not required <= len(r) <= len(names):
            raise wrong_size(i, r)
    return [[r.get(n) if isinstance(r, Mapping) else (r[k] if k < len(r) else None)
             for r in rows] for k, n in enumerate(names)]


class _Where:
    """Names record i of a table in errors: ``outputs[12] (id 345)``."""

    def __init__(self, what: str, ids: list[Any] | None = None) -> None:
        self.what, self.ids = what, ids

    def __call__(self, i: int) -> str:
        if self.ids is None:
            return f"{self.what}[{i}]"
        return f"{self.what}[{i}] (id {self.ids[i]})"


def _is_int(v: Any) -> bool:
    return isinstance(v, _INT_TYPES) and not isinstance(v, bool | np.bool_)


def _int_column(values: list[Any], where: _Where, field: str, *, optional: bool,
                minimum: int | None = 0, allowed: tuple[int, ...] | None = None) -> np.ndarray:
    """Integers (−1 for None when ``optional``); the first bad value raises ValueError."""
    kinds = set(map(type, values))
    if not all(k is type(None) or (issubclass(k, _INT_TYPES) and not issubclass(
            k, bool | np.bool_)) for k in kinds):
        for i, v in enumerate(values):
            if v is None or _is_int(v):
                continue
            if isinstance(v, float | np.floating) and float(v).is_integer():
                continue
            raise ValueError(f"{where(i)}: field {field!r} must be an integer, got {v!r}")
    if type(None) in kinds and not optional:
        i = next(i for i, v in enumerate(values) if v is None)
        raise ValueError(f"{where(i)}: field {field!r} is required")
    if not values:
        arr, given = np.zeros(0, dtype=np.int64), None
    elif kinds <= {int}:
        arr, given = np.array(values, dtype=np.int64), None
    elif kinds <= {int, type(None)}:
        obj = np.array(values, dtype=object)
        missing = np.equal(obj, None)
        obj[missing] = -1
        arr, given = obj.astype(np.int64), ~missing
    else:  # numpy integers, integral floats
        arr = np.array([-1 if v is None else int(v) for v in values], dtype=np.int64)
        given = np.array([v is not None for v in values], dtype=bool)
    bad = np.zeros(len(arr), dtype=bool)
    if allowed is not None:
        bad |= ~np.isin(arr, allowed)
    if minimum is not None:
        bad |= arr < minimum
    if given is not None:
        bad &= given
    if bad.any():
        i = int(np.argmax(bad))
        rule = f"one of {allowed} or None" if allowed is not None else f"≥ {minimum}"
        raise ValueError(f"{where(i)}: field {field!r} must be {rule}, got {values[i]!r}")
    return arr


def _real_column(values: list[Any], where: _Where, field: str, low: float,
                 high: float) -> np.ndarray:
    """Numbers (NaN for None or NaN); out of [low, high] or ±inf raises ValueError."""
    for k in set(map(type, values)):
        if not (k is type(None) or (issubclass(k, _REAL_TYPES)
                                    and not issubclass(k, bool | np.bool_))):
            i = next(i for i, v in enumerate(values) if type(v) is k)
            raise ValueError(f"{where(i)}: field {field!r} must be a number, got "
                             f"{values[i]!r}")
    arr = np.array(values, dtype=float)  # None → NaN
    bad = ~np.isnan(arr) & ~(np.isfinite(arr) & (arr >= low) & (arr <= high))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{where(i)}: field {field!r} must be a finite number in [{low}, "
                         f"{high}], got {values[i]!r}")
    return arr


def _readonly(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.setflags(write=False)


@dataclass(frozen=True, eq=False)
class CritiqueStudy:
    """Columns of a checked study. Question arrays are indexed by question row, output
    arrays by output row; ``output_question`` is a question *row*, parents are output *ids*
    (−1: none). Missing values: −1 for gold/final/choice, NaN for confidence/time_ms.
    Build it with :meth:`from_records` (which validates); the arrays are read-only."""

    question_id: np.ndarray
    gold: np.ndarray
    domain_index: np.ndarray
    domains: tuple[str, ...]
    output_id: np.ndarray
    output_question: np.ndarray
    level: np.ndarray
    parent_a: np.ndarray
    parent_b: np.ndarray
    final: np.ndarray
    choice: np.ndarray
    confidence: np.ndarray
    time_ms: np.ndarray
    is_ai: np.ndarray
    tree: np.ndarray  # the record's tree number, −1 where not given
    annotator: np.ndarray  # who wrote the output, −1 where not given (the AI, unknown)

    @property
    def n_questions(self) -> int:
        return len(self.question_id)

    @property
    def n_outputs(self) -> int:
        return len(self.output_id)

    @property
    def top_level(self) -> int:
        """L: the highest level present (0 for an empty study)."""
        return int(self.level.max()) if len(self.level) else 0

    @cached_property
    def chains(self) -> Chains:
        """Parents, sibling groups and ancestor pairs (computed once per study)."""
        return chains(self.output_id, self.output_question, self.level, self.parent_a,
                      self.parent_b, self.tree)

    @classmethod
    def from_records(cls, questions: Iterable[Any], outputs: Iterable[Any]) -> CritiqueStudy:
        """Check and convert the records (NamedTuples, tuples in field order, or mappings
        with the field names). All or nothing: the first problem raises ValueError naming
        the record (``outputs[12] (id 345)``), the field and the problem. Ids are
        integers ≥ 0; confidence and time_ms may be None or NaN (missing)."""
        q_id, q_gold, q_domain = _columns(questions, QuestionRecord._fields, "questions")
        question_id = _int_column(q_id, _Where("questions"), "id", optional=False)
        where = _Where("questions", q_id)
        gold = _int_column(q_gold, where, "gold", optional=True)
        for i, d in enumerate(q_domain):
            if d is not None and not isinstance(d, str):
                raise ValueError(f"{where(i)}: field 'domain' must be a string or None, "
                                 f"got {d!r}")
        names = ["" if d is None else d for d in q_domain]
        domains = tuple(sorted(set(names)))
        lookup = {d: k for k, d in enumerate(domains)}
        domain_index = np.array([lookup[d] for d in names], dtype=np.int64)
        _first_duplicate(question_id, "questions")

        (o_id, o_question, o_level, o_pa, o_pb, o_final, o_choice, o_conf, o_time,
         o_author, o_tree, o_annotator) = _columns(outputs, OutputRecord._fields, "outputs",
                                      OPTIONAL_FIELDS)
        output_id = _int_column(o_id, _Where("outputs"), "id", optional=False)
        where = _Where("outputs", o_id)
        question = _int_column(o_question, where, "question", optional=False)
        q_row = rows_of(question_id, question)
        if (q_row < 0).any():
            i = int(np.argmax(q_row < 0))
            raise ValueError(f"{where(i)}: field 'question': no question with id "
                             f"{int(question[i])}")
        level = _int_column(o_level, where, "level", optional=False)
        parent_a = _int_column(o_pa, where, "parent_a", optional=True)
        parent_b = _int_column(o_pb, where, "parent_b", optional=True)
        final = _int_column(o_final, where, "final", optional=True)
        choice = _int_column(o_choice, where, "choice", optional=True, allowed=(0, 1))
        confidence = _real_column(o_conf, where, "confidence", 1.0, 5.0)
        time_ms = _real_column(o_time, where, "time_ms", 0.0, math.inf)
        tree = _int_column(o_tree, where, "tree", optional=True)
        annotator = _int_column(o_annotator, where, "annotator", optional=True)
        if not set(o_author) <= set(AUTHORS):
            i = next(i for i, a in enumerate(o_author) if a not in AUTHORS)
            raise ValueError(f"{where(i)}: field 'author' must be 'human' or 'ai', got "
                             f"{o_author[i]!r}")
        is_ai = np.array([a == "ai" for a in o_author], dtype=bool)
        response = level == 0
        for bad, message in (
                (response & ((parent_a >= 0) | (parent_b >= 0)),
                 "field 'parent_a'/'parent_b': a response (level 0) has no parents"),
                (response & (choice >= 0),
                 "field 'choice': a response (level 0) has no inputs to choose from"),
                (~response & ((parent_a < 0) | (parent_b < 0)),
                 "field 'parent_a'/'parent_b': a critique needs two parents"),
                (~response & (parent_a == parent_b),
                 "field 'parent_b': the two parents are the same output")):
            if bad.any():
                raise ValueError(f"{where(int(np.argmax(bad)))}: {message}")
        study = cls(question_id=question_id, gold=gold, domain_index=domain_index,
                    domains=domains, output_id=output_id,
                    output_question=q_row.astype(np.int64), level=level, parent_a=parent_a,
                    parent_b=parent_b, final=final, choice=choice, confidence=confidence,
                    time_ms=time_ms, is_ai=is_ai, tree=tree, annotator=annotator)
        _first_duplicate(study.output_id, "outputs")
        _check_tree(study)
        _check_tree_numbers(study)
        _readonly(study.question_id, study.gold, study.domain_index, study.output_id,
                  study.output_question, study.level, study.parent_a, study.parent_b,
                  study.final, study.choice, study.confidence, study.time_ms, study.is_ai,
                  study.tree, study.annotator)
        return study

    def question_records(self) -> list[QuestionRecord]:
        return [QuestionRecord(int(q), None if g < 0 else int(g), self.domains[d] or None)
                for q, g, d in zip(self.question_id, self.gold, self.domain_index,
                                   strict=True)]

    def output_records(self) -> list[OutputRecord]:
        def opt(x: int) -> int | None:
            return None if x < 0 else int(x)

        def num(x: float) -> float | None:
            return None if math.isnan(x) else float(x)

        return [OutputRecord(int(o), int(self.question_id[q]), int(lv), opt(a), opt(b),
                             opt(f), opt(c), num(cf), num(t), "ai" if ai else "human",
                             opt(tr), opt(an))
                for o, q, lv, a, b, f, c, cf, t, ai, tr, an in zip(
                    self.output_id, self.output_question, self.level, self.parent_a,
                    self.parent_b, self.final, self.choice, self.confidence, self.time_ms,
                    self.is_ai, self.tree, self.annotator, strict=True)]


def _first_duplicate(ids: np.ndarray, what: str) -> None:
    if len(ids) < 2:
        return
    order = np.argsort(ids, kind="stable")
    dup = np.flatnonzero(ids[order][1:] == ids[order][:-1])
    if dup.size:
        i = int(order[dup[0] + 1])
        raise ValueError(f"{what}[{i}] (id {int(ids[i])}): field 'id': duplicate id")


def _check_tree(s: CritiqueStudy) -> None:
    """Parents exist, are one level below, in the same question, and are siblings."""
    crit = np.flatnonzero(s.level > 0)
    for field, parent in (("parent_a", s.parent_a), ("parent_b", s.parent_b)):
        rows = rows_of(s.output_id, parent[crit])
        bad = rows < 0
        if bad.any():
            i = int(crit[np.argmax(bad)])
            raise ValueError(f"outputs[{i}] (id {int(s.output_id[i])}): field {field!r}: "
                             f"no output with id {int(parent[i])}")
        bad = s.level[rows] != s.level[crit] - 1
        if bad.any():
            i = int(crit[np.argmax(bad)])
            raise ValueError(f"outputs[{i}] (id {int(s.output_id[i])}): field {field!r}: "
                             f"output {int(parent[i])} is of level {int(s.level[rows][bad][0])}"
                             f", a level-{int(s.level[i])} critique needs level "
                             f"{int(s.level[i]) - 1}")
        bad = s.output_question[rows] != s.output_question[crit]
        if bad.any():
            i = int(crit[np.argmax(bad)])
            raise ValueError(f"outputs[{i}] (id {int(s.output_id[i])}): field {field!r}: "
                             f"output {int(parent[i])} belongs to another question")
    ra = rows_of(s.output_id, s.parent_a[crit])
    rb = rows_of(s.output_id, s.parent_b[crit])
    pair_a = np.sort(np.stack([s.parent_a[ra], s.parent_b[ra]], axis=1), axis=1)
    pair_b = np.sort(np.stack([s.parent_a[rb], s.parent_b[rb]], axis=1), axis=1)
    bad = (pair_a != pair_b).any(axis=1)
    if bad.any():
        i = int(crit[np.argmax(bad)])
        raise ValueError(f"outputs[{i}] (id {int(s.output_id[i])}): field 'parent_b': "
                         f"outputs {int(s.parent_a[i])} and {int(s.parent_b[i])} do not share "
                         "their inputs (a critique compares two siblings)")


def _check_tree_numbers(s: CritiqueStudy) -> None:
    """A critique is of its responses' tree: a level-1 critique's two responses carry the
    same ``tree`` (both None or one number), and a critique's own ``tree``, if given, is
    theirs. (Higher critiques compare siblings, so their chains stay in one tree.)"""
    crit = np.flatnonzero(s.level > 0)
    if not crit.size or not (s.tree >= 0).any():
        return
    first = s.chains.ancestors[crit, 0]  # the level-0 pair of each critique (rows)
    ta, tb = s.tree[first[:, 0]], s.tree[first[:, 1]]
    bad = ta != tb
    if bad.any():
        k = int(np.argmax(bad))
        i = int(crit[k])
        shown = ["None" if t < 0 else str(int(t)) for t in (ta[k], tb[k])]
        raise ValueError(f"outputs[{i}] (id {int(s.output_id[i])}): field 'tree': its responses "
                         f"{int(s.output_id[first[k, 0]])} and {int(s.output_id[first[k, 1]])} "
                         f"are of trees {shown[0]} and {shown[1]} (a critique stays in one tree)")
    own = s.tree[crit]
    bad = (own >= 0) & (own != ta)
    if bad.any():
        k = int(np.argmax(bad))
        i = int(crit[k])
        theirs = "None" if ta[k] < 0 else str(int(ta[k]))
        raise ValueError(f"outputs[{i}] (id {int(s.output_id[i])}): field 'tree': {int(own[k])}"
                         f", but its responses are of tree {theirs}")
