"""The defended figures of docs/evaluation-service.md: adaptive attackers with and without
the Ladder and the budget, on the engine's ML estimate."""

import numpy as np

from estimators.evaluation.attacks import boosting_attack, probing_attack, simulated_labels

SEEDS = range(5)


def mean_overfit(k, calls, margin=None, budget=None):
    values = []
    for seed in SEEDS:
        labels = simulated_labels(2000, k, np.random.default_rng(seed))
        values.append(boosting_attack(labels, calls, np.random.default_rng(100 + seed),
                                      margin=margin, budget=budget).overfit)
    return float(np.mean(values))


def test_boosting_overfits_raw_scores_and_not_the_ladder():
    raw = mean_overfit(4, 1000)
    ladder = mean_overfit(4, 1000, margin=0.02)
    assert raw > 0.12  # the raw service is overfitted by > 12 points in 1000 calls
    assert ladder < 0.05 and ladder < raw / 3
    budget = mean_overfit(4, 1000, budget=20)  # one day's default budget, raw scores
    assert budget < raw / 2


def test_probing_recovers_every_label_from_raw_scores_and_chance_under_the_ladder():
    k, targets = 4, 200
    chance = (k - 1) / k**2
    labels = simulated_labels(400, k, np.random.default_rng(0))
    raw = probing_attack(labels, 100, targets, np.random.default_rng(1))
    assert raw.recovered_share == 1.0 and raw.calls == 1 + k * targets
    ladder = probing_attack(labels, 100, targets, np.random.default_rng(1), margin=0.02)
    assert ladder.recovered_share < chance + 0.08
    budget = probing_attack(labels, 100, targets, np.random.default_rng(1), budget=20)
    assert budget.calls == 20 and budget.recovered <= (20 - 1) // k
