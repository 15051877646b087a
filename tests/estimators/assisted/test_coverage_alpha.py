"""Coverage of Krippendorff's α's interval (``estimators.assisted.coverage_alpha``): the
generator's population α is a², the BCa interval keeps its coverage where the percentile
interval did not, and where too few ratings disagree the interval is marked unreliable."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.assisted import coverage, coverage_alpha
from estimators.assisted.agreement import MIN_ALPHA_MINORITY, krippendorff_alpha_nominal


@pytest.mark.parametrize(("alpha", "shares"), [(0.2, (0.6, 0.3, 0.1)),
                                               (0.8, (0.85, 0.12, 0.03))])
def test_the_generators_alpha_is_a_squared(alpha, shares):
    # α of one very large study is the population α
    rng = np.random.default_rng(1)
    values = coverage_alpha.simulate_ratings(rng, 200_000, 3, alpha, shares)
    got = krippendorff_alpha_nominal(np.repeat(np.arange(200_000), 3), values.ravel())
    assert got.alpha == pytest.approx(alpha, abs=0.01)


def test_bca_keeps_the_coverage_the_percentile_interval_lost():
    # given 600 studies of 200 sentences, 3 ratings each, 95 % of verdicts Accurate, α = 0.5
    # (the docs/coverage.md cell: the same seed draws the same studies)
    c = coverage_alpha.alpha_cell(coverage_alpha.SHARES["very skewed"], 0.5, 200, 3, 600)
    se = math.sqrt(0.95 * 0.05 / c["n"])
    # then the default covers 95 % within 1.5 Monte-Carlo SEs; the percentile interval did not
    assert c["n"] == 600
    assert c["bca"] >= 0.95 - 1.5 * se, c
    assert c["percentile"] < 0.95 - 3 * se, c


def test_too_few_disagreements_mark_the_interval_unreliable():
    unit = np.repeat(np.arange(40), 2)
    # 40 sentences, 10 ratings outside the commonest verdict: fewer than MIN_ALPHA_MINORITY
    values = np.array(["A"] * 70 + ["I"] * 10)
    few = krippendorff_alpha_nominal(unit, values, n_resamples=200)
    assert few.n_minority == 10 < MIN_ALPHA_MINORITY and not few.interval_reliable
    assert few.as_dict()["interval_reliable"] is False
    # every pair agrees (α = 1): no interval can say how far below 1 the truth is
    agreed = krippendorff_alpha_nominal(unit, np.repeat(["A"] * 20 + ["I"] * 20, 2),
                                        n_resamples=200)
    assert agreed.alpha == 1 and agreed.n_minority == 40 and not agreed.interval_reliable
    # enough disagreement
    rng = np.random.default_rng(0)
    ok = krippendorff_alpha_nominal(
        unit, coverage_alpha.simulate_ratings(rng, 40, 2, 0.5, (0.5, 0.5)).ravel(),
        n_resamples=200)
    assert ok.n_minority >= MIN_ALPHA_MINORITY and ok.interval_reliable
    assert ok.lower <= ok.alpha <= ok.upper


def test_the_command_prints_its_section(capsys):
    assert coverage.main(["--alpha", "--studies", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(coverage_alpha.ALPHA_HEADING)
    assert "python -m estimators.assisted.coverage --alpha" in out
