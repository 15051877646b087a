"""Question-clustered intervals of the critique tables: the Wilson endpoints solve their
score equation, the clustering counts a question once when its outputs agree, and the
intervals cover simulated truths (vectorised over thousands of replicate studies)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from estimators.critique import clustered_difference, clustered_mean, clustered_proportion

Z_LEVEL = 0.95


def _t(g):
    return stats.t.ppf(0.5 + Z_LEVEL / 2, g - 1)


def _score_roots(p_hat, n, c):
    """Wilson's interval as the two roots of (p̂ − x)² = c² x(1 − x)/n (brentq)."""
    def f(x):
        return (p_hat - x) ** 2 - c ** 2 * x * (1 - x) / n

    return optimize.brentq(f, 0, p_hat), optimize.brentq(f, p_hat, 1)


def test_one_output_per_question_is_wilson_at_n_times_g_minus_one_over_g():
    # independent outputs: CR1 variance = G/(G−1) · p̂(1−p̂)/N, so n* = N (G−1)/G
    s = np.r_[np.ones(23), np.zeros(17)]
    n = np.ones(40)
    ci = clustered_proportion(n, s)
    low, high = _score_roots(23 / 40, 40 * 39 / 40, _t(40))
    assert (ci.lower, ci.upper) == pytest.approx((low, high), abs=1e-9)


def test_questions_whose_outputs_agree_count_once():
    # five identical outputs per question: the information is that of G − 1 questions
    per_question = np.r_[np.ones(14), np.zeros(6)]
    ci = clustered_proportion(np.full(20, 5.0), 5 * per_question)
    low, high = _score_roots(0.7, 19, _t(20))
    assert (ci.lower, ci.upper) == pytest.approx((low, high), abs=1e-9)
    assert ci.n == 100 and ci.n_questions == 20


def test_edge_rules():
    # all right: n* = G, Wilson's lower limit G/(G + c²)
    ci = clustered_proportion(np.full(30, 3.0), np.full(30, 3.0))
    c = _t(30)
    assert ci.value == 1 and ci.upper == 1
    assert ci.lower == pytest.approx(30 / (30 + c ** 2))
    none_right = clustered_proportion(np.full(30, 3.0), np.zeros(30))
    assert none_right.lower == 0 and none_right.upper == pytest.approx(c ** 2 / (30 + c ** 2))
    one = clustered_proportion(np.array([4.0, 0.0]), np.array([3.0, 0.0]))
    assert (one.value, one.lower, one.upper, one.n_questions) == (0.75, 0.0, 1.0, 1)
    empty = clustered_proportion(np.zeros(3), np.zeros(3))
    assert np.isnan([empty.value, empty.lower, empty.upper]).all()
    # every question scoring exactly the same share: no zero-width interval
    same = clustered_proportion(np.full(10, 2.0), np.ones(10))
    assert same.upper - same.lower > 0.2


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="shape"):
        clustered_proportion(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match=r"\[0, n\]"):
        clustered_proportion(np.ones(3), np.full(3, 2.0))
    with pytest.raises(ValueError, match="interval_level"):
        clustered_proportion(np.ones(3), np.ones(3), interval_level=1.0)


def _clustered_study(rng, g, m, p, spread, reps):
    """reps replicate studies (columns) of g questions with m outputs each; question
    accuracies Beta with mean p and SD spread."""
    k = p * (1 - p) / spread ** 2 - 1
    p_q = rng.beta(p * k, (1 - p) * k, size=(g, reps))
    return np.full((g, reps), float(m)), rng.binomial(m, p_q).astype(float), p_q


@pytest.mark.parametrize(("g", "m", "p", "band"), [
    (16, 1, 0.6, (0.93, 0.985)),
    (16, 5, 0.85, (0.93, 0.985)),
    (64, 1, 0.9, (0.935, 0.97)),
    (64, 5, 0.6, (0.935, 0.97)),
    (64, 3, 0.9, (0.935, 0.97)),
    (300, 5, 0.75, (0.935, 0.965)),
])
def test_accuracy_interval_covers_about_nominally(g, m, p, band):
    rng = np.random.default_rng(g * 100 + m)
    n, s, _ = _clustered_study(rng, g, m, p, 0.15, 4000)
    ci = clustered_proportion(n, s)
    coverage = np.mean((ci.lower <= p) & (p <= ci.upper))
    assert band[0] <= coverage <= band[1], coverage


@pytest.mark.parametrize(("g", "p1", "p2", "band"), [
    (16, 0.6, 0.5, (0.93, 0.995)),
    (64, 0.9, 0.8, (0.935, 0.975)),
    (64, 0.97, 0.95, (0.935, 0.99)),   # near 1: where a Wald interval fails
    (300, 0.99, 0.99, (0.935, 0.985)),
])
def test_paired_difference_covers_about_nominally(g, p1, p2, band):
    rng = np.random.default_rng(int(g * p1 * 1000))
    reps = 4000 if g < 300 else 1500
    # shared question difficulty: side 2's accuracy is side 1's shifted by p2 − p1
    k = p1 * (1 - p1) / 0.05 ** 2 - 1
    q1 = rng.beta(p1 * k, (1 - p1) * k, size=(g, reps))
    q2 = q1 + (p2 - p1)
    assert (q2 >= 0).all() and (q2 <= 1).all()

    def side(q, m):
        return np.full((g, reps), float(m)), rng.binomial(m, q).astype(float)

    n1, s1 = side(q1, 3)
    n2, s2 = side(q2, 5)
    d = clustered_difference(n1, s1, n2, s2)
    truth = p1 - p2
    coverage = np.mean((d.lower <= truth + 1e-12) & (truth - 1e-12 <= d.upper))
    assert band[0] <= coverage <= band[1], coverage
    assert np.allclose(d.value, s1.sum(0) / n1.sum(0) - s2.sum(0) / n2.sum(0))


def test_mean_interval_covers_a_clustered_mean():
    rng = np.random.default_rng(12)
    g, m, reps, mean = 64, 4, 4000, 15.0
    question = rng.normal(0, 0.3, size=(g, 1, reps))
    values = mean * np.exp(question + rng.normal(0, 0.4, size=(g, m, reps)) - (0.09 + 0.16) / 2)
    ci = clustered_mean(np.full((g, reps), float(m)), values.sum(axis=1))
    coverage = np.mean((ci.lower <= mean) & (mean <= ci.upper))
    assert 0.935 <= coverage <= 0.965, coverage
    single = clustered_mean(np.array([2.0]), np.array([7.0]))
    assert single.value == 3.5 and np.isnan(single.lower)
