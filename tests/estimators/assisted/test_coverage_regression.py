"""Coverage of the paper's regression test (``estimators.assisted.coverage_regression``):
the generator is the fitted model, and each arm's Wald interval from ``arm_effects`` covers
its planted effect about 95 % of the time at a small size."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.assisted import coverage, coverage_regression
from estimators.assisted.mixed_logit import arm_effects


def test_the_generator_plants_the_effects_the_fit_recovers():
    # one large study from the model: the fit recovers β and τ
    rng = np.random.default_rng(0)
    correct, labels, sentence = coverage_regression.simulate_study(rng, 1500, 1.0, 0.7)
    assert set(labels) == {"baseline", "arm1", "arm2", "arm3"}
    assert correct.size == 1500 * 4 * coverage_regression.RATINGS_PER_ARM
    fit = arm_effects(correct, labels, sentence, baseline="baseline")
    got = {e.arm: e.beta for e in fit.effects}
    for j, beta in enumerate(coverage_regression.EFFECTS):
        assert got[f"arm{j + 1}"] == pytest.approx(beta, abs=0.12)
    assert fit.tau == pytest.approx(1.0, abs=0.12)
    assert 1 / (1 + math.exp(-fit.baseline_log_odds)) == pytest.approx(0.7, abs=0.03)


def test_each_arms_interval_covers_about_95_percent_with_20_sentences():
    # given 150 studies of 20 sentences (the smallest of the grid)
    c = coverage_regression.regression_cell(20, 1.0, 0.7, 150, seed=2)
    shown = c["shown"].sum()
    pooled = c["covered"].sum() / shown
    se = math.sqrt(0.95 * 0.05 / shown)
    # then the three arms' intervals together cover 95 % within 3 Monte-Carlo SEs
    assert shown == 450
    assert abs(pooled - 0.95) <= 3 * se, c


def test_the_command_prints_its_section(capsys):
    assert coverage.main(["--regression", "--studies", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(coverage_regression.REGRESSION_HEADING)
    assert ".venv/bin/python manage.py coverage_tables assisted --regression" in out
