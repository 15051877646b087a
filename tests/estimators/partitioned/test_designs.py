"""Routing designs (estimators.partitioned.designs): successive sampling against the exact
enumerated probabilities, and the checks of π and ε."""

import itertools

import numpy as np
import pytest
from scipy import stats

from estimators.partitioned.designs import (
    EPSILON_MIN,
    check_epsilon,
    check_probabilities,
    conditional_probability,
    step_probabilities,
    successive_orders_draw,
    targeted_probabilities,
)

PI = np.array([0.5, 0.25, 0.15, 0.1])


def _enumerated(pi, depth):
    """{order: probability} for every class order of length ``depth``, by the definition:
    each next class drawn from π renormalised over the classes left."""
    out = {}
    for order in itertools.permutations(range(len(pi)), depth):
        prob, left = 1.0, 1.0
        for c in order:
            prob *= pi[c] / left
            left -= pi[c]
        out[order] = prob
    return out


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_exponential_race_gives_successive_sampling_frequencies(depth):
    exact = _enumerated(PI, depth)
    rng = np.random.default_rng(3)
    n = 100_000
    draws = successive_orders_draw(rng, np.broadcast_to(PI, (n, 4)), depth)
    keys = list(exact)
    index = {k: i for i, k in enumerate(keys)}
    codes = np.array([index[tuple(row)] for row in draws.tolist()])
    observed = np.bincount(codes, minlength=len(keys))
    expected = n * np.array([exact[k] for k in keys])
    chi2 = ((observed - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(chi2, len(keys) - 1) > 1e-3


def test_step_probabilities_equal_enumeration():
    """π_j(k_j) = P(order[:j+1]) / P(order[:j]), the enumerated conditional probability."""
    pi = np.array([0.05, 0.35, 0.4, 0.2])
    full = _enumerated(pi, 3)
    orders = np.array(list(full))
    got = step_probabilities(np.broadcast_to(pi, (len(orders), 4)), orders)
    for row, order in zip(got, orders.tolist(), strict=True):
        for j in range(3):
            marginal = _enumerated(pi, j + 1)[tuple(order[: j + 1])]
            before = _enumerated(pi, j)[tuple(order[:j])] if j else 1.0
            assert row[j] == pytest.approx(marginal / before, abs=1e-12)
            assert conditional_probability(pi, order[:j], order[j]) == pytest.approx(
                row[j], abs=1e-12)
    assert conditional_probability(pi, [1, 2], 1) == 0


def test_targeted_probabilities():
    pi = targeted_probabilities([[3, 1, 0, 0], [0, 0, 0, 0]], 0.2)
    np.testing.assert_allclose(pi[0], [0.05 + 0.6, 0.05 + 0.2, 0.05, 0.05])
    np.testing.assert_allclose(pi[1], 0.25)
    np.testing.assert_allclose(pi.sum(axis=1), 1)


@pytest.mark.parametrize("bad", [EPSILON_MIN / 2, 1.5, float("nan"), "x"])
def test_bad_epsilon_is_refused(bad):
    with pytest.raises(ValueError, match="epsilon"):
        check_epsilon(bad)
    with pytest.raises(ValueError, match="epsilon"):
        targeted_probabilities([[1, 0]], bad)


@pytest.mark.parametrize("bad", [[0.5, 0.5, 0.0], [0.6, 0.6, -0.2], [0.3, 0.3, 0.3],
                                 [np.nan, 0.5, 0.5], [1.0]])
def test_bad_probabilities_are_refused(bad):
    with pytest.raises(ValueError, match="probabilities"):
        check_probabilities(bad)
    if len(bad) > 1:
        with pytest.raises(ValueError, match="probabilities"):
            successive_orders_draw(np.random.default_rng(0), [bad], 1)
