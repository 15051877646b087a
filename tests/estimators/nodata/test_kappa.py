"""Cohen's κ: the value is scikit-learn's; the standard error agrees with the spread of κ
over simulated samples; its interval's exact coverage (a sum over every 2 × 2 table) keeps
95 % where the plain Wald interval did not; degenerate cases are NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammaln
from sklearn.metrics import cohen_kappa_score

from estimators.nodata import coverage
from estimators.nodata.kappa import MIN_KAPPA_MINORITY, cohen_kappa


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
    # and at this setting (n = 400, agreement 0.8, 40 % ones) the exact coverage is 95 %
    cells = np.array([0.4 * 0.8, 0.4 * 0.2, 0.6 * 0.2, 0.6 * 0.8])  # n11, n10, n01, n00
    p_e = 0.4 * 0.44 + 0.6 * 0.56  # margins: 40 % ones on one side, 44 % on the other
    assert true_kappa == pytest.approx((0.8 - p_e) / (1 - p_e), abs=0.01)
    assert _exact_coverage(400, cells, (0.8 - p_e) / (1 - p_e)) == pytest.approx(0.95, abs=0.005)


def _exact_coverage(n, cells, kappa, *, former=False):
    tables = coverage.kappa_tables(n, cells)
    w = np.exp(gammaln(n + 1) - gammaln(tables + 1).sum(axis=1)
               + (tables * np.log(cells)).sum(axis=1))
    _, (lo, hi), (flo, fhi), _, defined = coverage.kappa_intervals(tables)
    if former:
        lo, hi = flo, fhi
    return float((w * defined * (lo <= kappa) * (kappa <= hi)).sum() / (w * defined).sum())


def test_the_vectorised_intervals_are_cohen_kappas():
    # every 2 × 2 table of 12 pairs: the coverage code scores what cohen_kappa returns
    tables = coverage.kappa_tables(12, np.full(4, 0.25))
    k, (lo, hi), _, minority, defined = coverage.kappa_intervals(tables)
    for j in range(0, len(tables), 7):
        n11, n10, n01, n00 = (int(x) for x in tables[j])
        a = [1] * (n11 + n10) + [0] * (n01 + n00)
        b = [1] * n11 + [0] * n10 + [1] * n01 + [0] * n00
        got = cohen_kappa(a, b)
        assert got.n_minority == minority[j]
        if not defined[j]:
            assert math.isnan(got.kappa)
            continue
        assert (got.kappa, got.lower, got.upper) == pytest.approx((k[j], lo[j], hi[j]),
                                                                  abs=1e-12)


@pytest.mark.parametrize(("n", "share", "kappa"), [(20, 0.5, 0.9), (20, 0.8, 0.7),
                                                   (50, 0.8, 0.9), (100, 0.5, 0.9)])
def test_the_interval_keeps_95_percent_where_the_plain_wald_did_not(n, share, kappa):
    # given people and an evaluator who both label 1 with probability `share` at this κ
    cells = coverage.kappa_cells(share, share, kappa)
    # then the add-½ Wald interval covers at least 93.5 % (exact), the plain one did not
    assert _exact_coverage(n, cells, kappa) >= 0.935
    assert _exact_coverage(n, cells, kappa, former=True) < 0.9


def test_few_minority_labels_mark_the_interval_unreliable():
    # 100 datapoints, people label 1 on 92 of them: 8 minority labels
    people = [1] * 92 + [0] * 8
    evaluator = [1] * 88 + [0] * 4 + [0] * 5 + [1] * 3
    k = cohen_kappa(evaluator, people)
    assert k.n_minority == 8 < MIN_KAPPA_MINORITY and not k.interval_reliable
    assert k.as_dict()["interval_reliable"] is False
    balanced = cohen_kappa([1, 0] * 20, [1, 0] * 18 + [0, 1] * 2)
    assert balanced.n_minority == 20 and balanced.interval_reliable


def test_degenerate_cases_are_nan():
    assert math.isnan(cohen_kappa([], []).kappa)
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]).kappa)
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 0])
