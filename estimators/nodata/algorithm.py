"""The No-Data Algorithm (paper 004, Algorithm 1 and Theorem 1; METHODS.md M4).

For every datapoint run the EV protocol (``protocol.ev_protocol``, r rounds). On success keep the
evaluator's label; on failure flip it with probability φ — **φ is the flip probability, as in
the paper's text** (the published notebook's ``phi`` is the probability of *keeping* it: its
``phi = p`` is φ = 1 − p here). Return the labels, per-datapoint success, the flips and every
run's rounds; the success rate is the trust signal.

Theorem 1: if the evaluator has accuracy α and lies exactly where it mislabels, the expected
accuracy is tied to B = 1 − (1 − α)(1 − φ + φ(1/4)^r)   (``theorem1_bound``). The paper states
E[accuracy] ≤ B, but its proof (eq. 9: E[wrong] ≤ (1 − α)(1 − φ + φ(1/4)^r)) gives E[accuracy]
≥ B: exactly, E[accuracy] = α + (1 − α)·φ·(1 − Q) with Q a liar's chance to pass a whole run,
so E = B when Q = (1/4)^r, E ≥ B when Q ≤ (1/4)^r (Lemma 1), E ≤ B only when liars pass more
often. docs/nodata.md and the tests show both sides.

Randomness: one seed makes three independent numpy Generators (``SeedSequence(seed).spawn``):
the evaluator's, the verifier's (the challenges, ``protocol.challenge_schedule``) and the
flips'. Same seed, same data, same evaluator → the same result; an item's challenges depend
only on the seed and its position.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from estimators.numerics.proportion import clopper_pearson

from .protocol import (
    Challenge,
    Evaluator,
    EVOutcome,
    Verifier,
    challenge_schedule,
    check_rounds,
    lie_pass_bound,
    play,
)

Progress = Callable[[int, int], None]


def check_phi(phi: float) -> float:
    if not 0.0 <= float(phi) <= 1.0:
        raise ValueError(f"phi: the flip probability must lie in [0, 1], got {phi}")
    return float(phi)


def theorem1_bound(alpha: float, phi: float, rounds: int) -> float:
    """Theorem 1's value B = 1 − (1 − α)(1 − φ + φ(1/4)^r) (a floor on expected accuracy when
    liars pass at most (1/4)^r of the runs — see the module docstring on the paper's "≤")."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha: an accuracy lies in [0, 1], got {alpha}")
    return 1.0 - (1.0 - alpha) * (1.0 - check_phi(phi) + phi * lie_pass_bound(rounds))


def exact_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson interval for a success rate (``estimators.numerics.proportion.
    clopper_pearson``: 0 and 1 at the ends are exact; [0, 1] without datapoints)."""
    lo, hi = clopper_pearson(successes, max(n, 0), level)
    return (float(lo), float(hi))


@dataclass(frozen=True, eq=False)
class NoDataResult:
    """Labels, per-datapoint success and flips of one run, with every EV outcome.

    ``labels[i]`` is None only when the evaluator never made a valid commitment for item i.
    """

    labels: tuple[int | None, ...]
    success: np.ndarray  # bool, one per datapoint
    flipped: np.ndarray  # bool, one per datapoint (False wherever success)
    outcomes: tuple[EVOutcome, ...]
    rounds: int
    phi: float

    @property
    def n(self) -> int:
        return len(self.labels)

    @property
    def successes(self) -> int:
        return int(self.success.sum())

    @property
    def success_rate(self) -> float:
        return self.successes / self.n if self.n else float("nan")

    @property
    def flips(self) -> int:
        return int(self.flipped.sum())

    @property
    def flip_rate(self) -> float:
        return self.flips / self.n if self.n else float("nan")

    @property
    def lie_pass_bound(self) -> float:
        """(1/4)^r: Lemma 1's bound on a liar's chance to pass a whole run."""
        return lie_pass_bound(self.rounds)

    @property
    def error_factor(self) -> float:
        """1 − φ + φ(1/4)^r: Theorem 1's factor, E[wrong] ≤ (1 − α)·factor (the proof's eq. 9)."""
        return 1.0 - self.phi + self.phi * lie_pass_bound(self.rounds)

    @property
    def failed_challenges(self) -> tuple[int | None, ...]:
        """Per datapoint: the challenge failed (1 or 2), None on success or with no challenge."""
        return tuple(None if o.challenge is None else int(o.challenge) for o in self.outcomes)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Per datapoint: why its run failed ("" on success)."""
        return tuple(o.reason for o in self.outcomes)

    def accuracy_bound(self, alpha: float) -> float:
        """Theorem 1 for this run's φ and r, given the evaluator's accuracy α."""
        return theorem1_bound(alpha, self.phi, self.rounds)

    def success_interval(self, level: float = 0.95) -> tuple[float, float]:
        return exact_interval(self.successes, self.n, level)

    def failures_by_challenge(self) -> dict[str, int]:
        """Failed runs by the challenge failed ("1", "2", or "none" for an unusable commitment)."""
        counts = Counter(str(int(o.challenge)) if o.challenge is not None else "none"
                         for o in self.outcomes if not o.success)
        return dict(sorted(counts.items()))

    def failures_by_criterion(self) -> dict[str, int]:
        counts = Counter(o.failure.criterion or "(none)" for o in self.outcomes if not o.success)
        return dict(sorted(counts.items()))


