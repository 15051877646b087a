"""The CR2 intervals of ``estimators.numerics.clustered``: the closed forms of the CR2
variance and Bell–McCaffrey's degrees of freedom against the matrices they come from, the
equal-size case (CR2 is CR1, the degrees of freedom G − 1), and the Welch–Satterthwaite
degrees of freedom of a difference of two separate sets of clusters. (The CR1 functions are
checked by tests/estimators/critique and tests/estimators/assisted/test_reliance.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from estimators.numerics.clustered import (
    clustered_difference,
    clustered_mean,
    clustered_proportion,
    cr2_bounded_mean,
    cr2_difference,
    cr2_log_mean,
    cr2_mean,
    cr2_proportion,
)


def _bell_mccaffrey(n: np.ndarray) -> float:
    """tr(B)² / tr(B²) of the G × G matrix B_qr = a_q a_r (n_q [q = r] − n_q n_r / N)."""
    n = n[n > 0].astype(float)
    big_n = n.sum()
    a = 1 / np.sqrt(1 - n / big_n)
    b = np.outer(a, a) * (np.diag(n) - np.outer(n, n) / big_n)
    return float(np.trace(b) ** 2 / np.trace(b @ b))


def test_cr2_variance_and_degrees_of_freedom_are_their_matrix_forms():
    rng = np.random.default_rng(0)
    for _ in range(20):
        g = int(rng.integers(2, 15))
        n = rng.integers(0, 40, g).astype(float)
        n[:2] += 1  # at least two raters with ratings
        s = rng.binomial(n.astype(int), 0.7).astype(float)
        got = cr2_proportion(n, s)
        p = s.sum() / n.sum()
        want_var = (((s - p * n) ** 2 / (1 - n / n.sum())).sum()) / n.sum() ** 2
        assert float(got.variance) == pytest.approx(want_var, rel=1e-12)
        assert float(got.df) == pytest.approx(_bell_mccaffrey(n), rel=1e-10)
        assert float(got.df) <= (n > 0).sum() - 1 + 1e-9


def test_equal_sizes_make_cr2_the_cr1_interval():
    n = np.full(6, 12.0)
    s = np.array([3.0, 7, 9, 10, 11, 12])
    x = np.array([30.0, 70, 95, 110, 150, 300])
    for cr1, cr2 in ((clustered_proportion(n, s), cr2_proportion(n, s)),
                     (clustered_mean(n, x), cr2_mean(n, x))):
        assert float(cr2.df) == pytest.approx(5)
        assert (float(cr2.lower), float(cr2.upper)) == pytest.approx(
            (float(cr1.lower), float(cr1.upper)), abs=1e-12)


def test_separate_clusters_take_the_welch_degrees_of_freedom():
    # given two arms of different raters (rows of one arm are zeros on the other side)
    rng = np.random.default_rng(1)
    n1 = np.r_[rng.integers(10, 40, 5), np.zeros(6)].astype(float)
    n2 = np.r_[np.zeros(5), rng.integers(10, 40, 6)].astype(float)
    s1 = rng.binomial(n1.astype(int), 0.8).astype(float)
    s2 = rng.binomial(n2.astype(int), 0.6).astype(float)
    a, b = cr2_proportion(n1, s1), cr2_proportion(n2, s2)
    welch = (a.variance + b.variance) ** 2 / (a.variance ** 2 / a.df + b.variance ** 2 / b.df)
    d = cr2_difference(n1, s1, n2, s2)
    # then the MOVER limits come from Wilson limits on the Welch df (quantile below each
    # arm's own), so the difference's interval is narrower than the CR1 one with G − 1
    assert float(welch) > max(float(a.df), float(b.df))
    assert stats.t.ppf(0.975, welch) < stats.t.ppf(0.975, min(a.df, b.df))

    def wilson(n, s, df):
        p = s.sum() / n.sum()
        v = ((s - p * n) ** 2 / np.where(n > 0, 1 - n / n.sum(), 1)).sum() / n.sum() ** 2
        ne = p * (1 - p) / v
        c = stats.t.ppf(0.975, df)
        centre = (p + c * c / (2 * ne)) / (1 + c * c / ne)
        half = c / (1 + c * c / ne) * np.sqrt(p * (1 - p) / ne + c * c / (4 * ne ** 2))
        return p, centre - half, centre + half

    p1, l1, u1 = wilson(n1, s1, welch)
    p2, l2, u2 = wilson(n2, s2, welch)
    assert (float(d.lower), float(d.upper)) == pytest.approx(
        (p1 - p2 - np.hypot(p1 - l1, u2 - p2), p1 - p2 + np.hypot(u1 - p1, p2 - l2)),
        abs=1e-12)
    old = clustered_difference(n1, s1, n2, s2)
    assert float(d.upper - d.lower) < float(old.upper - old.lower)


def test_log_mean_is_the_cr2_t_interval_on_the_log_scale():
    n = np.array([10.0, 25, 40, 15, 30])
    x = np.array([400.0, 1500, 1200, 2600, 900])  # seconds: one slow rater
    m, got = cr2_mean(n, x), cr2_log_mean(n, x)
    spread = stats.t.ppf(0.975, m.df) * np.sqrt(m.variance) / m.value
    assert (float(got.lower), float(got.upper)) == pytest.approx(
        (float(m.value * np.exp(-spread)), float(m.value * np.exp(spread))), rel=1e-12)
    # asymmetric: further above the mean than below
    assert got.upper - got.value > got.value - got.lower


def test_bounded_mean_is_the_logit_interval_and_keeps_the_edge_rule():
    n = np.array([12.0, 20, 8, 30, 15])
    x = np.array([20.0, 30, 14, 50, 22])  # sums of 0/1/2 answers
    got = cr2_bounded_mean(n, x, top=2.0)
    half = cr2_mean(n, x / 2)
    m = float(half.value)
    spread = stats.t.ppf(0.975, half.df) * np.sqrt(half.variance) / (m * (1 - m))
    centre = np.log(m / (1 - m))
    assert float(got.value) == pytest.approx(x.sum() / n.sum())
    assert (float(got.lower), float(got.upper)) == pytest.approx(
        (2 / (1 + np.exp(-(centre - spread))), 2 / (1 + np.exp(-(centre + spread)))),
        rel=1e-12)
    # every answer "extremely helpful": Wilson's interval at n* = G on the share, times 2
    every = cr2_bounded_mean(n, 2 * n, top=2.0)
    edge = cr2_proportion(n, n)
    assert float(every.upper) == 2.0
    assert float(every.lower) == pytest.approx(2 * float(edge.lower), rel=1e-12)
