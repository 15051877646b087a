"""Krippendorff's α (nominal, missing values) against Krippendorff's own worked example and
against the definition evaluated pair by pair; agreement with the AI."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimators.assisted.agreement import agreement_with_ai, krippendorff_alpha_nominal

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers
# (rows) × 12 units (columns), None = missing.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def _long(matrix):
    unit, value = [], []
    for row in matrix:
        for u, v in enumerate(row):
            unit.append(u)
            value.append(v)
    return unit, value


def test_krippendorffs_worked_example():
    # given the paper's reliability data, computed by hand: unit 12 has one value and is not
    # pairable; the coincidence diagonal o_cc = Σ_u n_uc(n_uc − 1)/(m_u − 1):
    #   o_11 = 3·2/2 (u1) + 3·2/3 (u8) + 2·1/1 (u11) = 7
    #   o_22 = 3·2/3 (u2) + 4·3/3 (u5) + 4·3/3 (u9) = 10
    #   o_33 = 4·3/3 (u3) + 4·3/3 (u4) = 8,  o_44 = 4·3/3 (u7) = 4,  o_55 = 3·2/2 (u10) = 3
    # and the pairable values n_1..n_5 = 9, 13, 10, 5, 3 (n = 40)
    o = {1: 7, 2: 10, 3: 8, 4: 4, 5: 3}
    nc = {1: 9, 2: 13, 3: 10, 4: 5, 5: 3}
    n = sum(nc.values())
    s = sum(k * (k - 1) for k in nc.values())
    by_hand = Fraction((n - 1) * sum(o.values()) - s, n * (n - 1) - s)
    assert by_hand == Fraction(904, 1216)  # the paper's .743
    # when
    res = krippendorff_alpha_nominal(*_long(KRIPPENDORFF_2011))
    # then
    assert res.alpha == pytest.approx(float(by_hand), abs=1e-12)
    assert round(res.alpha, 3) == 0.743
    assert (res.n_units, res.n_values) == (11, 40)


def _brute_alpha(unit, value):
    """The definition pair by pair: D_o over all ordered pairs of values of one unit (weight
    1/(m_u − 1)), D_e over all ordered pairs of pairable values anywhere."""
    units: dict = {}
    for u, v in zip(unit, value, strict=True):
        if v is not None:
            units.setdefault(u, []).append(v)
    units = {u: vs for u, vs in units.items() if len(vs) >= 2}
    pooled = [v for vs in units.values() for v in vs]
    n = len(pooled)
    if n == 0:
        return math.nan
    d_o = sum(Fraction(int(a != b), len(vs) - 1)
              for vs in units.values() for a, b in itertools.permutations(vs, 2)) / n
    d_e = Fraction(sum(int(a != b) for a, b in itertools.permutations(pooled, 2)), n * (n - 1))
    return math.nan if d_e == 0 else float(1 - d_o / d_e)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.sampled_from("abcd"))),
                max_size=40))
def test_alpha_equals_the_pairwise_definition(ratings):
    unit = [u for u, _ in ratings]
    value = [v for _, v in ratings]
    got = krippendorff_alpha_nominal(unit, value).alpha
    want = _brute_alpha(unit, value)
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(want, abs=1e-12)


def test_alpha_edge_cases():
    # perfect agreement over several values → 1; one value everywhere → undefined
    assert krippendorff_alpha_nominal([0, 0, 1, 1], ["a", "a", "b", "b"]).alpha == 1.0
    assert math.isnan(krippendorff_alpha_nominal([0, 0, 1, 1], ["a"] * 4).alpha)
    # nothing pairable → undefined
    assert math.isnan(krippendorff_alpha_nominal([0, 1], ["a", "b"]).alpha)
    # NaN values are missing, as None
    a = krippendorff_alpha_nominal([0, 0, 0, 1, 1], [1.0, 1.0, np.nan, 2.0, 2.0])
    assert a.alpha == 1.0 and a.n_values == 4


def test_independent_raters_agree_by_chance_only():
    # given raters labelling independently with the same marginal distribution
    rng = np.random.default_rng(1)
    unit = np.repeat(np.arange(3000), 3)
    value = rng.choice(3, unit.size, p=[0.5, 0.3, 0.2])
    res = krippendorff_alpha_nominal(unit, value, interval=True)
    # then α ≈ 0 (its bias is O(1/n)), and its interval holds 0
    assert abs(res.alpha) < 0.03
    assert res.lower <= 0 <= res.upper


def test_the_interval_covers_the_planted_alpha():
    # given 100 studies of 300 units × 3 raters who each copy the unit's true class with
    # probability q = 0.6 and otherwise draw from the same marginal π: two values agree
    # with probability q² + (1 − q²) Σπ², so α = q² = 0.36 exactly in the population
    rng = np.random.default_rng(2)
    p = [0.5, 0.3, 0.2]
    unit = np.repeat(np.arange(300), 3)
    hits, alphas = 0, []
    for _ in range(100):
        truth = rng.choice(3, 300, p=p)
        copy = rng.random(unit.size) < 0.6
        values = np.where(copy, truth[unit], rng.choice(3, unit.size, p=p))
        res = krippendorff_alpha_nominal(unit, values, interval=True)
        hits += res.lower <= 0.36 <= res.upper
        alphas.append(res.alpha)
    # then the intervals cover α about 95 % of the time and the estimates centre on it
    assert 0.88 <= hits / 100 <= 0.99
    assert abs(np.mean(alphas) - 0.36) < 4 * np.std(alphas) / 10


def test_agreement_with_ai_is_the_share_of_equal_values():
    assert agreement_with_ai([1, 0, 1, 2], [1, 1, 1, 1]) == 0.5
    assert math.isnan(agreement_with_ai([], []))
    with pytest.raises(ValueError, match="ai_value"):
        agreement_with_ai([1, 0], [1])


def _alpha_by_pairs(units):
    """α, D_o, D_e by the pairwise definition: ``units`` maps a unit to its list of values;
    every ordered pair of values of different raters within a unit, weight 1/(m_u − 1)."""
    pairable = {u: v for u, v in units.items() if len(v) >= 2}
    values = sorted({x for v in pairable.values() for x in v})
    o = {(c, k): 0.0 for c in values for k in values}
    for v in pairable.values():
        for i, j in itertools.permutations(range(len(v)), 2):
            o[v[i], v[j]] += 1 / (len(v) - 1)
    nc = {c: sum(o[c, k] for k in values) for c in values}
    n = sum(nc.values())
    d_o = sum(o[c, k] for c in values for k in values if c != k) / n
    d_e = sum(nc[c] * nc[k] for c in values for k in values if c != k) / (n * (n - 1))
    return (1 - d_o / d_e if d_e > 0 else math.nan), d_o, d_e


def _brute_interval(units, level=0.95):
    """The interval wired by hand: every possible type listed by loops, each sentence's
    type counted, the jackknife by deleting each sentence and recomputing α pairwise,
    Satterthwaite's ν and the t² cut-off from their formulas, then the profile bounds."""
    from scipy import stats

    from estimators.assisted.alpha_likelihood import profile_bounds

    pairable = {u: v for u, v in units.items() if len(v) >= 2}
    values = sorted({x for v in pairable.values() for x in v})
    k = len(values)
    ms = sorted({len(v) for v in pairable.values()})
    types = []
    for m in ms:
        for split in itertools.product(range(m + 1), repeat=k):
            if sum(split) == m:
                types.append(split)
    types.sort(key=lambda t: (sum(t), [-x for x in t]))
    x = np.array([[sum(c * (c - 1) for c in t) / (sum(t) - 1), *t] for t in types], float)
    counts = np.zeros(len(types))
    for v in pairable.values():
        counts[types.index(tuple(v.count(c) for c in values))] += 1
    alpha = _alpha_by_pairs(pairable)[0]
    jack = np.array([_alpha_by_pairs({w: v for w, v in pairable.items() if w != u})[0]
                     for u in pairable])
    s = len(jack)
    e = jack.mean() - jack
    spread = math.sqrt((s - 1) / s * float((e ** 2).sum()))
    m2, m4 = float((e ** 2).sum()), float((e ** 4).sum())
    nu = 2 * m2 ** 2 / (m4 - m2 ** 2 / s) if m4 - m2 ** 2 / s > 0 else s - 1
    crit = stats.t.ppf((1 + level) / 2, min(max(nu, 1), s - 1)) ** 2
    lo, hi = profile_bounds(x, counts[None], np.array([alpha]), np.array([spread]),
                            np.array([crit]))
    return float(lo[0]), float(hi[0])


