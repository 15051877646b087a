"""The defended figures of docs/evaluation-service.md: adaptive attackers with and without
the Ladder and the budget, on the engine's ML estimate. The boosting figures are means over
SEEDS simulated studies (the first seeds of the docs' 50: ``python -m
estimators.evaluation.protection``), compared with their standard error sd/√SEEDS."""

from functools import cache

import numpy as np

from estimators.evaluation.attacks import (
    SimulatedService,
    boosting_attack,
    probing_attack,
    service_score,
    simulated_labels,
)
from estimators.evaluation.protection import boosting_study

SEEDS = 20
# the docs' boosting table, Ladder η = 0.02, 1 000 calls, K = 10: mean of 50 seeds (± 0.003)
DOCUMENTED_LADDER_K10 = 0.048
OLD_CLAIM = 0.022  # what the docs said before 50 seeds (5 seeds): refuted below


@cache
def study(k, calls, margin=None, budget=None):
    return boosting_study(k, calls, SEEDS, margin, budget)


def test_boosting_overfits_raw_scores_and_the_ladder_far_less():
    for k in (4, 10):
        raw, ladder = study(k, 1000), study(k, 1000, 0.02)
        assert raw.mean - 3 * raw.se > 0.12  # > 12 points in 1000 calls without defences
        assert ladder.mean + 3 * ladder.se < raw.mean / 3
        budget = study(k, 1000, None, 20)  # one day's default budget, raw scores
        assert budget.mean + 3 * budget.se < raw.mean / 2


def test_the_ladder_leaves_the_selection_excess_of_its_few_moves_at_k10():
    ladder = study(10, 1000, 0.02)
    # the documented figure is inside the 20-seed mean's ±3 SE, the old one is not
    assert abs(ladder.mean - DOCUMENTED_LADDER_K10) < 3 * ladder.se
    assert ladder.mean - 3 * ladder.se > OLD_CLAIM
    # why: the release moves a few times only, the vote is made of the submissions that
    # set those records, and they are the luckiest of the calls — never beyond the luckiest
    assert np.mean(ladder.moves) < 6
    assert 0 < np.mean(ladder.kept_excess) < np.mean(ladder.best_excess)
    assert ladder.mean < np.mean(ladder.best_excess)


def test_a_smaller_margin_releases_more_moves_and_the_budget_bounds_the_overfit():
    moves = [np.mean(study(10, 1001, margin, 1000).moves) for margin in (0.01, 0.02, 0.05)]
    assert moves[0] > moves[1] > moves[2] >= 1
    small, large = study(10, 21, 0.02, 20), study(10, 1001, 0.02, 1000)
    assert small.mean + 2 * np.hypot(small.se, large.se) < large.mean
    assert np.mean(small.best_excess) < np.mean(large.best_excess)


def test_the_vectorised_attack_is_the_service_answering_call_by_call():
    """Brute force: the same random submissions sent one by one to SimulatedService (the
    Ladder's rule call by call, the budget refusing past it) and voted the same way."""
    for k, margin, budget in ((4, 0.02, None), (10, 0.01, 25), (10, None, None)):
        labels = simulated_labels(300, k, np.random.default_rng(7))
        fast = boosting_attack(labels, 60, np.random.default_rng(8), margin, budget)
        rng = np.random.default_rng(8)
        answered = 59 if budget is None else min(59, budget)
        guesses = rng.integers(k, size=(answered, 300))
        service = SimulatedService(labels, margin, budget)
        votes, last, kept, moves = np.zeros((300, k)), None, 0, 0
        for guess in guesses:
            released = service.submit(np.arange(300), guess)
            if released != last:
                moves += 1
                if released > 1 / k:
                    votes[np.arange(300), guess] += 1
                    kept += 1
            last = released
        final = np.argmax(votes + rng.random(votes.shape) * 1e-3, axis=1)
        assert (fast.kept, fast.moves) == (kept, moves)
        assert fast.service_score == service_score(labels, np.arange(300), final)
        assert fast.true_accuracy == np.mean(final == labels.y)
        assert fast.calls == answered + (budget is None)


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
