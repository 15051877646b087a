"""The reproduction of the paper's Tables 2 and 3: the paper's tree, the JSON's keys, the
entry point, and that each row is the library's No-Data Algorithm; estimators.nodata imports
no Django."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from estimators.nodata import reproduce as rep
from estimators.nodata.algorithm import no_data_algorithm
from estimators.nodata.synthetic import RUBRICS, load, tree_evaluator
from estimators.nodata.verifiers import ProgrammaticVerifier


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tmp_path_factory.mktemp("nodata") / "out.json"
    assert rep.main(["--json", str(path), "--seeds", "2"]) == 0
    return json.loads(path.read_text())


def test_the_json_has_every_row_with_its_metrics(result):
    for evaluator in ("dt_number", "dt_bits"):
        for ph in ("ip", "oop"):
            for case in ("known", "unknown"):
                row = result["table2"][evaluator][ph][case]
                assert set(row) >= {"successes", "flips", "accuracy", "f1"}
    for lie in ("no_sigma", "no_f", "probabilistic"):
        for ph in ("ip", "oop"):
            for table in ("table3", "table3_no_flips", "table3_as_text"):
                row = result[table][lie][ph]
                assert set(row) >= {"successes", "flips", "accuracy", "f1", "round_pass"}
                assert all(set(row[m]) == {"mean", "sd"} for m in row)
    assert result["meta"]["seeds"] == 2 and result["meta"]["rounds"] == 3
    assert [p["phi"] for p in result["phi_sweep"]["dt_number"]["oop"]] == list(rep.PHI_SWEEP)


def test_the_paper_tree_gives_the_published_known_scores(result):
    # Table 2, DT (known): 62.2 in phenomenon, 54.2 / 54.2 out of phenomenon (the published
    # F1 58.8 in phenomenon is the notebook's 0.598 miscopied: its unknown column has 59.8)
    ip, oop = (result["table2"]["dt_number"][ph]["known"] for ph in ("ip", "oop"))
    assert round(ip["accuracy"]["mean"], 1) == 62.2 and round(ip["f1"]["mean"], 1) == 59.8
    assert round(oop["accuracy"]["mean"], 1) == 54.2 and round(oop["f1"]["mean"], 1) == 54.2
    assert ip["successes"] is None and ip["flips"] is None


def test_known_scores_agree_with_scikit_learn():
    from sklearn.metrics import accuracy_score, f1_score

    for ph in ("ip", "oop"):
        test = load(ph, "test")
        for evaluator in ("dt_number", "dt_bits"):
            pred = tree_evaluator(evaluator).predict([x for x, _ in test])
            truth = [y for _, y in test]
            acc, f1 = rep.scores(list(pred), truth)
            assert acc == pytest.approx(100 * accuracy_score(truth, pred))
            assert f1 == pytest.approx(100 * f1_score(truth, pred))


def test_a_row_is_the_library_algorithm_for_that_seed():
    # table2.dt_number.oop.unknown with one seed = no_data_algorithm(seed=0, φ = 0.5)
    one = rep.reproduce(seeds=1)
    test = load("oop", "test")
    run = no_data_algorithm([x for x, _ in test], tree_evaluator("dt_number", "oracle"),
                            ProgrammaticVerifier(RUBRICS["oop"]), rounds=3, phi=0.5, seed=0)
    acc, _ = rep.scores(run.labels, [y for _, y in test])
    row = one["table2"]["dt_number"]["oop"]["unknown"]
    assert row["successes"]["mean"] == pytest.approx(round(100 * run.success_rate, 3))
    assert row["flips"]["mean"] == pytest.approx(round(100 * run.flip_rate, 3))
    assert row["accuracy"]["mean"] == pytest.approx(round(acc, 3))
    assert row["successes"]["sd"] == 0.0


def test_theorem_one_bound_column_of_the_sweep(result):
    for ph in ("ip", "oop"):
        alpha = result["table2"]["dt_number"][ph]["known"]["accuracy"]["mean"] / 100
        for cell in result["phi_sweep"]["dt_number"][ph]:
            phi = cell["phi"]
            expected = 100 * (1 - (1 - alpha) * (1 - phi + phi / 64))
            assert cell["bound"] == pytest.approx(expected, abs=1e-3)


def test_markdown_tables_show_ours_and_the_papers(result):
    text = rep.markdown(result)
    assert "| dt_number oop unknown |" in text and "(46.4)" in text
    assert text.count("\n| no_sigma ip |") == 3


def test_the_module_runs_as_a_script(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "estimators.nodata.reproduce", "--json",
                           str(out), "--seeds", "2"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "table3" in json.loads(out.read_text())


def test_estimators_nodata_imports_without_django():
    code = ("import sys, estimators.nodata.reproduce, estimators.nodata.commitments; "
            "assert 'django' not in sys.modules, 'estimators.nodata imported django'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_seeds_must_be_positive():
    with pytest.raises(ValueError, match="seeds"):
        rep.reproduce(seeds=0)
    assert np.isfinite(rep.scores([1, 0], [1, 1])).all()


def test_the_rubrics_and_generators_import_without_scikit_learn():
    """scikit-learn (about a second of CPU to import) comes in only when a tree is fitted: an
    audit's demo data needs the rubrics and generators, not the tree (issue 27)."""
    code = ("import sys, estimators.nodata.synthetic as s; s.generator('oracle'); "
            "assert 'sklearn' not in sys.modules, 'synthetic imported scikit-learn'; "
            "s.fitted_tree('dt_number'); assert 'sklearn' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
