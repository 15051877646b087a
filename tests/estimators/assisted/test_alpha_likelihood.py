"""The profile-likelihood interval of Krippendorff's α (``estimators.assisted.alpha_likelihood``):
its types against a direct enumeration, its bounds against an independent maximisation of
the likelihood, its degrees of freedom against the formula, and the unseen patterns it
allows."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, stats

from estimators.assisted import agreement, alpha_likelihood
from estimators.assisted.agreement import krippendorff_alpha_nominal


def test_sentence_types_are_every_split_of_the_ratings():
    # given sentences of 2 and 3 ratings over 3 values
    x = alpha_likelihood.sentence_types([3, 2, 3], 3)
    # then every (m, split) appears once, with d = Σ n(n − 1)/(m − 1)
    want = {(m, n) for m in (2, 3) for n in itertools.product(range(m + 1), repeat=3)
            if sum(n) == m}
    got = {(int(row[1:].sum()), tuple(int(v) for v in row[1:])) for row in x}
    assert got == want and len(x) == len(want) == alpha_likelihood.type_count([2, 3], 3)
    for row in x:
        n, m = row[1:], row[1:].sum()
        assert row[0] == pytest.approx((n * (n - 1)).sum() / (m - 1))


def test_effective_df_is_satterthwaites():
    # equal spread over the sentences: nothing to correct, S − 1
    even = np.array([[0.0, 1.0] * 10])
    assert alpha_likelihood.effective_df(even)[0] == 19
    # one sentence carries the variance: ν = 2(Σe²)² / (Σe⁴ − (Σe²)²/S), e = ᾱ − α₍u₎
    lumpy = np.array([[0.0] * 19 + [1.0]])
    e = lumpy[0].mean() - lumpy[0]
    want = 2 * (e ** 2).sum() ** 2 / ((e ** 4).sum() - (e ** 2).sum() ** 2 / 20)
    assert alpha_likelihood.effective_df(lumpy)[0] == pytest.approx(want)
    assert want < 3
    # no variance at all: S − 1
    assert alpha_likelihood.effective_df(np.zeros((1, 8)))[0] == 7


def _ratings(patterns: dict[tuple[int, ...], int]) -> tuple[np.ndarray, np.ndarray]:
    unit, value, u = [], [], 0
    for split, n in patterns.items():
        for _ in range(n):
            for c, k in enumerate(split):
                unit += [u] * k
                value += [c] * k
            u += 1
    return np.array(unit), np.array(value)


def _profile_by_brute_force(patterns: dict, a0: float, k: int, m: int) -> float:
    """−2 log R(α₀) by scipy's SLSQP over the shares of every type (softmax, several
    starts): the largest likelihood with α(p) = α₀, against the largest without."""
    x = alpha_likelihood.sentence_types([m], k)
    n = np.array([patterns.get(tuple(int(v) for v in row[1:]), 0) for row in x], float)
    w = n + alpha_likelihood.EPSILON
    s = n.sum()

    def shares(q):
        e = np.exp(q - q.max())
        return e / e.sum()

    def alpha_of(q):
        mu = shares(q) @ x
        t = mu[1:]
        return 1 - (t.sum() - 1 / s) * (t.sum() - mu[0]) / (t.sum() ** 2 - (t * t).sum())

    best = math.inf
    for start in range(8):
        q0 = np.log(w / w.sum()) + np.random.default_rng(start).normal(0, start > 0, len(w))
        res = optimize.minimize(lambda q: -(w * np.log(shares(q))).sum(), q0,
                                constraints=[{"type": "eq", "fun": lambda q: alpha_of(q) - a0}],
                                method="SLSQP", options={"maxiter": 1000, "ftol": 1e-14})
        if abs(alpha_of(res.x) - a0) < 1e-9:
            best = min(best, res.fun)
    return 2 * (best + (w * np.log(w / w.sum())).sum())


@pytest.mark.parametrize("patterns", [
    # 60 sentences, 3 ratings, a rare third verdict never given by all three
    {(3, 0, 0): 38, (2, 1, 0): 12, (1, 2, 0): 4, (0, 3, 0): 3, (2, 0, 1): 2, (1, 1, 1): 1},
    # 40 sentences, 2 ratings, two values
    {(2, 0): 22, (1, 1): 8, (0, 2): 10},
])
def test_the_bounds_are_where_the_profile_likelihood_crosses_the_cutoff(patterns):
    # given a study
    unit, value = _ratings(patterns)
    k, m = len(next(iter(patterns))), sum(next(iter(patterns)))
    got = krippendorff_alpha_nominal(unit, value, interval=True)
    # the cut-off: t² on Satterthwaite's ν of the jackknife
    counts = np.array([split for split, n in patterns.items() for _ in range(n)], float)
    d = (counts * (counts - 1)).sum(axis=1) / (m - 1)
    jack = agreement._alpha_parts(d.sum() - d, counts.sum(axis=0) - counts)[0]
    nu = alpha_likelihood.effective_df(jack[None])[0]
    cut = stats.t.ppf(0.975, nu) ** 2
    # then at each bound an independent maximisation of the likelihood gives −2 log R = c,
    # and just inside the bounds less
    assert got.lower < got.alpha < got.upper
    for bound, inward in ((got.lower, 0.01), (got.upper, -0.01)):
        assert _profile_by_brute_force(patterns, bound, k, m) == pytest.approx(cut, abs=1e-4)
        assert _profile_by_brute_force(patterns, bound + inward, k, m) < cut


def test_patterns_never_seen_may_take_probability(monkeypatch):
    # given verdicts 95 % alike where no sentence has all three ratings on a rare verdict
    patterns = {(3, 0, 0): 360, (2, 1, 0): 30, (2, 0, 1): 6, (1, 2, 0): 4}
    unit, value = _ratings(patterns)
    every = krippendorff_alpha_nominal(unit, value, interval=True)
    # when only the patterns seen may have probability (the empirical likelihood, used
    # beyond MAX_TYPES possible patterns)
    monkeypatch.setattr(agreement, "MAX_TYPES", 0)
    seen = krippendorff_alpha_nominal(unit, value, interval=True)
    # then allowing the unseen ones — the sentence bootstrap never draws them — widens the
    # interval upwards, where a sentence with three rare verdicts would move α
    assert every.alpha == seen.alpha
    assert every.upper > seen.upper + 0.03
    assert every.lower == pytest.approx(seen.lower, abs=0.001)


def test_no_disagreement_puts_the_upper_bound_at_one():
    unit, value = _ratings({(2, 0): 12, (0, 2): 8})
    got = krippendorff_alpha_nominal(unit, value, interval=True)
    assert got.alpha == 1 and got.upper == 1 and -1 <= got.lower < 1
