"""Which cells get the exact interval: the information share against the Fisher
information computed term by term, and the likelihood-ratio interval's coverage, in
simulation, where a few-event source sits beside a much richer one."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.intervals import (
    EXACT_SHARE,
    confidence_interval,
    few_events,
    likelihood_ratio_interval,
    needs_exact,
    ordinary_information_share,
)
from estimators.partitioned import ml_accuracy
from estimators.simulation import simulate_counts


@pytest.mark.parametrize(("n_o", "n_c", "k", "a"), [(40, 360, 10, 0.97), (200, 20000, 3, 0.05),
                                                    (2000, 360, 10, 0.6), (7, 3, 4, 0.5)])
def test_information_share_equals_the_fisher_information_ratio(n_o, n_c, k, a):
    q = (a + k - 2) / (k - 1)
    info_o = n_o / (a * (1 - a))
    info_c = n_c / ((k - 1) ** 2 * q * (1 - q))
    assert ordinary_information_share(n_o, n_c, k, a) == pytest.approx(info_o / (info_o + info_c))


def test_information_share_at_the_edges():
    # without complementary labels everything is ordinary, and the other way round; at
    # A ∈ {0, 1} both informations diverge but their ratio does not
    assert ordinary_information_share(40, 0, 5, 1.0) == 1.0
    assert ordinary_information_share(0, 40, 5, 0.3) == 0.0
    assert ordinary_information_share(0, 0, 5, 0.3) == 1.0
    assert ordinary_information_share(40, 360, 10, 1.0) == pytest.approx(0.5)
    assert ordinary_information_share(40, 360, 10, 0.0) == 1.0


def test_exact_where_a_few_event_source_matters():
    # the hard cell's perfect score: ordinary and complementary share the information
    assert needs_exact(40, 40, 360, 360, 10, 1.0)
    # 10 correct of 200 ordinary labels beside 20 000 complementary ones (17 % of the
    # information): the likelihood is nearly quadratic, the LR interval is used
    a_hat = ml_accuracy(200.0, 10.0, 20000.0, 10500.0, 3)
    share = ordinary_information_share(200, 20000, 3, a_hat)
    assert share < EXACT_SHARE and few_events(200, 10, 20000, 10500)[0]
    assert not needs_exact(200, 10, 20000, 10500, 3, a_hat)
    lo, hi = confidence_interval(200, 10, 20000, 10500, 3, 0.95, mle=a_hat, u=0.5)
    lr = likelihood_ratio_interval(200, 10, 20000, 10500, 3, 0.95, mle=a_hat)
    assert (lo, hi) == (lr[0], lr[1])
    # the same 10 correct answers alone: exact
    assert needs_exact(200, 10, 0, 0, 3, 0.05)


@pytest.mark.parametrize(("k", "a", "n_o", "n_c"), [(3, 0.05, 200, 20000), (5, 0.6, 40, 2000),
                                                    (3, 0.3, 20, 360), (10, 0.6, 2000, 360)])
def test_default_interval_covers_where_the_rule_picks_likelihood_ratio(k, a, n_o, n_c):
    """Cells where a few-event source carries under a fifth of the information (the third
    near that threshold, so its replicates mix both intervals): the default interval
    covers 95 % (± 1 point; 8 000 replicates, Monte-Carlo SE 0.24)."""
    s_o, s_c = simulate_counts(np.random.default_rng(3), 8000, a, k, n_o, n_c)
    a_hat = ml_accuracy(float(n_o), s_o, float(n_c), s_c, k)
    few_o, few_c = few_events(n_o, s_o, n_c, s_c)
    assert (few_o | few_c).mean() > 0.5  # the old per-kind rule sent these to exact
    assert needs_exact(n_o, s_o, n_c, s_c, k, a_hat).mean() < 0.5  # most now use LR
    lo, hi = confidence_interval(n_o, s_o, n_c, s_c, k, 0.95, mle=a_hat,
                                 u=np.random.default_rng(4).random(8000))
    assert 0.94 <= np.mean((lo <= a) & (a <= hi)) <= 0.96
