"""Simulated studies with known truth for allocations of answers across strata
(:mod:`estimators.partitioned.allocation`): one AI system, strata of known accuracy, one
uniformly routed query per answered item, the per-stratum ML estimates and the stratified
estimate the dashboard shows (``stratified_estimate`` with the per-stratum intervals
combined, as for one query per item). Vectorised over a stack of studies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimators.partitioned.accuracy import estimate
from estimators.partitioned.adjust import binomial_equivalent, stratified_estimate


def answer_spread(accuracy, k: int) -> np.ndarray:
    """S = √(A(1−A) / e): the standard deviation one uniformly routed answer brings to the
    ML estimate of accuracy A, e = 1/K + (K−1)/K · A/(A+K−2) its binomial-equivalent count
    (``binomial_equivalent`` per answer: an ordinary label with probability 1/K, else a
    complementary one)."""
    a = np.asarray(accuracy, float)
    per_answer = binomial_equivalent(a, 1.0 / k, (k - 1.0) / k, k)
    return np.sqrt(a * (1 - a) / per_answer)


def answers_per_stratum(weights, rates, n: int) -> np.ndarray:
    """n_h = n · W_h r_h / Σ W r, rounded (at least 1): the answers each stratum gets when
    its items are answered at rates proportional to r_h (all 1: proportional allocation)."""
    w = np.asarray(weights, float) / np.sum(weights)
    share = w * np.asarray(rates, float)
    return np.maximum(np.round(n * share / share.sum()), 1).astype(int)


@dataclass(frozen=True)
class AllocationRun:
    """Stacked simulated studies: the stratified estimate (reps,), its interval ends, and
    the population-weighted truth."""

    accuracy: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    truth: float

    @property
    def coverage(self) -> float:
        return float(np.mean((self.ci_low <= self.truth) & (self.truth <= self.ci_high)))


def simulate_allocation(accuracies, weights, n_h, k: int, reps: int,
                        rng: np.random.Generator) -> AllocationRun:
    """``reps`` studies whose strata (accuracies A_h, population shares W_h) got ``n_h``
    answers each: per answer the asked class is the system's pick with probability 1/K
    (an ordinary label: yes iff it is right), else another class (a complementary label:
    "no" for sure if the pick is right, else with probability (K−2)/(K−1)); the correctness
    of the answered items is drawn per item with probability A_h."""
    a = np.asarray(accuracies, float)[:, None]
    n_h = np.asarray(n_h)[:, None]
    n_ord = rng.binomial(np.broadcast_to(n_h, (len(a), reps)), 1.0 / k)
    n_comp = n_h - n_ord
    s_ord = rng.binomial(n_ord, np.broadcast_to(a, n_ord.shape))
    right = rng.binomial(n_comp, np.broadcast_to(a, n_comp.shape))
    s_comp = right + rng.binomial(n_comp - right, (k - 2.0) / (k - 1.0))
    per = estimate(n_ord, s_ord, n_comp, s_comp, k)
    n_eq = binomial_equivalent(per.accuracy, n_ord, n_comp, k)
    w = np.asarray(weights, float) / np.sum(weights)
    est = stratified_estimate(per.accuracy, n_eq, w, k,
                              stratum_intervals=(per.ci_low, per.ci_high))
    return AllocationRun(np.asarray(est.accuracy), np.asarray(est.ci_low),
                         np.asarray(est.ci_high), float(w @ a[:, 0]))
