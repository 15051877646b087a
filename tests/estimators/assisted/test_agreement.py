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
