"""Cohen's κ: the value is scikit-learn's; the standard error agrees with the spread of κ
over simulated samples; its interval's exact coverage (a sum over every 2 × 2 table) keeps
95 % where the plain Wald interval did not; degenerate cases are NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammaln
from scipy.stats import norm
from sklearn.metrics import cohen_kappa_score

from estimators.nodata import coverage
from estimators.nodata.kappa import MIN_KAPPA_MINORITY, cohen_kappa, kappa_of_tables


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
    # every 2 × 2 table of 12 pairs, all at once: the coverage code scores exactly what
    # cohen_kappa returns for each table alone (the same function, one table at a time)
    tables = coverage.kappa_tables(12, np.full(4, 0.25))
    k, (lo, hi), (flo, fhi), minority, defined = coverage.kappa_intervals(tables)
    assert len(tables) == math.comb(15, 3)
    z = float(norm.ppf(0.975))
    for j, row in enumerate(tables):
        n11, n10, n01, n00 = (int(x) for x in row)
        a = [1] * (n11 + n10) + [0] * (n01 + n00)
        b = [1] * n11 + [0] * n10 + [1] * n01 + [0] * n00
        got = cohen_kappa(a, b)
        assert got.n_minority == minority[j]
        assert defined[j] == math.isfinite(got.kappa)
        if not defined[j]:
            continue
        assert (got.kappa, got.lower, got.upper) == (k[j], lo[j], hi[j])
        # the former interval: plain Wald at the table itself (the brute-force SE)
        se = _brute_se([[n00, n01], [n10, n11]])
        assert (flo[j], fhi[j]) == pytest.approx((max(-1, k[j] - z * se),
                                                  min(1, k[j] + z * se)), abs=1e-12)


def _brute_se(count):
    n = sum(map(sum, count))
    p = [[c / n for c in row] for row in count]
    rows = [sum(r) for r in p]
    cols = [p[0][j] + p[1][j] for j in range(2)]
    p_e = rows[0] * cols[0] + rows[1] * cols[1]
    k = (p[0][0] + p[1][1] - p_e) / (1 - p_e)
    var = (sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - k)) ** 2 for i in range(2))
           + (1 - k) ** 2 * (p[0][1] * (cols[0] + rows[1]) ** 2
                             + p[1][0] * (cols[1] + rows[0]) ** 2)
           - (k - p_e * (1 - k)) ** 2) / (n * (1 - p_e) ** 2)
    return math.sqrt(max(var, 0.0))


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


def _brute_kappa(a, b, level=0.95):
    """Cohen's κ and its add-½ Wald interval by plain loops over the K × K table (the module
    docstring's formulas written out cell by cell): an independent reference."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    n = len(pairs)
    cats = sorted({x for x, _ in pairs} | {y for _, y in pairs}, key=repr)
    size = len(cats)
    count = [[sum(1 for x, y in pairs if x == ci and y == cj) for cj in cats] for ci in cats]

    def parts(p):
        rows = [sum(p[i][j] for j in range(size)) for i in range(size)]
        cols = [sum(p[i][j] for i in range(size)) for j in range(size)]
        p_o = sum(p[i][i] for i in range(size))
        p_e = sum(rows[i] * cols[i] for i in range(size))
        if p_e >= 1:
            return p_o, p_e, math.nan, math.nan
        k = (p_o - p_e) / (1 - p_e)
        var = (sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - k)) ** 2 for i in range(size))
               + (1 - k) ** 2 * sum(p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(size)
                                    for j in range(size) if i != j)
               - (k - p_e * (1 - k)) ** 2) / (n * (1 - p_e) ** 2)
        return p_o, p_e, k, math.sqrt(max(var, 0.0))

    p_o, p_e, k, _ = parts([[c / n for c in row] for row in count])
    minority = min(n - max(sum(row) for row in count),
                   n - max(sum(count[i][j] for i in range(size)) for j in range(size)))
    if p_e >= 1:
        return (math.nan,) * 4 + (p_o, p_e, n, minority)
    _, _, k_adj, se = parts([[(c + 0.5) / (n + 0.5 * size * size) for c in row]
                             for row in count])
    z = float(norm.ppf(0.5 + level / 2))
    return (k, max(-1.0, min(k, k_adj - z * se)), min(1.0, max(k, k_adj + z * se)), se,
            p_o, p_e, n, minority)


def _label_sets():
    rng = np.random.default_rng(7)
    for n, k in ((12, 2), (40, 2), (300, 2), (25, 3), (200, 3)):
        a = rng.integers(0, k, n)
        b = np.where(rng.random(n) < 0.7, a, rng.integers(0, k, n))
        yield a.tolist(), b.tolist()
    yield [1] * 92 + [0] * 8, [1] * 88 + [0] * 4 + [0] * 5 + [1] * 3
    yield ["A", "B", "B", None, "A"], ["A", "B", "A", "B", None]
    yield [1, 1, 1], [1, 1, 1]
    yield [0, 1] * 10, [0, 1] * 10


def test_single_study_results_are_the_formulas_cell_by_cell():
    # the figures the audit page shows, against loops over the table's cells
    for a, b in _label_sets():
        got = cohen_kappa(a, b)
        want = _brute_kappa(a, b)
        have = (got.kappa, got.lower, got.upper, got.se, got.observed, got.expected, got.n,
                got.n_minority)
        for g, w in zip(have, want, strict=True):
            assert (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, abs=1e-12)


def test_a_stack_of_tables_is_each_table_alone():
    # given 3 × 3 tables stacked on two leading axes, some with p_e = 1
    rng = np.random.default_rng(5)
    tables = rng.integers(0, 9, (4, 5, 3, 3)).astype(float)
    tables[0, 0] = 0
    tables[0, 0, 1, 1] = 7
    got = kappa_of_tables(tables)
    for idx in np.ndindex(4, 5):
        one = kappa_of_tables(tables[idx])
        for name in ("kappa", "lower", "upper", "se", "observed", "expected", "n",
                     "n_minority"):
            np.testing.assert_array_equal(getattr(got, name)[idx], getattr(one, name))
    assert np.isnan(got.kappa[0, 0]) and got.expected[0, 0] == 1
