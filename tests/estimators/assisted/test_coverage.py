"""Coverage of the reliance intervals with few raters (issue 18): the simulation of
``estimators.assisted.coverage`` measures the intervals ``reliance_by_arm`` returns, they
cover at least 93 % from ``MIN_RELIABLE_RATERS`` raters per arm — also with very unequal
raters, where the CR1 interval on G − 1 degrees of freedom did not — and the former
percentile rater bootstrap did not."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from estimators.assisted import coverage
from estimators.assisted.reliance import MIN_RELIABLE_RATERS, reliance_by_arm


def _ratings(base: np.ndarray, arm: np.ndarray, study: int) -> dict[str, np.ndarray]:
    """Per-rating arrays of one simulated study from its per-rater sums (raters 0…G−1 in
    the baseline, G…2G−1 in the assisted arm)."""
    rater, arm_of, correct, ai_correct = [], [], [], []
    for offset, name, sums in ((0, "baseline", base), (len(base), "assisted", arm)):
        for r in range(len(sums)):
            n_right, s_right = sums[r, study, 1]
            n_wrong, s_wrong = sums[r, study, 2]
            for n, s, ai in ((n_right, s_right, 1), (n_wrong, s_wrong, 0)):
                k = int(n)
                rater += [offset + r] * k
                arm_of += [name] * k
                correct += [1] * int(s) + [0] * (k - int(s))
                ai_correct += [ai] * k
    return {"rater": np.array(rater), "arm": np.array(arm_of),
            "correct": np.array(correct), "ai_correct": np.array(ai_correct)}


def test_the_simulation_measures_the_intervals_reliance_by_arm_returns():
    # given simulated studies of 5 raters per arm with rater heterogeneity
    rng = np.random.default_rng(3)
    effect = coverage.EFFECTS[1]
    base = coverage.simulate_arm(rng, effect.baseline, 0.5, 5, 4)
    arm = coverage.simulate_arm(rng, effect.assisted, 0.5, 5, 4)
    lo, hi = coverage.clustered_bounds(base, arm)
    for study in range(4):
        # then the bounds the coverage study scores are those the dashboard shows
        a = reliance_by_arm(**_ratings(base, arm, study), baseline="baseline").arm("assisted")
        for j, name in enumerate(coverage.FIGURES):
            got = getattr(a, name)
            assert (got.lower, got.upper) == pytest.approx((lo[j, study], hi[j, study]),
                                                           abs=1e-12), name


def test_truth_is_the_mean_over_raters():
    # the quadrature against a large draw of raters
    rng = np.random.default_rng(0)
    b = 1.0 * rng.standard_normal(2_000_000)
    want = (1 / (1 + np.exp(-(math.log(0.9 / 0.1) + b)))).mean()
    truth = coverage.true_values(coverage.EFFECTS[1], 1.0)
    assert truth["accuracy_ai_right"] == pytest.approx(want, abs=1e-3)


@pytest.mark.parametrize("rater_sd", coverage.RATER_SDS)
def test_coverage_is_at_least_93_percent_from_the_reliable_size(rater_sd):
    # given 3 000 simulated studies per setting at MIN_RELIABLE_RATERS (5) raters per arm
    n_studies = 3000
    se = math.sqrt(0.93 * 0.07 / n_studies)  # Monte-Carlo SE of a coverage near 93 %
    assert MIN_RELIABLE_RATERS == 5
    covs = np.array([coverage.cell_coverage(effect, rater_sd, MIN_RELIABLE_RATERS, n_studies,
                                            seed=7)["clustered"]
                     for effect in coverage.EFFECTS])
    # then every figure of every effect covers 93 % within 2.5 Monte-Carlo SEs, and their
    # mean is at least 93 %
    assert covs.min() >= 0.93 - 2.5 * se, covs
    assert covs.mean() >= 0.93, covs


def test_very_unequal_raters_keep_93_percent_where_cr1_fell_short():
    # given 50 000 simulated studies of 8 raters per arm, rater effects σ = 1 and an assisted
    # arm at 0.9 when the AI is right (rater accuracies spread and skewed towards 1)
    n_studies = 50_000
    se = math.sqrt(0.93 * 0.07 / n_studies)
    c = coverage.cell_coverage(coverage.EFFECTS[1], 1.0, 8, n_studies, seed=5)
    # then every figure covers 93 % within 1.5 Monte-Carlo SEs (CR1 on G − 1 degrees of
    # freedom covered the accuracy when the AI was right about 92.7 % here)
    assert c["clustered"].min() >= 0.93 - 1.5 * se, c
    assert c["cr1"].min() < 0.93 - 1.5 * se, c
    # at about the same mean width
    assert c["clustered_width"].mean() == pytest.approx(c["cr1_width"].mean(), rel=0.03)


def test_the_former_percentile_bootstrap_fell_short_with_five_raters():
    c = coverage.cell_coverage(coverage.EFFECTS[1], 0.5, 5, 1200, seed=1, n_resamples=300,
                               n_boot_studies=600)
    se = math.sqrt(0.9 * 0.1 / 600)
    assert c["percentile"].max() < 0.93 - 2 * se, c
    assert c["clustered"].min() > c["percentile"].max(), c


def test_table_command_prints_markdown(capsys):
    assert coverage.main(["--reliance", "--studies", "50", "--resamples", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Assisted: reliance with few raters")
    assert "| 5 |" in out and ".venv/bin/python manage.py coverage_tables assisted --reliance" in out
    with pytest.raises(SystemExit):
        coverage.main([])


def test_docs_coverage_table_backs_the_constant():
    # docs/coverage.md carries the table the constant stands on: from MIN_RELIABLE_RATERS
    # raters per arm, with rater effects σ up to 1, no default cell below 93 %
    text = (Path(__file__).resolve().parents[3] / "docs" / "coverage.md").read_text()
    section = text.split("## Assisted: reliance with few raters", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/python manage.py coverage_tables assisted --reliance" in section
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| raters per arm |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    header, _, *rows = lines[start:end]
    columns = [c.strip() for c in header.strip("|").split("|")]
    mild = [j for j, c in enumerate(columns) if c in ("default min, σ = 0.25",
                                                      "default min, σ = 0.5",
                                                      "default min, σ = 1")]
    assert len(mild) == 3
    seen = 0
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if int(cells[0]) >= MIN_RELIABLE_RATERS:
            seen += 1
            assert min(float(cells[j]) for j in mild) >= 93.0, row
    assert seen >= 3
