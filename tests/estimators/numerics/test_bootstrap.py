"""The vectorised cluster bootstrap against explicit resampling of rows, the multinomial law
of its counts, and the coverage of its intervals in simulated rater studies."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from estimators.numerics.bootstrap import (
    bootstrap_means,
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
    y = (rng.uniform(size=(300, 2)) < .7) * 1.0
    alone = (bootstrap_means(x, n_resamples=400, seed=9), bootstrap_means(x[:, :1] ** 2,
             n_resamples=400, seed=9), bootstrap_means(y, n_resamples=400, seed=9))
    assert len(draws) == 3
    draws.clear()
    with shared_resamples():
        shared = (bootstrap_means(x, n_resamples=400, seed=9), bootstrap_means(
            x[:, :1] ** 2, n_resamples=400, seed=9), bootstrap_means(y, n_resamples=400,
                                                                      seed=9))
        # other seeds, sizes and Generators draw their own
        other = bootstrap_means(x, n_resamples=400, seed=10)
        bootstrap_means(x, n_resamples=400, seed=np.random.default_rng(9))
        bootstrap_means(x, n_resamples=400, seed=np.random.default_rng(9))
        kept = next(cluster_count_chunks(300, 400, 9, dtype=float))
    # the same 300 × 400 counts were drawn once for the three figures, bit-identical results
    assert draws == [(300, 400), (300, 400), (300, 400), (300, 400)]
    assert shared == alone and other != alone[0]
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
