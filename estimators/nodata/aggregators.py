"""Aggregators σ: a rubric's bit string C(x) → a label (paper 004, Section 5; f = σ∘C).

Neither player of the EV protocol is given σ; the aggregators serve to *make* labelled data
(the synthetic sets), to score an evaluator when references exist, and to describe a rubric
to people. Labels are the ints 0 and 1 (the paper's binary label set).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MajorityVote:
    """1 when more bits are 1 than 0, 0 when fewer; a tie gives ``tie`` (default 1).

    The paper's tie rule: its data generator (``get_label_for`` in the published notebook)
    returns "1" on a tie. Three-criterion rubrics never tie; even-length ones can.
    """

    tie: int = 1
    name: str = "majority vote"

    def __call__(self, bits: Sequence[int]) -> int:
        ones = sum(bits)
        zeros = len(bits) - ones
        if ones == zeros:
            return self.tie
        return 1 if ones > zeros else 0


@dataclass(frozen=True, slots=True)
class AnyOf:
    """1 when at least one bit is 1 (an empty rubric gives 0)."""

    name: str = "any of"

    def __call__(self, bits: Sequence[int]) -> int:
        return 1 if any(bits) else 0


@dataclass(frozen=True, slots=True)
class AllOf:
    """1 when every bit is 1 (an empty rubric gives 1, the empty conjunction)."""

    name: str = "all of"

    def __call__(self, bits: Sequence[int]) -> int:
        return 1 if all(bits) else 0


majority_vote = MajorityVote()
any_of = AnyOf()
all_of = AllOf()
