"""Reliability bins and ECE against bins computed item by item, the Wilson interval against
scipy's, and simulated AIs whose calibration is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from estimators.assisted.calibration import (
    expected_calibration_error,
    reliability_bins,
    reliability_stack,
    wilson_interval,
)
from estimators.numerics.proportion import blaker


def _brute_bins(c, x, edges):
    """Item by item: bin j holds edges[j] < c ≤ edges[j+1] (the first bin also c = edges[0])."""
    out = []
    for j in range(len(edges) - 1):
        members = [i for i in range(len(c))
                   if (c[i] > edges[j] or (j == 0 and c[i] >= edges[0]))
                   and c[i] <= edges[j + 1] and not math.isnan(x[i])]
        if members:
            out.append((len(members), sum(c[i] for i in members) / len(members),
                        sum(x[i] for i in members) / len(members)))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.1, 0.35, 0.5, 0.55, 0.6, 0.7, 0.95, 1.0]),
                          st.sampled_from([0.0, 1.0, 0.5, math.nan])), min_size=1, max_size=50),
       st.integers(1, 12))
def test_uniform_bins_equal_brute_force(rows, n_bins):
    c = [r[0] for r in rows]
    x = [r[1] for r in rows]
    if all(math.isnan(v) for v in x):
        with pytest.raises(ValueError, match="no item has a label"):
            reliability_bins(c, x, n_bins=n_bins)
        return
    res = reliability_bins(c, x, n_bins=n_bins)
    # the same edges as the module (linspace), item by item
    brute = _brute_bins(c, x, list(np.linspace(0, 1, n_bins + 1)))
    assert res.n.tolist() == [b[0] for b in brute]
    np.testing.assert_allclose(res.mean_confidence, [b[1] for b in brute])
    np.testing.assert_allclose(res.accuracy, [b[2] for b in brute])
    total = sum(b[0] for b in brute)
    assert res.ece == pytest.approx(sum(b[0] * abs(b[2] - b[1]) for b in brute) / total)
    assert res.mce == pytest.approx(max(abs(b[2] - b[1]) for b in brute))


def test_distinct_and_quantile_bins():
    c = np.array([0.5, 0.5, 0.6, 0.7, 0.7, 0.7, 0.9, 1.0])
    x = np.array([0, 1, 1, 1, 0, 1, 1, 1.0])
    d = reliability_bins(c, x, strategy="distinct")
    assert d.mean_confidence.tolist() == pytest.approx([0.5, 0.6, 0.7, 0.9, 1.0])
    assert d.n.tolist() == [2, 1, 3, 1, 1]
    assert d.accuracy.tolist() == pytest.approx([0.5, 1, 2 / 3, 1, 1])
    q = reliability_bins(np.linspace(0.01, 1, 100), np.ones(100), n_bins=4, strategy="quantile")
    assert q.n.tolist() == [25, 25, 25, 25]
    with pytest.raises(ValueError, match="strategy"):
        reliability_bins(c, x, strategy="equal")


def test_wilson_matches_scipy():
    for k, n in [(0, 10), (3, 10), (10, 10), (37, 120), (1, 1)]:
        lo, hi = wilson_interval(np.array([k]), np.array([n]), 0.95)
        ci = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
        assert (lo[0], hi[0]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    # exactly 0 and 1 at the ends (a planted accuracy of 1 must not fall outside by rounding)
    lo, hi = wilson_interval(np.array([0, 33]), np.array([7, 33]), 0.99)
    assert lo[0] == 0.0 and hi[1] == 1.0


def test_calibrated_ai_has_small_ece_and_covered_bins():
    # given simulated AIs whose accuracy at confidence c is exactly c
    hits, bins, eces = 0, 0, []
    rng = np.random.default_rng(3)
    for _ in range(100):
        c = rng.integers(10, 21, 2000) / 20
        x = (rng.random(c.size) < c).astype(float)
        res = reliability_bins(c, x, strategy="distinct")
        hits += ((res.accuracy_lower <= res.mean_confidence)
                 & (res.mean_confidence <= res.accuracy_upper)).sum()
        bins += res.n.size
        eces.append(res.ece)
    # then the Wilson intervals cover the true accuracy about 95 % of the time, and the ECE
    # is only the sampling noise: E|acc_b − c| ≈ √(2/π) sd ≈ 0.02 in bins of ~180 items
    assert 0.92 <= hits / bins <= 0.98
    assert np.mean(eces) < 0.03


def test_miscalibration_is_measured():
    # given an AI whose accuracy is c − 0.15 everywhere (over-confident by 0.15)
    rng = np.random.default_rng(4)
    c = rng.uniform(0.5, 1.0, 50_000)
    x = (rng.random(c.size) < c - 0.15).astype(float)
    res = reliability_bins(c, x, n_bins=10, ece_interval=True)
    # then the ECE is 0.15 within sampling error, and its interval holds it
    assert res.ece == pytest.approx(0.15, abs=0.01)
    assert res.ece_interval[0] <= res.ece <= res.ece_interval[1]
    assert expected_calibration_error(c, x) == pytest.approx(res.ece)


def test_rows_and_bad_input():
    rows = reliability_bins([0.55, 0.95], [1, 0], n_bins=2).rows()
    assert [(r["lower_edge"], r["upper_edge"], r["n"]) for r in rows] == [(0.5, 1.0, 2)]
    with pytest.raises(ValueError, match=r"confidence\[1\]: 1.2 is not in \[0, 1\]"):
        reliability_bins([0.5, 1.2], [1, 0])


def test_ece_interval_is_the_range_of_the_ece_over_the_bins_simultaneous_intervals():
    # given 300 items in 5 bins and the bins' Blaker intervals at the Šidák level 0.9^(1/5)
    rng = np.random.default_rng(5)
    c = rng.uniform(0, 1, 300)
    x = (rng.random(300) < c ** 2).astype(float)
    res = reliability_bins(c, x, n_bins=5, level=0.9, ece_interval=True)
    lo, hi = blaker(np.round(res.accuracy * res.n).astype(int), res.n, 0.9 ** (1 / 5))
    # then the ECE interval is the smallest and largest ECE with every bin's accuracy
    # anywhere in its interval (a grid of 2001 points per bin, each bin on its own)
    w = res.n / res.n.sum()
    grid = lo[:, None] + (hi - lo)[:, None] * np.linspace(0, 1, 2001)[None, :]
    gaps = np.abs(grid - res.mean_confidence[:, None])
    assert res.ece_interval[0] == pytest.approx((w * gaps.min(axis=1)).sum(), abs=1e-3)
    assert res.ece_interval[1] == pytest.approx((w * gaps.max(axis=1)).sum(), abs=1e-12)
    # and the bins' own intervals are Blaker's at the level
    assert (res.accuracy_lower, res.accuracy_upper) == tuple(
        pytest.approx(v) for v in blaker(np.round(res.accuracy * res.n).astype(int), res.n,
                                         0.9))
    with pytest.raises(ValueError, match="0/1 correctness"):
        reliability_bins(c, np.full(300, 0.5), ece_interval=True)



def _brute_diagram(c, x, strategy, n_bins, level=0.95):
    """A study's reliability diagram item by item: the edges from their definition, each
    bin's members by a loop (``_brute_bins``), its interval from Blaker's (0/1 labels) or
    Wilson's (fractional) for that bin alone, the ECE's interval from its formula."""
    kept = [ci for ci, xi in zip(c, x, strict=True) if not math.isnan(xi)]
    if strategy == "uniform":
        edges = list(np.linspace(0, 1, n_bins + 1))
    elif strategy == "distinct":
        edges = [min(kept), *sorted(set(kept))]
    else:
        qs = sorted(set(np.quantile(kept, np.linspace(0, 1, n_bins + 1))[1:-1].tolist()))
        edges = [min(kept), *qs, max(kept)]
    bins = _brute_bins(c, x, edges)
    binary = all(v in (0.0, 1.0) for v in x if not math.isnan(v))
    lower, upper, right = [], [], []
    for k, _, acc in bins:
        s = round(acc * k)
        lo, hi = (blaker(s, k, level) if binary else wilson_interval(acc * k, k, level))
        lower.append(float(lo))
        upper.append(float(hi))
        right.append(s)
    total = sum(b[0] for b in bins)
    ece = sum(b[0] * abs(b[2] - b[1]) for b in bins) / total
    interval = None
    if binary:
        lo_s, hi_s = [], []
        for (k, _, _), s in zip(bins, right, strict=True):
            lo, hi = blaker(s, k, level ** (1 / len(bins)))
            lo_s.append(float(lo))
            hi_s.append(float(hi))
        interval = (sum(b[0] / total * max(0.0, lo - b[1], b[1] - hi)
                        for b, lo, hi in zip(bins, lo_s, hi_s, strict=True)),
                    sum(b[0] / total * max(abs(lo - b[1]), abs(hi - b[1]))
                        for b, lo, hi in zip(bins, lo_s, hi_s, strict=True)))
    return bins, lower, upper, ece, interval


@pytest.mark.parametrize("strategy", ["uniform", "quantile", "distinct"])
def test_single_study_diagram_equals_brute_force(strategy):
    # the figures the dashboard shows for one study, bin by bin
    rng = np.random.default_rng(13)
    for trial in range(8):
        n = int(rng.integers(5, 90))
        c = rng.choice(np.arange(10, 21) / 20, n) if trial % 2 else rng.random(n)
        binary = trial % 3 != 2
        x = ((rng.random(n) < c).astype(float) if binary
             else rng.choice([0.0, 1 / 3, 0.5, 1.0], n))
        if trial % 4 == 0:
            x[rng.random(n) < 0.15] = np.nan
        got = reliability_bins(c, x, strategy=strategy, n_bins=6, ece_interval=binary)
        bins, lower, upper, ece, interval = _brute_diagram(c, x, strategy, 6)
        assert got.n.tolist() == [b[0] for b in bins]
        np.testing.assert_allclose(got.mean_confidence, [b[1] for b in bins], rtol=0,
                                   atol=1e-12)
        np.testing.assert_allclose(got.accuracy, [b[2] for b in bins], rtol=0, atol=1e-12)
        np.testing.assert_allclose(got.accuracy_lower, lower, rtol=0, atol=1e-12)
        np.testing.assert_allclose(got.accuracy_upper, upper, rtol=0, atol=1e-12)
        assert got.ece == pytest.approx(ece, abs=1e-12)
        assert got.n_items == sum(b[0] for b in bins)
        if binary:
            assert got.ece_interval == pytest.approx(interval, abs=1e-12)


@pytest.mark.parametrize("strategy", ["uniform", "quantile", "distinct"])
def test_a_stack_of_studies_is_each_study_alone(strategy):
    # given 12 studies of 40 items (0/1 labels, some missing) binned on their own
    rng = np.random.default_rng(14)
    c = rng.choice(np.arange(10, 21) / 20, (12, 40))
    c[::3] = rng.random((4, 40))
    x = (rng.random((12, 40)) < c).astype(float)
    x[rng.random((12, 40)) < 0.1] = np.nan
    stack = reliability_stack(c, x, strategy=strategy, n_bins=5, ece_interval=True)
    for i in range(12):
        one = reliability_bins(c[i], x[i], strategy=strategy, n_bins=5, ece_interval=True)
        k = one.n.size
        assert (stack.n[i, k:] == 0).all()
        for name in ("lower_edge", "upper_edge", "n", "mean_confidence", "accuracy",
                     "accuracy_lower", "accuracy_upper"):
            np.testing.assert_array_equal(getattr(stack, name)[i, :k], getattr(one, name))
        assert (stack.ece[i], stack.mce[i], stack.n_items[i]) == (one.ece, one.mce,
                                                                  one.n_items)
        np.testing.assert_allclose([stack.ece_lower[i], stack.ece_upper[i]],
                                   one.ece_interval, rtol=0, atol=1e-12)
