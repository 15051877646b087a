"""The yes-share check: its false-alarm rate under uniform routing (simulated studies) and
its power against abstention that depends on the truth."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from estimators.partitioned.checks import FAMILY_ALPHA, MIN_ANSWERED, yes_share_test


def _first_queries(rng, n_items: int, k: int, unsure_if_yes: float = 0.0,
                   prevalence=None):
    """First queries of ``n_items`` items: truth drawn with ``prevalence`` (uniform by
    default), class asked uniform and independent of it; a perfect specialist says "yes"
    iff the class is the truth, and "not sure" with probability ``unsure_if_yes`` when it
    is. Returns per class (yes, answered)."""
    truth = rng.choice(k, n_items, p=prevalence)
    asked = rng.integers(0, k, n_items)
    yes = asked == truth
    answered = ~(yes & (rng.random(n_items) < unsure_if_yes))
    return (np.bincount(asked[yes & answered], minlength=k),
            np.bincount(asked[answered], minlength=k))


def test_uniform_routing_rarely_flags():
    """2 000 simulated studies of 400 items, K = 5: the share of studies flagged stays
    near the nominal family-wise level (1 %; Bonferroni is conservative, so at most that
    plus Monte-Carlo noise), and the overall test's p-values are uniform-ish."""
    rng = np.random.default_rng(11)
    flags, p_values = 0, []
    for _ in range(2000):
        yes, answered = _first_queries(rng, 400, 5)
        result = yes_share_test(yes, answered, 5)
        flags += result.overall.flag or any(c.flag for c in result.classes)
        p_values.append(result.overall.p_value)
    assert flags / 2000 <= FAMILY_ALPHA + 3 * np.sqrt(FAMILY_ALPHA / 2000)
    assert np.mean(np.array(p_values) < 0.1) == pytest.approx(0.1, abs=0.03)


def test_abstention_that_depends_on_the_truth_is_flagged():
    # specialists say "not sure" to a third of the items that are of their class
    rng = np.random.default_rng(3)
    yes, answered = _first_queries(rng, 2000, 4, unsure_if_yes=1 / 3)
    result = yes_share_test(yes, answered, 4)
    assert result.overall.flag and result.overall.share < 0.25
    assert result.overall.p_value == pytest.approx(
        stats.binomtest(int(yes.sum()), int(answered.sum()), 0.25).pvalue)
    assert result.level == FAMILY_ALPHA / 5


def test_the_same_share_on_few_answers_raises_no_flag():
    # 0 "yes" of 20 answered (expected 5) rejects at p ≈ 0.003, but 20 < MIN_ANSWERED
    assert MIN_ANSWERED > 20
    result = yes_share_test([0, 0, 0, 0], [5, 5, 5, 5], 4)
    assert result.overall.p_value < 0.01 and not result.overall.flag
    assert result.overall.share == 0.0
    empty = yes_share_test([0, 0, 0], [0, 0, 0], 3)
    assert (empty.overall.share, empty.overall.p_value, empty.overall.flag) == (None, None,
                                                                                False)


def test_named_classes_test_only_the_overall_share():
    # classes with unequal prevalence: per-class shares differ from 1/K legitimately, the
    # overall one does not (Σ_k (1/K) π_k = 1/K)
    rng = np.random.default_rng(5)
    yes, answered = _first_queries(rng, 4000, 3, prevalence=[0.6, 0.3, 0.1])
    shuffled = yes_share_test(yes, answered, 3, uniform_classes=True)
    named = yes_share_test(yes, answered, 3, uniform_classes=False)
    assert shuffled.classes[0].flag  # tested as if positions were uniform: wrongly flagged
    assert not any(c.flag for c in named.classes)
    assert all(c.p_value is None for c in named.classes)
    assert not named.overall.flag and named.level == FAMILY_ALPHA


def test_impossible_counts_are_refused():
    with pytest.raises(ValueError, match="one count per class"):
        yes_share_test([1, 2], [3, 4], 3)
    with pytest.raises(ValueError, match="between 0 and answered"):
        yes_share_test([5, 0, 0], [3, 4, 4], 3)