def flip_failures(outcomes: Sequence[EVOutcome], phi: float,
                  rng: np.random.Generator) -> tuple[tuple[int | None, ...], np.ndarray]:
    """Algorithm 1's lines 6–12: keep a success's label; flip a failure's with probability φ.

    One uniform draw per failed run that has a label, in item order (``rng.random() < φ``
    flips); successes and label-less failures draw nothing. The m draws are taken as one
    ``rng.random(m)``, which gives the same numbers as m calls of ``rng.random()``.
    """
    phi = check_phi(phi)
    labels = [o.label for o in outcomes]
    failed = [i for i, o in enumerate(outcomes) if not o.success and o.label is not None]
    flipped = np.zeros(len(outcomes), dtype=bool)
    if failed:
        hits = (rng.random(len(failed)) < phi).tolist()
        for i, hit in zip(failed, hits, strict=True):
            if hit:
                flipped[i] = True
                labels[i] = 1 - labels[i]
    return tuple(labels), flipped


def streams(seed: int | np.random.SeedSequence) -> tuple[np.random.Generator, ...]:
    """The evaluator's, the verifier's and the flips' Generators, independent, from one seed."""
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return tuple(np.random.default_rng(s) for s in ss.spawn(3))


def run_ev(data: Sequence, evaluator: Evaluator, verifier: Verifier, *, rounds: int,
           evaluator_rng: np.random.Generator, verifier_rng: np.random.Generator,
           items: Sequence[Hashable] | None = None,
           progress: Progress | None = None) -> tuple[EVOutcome, ...]:
    """The EV protocol over a data set, in order; ``progress(done, total)`` after each item.

    The verifier's Generator draws the whole ``challenge_schedule`` first (item i's challenges
    depend only on it and i); the evaluator's Generator is used in item order.

    ``items`` names the datapoints (default ``"0"``, ``"1"``, …); a progress callback may raise
    to cancel the run.
    """
    rounds = check_rounds(rounds)
    ids = [str(i) for i in range(len(data))] if items is None else list(items)
    if len(ids) != len(data):
        raise ValueError(f"items: {len(ids)} names for {len(data)} datapoints")
    schedule = challenge_schedule(verifier_rng, len(data), rounds).tolist()
    evaluator.prepare(list(zip(ids, data, strict=True)))
    commit, check = evaluator.commit, verifier.check
    out = []
    total = len(data)
    for done, (item, x, row) in enumerate(zip(ids, data, schedule, strict=True), start=1):
        out.append(play(item, x, commit, check, rounds, evaluator_rng, row))
        if progress is not None:
            progress(done, total)
    return tuple(out)


def no_data_algorithm(data: Sequence, evaluator: Evaluator, verifier: Verifier, *,
                      rounds: int = 3, phi: float, seed: int | np.random.SeedSequence,
                      items: Sequence[Hashable] | None = None,
                      progress: Progress | None = None) -> NoDataResult:
    """Algorithm 1: the EV protocol for every datapoint, then φ-flips of the failures."""
    phi = check_phi(phi)
    ev_rng, ver_rng, flip_rng = streams(seed)
    outcomes = run_ev(data, evaluator, verifier, rounds=rounds, evaluator_rng=ev_rng,
                      verifier_rng=ver_rng, items=items, progress=progress)
    labels, flipped = flip_failures(outcomes, phi, flip_rng)
    success = np.fromiter((o.success for o in outcomes), dtype=bool, count=len(outcomes))
    return NoDataResult(labels, success, flipped, outcomes, check_rounds(rounds), phi)


__all__ = ["Challenge", "NoDataResult", "exact_interval", "flip_failures", "no_data_algorithm",
           "run_ev", "streams", "theorem1_bound"]
