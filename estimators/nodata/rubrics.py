"""Rubrics C (ordered criteria) and total rubrics C̄ (paper 004, Section 5).

``Rubric.encode(x)`` is C(x) = c_1(x)|…|c_n(x) as a tuple of ints. ``Rubric.total()`` is C̄:
every criterion, and before each non-linear one its clauses (the paper's Table 1 lists the
in-phenomenon total rubric as {c0, c2, c1a, c1b, c1}; order within C̄ carries no meaning for
the challenges, which compare whole encodings). A rubric without non-linear criteria is its
own total rubric.

``label(x)`` = σ(C(x)) needs an aggregator; the EV protocol never calls it (neither player
is given σ), the synthetic data and the tests do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .criteria import Criterion, Datapoint


@dataclass(frozen=True, slots=True)
class Rubric:
    """An ordered, non-empty tuple of criteria with distinct names, and an optional σ."""

    criteria: tuple[Criterion, ...]
    aggregator: Callable[[Sequence[int]], int] | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if not self.criteria:
            raise ValueError("criteria: a rubric needs at least one criterion")
        names = [c.name for c in self.criteria]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"criteria: names must be distinct, repeated: {', '.join(dupes)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.criteria)

    def encode(self, x: Datapoint) -> tuple[int, ...]:
        """C(x): one bit per criterion, in order."""
        return tuple(c(x) for c in self.criteria)

    def label(self, x: Datapoint) -> int:
        """f(x) = σ(C(x)); raises when the rubric has no aggregator."""
        if self.aggregator is None:
            raise ValueError(f"rubric {self.name or '(unnamed)'}: no aggregator to label with")
        return int(self.aggregator(self.encode(x)))

    def total(self) -> TotalRubric:
        """C̄: the clauses of each non-linear criterion, then the criterion itself."""
        expanded: list[Criterion] = []
        for c in self.criteria:
            expanded.extend(c.clauses)
            expanded.append(c)
        return TotalRubric(tuple(expanded), rubric=self)


@dataclass(frozen=True, slots=True)
class TotalRubric:
    """C̄: the criteria of ``rubric`` with the clauses of its non-linear criteria listed too."""

    criteria: tuple[Criterion, ...]
    rubric: Rubric

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.criteria)

    def encode(self, x: Datapoint) -> tuple[int, ...]:
        """C̄(x): the total evaluation, one bit per criterion or clause."""
        return tuple(c(x) for c in self.criteria)
