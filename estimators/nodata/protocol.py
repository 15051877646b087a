"""The Evaluator–Verifier (EV) protocol for one datapoint (paper 004, Section 6.1; METHODS M4).

Per round k = 1 … r:

1. the evaluator **commits** to a partial label ỹ′ ∈ {0, 1} and a datapoint x′ similar to x
   (generated, or picked from data) — ``Evaluator.commit``; the commitment is final for the
   round;
2. the verifier **reveals one challenge**, drawn uniformly at random from its seeded numpy
   Generator (``challenge_schedule``: one ``rng.random()`` per item and round, challenge 1 when
   < 1/2, else challenge 2). The draws for a run are made up front, row by row, and kept from
   the evaluator until it has committed: item i's challenges then depend only on the seed and
   i — not on how the other items went — so a run can be resumed, split, or put to people one
   question at a time;
3. the verifier **checks** it — ``Verifier.check``:
   challenge 1, equality up to permutation over the total rubric C̄
   (∀s∈S_x ∃t∈S_x′ ∀c∈C̄: c(s) = c(t)); challenge 2, equality up to isomorphism
   (C(x′) = C(x); relaxed: δ(C(x), C(x′)) < ε).

A failed check ends the run as a failure; passing all r rounds is a success. A commitment
without a usable label or datapoint (unparseable output, a missing imported line, a
generator that found nothing) fails its round with no challenge revealed or checked —
never guessed. Either way the protocol returns the label of the last valid commitment (the paper:
"at the end of the call the EV Protocol also returns ỹ′"; None when there was none).

Lemma 1 of the paper: a lying evaluator passes a round with probability ≤ 1/4, so r rounds
with ≤ (1/4)^r (``lie_pass_bound``). The bound is the paper's claim for the liars it
analyses; docs/nodata.md shows liars of its own Table 3 that pass more often.

Evaluators and verifiers are ``typing.Protocol`` interfaces; implementations live in
``evaluators.py`` and ``verifiers.py`` (the platform adds an AI-provider evaluator and a human
verifier on the same interfaces).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

Datapoint = Any


class Challenge(IntEnum):
    """The verifier's two challenges, numbered as in the paper."""

    PERMUTATION = 1  # equality up to permutation over the total rubric
    ISOMORPHISM = 2  # equality up to isomorphism: C(x′) = C(x) (or within a tolerance)


class Commitment(NamedTuple):
    """What the evaluator commits to in one round: ỹ′ and x′, or why it has nothing.

    ``error`` non-empty means the commitment is unusable (the round fails without a
    challenge); otherwise ``label`` is 0 or 1 and ``similar`` is a datapoint. (Named tuples
    here: immutable, and cheap to make once per round.)
    """

    label: int | None
    similar: Datapoint | None
    error: str = ""

    @classmethod
    def invalid(cls, error: str) -> Commitment:
        return cls(None, None, error or "no usable commitment")

    @property
    def valid(self) -> bool:
        return not self.error and self.label in (0, 1) and self.similar is not None


class Verdict(NamedTuple):
    """A verifier's answer to one challenge; on failure, the criterion that decided it."""

    passed: bool
    criterion: str = ""
    reason: str = ""


PASS = Verdict(True)


class Round(NamedTuple):
    """One round as played: the commitment, the challenge drawn (None if none) and the check."""

    index: int
    label: int | None
    similar: Datapoint | None
    challenge: Challenge | None
    passed: bool
    criterion: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class EVOutcome:
    """The EV protocol's result for one datapoint: success, the label, and every round played."""

    item: Hashable
    success: bool
    label: int | None
    rounds: tuple[Round, ...]

    @property
    def failure(self) -> Round | None:
        """The round that ended a failed run (None on success)."""
        return None if self.success else self.rounds[-1]

    @property
    def challenge(self) -> Challenge | None:
        """The challenge that was failed (None on success or when no challenge was checked)."""
        f = self.failure
        return None if f is None else f.challenge

    @property
    def reason(self) -> str:
        f = self.failure
        return "" if f is None else f.reason


