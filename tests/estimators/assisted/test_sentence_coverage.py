"""Coverage of the assisted dashboard's sentence intervals (issue 18): the generator's truth
is right (brute force), the coverage study scores the intervals the analysis' functions
return, and at a small size those intervals keep their promise where the former sentence
bootstrap did not (these tests fail on the former code)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from estimators.assisted import coverage
from estimators.assisted import sentence_coverage as sc
from estimators.assisted.calibration import reliability_bins, reliability_stack
from estimators.assisted.hybridization import calibration_split


def test_subset_distribution_equals_enumerating_every_subset():
    q = np.array([0.3, 0.55, 0.8, 0.9, 0.62])
    for m in (1, 2, 3, 5):
        brute = np.zeros(m + 1)
        subsets = list(itertools.combinations(range(q.size), m))
        for subset in subsets:
            for right in itertools.product((0, 1), repeat=m):
                brute[sum(right)] += math.prod(q[r] if x else 1 - q[r]
                                               for r, x in zip(subset, right, strict=True))
        got = sc.subset_count_distribution(q, m)
        np.testing.assert_allclose(got, brute / len(subsets), atol=1e-14)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_truth_is_the_limit_of_simulated_studies(m):
    # given 200 000 simulated sentences (standard error ≤ 0.001)
    ai = sc.AI_CASES[1]
    truth = sc.cell_truth(ai, m)
    studies = sc.simulate_studies(np.random.default_rng(m), ai, 20_000, m, 10)
    for rule in sc.RULES:
        for source in ("baseline", sc.POOLED):
            h = studies.human[rule, source]
            for t in (0.7, 0.85, math.inf):
                y = np.where(studies.confidence <= t, h, studies.ai_correct)
                # then the population hybrid accuracy is the simulated one
                assert y.mean() == pytest.approx(truth.at(rule, source, t), abs=0.004)
    assert studies.ai_correct.mean() == pytest.approx(truth.ai_accuracy, abs=0.004)


def test_the_study_at_once_scores_what_the_analysis_functions_return():
    # given studies scored at once (moments) and one by one through curve_band,
    # held_out_threshold, overall_accuracy and best_band_sources
    for ai, n, m in ((sc.AI_CASES[0], 50, 3), (sc.AI_CASES[2], 150, 1)):
        at_once = sc.hybrid_cell(ai, n, m, 25)
        truth = sc.cell_truth(ai, m)
        studies = sc.simulate_studies(
            np.random.default_rng([0, n, m, sc.AI_CASES.index(ai)]), ai, n, m, 25)
        one_by_one = sc.Tally()
        sc._hybrid_studies(one_by_one, truth, studies,
                           calibration_split(np.arange(n), 0.5, seed=0), 25, 0)
        # then every figure is shown and covered in the same studies
        for key, counts in one_by_one.counts.items():
            assert tuple(at_once.counts[key][:2]) == tuple(counts[:2]), key


def test_the_ece_interval_scored_is_the_one_reliability_bins_reports():
    ai, n = sc.AI_CASES[1], 50
    studies = sc.simulate_studies(np.random.default_rng(4), ai, n, 1, 8)
    got = reliability_stack(studies.confidence, studies.ai_correct, strategy="distinct",
                            ece_interval=True)
    for i in range(8):
        one = reliability_bins(studies.confidence[i], studies.ai_correct[i],
                               strategy="distinct", ece_interval=True)
        assert (got.ece_lower[i], got.ece_upper[i]) == pytest.approx(one.ece_interval,
                                                                     abs=1e-12)
        assert got.ece[i] == one.ece


def test_the_bars_scored_are_the_ones_reliability_bins_draws():
    # every outcome of a bin of k items at once, against reliability_bins one outcome at a
    # time (a study whose k items share one confidence, s of them right)
    for k in (1, 2, 7, 30):
        lo, hi = sc.dashboard_bars(np.arange(k + 1), np.full(k + 1, k))
        for s in range(k + 1):
            d = reliability_bins(np.full(k, 0.75), np.r_[np.ones(s), np.zeros(k - s)],
                                 strategy="distinct", n_bins=10, level=0.95)
            assert (lo[s], hi[s]) == (d.accuracy_lower[0], d.accuracy_upper[0])


def _pooled(tally: sc.Tally, figure: str) -> float:
    rows = [v for k, v in tally.counts.items() if figure in k]
    return sum(r[1] for r in rows) / sum(r[0] for r in rows)


def test_small_studies_keep_the_promise_study_by_study():
    # given 120 simulated studies of 50 sentences (25 held out), near-ceiling AI, one rating
    # per sentence and arm, scored through the analysis' own functions
    ai, n, m, n_studies = sc.AI_CASES[2], 50, 1, 120
    truth = sc.cell_truth(ai, m)
    studies = sc.simulate_studies(np.random.default_rng(8), ai, n, m, n_studies)
    tally = sc.Tally()
    sc._hybrid_studies(tally, truth, studies, calibration_split(np.arange(n), 0.5, seed=0),
                       n_studies, 0)
    # then the held-out gains (former bootstrap: 66–85 %), the held-out accuracies and the
    # curve's bars (former: 82–93 % at 50 sentences) hold the truth at least 94 % of the time
    assert _pooled(tally, "held-out") >= 0.94
    gains = [v for k, v in tally.counts.items() if k[-1] == "gain" and "held-out" in k]
    assert sum(r[1] for r in gains) / sum(r[0] for r in gains) >= 0.94
    assert _pooled(tally, "curve") >= 0.94
    assert _pooled(tally, "bands") >= 0.94
    assert _pooled(tally, "best range") >= 0.95


def test_the_grid_keeps_the_promise_at_a_smaller_size():
    # given 400 studies in each of four settings, every figure and threshold
    cells = [sc.hybrid_cell(ai, n, m, 400) for ai in sc.AI_CASES[1:] for n, m in
             ((50, 1), (150, 3))]
    for _, _, pick in sc.FIGURES:
        cov = sc._coverages(cells, pick, False)
        # then no cell is below 90 % (Monte-Carlo SE 1.1 points) and the median at least 95 %
        assert cov.size and cov.min() >= 0.90 and np.median(cov) >= 0.95


def test_calibration_bars_hold_their_promise_in_every_bin_size():
    # given a bin of k sentences, s of them right (the bars reliability_bins draws)
    p = sc.BIN_ACCURACIES
    for k in (1, 2, 3, 5, 8, 13, 21, 40):
        lo, hi = np.empty(k + 1), np.empty(k + 1)
        for s in range(k + 1):
            d = reliability_bins(np.full(k, 0.75), np.r_[np.ones(s), np.zeros(k - s)],
                                 strategy="distinct")
            lo[s], hi[s] = d.accuracy_lower[0], d.accuracy_upper[0]
        cover = ((lo[None, :] <= p[:, None]) & (p[:, None] <= hi[None, :]))
        pmf = np.array([[math.comb(k, s) * q ** s * (1 - q) ** (k - s) for s in range(k + 1)]
                        for q in p])
        # then the exact coverage is at least 95 % at every accuracy (Wilson's fell to 86 %)
        assert (pmf * cover).sum(axis=1).min() >= 0.95 - 1e-12, k


def test_the_ece_interval_holds_a_calibrated_ais_zero():
    # given a perfectly calibrated AI (ECE 0): the former bootstrap never covered it
    cell = sc.ece_cell(sc.AI_CASES[0], 150, 300)
    assert cell["truth"] == 0.0
    assert cell["coverage"] >= 0.95


def test_other_raters_are_not_what_the_sentence_intervals_cover():
    # with 3 raters per arm and 500 sentences the sentence interval of "humans alone" is
    # far from holding the value over all raters (what the dashboard's note says)
    assert sc.other_raters_coverage(3, 500, 400) < 0.8


def test_table_commands_print_markdown(capsys):
    assert coverage.main(["--hybrid", "--studies", "5", "--former", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(sc.HYBRID_HEADING)
    for label, _, _ in sc.FIGURES:
        assert f"| {label} |" in out


def test_docs_coverage_has_both_sections_from_their_commands():
    text = (Path(__file__).resolve().parents[3] / "docs" / "coverage.md").read_text()
    for heading, flag in ((sc.HYBRID_HEADING, "--hybrid"),
                          (sc.CALIBRATION_HEADING, "--calibration")):
        section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
        assert f".venv/bin/python manage.py coverage_tables assisted {flag}" in section
        assert "| figure |" in section or "| items in the bin |" in section


def test_bar_coverage_is_the_shared_exact_sum_with_blakers_own_test_at_the_ends():
    # the bars' exact coverage is proportion.exact_coverage of Blaker's interval: a truth at
    # an end is decided by Blaker's test (one item, none right: the set [0, 0.95), since
    # acc(p, 0) = 1 − p; so p = 0.95 is covered only when the item is right, 95 %)
    from estimators.numerics.proportion import blaker, exact_coverage

    for k in (1, 2, 3, 5, 10, 30):
        got = sc.bin_coverage(k, sc.BIN_ACCURACIES, sc.dashboard_bars)
        np.testing.assert_allclose(got, exact_coverage(k, sc.BIN_ACCURACIES, blaker),
                                   rtol=0, atol=1e-12)
    one = sc.bin_coverage(1, np.array([0.95]), sc.dashboard_bars)
    assert one[0] == pytest.approx(0.95, abs=1e-12)
