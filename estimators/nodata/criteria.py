"""Criteria: a datapoint → one bit (METHODS.md M4; paper 004, Section 5).

A criterion ``c: X → {0, 1}`` is a named, deterministic check. A non-linear criterion of arity
> 1 (the paper's xor ``c = c_a ⊕ c_b``) also lists its *clauses*, so that a total rubric
(``rubrics.TotalRubric``) can evaluate them one by one (the paper's "total evaluation").

Datapoints are whatever the checks accept (a string, a JSON object); the checks here are the
ones the paper's synthetic experiments need plus a few general ones. Every check returns the
int 0 or 1, never a bool, so encodings compare and serialise the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Datapoint = Any


@dataclass(frozen=True, slots=True)
class Criterion:
    """A named check ``x → 0/1``; ``clauses`` is empty for a linear (atomic) criterion.

    ``fn`` must be deterministic and total on the data set (the paper assumes deterministic
    functions throughout). ``description`` is the plain-language wording shown to people.
    """

    name: str
    fn: Callable[[Datapoint], int]
    description: str = ""
    clauses: tuple[Criterion, ...] = field(default=())

    def __call__(self, x: Datapoint) -> int:
        return 1 if self.fn(x) else 0

    @property
    def is_total(self) -> bool:
        """True when the criterion has no clauses to decompose (arity 1)."""
        return not self.clauses


def xor(name: str, a: Criterion, b: Criterion, description: str = "") -> Criterion:
    """``c = a ⊕ b`` (1 when exactly one clause holds), listing ``a`` and ``b`` as clauses."""
    return Criterion(name, lambda x: a(x) ^ b(x), description or f"{a.name} xor {b.name}",
                     clauses=(a, b))


def contains(name: str, sub: str) -> Criterion:
    """1 when the string datapoint contains ``sub``."""
    return Criterion(name, lambda x: sub in x, f"contains {sub}")


def starts_with(name: str, prefix: str) -> Criterion:
    """1 when the string datapoint starts with ``prefix``."""
    return Criterion(name, lambda x: x.startswith(prefix), f"starts with {prefix}")


def ends_with(name: str, suffix: str) -> Criterion:
    """1 when the string datapoint ends with ``suffix``."""
    return Criterion(name, lambda x: x.endswith(suffix), f"ends with {suffix}")


def even_count(name: str, symbol: str) -> Criterion:
    """1 when ``symbol`` occurs an even number of times (zero counts as even)."""
    return Criterion(name, lambda x: x.count(symbol) % 2 == 0,
                     f"has an even number of {symbol!r}")


def count_above(name: str, symbol: str, threshold: int) -> Criterion:
    """1 when ``symbol`` occurs strictly more than ``threshold`` times."""
    return Criterion(name, lambda x: x.count(symbol) > threshold,
                     f"has more than {threshold} {symbol!r}")


def field_equals(name: str, key: str, value: Any) -> Criterion:
    """1 when the JSON-object datapoint has ``key`` equal to ``value`` (missing key → 0)."""
    return Criterion(name, lambda x: isinstance(x, dict) and x.get(key) == value,
                     f"{key} = {value!r}")
