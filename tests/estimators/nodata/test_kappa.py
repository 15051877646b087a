"""Cohen's κ: the value is scikit-learn's; the standard error agrees with the spread of κ
over simulated samples; its interval covers about 95 %; degenerate cases are NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from estimators.nodata.kappa import cohen_kappa


def _pair(rng, n, agree=0.8, p1=0.4):
    a = (rng.random(n) < p1).astype(int)
    b = np.where(rng.random(n) < agree, a, 1 - a)
    return a.tolist(), b.tolist()


def test_kappa_is_scikit_learns_and_pairs_with_none_are_left_out():
    rng = np.random.default_rng(1)
    a, b = _pair(rng, 300)
    k = cohen_kappa(a, b)
    assert k.kappa == pytest.approx(cohen_kappa_score(a, b))
    assert k.n == 300 and k.lower < k.kappa < k.upper
    with_none = cohen_kappa([*a, None, 1], [*b, 0, None])
    assert with_none.kappa == pytest.approx(k.kappa) and with_none.n == 300


def test_the_standard_error_matches_the_spread_and_the_interval_covers():
    rng = np.random.default_rng(2)
    truth_a, truth_b = _pair(rng, 200_000)
    true_kappa = cohen_kappa_score(truth_a, truth_b)
    draws = [cohen_kappa(*_pair(rng, 400)) for _ in range(600)]
    spread = np.std([d.kappa for d in draws], ddof=1)
    assert np.mean([d.se for d in draws]) == pytest.approx(spread, rel=0.1)
    covered = np.mean([d.lower <= true_kappa <= d.upper for d in draws])
    assert 0.92 <= covered <= 0.98


def test_degenerate_cases_are_nan():
    assert math.isnan(cohen_kappa([], []).kappa)
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]).kappa)
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 0])
