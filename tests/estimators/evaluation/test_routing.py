"""Candidates under a targeted routing design (docs/evaluation-service.md, "Routing
designs"): the picks are what the docstring says, the design estimate is unbiased for every
candidate, and its error shrinks for a candidate agreeing with the routed systems and grows
for one disagreeing with them, against the uniform design at the same answer count."""

import numpy as np
import pytest

from estimators.evaluation.routing import CANDIDATES, candidate_errors, candidates_draw
from estimators.partitioned.routing_simulation import draw_predictions

K, EPS, N, REPS = 5, 0.2, 500, 200


def test_the_candidates_picks():
    rng = np.random.default_rng(1)
    y, routed = draw_predictions(rng, 50, 400, K, (0.85, 0.7))
    picks = candidates_draw(rng, y, routed, K, 0.7)
    assert (picks[..., 0] == routed[..., 1]).all()
    picked = (routed[..., None] == np.arange(K)).any(axis=-2)
    free_left = (~picked & (np.arange(K) != y[..., None])).any(axis=-1)
    for j in (2, 3):  # disagreeing, contrarian: a wrong pick is never a routed pick
        wrong = (picks[..., j] != y) & free_left
        chosen = np.take_along_axis(picked, picks[..., j:j + 1], axis=-1)[..., 0]
        assert not chosen[wrong].any()
    # the contrarian is right only where the routed systems missed the truth
    y_picked = np.take_along_axis(picked, y[..., None], axis=-1)[..., 0]
    assert not ((picks[..., 3] == y) & y_picked).any()
    # independent and disagreeing are right with probability 0.7
    for j in (1, 2):
        share = (picks[..., j] == y).mean()
        assert abs(share - 0.7) < 4 * np.sqrt(0.21 / y.size)


@pytest.fixture(scope="module")
def found():
    return candidate_errors(np.random.default_rng(2), reps=REPS, n_items=N, k=K, epsilon=EPS)


def test_the_estimate_is_unbiased_for_every_candidate_and_its_se_is_right(found):
    for design in ("uniform", "targeted"):
        f = found[design]
        assert (np.abs(f["bias"]) < 4 * f["sd"] / np.sqrt(REPS)).all(), (design, f)
        # the released SE also counts the items' own variation √(a(1 − a)/N); the
        # contrarian's, under the targeted design, rests on rare heavy weights and is left
        # out (docs/evaluation-service.md: it understates that error)
        expected = np.sqrt(f["sd"] ** 2 + f["accuracy"] * (1 - f["accuracy"]) / N)
        checked = slice(None) if design == "uniform" else slice(0, 3)
        assert np.allclose(f["se"][checked], expected[checked], rtol=0.2), (design, f["se"],
                                                                           expected)


def test_how_often_each_pick_is_asked(found):
    u, t = found["uniform"], found["targeted"]
    tol = 4 * np.sqrt(0.2 * 0.8 / (N * REPS))
    assert np.allclose(u["asked"], 1 / K, atol=tol)
    contrarian = CANDIDATES.index("contrarian")
    # a targeted item asks an unpicked class only through its uniform coin: ε/K
    assert abs(t["asked"][contrarian] - EPS / K) < tol
    assert t["asked"][CANDIDATES.index("routed")] > 0.6


def test_agreeing_candidates_profit_and_disagreeing_ones_do_not(found):
    u, t = found["uniform"], found["targeted"]
    routed, contrarian = CANDIDATES.index("routed"), CANDIDATES.index("contrarian")
    assert t["sd"][routed] < 0.7 * u["sd"][routed]
    assert t["sd"][contrarian] > 1.4 * u["sd"][contrarian]
