"""Exact coverage at one query per item (issue 18): the IVW mixtures keep their promise on
a smaller grid, the exact sums are what a brute-force sum gives, and a confidence band's
interval covers as the estimator does at the band's counts."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from estimators.partitioned.accuracy import estimate
from estimators.partitioned.coverage_exact import (
    FINE_ACCURACIES,
    MIXTURES,
    exact_coverage_curve,
    mixture_cells,
    mixtures_markdown,
    small_count_rows,
    small_counts_markdown,
    subset_rows,
)

SMALL_GRID = {"ks": (3, 10), "accuracies": (0.3, 0.9, 0.97), "n_ords": (20, 40),
              "n_comps": (0, 40, 360)}


def test_ivw_mixtures_keep_the_promise_on_a_smaller_grid():
    # given 36 cells of the ML grid's kind, every one small enough to sum exactly
    cells = mixture_cells(SMALL_GRID, reps=100)
    assert len(cells) == 36 and all(c.exact for c in cells)
    for method in MIXTURES:
        v = np.array([c.coverage[method] for c in cells])
        # then no cell is below 93.5 % and the median is within 95–97 %
        assert v.min() >= 0.935, method
        assert 0.95 <= np.median(v) <= 0.97, method
        # while the paper's Wald interval on the same cells collapses
        assert min(c.coverage_wald[method] for c in cells) < 0.6, method


def _brute_force_coverage(n_o: int, n_c: int, k: int, a: float, method: str) -> float:
    """Σ over every outcome, one estimate() call per outcome, binomial terms by comb."""
    q = (a + k - 2) / (k - 1)
    total = 0.0
    for s_o in range(n_o + 1):
        for s_c in range(n_c + 1):
            p = (comb(n_o, s_o) * a**s_o * (1 - a) ** (n_o - s_o)
                 * comb(n_c, s_c) * q**s_c * (1 - q) ** (n_c - s_c))
            e = estimate(n_o, s_o, n_c, s_c, k, method)
            total += p * (e.ci_low <= a <= e.ci_high)
    return total


def test_exact_sums_equal_a_brute_force_sum_over_every_outcome():
    cells = mixture_cells({"ks": (5,), "accuracies": (0.9,), "n_ords": (20,),
                           "n_comps": (40,)}, reps=100)
    for method in MIXTURES:
        assert cells[0].coverage[method] == pytest.approx(
            _brute_force_coverage(20, 40, 5, 0.9, method), abs=1e-6)
    curve = exact_coverage_curve(3, 12, 5, [0.35, 0.8])
    for got, a in zip(curve, (0.35, 0.8), strict=True):
        assert got == pytest.approx(_brute_force_coverage(3, 12, 5, a, "ml"), abs=1e-12)


def test_one_ordinary_label_covers_as_its_two_outcomes_say():
    # one label, the joint exact (mid-p) set {p : both tails > α/2}: 1 of 1 has the upper
    # tail ½p, so the set is (0.05, 1]; 0 of 1 gives [0, 0.95). The coverage is 1 − A up to
    # and including A = 0.05 (there the test rejects: the end is outside), A from 0.95 on,
    # and 1 between
    a = np.asarray(FINE_ACCURACIES)
    want = np.where(a <= 0.05, 1 - a, np.where(a >= 0.95, a, 1.0))
    assert exact_coverage_curve(1, 0, 4) == pytest.approx(want, abs=1e-9)


def test_an_end_is_decided_the_same_whatever_its_last_bits():
    # the computed ends of 1 of 1 and 0 of 1 are 0.05 and 0.95 to rounding: whichever way
    # another library's last bits move them, A = 0.05 and 0.95 are decided by the test
    # (rejected: outside), and a truth a real step inside is inside
    from estimators.numerics.proportion import covers, mid_p_accepts

    est = estimate(1, np.array([0, 1]), 0, np.array([0, 0]), 4, "ml")
    low, high = np.asarray(est.ci_low), np.asarray(est.ci_high)
    test = mid_p_accepts(np.array([0, 1]), 1)
    for ulps in (-4, -1, 0, 1, 4):
        lo, hi = low + ulps * np.spacing(low), high + ulps * np.spacing(high)
        assert covers(lo, hi, 0.05, test).tolist() == [True, False], ulps
        assert covers(lo, hi, 0.95, test).tolist() == [False, True], ulps
        assert covers(lo, hi, 0.05 + 2e-8, test).tolist() == [True, True], ulps
    assert exact_coverage_curve(1, 0, 4, [0.05, 0.95]) == pytest.approx([0.95, 0.95])


def test_a_bands_interval_covers_as_the_estimator_at_the_bands_counts():
    rows = subset_rows(4, 90, reps=1500, seed=3)
    assert [r.scope for r in rows] == ["band 1", "band 2", "band 3", "kept: bands ≥ 1",
                                       "kept: bands ≥ 2"]
    assert [r.n_items for r in rows] == [30, 30, 30, 90, 60]
    se = np.sqrt(0.95 * 0.05 / 1500)
    for r in rows:
        if r.scope.startswith("band"):
            assert abs(r.simulated - r.at_counts) < 4 * se, r
        else:  # labels less dispersed than one binomial: never less coverage
            assert r.simulated > r.at_counts - 4 * se, r


def test_the_sections_name_their_command_and_every_cell():
    cells = mixture_cells({"ks": (3,), "accuracies": (0.9,), "n_ords": (20, 40),
                           "n_comps": (40,)}, reps=100)
    text = mixtures_markdown(cells, reps=100)
    assert text.startswith("## Partitioned, one query per item: the IVW mixtures\n")
    assert "`.venv/bin/python manage.py coverage_tables partitioned --mixtures --write" in text
    assert text.count("\n| 3 | 0.9 |") == 2
    rows = small_count_rows(ks=(10,), n_ords=(1, 3), n_comps=(0,))
    text = small_counts_markdown(rows, subset_rows(10, 30, reps=200), reps=200)
    assert "--small-counts --write docs/coverage.md" in text
    assert "| 10 | 3 | 27 |" in text and "| 10 | 1 | 0 |" in text
