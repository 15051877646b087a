"""Coverage of Krippendorff's α's interval (``estimators.assisted.coverage_alpha``): the
generator's population α is a, the batched intervals are the dashboard's, the
profile-likelihood interval keeps its coverage where the former BCa interval did not, and
where too few ratings disagree the interval is marked unreliable."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.assisted import coverage, coverage_alpha
from estimators.assisted.agreement import (
    MIN_ALPHA_MINORITY,
    alpha_of_counts,
    krippendorff_alpha_nominal,
)


@pytest.mark.parametrize(("alpha", "shares"), [(0.2, (0.6, 0.3, 0.1)),
                                               (0.8, (0.85, 0.12, 0.03))])
def test_the_generators_alpha_is_a(alpha, shares):
    # α of one very large study is the population α
    rng = np.random.default_rng(1)
    values = coverage_alpha.simulate_ratings(rng, 200_000, 3, alpha, shares)
    got = krippendorff_alpha_nominal(np.repeat(np.arange(200_000), 3), values.ravel())
    assert got.alpha == pytest.approx(alpha, abs=0.01)


def test_the_batched_intervals_are_the_dashboards():
    # given studies of 40 sentences with 2 ratings, verdicts 95 % alike (some studies
    # never use the rarest verdict), and of 60 with 3 ratings
    for s, m, shares, seed in ((40, 2, (0.95, 0.04, 0.01), 3), (60, 3, (0.6, 0.3, 0.1), 4)):
        rng = np.random.default_rng(seed)
        ratings = coverage_alpha.simulate_ratings(rng, s, m, 0.5, shares, 12)
        if m == 2:
            assert any(len(set(r.ravel())) < 3 for r in ratings)
        # when the table computes them all at once
        fig = coverage_alpha.study_figures(ratings, 3)
        # then each is what the dashboard computes for that study alone (the same
        # function, up to the order of floating-point sums in a batch of studies)
        unit = np.repeat(np.arange(s), m)
        for i, r in enumerate(ratings):
            one = krippendorff_alpha_nominal(unit, r.ravel(), interval=True)
            if not math.isfinite(one.alpha):
                assert not fig["ok"][i]
                continue
            assert fig["alpha"][i] == one.alpha
            assert fig["default"][0][i] == pytest.approx(one.lower, abs=1e-12)
            assert fig["default"][1][i] == pytest.approx(one.upper, abs=1e-12)
            assert fig["shown"][i] == one.interval_reliable


def test_a_stack_of_studies_is_each_study_alone():
    # given value counts of 4 × 5 studies of 30 sentences, 2 to 4 ratings each
    rng = np.random.default_rng(9)
    m = rng.integers(2, 5, (4, 5, 30))
    consensus = rng.choice(3, (4, 5, 30), p=(0.7, 0.2, 0.1))
    counts = np.zeros((4, 5, 30, 3))
    for idx in np.ndindex(4, 5, 30):
        for _ in range(m[idx]):
            v = consensus[idx] if rng.random() < 0.6 else rng.choice(3, p=(0.7, 0.2, 0.1))
            counts[idx + (v,)] += 1
    got = alpha_of_counts(counts, interval=True)
    crit = alpha_of_counts(counts, interval=True, crit=3.0)
    for idx in np.ndindex(4, 5):
        one = alpha_of_counts(counts[idx], interval=True)
        for name in ("alpha", "observed_disagreement", "expected_disagreement", "n_units",
                     "n_values", "n_minority"):
            np.testing.assert_array_equal(getattr(got, name)[idx], getattr(one, name))
        np.testing.assert_allclose([got.lower[idx], got.upper[idx]], [one.lower, one.upper],
                                   rtol=0, atol=1e-12)
        # a cut-off of one's own (the table's χ²₁ and t_{S−1} variants)
        mine = alpha_of_counts(counts[idx], interval=True, crit=3.0)
        np.testing.assert_allclose([crit.lower[idx], crit.upper[idx]],
                                   [mine.lower, mine.upper], rtol=0, atol=1e-12)
        assert crit.lower[idx] > got.lower[idx]  # c = 3 < t²_ν ≤ t²_1: a shorter interval


def test_the_likelihood_keeps_the_coverage_the_bca_interval_lost():
    # given 800 studies of 400 sentences, 3 ratings each, 95 % of verdicts Accurate and
    # raters who barely agree (α = 0.2): no note on the dashboard in any of them
    c = coverage_alpha.alpha_cell(coverage_alpha.SHARES["very skewed"], 0.2, 400, 3, 800,
                                  800)
    assert c["n_shown"] == c["n_former"] > 790
    se = math.sqrt(0.95 * 0.05 / c["n_shown"])
    # then the default covers 95 % within 1.5 Monte-Carlo SEs; the former BCa did not
    assert c["default"] >= 0.95 - 1.5 * se, c
    assert c["former"] < 0.95 - 3 * se, c


def test_too_few_disagreements_mark_the_interval_unreliable():
    unit = np.repeat(np.arange(40), 2)
    # 40 sentences, 10 ratings outside the commonest verdict: fewer than MIN_ALPHA_MINORITY
    values = np.array(["A"] * 70 + ["I"] * 10)
    few = krippendorff_alpha_nominal(unit, values, interval=True)
    assert few.n_minority == 10 < MIN_ALPHA_MINORITY and not few.interval_reliable
    assert few.as_dict()["interval_reliable"] is False
    # every pair agrees (α = 1): no interval can say how far below 1 the truth is
    agreed = krippendorff_alpha_nominal(unit, np.repeat(["A"] * 20 + ["I"] * 20, 2),
                                        interval=True)
    assert agreed.alpha == 1 and agreed.n_minority == 40 and not agreed.interval_reliable
    # enough disagreement
    rng = np.random.default_rng(0)
    ok = krippendorff_alpha_nominal(
        unit, coverage_alpha.simulate_ratings(rng, 40, 2, 0.5, (0.5, 0.5)).ravel(),
        interval=True)
    assert ok.n_minority >= MIN_ALPHA_MINORITY and ok.interval_reliable
    assert ok.lower <= ok.alpha <= ok.upper


def test_the_command_prints_its_section(capsys):
    assert coverage.main(["--alpha", "--studies", "4", "--former", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(coverage_alpha.ALPHA_HEADING)
    assert "manage.py coverage_tables assisted --alpha --studies 4 --former 2" in out