@runtime_checkable
class Evaluator(Protocol):
    """Claims to know f; per round commits to ⟨ỹ′, x′⟩ for the datapoint under test.

    ``prepare`` sees the whole data set once before the run (batch prediction, validation);
    ``commit`` never sees the challenges (it is called before each is revealed) and uses only
    the Generator it is given for any randomness, so seeded runs reproduce.
    """

    def prepare(self, items: Sequence[tuple[Hashable, Datapoint]]) -> None: ...

    def commit(self, item: Hashable, x: Datapoint, round_index: int,
               rng: np.random.Generator) -> Commitment: ...


@runtime_checkable
class Verifier(Protocol):
    """Given the challenge, x and the committed x′, says whether the evaluator passed.

    Knows the rubric (and its total form), never σ nor the label.
    """

    def check(self, challenge: Challenge, x: Datapoint, similar: Datapoint) -> Verdict: ...


_CHALLENGE = {1: Challenge.PERMUTATION, 2: Challenge.ISOMORPHISM}


def challenge_schedule(rng: np.random.Generator, n_items: int, rounds: int) -> np.ndarray:
    """The verifier's draws for a run: entry [i, k−1] (1 or 2) is item i's round-k challenge.

    ``rng.random((n_items, rounds)) < 1/2`` → challenge 1, else 2: uniform and independent;
    filled row by row, so row i is the same for any ``n_items`` > i.
    """
    return np.where(rng.random((n_items, check_rounds(rounds))) < 0.5, 1, 2).astype(np.int8)


def lie_pass_bound(rounds: int) -> float:
    """(1/4)^r: the paper's bound on a liar passing r rounds (Lemma 1)."""
    return 0.25 ** rounds


def check_rounds(rounds: int) -> int:
    if isinstance(rounds, bool) or not isinstance(rounds, int | np.integer) or rounds < 1:
        raise ValueError(f"rounds: need a whole number of rounds ≥ 1, got {rounds!r}")
    return int(rounds)


def ev_protocol(item: Hashable, x: Datapoint, evaluator: Evaluator, verifier: Verifier, *,
                rounds: int, evaluator_rng: np.random.Generator,
                challenges: Sequence[int]) -> EVOutcome:
    """Play up to ``rounds`` rounds for ``x``; stop at the first failure (module docstring).

    ``challenges[k − 1]`` (1 or 2) is the verifier's draw for round k (a row of
    ``challenge_schedule``), revealed only after the round's commitment.
    """
    rounds = check_rounds(rounds)
    if len(challenges) < rounds:
        raise ValueError(f"challenges: {len(challenges)} draws for {rounds} rounds")
    return play(item, x, evaluator.commit, verifier.check, rounds, evaluator_rng, challenges)


def play(item: Hashable, x: Datapoint,
         commit: Callable[[Hashable, Datapoint, int, np.random.Generator], Commitment],
         check: Callable[[Challenge, Datapoint, Datapoint], Verdict], rounds: int,
         evaluator_rng: np.random.Generator, challenges: Sequence[int]) -> EVOutcome:
    """``ev_protocol`` with its arguments already checked: ``rounds`` a whole number ≥ 1,
    ``challenges`` at least ``rounds`` draws; ``commit``/``check`` the evaluator's and the
    verifier's methods. ``algorithm.run_ev`` checks once per run and calls this per item."""
    played: list[Round] = []
    label: int | None = None
    for k in range(1, rounds + 1):
        commitment = commit(item, x, k, evaluator_rng)
        if commitment.error or commitment.label not in (0, 1) or commitment.similar is None:
            # not ``commitment.valid``, spelt out: this runs once per round
            why = commitment.error or (
                f"label must be 0 or 1, got {commitment.label!r}"
                if commitment.label not in (0, 1) else "no similar datapoint")
            played.append(Round(k, None, None, None, False, "", f"evaluator: {why}"))
            return EVOutcome(item, False, label, tuple(played))
        label = int(commitment.label)
        challenge = _CHALLENGE[int(challenges[k - 1])]
        verdict = check(challenge, x, commitment.similar)
        played.append(Round(k, label, commitment.similar, challenge, verdict.passed,
                            verdict.criterion, verdict.reason))
        if not verdict.passed:
            return EVOutcome(item, False, label, tuple(played))
    return EVOutcome(item, True, label, tuple(played))