def _studies():
    rng = np.random.default_rng(11)
    for s, m, shares in ((30, 2, (0.6, 0.3, 0.1)), (25, 3, (0.85, 0.12, 0.03)),
                         (40, 2, (0.5, 0.5))):
        consensus = rng.choice(len(shares), s, p=shares)
        noise = rng.choice(len(shares), (s, m), p=shares)
        r = np.where(rng.random((s, m)) < 0.7, consensus[:, None], noise)
        yield {u: list(r[u]) for u in range(s)}
    # unequal numbers of ratings, a unit with one rating (not pairable), string values
    rows = [["A", "A", "I"], ["A", "I"], ["C"], ["I", "I", "I", "A"], ["A", "A"],
            ["C", "A", "A"], ["I", "A"], ["A", "A", "A"], ["I", "I"], ["A", "C"]]
    yield dict(enumerate(rows))


def test_single_study_results_are_the_definitions_by_brute_force():
    # the figures the dashboard shows for one study, against loops over pairs, deleted
    # sentences and listed types
    for units in _studies():
        unit = [u for u, v in units.items() for _ in v]
        value = [x for v in units.values() for x in v]
        got = krippendorff_alpha_nominal(unit, value, interval=True)
        alpha, d_o, d_e = _alpha_by_pairs(units)
        assert (got.alpha, got.observed_disagreement, got.expected_disagreement) == \
            pytest.approx((alpha, d_o, d_e), abs=1e-12)
        pairable = [v for v in units.values() if len(v) >= 2]
        flat = [x for v in pairable for x in v]
        assert got.n_minority == len(flat) - max(flat.count(c) for c in set(flat))
        assert (got.n_units, got.n_values) == (len(pairable), len(flat))
        assert (got.lower, got.upper) == pytest.approx(_brute_interval(units), abs=1e-9)
