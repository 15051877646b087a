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


# --- what the check can detect (issue 18: say what size of departure it sees) -------------

@pytest.mark.parametrize(("n", "expected", "level"), [(60, 0.25, 0.002), (200, 0.1, 0.01 / 11),
                                                      (151, 0.5, 0.01), (7, 1 / 3, 0.0025)])
def test_the_rejection_region_is_scipys_binomtest_decision_for_every_outcome(n, expected,
                                                                             level):
    from scipy.stats import binomtest

    from estimators.partitioned.checks import rejection_region

    region = rejection_region(n, expected, level)
    brute = [binomtest(x, n, expected).pvalue < level for x in range(n + 1)]
    assert region.tolist() == brute


def test_the_window_of_a_large_study_changes_no_decision():
    """Outcomes beyond 12 SD are rejected without being summed: the same region as the
    sum over every outcome (n = 20 000)."""
    from scipy import stats

    from estimators.partitioned.checks import rejection_region

    n, expected, level = 20_000, 0.25, 0.002
    pmf = stats.binom.pmf(np.arange(n + 1), n, expected)
    order = np.sort(pmf)
    full = np.cumsum(order)[np.searchsorted(order, pmf * (1 + 1e-7), side="right") - 1]
    assert rejection_region(n, expected, level).tolist() == (full < level).tolist()


@pytest.mark.parametrize(("n", "k"), [(60, 4), (300, 10), (1000, 4), (45, 3)])
def test_the_detectable_shares_are_detected_with_the_stated_power_by_brute_force(n, k):
    """At the returned shares the exact test rejects with probability 0.8: summed over
    every outcome that scipy's binomtest rejects; 1 % closer to 1/K it rejects less often."""
    from scipy.stats import binom, binomtest

    from estimators.partitioned.checks import POWER, detectable_shares

    expected, level = 1 / k, 0.01 / (k + 1)
    rejected = [x for x in range(n + 1) if binomtest(x, n, expected).pvalue < level]
    low, high = detectable_shares(n, expected, level)

    def power(share):
        return sum(binom.pmf(x, n, share) for x in rejected)

    for share in (low, high):
        if share is not None:
            assert power(share) == pytest.approx(POWER, abs=1e-6)
    assert high is not None and power(expected + 0.99 * (high - expected)) < POWER
    if low is not None:
        assert power(expected - 0.99 * (expected - low)) < POWER


def test_a_simulated_departure_at_the_detectable_share_is_flagged_four_times_in_five():
    """Known truth: studies of 1 000 answered first queries whose yes share is the stated
    detectable low end are flagged by yes_share_test in 80 % of them (± 3 SE)."""
    from estimators.partitioned.checks import POWER, detectable_shares, yes_share_test

    k, n, reps = 4, 1000, 4000
    level = 0.01 / (k + 1)
    low, _ = detectable_shares(n, 1 / k, level)
    rng = np.random.default_rng(18)
    flagged = 0
    for _ in range(reps):
        yes = rng.binomial(n, low)
        per_class = np.array([yes, 0, 0, 0]), np.array([n, 0, 0, 0])
        flagged += yes_share_test(*per_class, k, uniform_classes=True).overall.flag
    se = np.sqrt(POWER * (1 - POWER) / reps)
    assert abs(flagged / reps - POWER) < 3 * se
