"""Simulated adaptive attackers against the evaluation service (issue 20,
docs/evaluation-service.md): how far they get with and without the service's defences
(the Ladder's margin, a per-token call budget).

The simulated study: n items with a true class y uniform over K; each item has one answered
query of class k uniform over K (partitioned supervision, METHODS.md M1): "yes" (an
ordinary label) when k = y, else "no" (a complementary label). The service scores a
submission on the items it names with the engine's ML estimate
(:func:`estimators.partitioned.likelihood.ml_accuracy`, the service's fitness score) and
releases it raw, or through the Ladder (:mod:`estimators.evaluation.ladder`); a budget
refuses calls past it (the simulation then stops, as a real day's budget would).

Two attackers, both the ones the issue names:

* :func:`boosting_attack` — the boosting attack of Blum & Hardt (2015, section 5): submit
  random predictions, keep those scored above chance, submit the per-item plurality vote.
  Its service score exceeds its true accuracy: the service has been overfitted.
* :func:`probing_attack` — single-item probing by differencing two batches: a fixed base
  batch of the minimum size, then the base plus one target item predicted as each class in
  turn; the odd one out of the K scores names the query's class k and its direction the
  answer. Exact released scores give every target's label away in K calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimators.evaluation.ladder import ladder_release
from estimators.partitioned.likelihood import ml_accuracy


@dataclass(frozen=True)
class SimulatedLabels:
    """One label per item: the query's class ``k`` and answer ``yes``; ``y`` the truth."""

    y: np.ndarray
    k: np.ndarray
    yes: np.ndarray
    n_classes: int


def simulated_labels(n: int, n_classes: int, rng: np.random.Generator) -> SimulatedLabels:
    y = rng.integers(n_classes, size=n)
    k = rng.integers(n_classes, size=n)
    return SimulatedLabels(y=y, k=k, yes=k == y, n_classes=n_classes)


def service_scores(labels: SimulatedLabels, items: np.ndarray,
                   predictions: np.ndarray) -> np.ndarray:
    """The engine's ML estimate of each row of ``predictions`` (shape (…, len(items)): a
    class per item of ``items``), vectorised over the leading axes."""
    k, yes = labels.k[items], labels.yes[items]
    match = predictions == k
    n_o, n_c = float(yes.sum()), float((~yes).sum())
    s_o = (match & yes).sum(axis=-1).astype(float)
    s_c = (~match & ~yes).sum(axis=-1).astype(float)
    return ml_accuracy(n_o, s_o, n_c, s_c, labels.n_classes)


def service_score(labels: SimulatedLabels, items: np.ndarray, predictions: np.ndarray) -> float:
    """The engine's ML estimate of ``predictions`` (a class per item of ``items``)."""
    return float(service_scores(labels, items, predictions))


class SimulatedService:
    """The service's release policy: ``margin`` None releases raw scores, else the Ladder;
    ``budget`` None is unlimited, else at most that many calls (``submit`` → None past it).
    ``raw`` is the last answered call's raw score (what the simulation, not the caller, sees)."""

    def __init__(self, labels: SimulatedLabels, margin: float | None = None,
                 budget: int | None = None) -> None:
        self.labels, self.margin, self.budget = labels, margin, budget
        self.calls, self.best, self.raw = 0, None, None

    def submit(self, items: np.ndarray, predictions: np.ndarray) -> float | None:
        if self.budget is not None and self.calls >= self.budget:
            return None
        self.calls += 1
        raw = self.raw = service_score(self.labels, items, predictions)
        if self.margin is None:
            return raw
        release = ladder_release(self.best, raw, self.margin)
        self.best = release.best
        return release.score


@dataclass(frozen=True)
class BoostingResult:
    calls: int  # calls the service answered (the final submission included)
    kept: int  # random submissions kept for the vote
    service_score: float  # the engine's raw estimate of the final submission
    true_accuracy: float  # its accuracy against the items' true classes
    moves: int = 0  # random submissions whose release changed (the first counts)
    kept_excess: float = 0.0  # mean raw score − true accuracy of the kept submissions
    best_excess: float = 0.0  # largest raw score − true accuracy of an answered submission

    @property
    def overfit(self) -> float:
        return self.service_score - self.true_accuracy


