"""Simulated routing studies (estimators.partitioned.routing_simulation): the draws follow
the stated model."""

import numpy as np

from estimators.partitioned.design_estimate import NO, UNSURE, YES
from estimators.partitioned.routing_simulation import draw_predictions, simulate


def test_accuracies_and_shared_errors():
    rng = np.random.default_rng(1)
    y, pred = draw_predictions(rng, 1, 40_000, 5, [0.6, 0.6], agree=True, share=0.7)
    correct = pred == y[..., None]
    np.testing.assert_allclose(correct.mean(axis=(0, 1)), 0.6, atol=0.01)
    both_wrong = ~correct.any(axis=-1)
    same = (pred[..., 0] == pred[..., 1])[both_wrong].mean()
    # same wrong class: both copy the common one (0.49), or otherwise meet (0.51 / 4)
    assert abs(same - (0.49 + 0.51 / 4)) < 0.02
    y, pred = draw_predictions(rng, 1, 40_000, 5, [0.6, 0.6], agree=False)
    wrong = (pred != y[..., None]).all(axis=-1)
    assert abs((pred[..., 0] == pred[..., 1])[wrong].mean() - 0.25) < 0.02


def test_follow_ups_only_after_non_yes_and_truthful_answers():
    rng = np.random.default_rng(2)
    st = simulate(rng, 5, 300, 4, [0.8], design="targeted", depth=3, unsure=0.2)
    a, o, y = st.items["answers"], st.items["orders"], st.items["truth_class"]
    asked = a >= 0
    assert asked[..., 0].all()
    # a step is asked iff no earlier yes
    earlier_yes = np.cumsum(a == YES, axis=-1) - (a == YES) > 0
    np.testing.assert_array_equal(asked, ~earlier_yes)
    answered = (a == YES) | (a == NO)
    np.testing.assert_array_equal((a == YES)[answered], (o == y[..., None])[answered])
    assert abs((a == UNSURE)[asked].mean() - 0.2) < 0.02


def test_newcomer_is_not_routed():
    """The targeted π follows the routed systems only: a class that only the newcomer
    picked keeps the floor ε/K."""
    rng = np.random.default_rng(3)
    st = simulate(rng, 2, 500, 4, [0.9, 0.3], design="targeted", epsilon=0.2, routed=[0])
    pi, pred = st.items["pi"], st.items["predictions"]
    alone = pred[..., 1] != pred[..., 0]
    got = np.take_along_axis(pi, pred[..., 1:2], axis=-1)[..., 0][alone]
    np.testing.assert_allclose(got, 0.05)
