"""The IPW and stratified columns at one query per item keep their promise in simulated
studies with known truth (issue 18), where their former intervals did not."""

from __future__ import annotations

import numpy as np

from estimators.partitioned.coverage_adjusted import (
    imbalance_design,
    ipw_cell,
    ipw_cells,
    ipw_markdown,
    strata_designs,
    stratified_cell,
    stratified_cells,
    stratified_markdown,
)


def test_the_imbalance_generator_has_the_population_accuracy_it_claims():
    rate, acc, wrong = imbalance_design(5, 0.7, (0.25, 1.0))
    assert rate.tolist() == [0.25, 0.4375, 0.625, 0.8125, 1.0]
    assert abs(acc.mean() - 0.7) < 1e-12
    assert acc[0] < acc[-1]  # the slow classes are the hard ones
    assert np.allclose(wrong.sum(axis=1), 1.0) and (np.diag(wrong) == 0).all()
    for _, sample, population, acc_h in strata_designs(0.97):
        assert abs(population @ acc_h / population.sum() - 0.97) < 1e-12
        assert not np.allclose(sample, population)  # sampled out of proportion
        assert ((acc_h >= 0) & (acc_h <= 1)).all()


def test_ipw_column_covers_under_a_completion_imbalance_of_four():
    # given classes answered at 25 % to 100 %, the slow ones hard, 2 000 items, K = 5
    cell = ipw_cell(5, 0.7, 2000, 3000, np.random.default_rng(0), completion=(0.25, 1.0))
    # then the plain estimate is biased (coverage collapses), the IPW one is not
    assert cell.bias["plain"] > 0.05 and cell.coverage["plain"] < 0.5
    assert abs(cell.bias["ipw"]) < 0.005
    # and its interval covers, where Kish's count of each source fell short
    assert cell.coverage["ipw"] >= 0.94
    assert cell.coverage["kish"] < 0.935


def test_stratified_column_covers_with_a_small_stratum_that_weighs_much():
    # given 4 strata, the one sampled least (10 % of 400 items) 40 % of the population
    design = next(d for d in strata_designs(0.7) if d[0] == "4 strata")
    cell = stratified_cell(10, 0.7, 400, 3000, np.random.default_rng(0), design)
    # then the combined per-stratum intervals cover; the effective-count one did not
    assert cell.coverage["combined"] >= 0.94
    assert cell.coverage["effective"] < 0.935
    assert cell.coverage["pooled"] < 0.6  # the strata cannot be ignored


def test_the_sections_name_their_command_and_list_every_cell():
    cells = ipw_cells(reps=200, ks=(3,), accuracies=(0.7,), items=(100, 400))
    text = ipw_markdown(cells, reps=200)
    assert "`.venv/bin/python manage.py coverage_tables partitioned --ipw --write docs/coverage.md`" in text
    assert [c.design for c in cells] == ["50–100 %", "50–100 %", "25–100 %", "25–100 %"]
    assert text.count("| 3 | 0.7 |") == 4
    cells = stratified_cells(reps=200, ks=(3,), accuracies=(0.9,), items=(100,))
    text = stratified_markdown(cells, reps=200)
    assert "--stratified --write docs/coverage.md" in text
    assert "| 2 strata |" in text and "| 4 strata |" in text
