"""The single-source columns' default intervals keep their promise (issue 18): exact
coverage on the whole grid, computed from ``estimate`` itself (what the dashboard shows)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from estimators.numerics.proportion import exact_coverage
from estimators.partitioned.accuracy import estimate
from estimators.partitioned.coverage import (
    DEFAULT,
    SINGLE_SOURCE_GRID,
    markdown,
    meets_goal,
    single_source_cells,
    summary,
)


def _column_interval(column, k, interval="auto"):
    """estimate()'s interval of every outcome s of n labels, as an interval for the
    binomial's parameter (A for "ord", q for "comp")."""
    def interval_of(s, n):
        s, n = np.asarray(s, float), np.asarray(n, float)
        zeros = np.zeros_like(s)
        if column == "ord":
            e = estimate(n, s, zeros, zeros, k, "ord", interval=interval)
            return np.asarray(e.ci_low), np.asarray(e.ci_high)
        e = estimate(zeros, zeros, n, s, k, "comp", interval=interval)
        return ((np.asarray(e.ci_low) + k - 2) / (k - 1),
                (np.asarray(e.ci_high) + k - 2) / (k - 1))
    return interval_of


def test_default_single_source_intervals_meet_the_goal_on_the_whole_grid():
    # given every cell of the grid: K ∈ {3, 4, 10}, A ∈ {.5, .7, .9, .97, .99},
    # n_o ∈ {20, 40, 100, 300}, n_c = (K − 1) n_o
    grid = SINGLE_SOURCE_GRID
    for column in ("ord", "comp"):
        coverages = []
        for k in (grid["ks"] if column == "comp" else (3,)):
            for n_o in grid["n_ords"]:
                n = n_o if column == "ord" else (k - 1) * n_o
                p = [a if column == "ord" else (a + k - 2) / (k - 1)
                     for a in grid["accuracies"]]
                coverages += list(exact_coverage(n, p, _column_interval(column, k)))
        coverages = np.array(coverages)
        # then no cell is below 93.5 % (Blaker's: none below 95 %) and the median is 95–97 %
        assert len(coverages) == (20 if column == "ord" else 60)
        assert coverages.min() >= 0.95 - 1e-9, column
        assert 0.95 <= np.median(coverages) <= 0.97, column


def test_the_issues_cell_now_covers():
    # A = 0.97, n_o = 100: the mid-p default covered 92.1 % (ordinary) and 91.7 %
    # (complementary, K = 10); 100 of 100 correct gave [0.9705, 1]
    ord_cov = exact_coverage(100, [0.97], _column_interval("ord", 10))[0]
    comp_cov = exact_coverage(900, [(0.97 + 8) / 9], _column_interval("comp", 10))[0]
    assert ord_cov >= 0.95 and comp_cov >= 0.95
    e = estimate(100, 100, 0, 0, 10, "ord")
    assert e.ci_low < 0.9705 and e.ci_high == 1.0


def test_conservative_single_source_is_clopper_pearson_and_contains_the_default():
    for n, s in ((20, 20), (40, 31), (100, 97), (300, 150)):
        e = estimate(n, s, 0, 0, 4, "ord", interval="conservative")
        ref = stats.binomtest(s, n).proportion_ci(0.95, method="exact")
        assert (float(e.ci_low), float(e.ci_high)) == pytest.approx((ref.low, ref.high),
                                                                    abs=1e-12)
        d = estimate(n, s, 0, 0, 4, "ord")
        assert e.ci_low <= d.ci_low <= d.ci_high <= e.ci_high


def test_the_coverage_command_prints_every_column_and_the_default_meets_the_goal():
    cells = single_source_cells()
    for column in ("ord", "comp"):
        mine = [c for c in cells if c.column == column]
        assert meets_goal(mine, DEFAULT)
        assert not meets_goal(mine, "former default (LR, mid-p where events < 30)")
        assert summary(mine, DEFAULT)["min"] >= 0.95 - 1e-9
    text = markdown(cells)
    assert ".venv/bin/python manage.py coverage_tables partitioned --single-source" in text
    assert text.count("\n| ord | — |") == 20 and text.count("\n| comp | ") == 60


def test_the_command_offers_every_one_query_table_and_writes_the_chosen_section(
        capsys, tmp_path):
    from estimators.partitioned.coverage import TABLES, main

    assert set(TABLES) == {"single_source", "mixtures", "small_counts", "ipw", "stratified",
                           "design"}
    with pytest.raises(SystemExit):
        main([])  # a table must be chosen
    doc = tmp_path / "coverage.md"
    doc.write_text("# Coverage\n\n## Other section\n\nkept\n")
    assert main(["--single-source", "--write", str(doc)]) == 0
    text = doc.read_text()
    assert "## Other section\n\nkept\n" in text
    assert "## Partitioned, one query per item: single-source columns (ord, comp), exact\n" in text
    assert capsys.readouterr().out == ""
