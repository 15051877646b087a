"""The clustered variance's integer sums (estimators/partitioned/moment_sums.py) against a
brute force: each item's x = (S_o, T_o, S_c, T_c) summed label by label in exact fractions,
then Σ x and Σ x xᵀ over the items of each scope — the whole study, each stratum, per-class
weights, each confidence band and cut; and their arithmetic: the sums of two disjoint sets
of items add, and taking one set's sums away leaves the other's exactly."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from estimators.partitioned.moment_sums import (
    BAND_SCOPES,
    LabelArrays,
    MomentSums,
    band_scope_members,
    moment_sums,
)

J = 3


def _labels(k: int, seed: int, n_items: int = 40) -> LabelArrays:
    rng = np.random.default_rng(seed)
    item = np.repeat(np.arange(n_items), rng.integers(1, 4, n_items))
    n = len(item)
    present = rng.random((n, J)) < 0.8
    match = present & (rng.random((n, J)) < 0.5)
    match[0, 0] = True  # a stray match without its prediction: still counted as its bits say
    present[0, 0] = False
    return LabelArrays(cluster=item * 7 + 3, stratum=item % 2, strata=("a", "b"),
                       k=rng.integers(0, k, n), yes=rng.random(n) < 0.3,
                       code=present.astype(np.int64) | match.astype(np.int64) << 1,
                       band=rng.integers(0, 4, (n, 2)), band_columns=(0, 2))


def _x(k: int, yes: bool, code: int) -> tuple[Fraction, ...]:
    """One label's (S_o, T_o, S_c, T_c) for one system (METHODS.md M1), unscaled."""
    present, match = code & 1, code >> 1 & 1
    if yes:
        return (Fraction(match), Fraction(1 - match), Fraction(0), Fraction(0))
    if k == 2:  # a "no" is an ordinary label of the other class
        s = Fraction(present - match)
        return (s, 1 - s, Fraction(0), Fraction(0))
    s = Fraction(present - match) + Fraction(k - 2, k - 1) * (1 - present)
    return (Fraction(0), Fraction(0), s, 1 - s)


def _brute(labels: LabelArrays, k: int, keep, weight=None):
    """Per system: Σ x, Σ x xᵀ, clusters with a label, whether one has two ordinary labels,
    over the labels ``keep(l, j)`` says, each weighted by ``weight(l)``."""
    out = []
    for j in range(J):
        items: dict[tuple, list] = {}
        ordinary: dict[tuple, int] = {}
        for i in range(len(labels.yes)):
            if not keep(i, j):
                continue
            key = (int(labels.cluster[i]), int(labels.stratum[i]))
            w = Fraction(weight(i)) if weight else Fraction(1)
            x = [w * v for v in _x(k, bool(labels.yes[i]), int(labels.code[i, j]))]
            items[key] = [a + b for a, b in zip(items.get(key, [0] * 4), x, strict=True)]
            ordinary[key] = ordinary.get(key, 0) + int(bool(labels.yes[i]) or k == 2)
        first = [sum(x[a] for x in items.values()) for a in range(4)]
        second = [[sum(x[a] * x[b] for x in items.values()) for b in range(4)]
                  for a in range(4)]
        out.append((first, second, len(items), any(c >= 2 for c in ordinary.values())))
    return out


def _assert_matches(moments, brute, columns=range(J)) -> None:
    for cell, j in enumerate(columns):
        first, second, labelled, several = brute[j]
        assert moments.first[:, cell] == pytest.approx([float(v) for v in first], rel=1e-14)
        assert moments.second[:, :, cell] == pytest.approx(
            np.array([[float(v) for v in row] for row in second]), rel=1e-14, abs=1e-12)
        assert moments.labelled[cell] == labelled
    assert moments.several_ordinary == any(b[3] for b in (brute[j] for j in columns))


@pytest.mark.parametrize("k", [2, 3, 5])
def test_every_scope_equals_the_brute_force_sums(k):
    labels = _labels(k, seed=k)
    sums = moment_sums(labels, k, J)
    _assert_matches(sums.moments(), _brute(labels, k, lambda i, j: True))
    for h, name in enumerate(labels.strata):
        _assert_matches(sums.moments(name),
                        _brute(labels, k, lambda i, j, h=h: labels.stratum[i] == h))
    weights = [Fraction(1 + c, 3) for c in range(k)]
    _assert_matches(sums.moments(weights=[float(w) for w in weights]),
                    _brute(labels, k, lambda i, j: True, lambda i: weights[labels.k[i]]))
    for scope in range(BAND_SCOPES):
        inside = np.flatnonzero(band_scope_members(scope)) + 1
        brute = _brute(labels, k, lambda i, j, inside=inside: j in labels.band_columns
                       and labels.band[i, labels.band_columns.index(j)] in inside)
        _assert_matches(sums.band_moments(scope), brute, labels.band_columns)


def test_the_sums_of_disjoint_items_add_and_subtract_exactly():
    k = 4
    labels = _labels(k, seed=9)
    half = labels.cluster % 2 == 0
    whole = moment_sums(labels, k, J)
    one, other = moment_sums(labels.subset(half), k, J), moment_sums(labels.subset(~half), k, J)
    assert one.plus(other) == whole
    assert whole.plus(other, -1) == one
    assert whole.plus(whole, -1).strata == ()  # every stratum emptied is dropped
    assert MomentSums.of_arrays(whole.arrays()) == whole


def test_no_labels_give_zero_sums():
    empty = LabelArrays(cluster=np.zeros(0, np.int64), stratum=np.zeros(0, np.int64),
                        strata=(), k=np.zeros(0, np.int64), yes=np.zeros(0, bool),
                        code=np.zeros((0, J), np.int64))
    sums = moment_sums(empty, 3, J)
    m = sums.moments()
    assert not m.first.any() and not m.second.any() and not m.labelled.any()
