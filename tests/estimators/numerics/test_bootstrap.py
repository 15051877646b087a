"""The vectorised cluster bootstrap against explicit resampling of rows, the multinomial law
of its counts, and the coverage of its intervals in simulated rater studies."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from estimators.assisted.hybridization import curve_band
from estimators.numerics.bootstrap import (
    bootstrap_means,
    bootstrap_ratios,
    cluster_count_chunks,
    cluster_counts,
    percentile_interval,
    shared_resamples,
)


def test_counts_draw_each_stratum_to_its_size():
    # given 7 clusters in strata of sizes 3, 4
    strata = np.array([0, 1, 0, 1, 1, 0, 1])
    w = cluster_counts(7, 500, 3, strata=strata)
    # then every resample draws 3 clusters of stratum 0 and 4 of stratum 1
    assert w.shape == (500, 7)
    assert (w[:, strata == 0].sum(axis=1) == 3).all()
    assert (w[:, strata == 1].sum(axis=1) == 4).all()


def test_counts_are_multinomial():
    # given many resamples of C = 5 clusters
    c, b = 5, 40_000
    w = cluster_counts(c, b, 11)
    # then each count is Binomial(C, 1/C): mean 1, variance 1 − 1/C, and two counts have
    # covariance −1/C (6-sigma tolerances from the sampling variance of those moments)
    assert abs(w.mean() - 1) < 6 * np.sqrt((1 - 1 / c) / (b * c))
    assert np.var(w[:, 0]) == pytest.approx(1 - 1 / c, abs=6 * np.sqrt(2 / b))
    assert np.cov(w[:, 0], w[:, 1])[0, 1] == pytest.approx(-1 / c, abs=6 / np.sqrt(b))
    # and the pmf of one count matches the binomial (chi-square test, p > 1e-4)
    observed = np.bincount(w[:, 2], minlength=c + 1)
    expected = stats.binom.pmf(np.arange(c + 1), c, 1 / c) * b
    keep = expected > 5
    chi2 = (((observed[keep] - expected[keep]) ** 2) / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


def test_chunks_are_reproducible_and_bounded(monkeypatch):
    import estimators.numerics.bootstrap as bootstrap

    monkeypatch.setattr(bootstrap, "_CHUNK_CELLS", 30)
    chunks = list(cluster_count_chunks(10, 25, 5))
    # then chunks hold at most 3 resamples of 10 clusters and the same seed gives the same
    assert max(ch.shape[0] for ch in chunks) == 3
    assert sum(ch.shape[0] for ch in chunks) == 25
    np.testing.assert_array_equal(np.concatenate(chunks), cluster_counts(10, 25, 5))


def test_shared_resamples_draw_once_and_change_no_result(monkeypatch):
    import estimators.numerics.bootstrap as bootstrap

    draws = []
    real = bootstrap._draw_chunks
    monkeypatch.setattr(bootstrap, "_draw_chunks", lambda *a: draws.append(a[:2]) or real(*a))
    rng = np.random.default_rng(4)
    x = rng.uniform(size=(300, 3))
    conf, ai, human = rng.uniform(size=300), (rng.uniform(size=300) < .7) * 1.0, \
        (rng.uniform(size=300) < .8) * 1.0
    alone = (bootstrap_means(x, n_resamples=400, seed=9), bootstrap_means(x[:, :1] ** 2,
             n_resamples=400, seed=9), curve_band(conf, ai, human, n_resamples=400, seed=9))
    assert len(draws) == 3
    draws.clear()
    with shared_resamples():
        shared = (bootstrap_means(x, n_resamples=400, seed=9), bootstrap_means(
            x[:, :1] ** 2, n_resamples=400, seed=9), curve_band(conf, ai, human,
                                                                n_resamples=400, seed=9))
        # other seeds, sizes and Generators draw their own
        other = bootstrap_means(x, n_resamples=400, seed=10)
        bootstrap_means(x, n_resamples=400, seed=np.random.default_rng(9))
        bootstrap_means(x, n_resamples=400, seed=np.random.default_rng(9))
        kept = next(cluster_count_chunks(300, 400, 9, dtype=float))
    # the same 300 × 400 counts were drawn once for the three figures, bit-identical results
    assert draws == [(300, 400), (300, 400), (300, 400), (300, 400)]
    assert shared[:2] == alone[:2] and other != alone[0]
    for name in ("lower", "upper", "gain_lower", "gain_upper", "near_best"):
        np.testing.assert_array_equal(getattr(shared[2], name), getattr(alone[2], name))
    assert not kept.flags.writeable  # a caller cannot change what the next one reads
    # outside the block nothing is kept
    draws.clear()
    bootstrap_means(x, n_resamples=400, seed=9)
    assert draws == [(300, 400)]


def test_shared_resamples_keep_at_most_their_cells(monkeypatch):
    import estimators.numerics.bootstrap as bootstrap

    draws = []
    real = bootstrap._draw_chunks
    monkeypatch.setattr(bootstrap, "_draw_chunks", lambda *a: draws.append(a[:2]) or real(*a))
    x = np.arange(100.0)
    with shared_resamples(max_cells=100 * 50):
        a = [bootstrap_means(x, n_resamples=50, seed=1) for _ in range(2)]
        b = [bootstrap_means(x, n_resamples=60, seed=1) for _ in range(2)]  # over the cap
    assert draws == [(100, 50), (100, 60), (100, 60)]
    assert a[0] == a[1] and b[0] == b[1]


def _ratings(rng, n_raters: int, per_rater: int, p: float, spread: float):
    """Binary ratings of raters with uniform effects ±spread around p."""
    eff = rng.uniform(-spread, spread, n_raters)
    rater = np.repeat(np.arange(n_raters), per_rater)
    correct = (rng.random(rater.size) < p + eff[rater]).astype(float)
    return rater, correct


def test_ratios_equal_explicit_resampling_of_rows():
    # given ratings of 12 raters in two strata, two ratio statistics
    rng = np.random.default_rng(1)
    rater = rng.integers(0, 12, 200)
    strata = rater % 2
    num = np.c_[rng.random(200) < 0.7, rng.random(200)]
    den = np.c_[np.ones(200), rng.random(200) < 0.5]
    res = bootstrap_ratios(rater, num, den, strata=strata, n_resamples=50, seed=9)
    # when the same resamples are built row by row (each drawn rater's rows repeated)
    w = cluster_counts(12, 50, 9, strata=strata[np.unique(rater, return_index=True)[1]])
    for b in range(50):
        rows = np.concatenate([np.repeat(np.flatnonzero(rater == r), w[b, r])
                               for r in range(12)])
        expect = num[rows].sum(axis=0) / den[rows].sum(axis=0)
        # then the replicate is the ratio of the resampled rows
        np.testing.assert_allclose(res.replicates[b], expect, rtol=1e-12)
    np.testing.assert_allclose(res.estimate, num.sum(axis=0) / den.sum(axis=0))


def test_cluster_spanning_two_strata_is_refused():
    with pytest.raises(ValueError, match=r"strata\[2\]: cluster 1 spans two strata"):
        bootstrap_ratios([0, 1, 1], [1, 0, 1], [1, 1, 1], strata=["a", "a", "b"],
                         n_resamples=10)


def test_undefined_replicates_are_left_out():
    # given a statistic whose denominator is carried by one rater of ten
    rater = np.arange(10)
    res = bootstrap_ratios(rater, np.c_[np.r_[1.0, np.zeros(9)]], np.c_[np.r_[1.0,
                                                                               np.zeros(9)]],
                           n_resamples=400, seed=2)
    # then the resamples without that rater are undefined and the rest give 1
    assert 0 < res.n_undefined(0) < 400
    assert res.interval(0).lower == res.interval(0).upper == 1.0


def test_percentile_interval_ignores_nan_columns():
    lo, hi = percentile_interval(np.c_[np.arange(101.0), np.full(101, np.nan)], 0.9)
    assert lo[0] == pytest.approx(5.0) and hi[0] == pytest.approx(95.0)
    assert np.isnan(lo[1]) and np.isnan(hi[1])


def test_means_equal_explicit_resampling():
    rng = np.random.default_rng(4)
    values = np.c_[rng.random(30), rng.random(30) < 0.3, np.r_[np.nan, rng.random(29)]]
    res = bootstrap_means(values, n_resamples=200, seed=8, level=0.8)
    w = cluster_counts(30, 200, 8)
    reps = np.array([values[np.repeat(np.arange(30), w[b]), :2].mean(axis=0)
                     for b in range(200)])
    lo, hi = np.quantile(reps, [0.1, 0.9], axis=0)
    for j in range(2):
        assert res[j].value == pytest.approx(values[:, j].mean())
        assert (res[j].lower, res[j].upper) == pytest.approx((lo[j], hi[j]))
    # a column with a missing value is undefined
    assert not res[2].defined


def test_rater_clustered_intervals_cover_the_planted_accuracy():
    # given 300 simulated studies of 25 raters × 20 ratings with rater effects ±0.15
    # around accuracy 0.7 (E effect = 0, so 0.7 is the population accuracy)
    rng = np.random.default_rng(12)
    covered, naive_covered, n_sims = 0, 0, 300
    for s in range(n_sims):
        rater, correct = _ratings(rng, 25, 20, 0.7, 0.15)
        iv = bootstrap_ratios(rater, correct, np.ones_like(correct), n_resamples=400,
                              seed=s).interval(0)
        covered += iv.lower <= 0.7 <= iv.upper
        naive = bootstrap_ratios(np.arange(rater.size), correct, np.ones_like(correct),
                                 n_resamples=400, seed=s).interval(0)
        naive_covered += naive.lower <= 0.7 <= naive.upper
    # then the clustered intervals cover about 95 % (binomial sd over 300 studies ≈ 1.3 %;
    # percentile intervals with 25 clusters run a little short)
    assert 0.90 <= covered / n_sims <= 0.985
    # and resampling single ratings instead of raters does worse (the design effect)
    assert naive_covered < covered


def test_differences_cover_the_planted_contrast():
    # given two arms (strata) of raters with accuracies 0.72 and 0.60
    rng = np.random.default_rng(13)
    covered, n_sims = 0, 200
    for s in range(n_sims):
        r1, c1 = _ratings(rng, 20, 15, 0.72, 0.1)
        r2, c2 = _ratings(rng, 20, 15, 0.60, 0.1)
        rater = np.r_[r1, r2 + 20]
        arm = np.r_[np.zeros(r1.size), np.ones(r2.size)]
        num = np.c_[np.r_[c1, np.zeros(c2.size)], np.r_[np.zeros(c1.size), c2]]
        den = np.c_[1 - arm, arm]
        d = bootstrap_ratios(rater, num, den, strata=arm, n_resamples=400,
                             seed=s).difference(0, 1)
        covered += d.lower <= 0.12 <= d.upper
    assert 0.90 <= covered / n_sims <= 0.99
