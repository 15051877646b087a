"""Per-worker figures (``estimators.numerics.workers``) against brute force and an outside
reference: agreement with the others' majority by counting every unit by hand, time
figures by numpy's percentile per worker, the gold interval by SciPy's exact
(Clopper–Pearson) binomial interval."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy.stats import binomtest

from estimators.numerics.workers import (
    TIME_EDGES,
    leave_one_out_agreement,
    worker_figures,
)


def _brute_agreement(unit, value):
    out = []
    for i, (u, v) in enumerate(zip(unit, value, strict=True)):
        others = Counter(value[j] for j in range(len(unit)) if unit[j] == u and j != i)
        if not others:
            out.append(np.nan)
            continue
        (top, n), *rest = others.most_common()
        if rest and rest[0][1] == n:
            out.append(np.nan)
        else:
            out.append(float(top == v))
    return np.array(out)


@pytest.mark.parametrize("seed", range(40))
def test_agreement_with_the_others_majority_matches_counting_by_hand(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    unit = rng.integers(0, max(1, n // 3), size=n)
    value = rng.integers(0, int(rng.integers(1, 5)), size=n)
    np.testing.assert_array_equal(leave_one_out_agreement(unit, value),
                                  _brute_agreement(unit, value))


def test_agreement_cases_by_hand():
    # unit 0: values 1, 1, 2 → each 1 agrees with the other 1 (1 vs 2 tie among others? no:
    # for the first 1 the others are {1, 2}: a tie → nothing); the 2 sees {1, 1} → disagrees
    got = leave_one_out_agreement([0, 0, 0, 1], [1, 1, 2, 0])
    np.testing.assert_array_equal(got, [np.nan, np.nan, 0.0, np.nan])
    np.testing.assert_array_equal(leave_one_out_agreement([5, 5, 5], [3, 3, 3]), [1, 1, 1])
    assert leave_one_out_agreement([], []).size == 0
    with pytest.raises(ValueError, match="non-negative"):
        leave_one_out_agreement([0, -1], [0, 0])
    with pytest.raises(ValueError, match="one length"):
        leave_one_out_agreement([0, 1], [0])


def test_worker_figures_match_numpy_and_scipy_per_worker():
    rng = np.random.default_rng(7)
    n = 400
    worker = rng.integers(10, 16, size=n)
    seconds = np.where(rng.random(n) < 0.1, np.nan, rng.exponential(20, size=n))
    correct = np.where(rng.random(n) < 0.5, np.nan, (rng.random(n) < 0.8).astype(float))
    agreement = np.where(rng.random(n) < 0.3, np.nan, (rng.random(n) < 0.7).astype(float))
    ids = [9, *range(10, 16)]  # 9 has no answers
    f = worker_figures(worker, seconds, correct, agreement, workers=ids)
    assert f.answers[0] == 0 and np.isnan(f.median_s[0]) and np.isnan(f.gold_lo[0])
    for i, w in enumerate(ids[1:], start=1):
        mine = worker == w
        secs = seconds[mine & ~np.isnan(seconds)]
        assert f.answers[i] == mine.sum()
        np.testing.assert_allclose([f.p10_s[i], f.median_s[i], f.p90_s[i]],
                                   np.percentile(secs, [10, 50, 90]))
        bins = [np.sum(secs < TIME_EDGES[0])]
        bins += [np.sum((secs >= a) & (secs < b)) for a, b in
                 zip(TIME_EDGES, TIME_EDGES[1:], strict=False)]
        bins += [np.sum(secs >= TIME_EDGES[-1])]
        np.testing.assert_array_equal(f.histogram[i], bins)
        checks = correct[mine & ~np.isnan(correct)]
        k, m = int(checks.sum()), checks.size
        assert (f.gold_correct[i], f.gold_n[i]) == (k, m)
        ci = binomtest(k, m).proportion_ci(confidence_level=0.95, method="exact")
        np.testing.assert_allclose([f.gold_lo[i], f.gold_hi[i]], [ci.low, ci.high],
                                   rtol=1e-9, atol=1e-12)
        said = agreement[mine & ~np.isnan(agreement)]
        assert (f.agree[i], f.agree_n[i]) == (int(said.sum()), said.size)


def test_worker_figures_refuse_ragged_rows():
    with pytest.raises(ValueError, match="one length"):
        worker_figures([1, 2], [1.0], [np.nan, np.nan], [np.nan, np.nan])