def boosting_attack(labels: SimulatedLabels, calls: int, rng: np.random.Generator,
                    margin: float | None = None, budget: int | None = None) -> BoostingResult:
    """Blum & Hardt's boosting attack with ``calls`` − 1 random submissions on every item and
    a final plurality vote of those released above chance (against the Ladder: of those
    whose release moved above chance — the only ones it tells apart). A ``budget`` answers
    only its first ``budget`` calls; the vote is then scored off the budget.

    Also recorded, to explain the overfit: ``moves``, ``kept_excess`` (the kept
    submissions' mean excess raw − true: their selection bias, which the vote, nearly a
    per-item mixture of them, inherits) and ``best_excess`` (the largest excess among the
    answered random submissions: the overfit of an attacker who knew which one scored
    highest).

    The random submissions do not depend on the releases, so they are drawn and scored at
    once (the same numbers as :class:`SimulatedService` call by call); only the release
    policy runs call by call."""
    n, n_classes = len(labels.y), labels.n_classes
    items = np.arange(n)
    answered = calls - 1 if budget is None else min(calls - 1, budget)
    guesses = rng.integers(n_classes, size=(max(answered, 0), n))
    raw = service_scores(labels, items, guesses)
    excess = raw - np.mean(guesses == labels.y, axis=1)
    released = raw.copy()
    if margin is not None:
        best = None
        for i, score in enumerate(raw):
            best = ladder_release(best, float(score), margin).best
            released[i] = best
    moved = np.ones(len(released), dtype=bool)
    moved[1:] = released[1:] != released[:-1]
    keep = moved & (released > 1.0 / n_classes)
    votes = np.stack([(guesses[keep] == c).sum(axis=0) for c in range(n_classes)], axis=1)
    # ties broken at random: no class is favoured when nothing was learnt
    final = np.argmax(votes + rng.random(votes.shape) * 1e-3, axis=1)
    final_answered = budget is None or answered < budget
    kept = int(keep.sum())
    return BoostingResult(calls=answered + int(final_answered), kept=kept,
                          service_score=service_score(labels, items, final),
                          true_accuracy=float(np.mean(final == labels.y)),
                          moves=int(moved.sum()),
                          kept_excess=float(excess[keep].mean()) if kept else 0.0,
                          best_excess=float(excess.max()) if answered > 0 else 0.0)


@dataclass(frozen=True)
class ProbingResult:
    targets: int
    calls: int  # calls the service answered
    recovered: int  # targets whose query class and answer the attacker named correctly

    @property
    def recovered_share(self) -> float:
        return self.recovered / self.targets if self.targets else 0.0


def probing_attack(labels: SimulatedLabels, batch: int, targets: int,
                   rng: np.random.Generator, margin: float | None = None,
                   budget: int | None = None) -> ProbingResult:
    """Differencing: the base batch (the first ``batch`` items, every one predicted as
    class 0) and, per target item, the base plus the target predicted as each class c. The
    class whose score differs from the others' is taken as the query's class k, "yes" when
    its score is the higher; where all K released scores are equal the attacker guesses
    (k at random, "no": the likelier answer). A target counts as recovered when both guesses
    are right (by chance: (K−1)/K² of targets)."""
    service = SimulatedService(labels, margin, budget)
    n_classes = labels.n_classes
    base = np.arange(batch)
    base_predictions = np.zeros(batch, dtype=int)
    if service.submit(base, base_predictions) is None:
        return ProbingResult(targets=targets, calls=0, recovered=0)
    recovered = 0
    for target in range(batch, batch + targets):
        items = np.append(base, target)
        scores = []
        for c in range(n_classes):
            released = service.submit(items, np.append(base_predictions, c))
            if released is None:
                return ProbingResult(targets=targets, calls=service.calls,
                                     recovered=recovered)
            scores.append(released)
        scores = np.array(scores)
        values, counts = np.unique(scores, return_counts=True)
        if len(values) == 2 and counts.min() == 1:
            odd = values[np.argmin(counts)]
            k_guess = int(np.flatnonzero(scores == odd)[0])
            yes_guess = bool(odd > values[np.argmax(counts)])
        else:
            k_guess, yes_guess = int(rng.integers(n_classes)), False
        if k_guess == labels.k[target] and yes_guess == bool(labels.yes[target]):
            recovered += 1
    return ProbingResult(targets=targets, calls=service.calls, recovered=recovered)
