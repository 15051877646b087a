"""Which routing design to choose (issue 28): from a study's own items — the classes its AI
systems picked for each — and pilot accuracies, the answers each design needs for a target
interval width, by simulation with the estimator the dashboard uses.

Truth model for the simulation (planning only; the estimates never assume it): the one-coin
model, each system right with its pilot accuracy A_s and otherwise on any other class alike,
so P(y = c | picks) ∝ Π_s (A_s if ŷ_s = c else (1 − A_s)/(K − 1)) (a missing pick: factor 1)
over a uniform prior. Specialists are truthful; one query per item.

* Uniform design: the paper's ML estimate, SE from the Fisher information of n answers
  (n/K ordinary, n(K − 1)/K complementary; ``likelihood.fisher_se``) — exact enough at
  planning sizes, and what a uniform study's dashboard shows.
* Targeted design with ε: ``design_estimate`` on ``reps`` simulated studies of n items
  drawn from the study's own (with replacement), π = ``designs.targeted_probabilities``;
  its SE is the root mean square of the replicates' SEs.

Answers for a full width w at the 95 % level: n · (2 z SE_n / w)², SE ∝ 1/√n.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from estimators.partitioned.design_estimate import YES, design_estimate, design_steps
from estimators.partitioned.designs import TARGETED, UNIFORM, targeted_probabilities
from estimators.partitioned.likelihood import fisher_se

EPSILONS = (0.1, 0.2, 0.3, 0.5)
# A design is recommended only if no system of the study needs more than this many times
# the uniform design's answers (the bound for a system added later).
WORST_RATIO = 1.3


@dataclass(frozen=True)
class DesignOption:
    """One design: its answers for the target width per system and for the median one."""

    kind: str
    epsilon: float | None
    answers: np.ndarray  # (S,)
    median: float
    worst_ratio: float  # max over systems of answers / the uniform design's


@dataclass(frozen=True)
class DesignPlan:
    options: list[DesignOption]
    recommended: DesignOption
    saving: float  # the uniform design's median answers / the recommended one's


def one_coin_truth(rng: np.random.Generator, picks: np.ndarray, accuracies: np.ndarray,
                   k: int, size: tuple) -> np.ndarray:
    """Truths y (size + (n,)) for items with ``picks`` (n, S) under the one-coin model."""
    a = np.clip(np.asarray(accuracies, float), 0.01, 0.99)
    logp = np.zeros((picks.shape[0], k))
    for s in range(picks.shape[1]):
        has = picks[:, s] >= 0
        right = np.zeros((picks.shape[0], k), dtype=bool)
        right[np.flatnonzero(has), picks[has, s]] = True
        logp += np.where(has[:, None], np.where(right, np.log(a[s]),
                                                np.log((1 - a[s]) / (k - 1))), 0.0)
    p = np.exp(logp - logp.max(axis=1, keepdims=True))
    cum = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    u = rng.random((*size, picks.shape[0], 1))
    return np.minimum((u > cum).sum(axis=-1), k - 1)


def design_plan(picks, accuracies, k: int, width: float, *, epsilons=EPSILONS,
                n: int | None = None, reps: int = 100, seed: int = 0,
                confidence: float = 0.95) -> DesignPlan:
    """The answers each design needs for a ``width``-wide interval (module docstring), and
    the recommended design: the fewest answers for the median system among the designs
    whose worst system needs at most ``WORST_RATIO`` × the uniform design's answers (the
    uniform design when none does). ``picks`` (N, S): each item's class per system (−1:
    none); ``n``: items per simulated study (default min(N, 2000))."""
    picks = np.asarray(picks, dtype=np.int64)
    acc = np.clip(np.asarray(accuracies, float), 0.01, 0.99)
    if picks.ndim != 2 or picks.shape[1] != acc.size or picks.shape[0] == 0:
        raise ValueError("picks: need an (items × systems) array matching the accuracies")
    if not 0 < width < 1:
        raise ValueError(f"width: must lie strictly between 0 and 1, got {width}")
    z = stats.norm.ppf(0.5 + confidence / 2)
    size = min(picks.shape[0], 2000) if n is None else int(n)
    se_one = fisher_se(acc, np.full_like(acc, 1 / k), np.full_like(acc, (k - 1) / k), k)
    uniform_answers = (2 * z * se_one / width) ** 2
    options = [DesignOption(UNIFORM, None, uniform_answers, float(np.median(uniform_answers)),
                            1.0)]
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, picks.shape[0], size=(reps, size))
    sampled = picks[rows]  # (R, n, S)
    truth = np.take_along_axis(
        one_coin_truth(rng, picks, acc, k, (reps,)), rows, axis=1)  # (R, n)
    counts = np.zeros((reps, size, k))
    for s in range(picks.shape[1]):
        has = sampled[:, :, s] >= 0
        r, i = np.nonzero(has)
        np.add.at(counts, (r, i, sampled[r, i, s]), 1.0)
    for eps in epsilons:
        pi = targeted_probabilities(counts, eps)
        cum = np.cumsum(pi, axis=-1)
        asked = np.minimum((rng.random((reps, size, 1)) > cum).sum(axis=-1), k - 1)
        answers = np.where(asked == truth, YES, 0)
        est = design_estimate(design_steps(asked[..., None], pi, answers[..., None], sampled),
                              confidence=confidence)
        se = np.sqrt(np.mean(np.asarray(est.se, float) ** 2, axis=0))
        need = size * (2 * z * se / width) ** 2
        options.append(DesignOption(TARGETED, float(eps), need, float(np.median(need)),
                                    float(np.max(need / uniform_answers))))
    allowed = [o for o in options if o.worst_ratio <= WORST_RATIO]
    best = min(allowed, key=lambda o: o.median)
    return DesignPlan(options, best, options[0].median / best.median)


__all__ = ["EPSILONS", "WORST_RATIO", "DesignOption", "DesignPlan", "design_plan",
           "one_coin_truth"]
