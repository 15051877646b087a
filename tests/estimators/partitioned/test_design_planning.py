"""The routing-design planner: the answers it says a design needs for a target width give
that width when studies of that size are simulated with known truth, for the uniform
design (the paper's ML interval) and a targeted one (the design-weighted interval)."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.partitioned.accuracy import estimate
from estimators.partitioned.design_estimate import YES, design_estimate, design_steps
from estimators.partitioned.design_planning import design_plan, one_coin_truth
from estimators.partitioned.designs import targeted_probabilities

K = 6
ACCURACIES = [0.85, 0.7, 0.6]


def _study(rng, n):
    y = rng.integers(0, K, n)
    picks = np.stack([np.where(rng.random(n) < a, y, (y + rng.integers(1, K, n)) % K)
                      for a in ACCURACIES], axis=1)
    return picks


def test_the_planned_answers_give_the_target_width_in_simulation():
    rng = np.random.default_rng(5)
    picks = _study(rng, 3000)
    width = 0.08
    plan = design_plan(picks, ACCURACIES, K, width, epsilons=(0.2,), reps=60, seed=1)
    uniform, targeted = plan.options
    assert targeted.median < uniform.median  # the routed systems need fewer answers
    reps = 300
    # uniform design, the paper's ML on n answers: mean full width ≈ the target
    for s, a in enumerate(ACCURACIES):
        n = int(round(uniform.answers[s]))
        ordinary = rng.binomial(n, 1 / K, reps)
        s_o = rng.binomial(ordinary, a)
        q = (a + K - 2) / (K - 1)
        s_c = rng.binomial(n - ordinary, q)
        est = estimate(ordinary, s_o, n - ordinary, s_c, K, method="ml")
        assert np.mean(est.ci_high - est.ci_low) == pytest.approx(width, rel=0.1)
    # targeted design: simulate studies of the planned size on the same items
    for s in range(len(ACCURACIES)):
        n = int(round(targeted.answers[s]))
        rows = rng.integers(0, len(picks), size=(reps, n))
        sampled = picks[rows]
        truth = np.take_along_axis(one_coin_truth(rng, picks, np.array(ACCURACIES), K,
                                                  (reps,)), rows, axis=1)
        counts = np.zeros((reps, n, K))
        for j in range(sampled.shape[2]):
            r, i = np.nonzero(sampled[:, :, j] >= 0)
            np.add.at(counts, (r, i, sampled[r, i, j]), 1.0)
        pi = targeted_probabilities(counts, 0.2)
        asked = np.minimum((rng.random((reps, n, 1)) > np.cumsum(pi, axis=-1)).sum(-1), K - 1)
        answers = np.where(asked == truth, YES, 0)
        est = design_estimate(design_steps(asked[..., None], pi, answers[..., None], sampled))
        widths = np.asarray(est.ci_high)[:, s] - np.asarray(est.ci_low)[:, s]
        assert np.mean(widths) == pytest.approx(width, rel=0.15)


def test_the_planner_refuses_what_it_cannot_plan():
    with pytest.raises(ValueError, match="picks"):
        design_plan(np.zeros((0, 2), int), [0.8, 0.7], 4, 0.05)
    with pytest.raises(ValueError, match="width"):
        design_plan(np.zeros((10, 2), int), [0.8, 0.7], 4, 1.5)
