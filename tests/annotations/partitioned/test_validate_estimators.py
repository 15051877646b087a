"""manage.py validate_estimators: the paper's validation on simulated data, the Table 1
preset, and its sections of docs/coverage.md."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from estimators.partitioned.simulation import TABLE1


def test_validate_estimators_command_prints_the_table_and_writes_the_figure(tmp_path):
    out = StringIO()
    figure = tmp_path / "fig2.svg"
    call_command("validate_estimators", "--reps", "500", "--k", "4", "--accuracy", "0.8",
                 "--n-ord", "50", "--n-comp", "150", "--figure", str(figure),
                 "--ratios", "1,4", stdout=out, stderr=StringIO())
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("K=4 A=0.8 n_o=50 n_c=150 reps=500")
    assert [line.split()[0] for line in lines[2:]] == ["Ord", "Comp-n_o", "Comp-(K-1)",
                                                       "Comp-Var", "IVW-0.5", "IVW", "ML"]
    svg = figure.read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 5


def test_validate_estimators_table1_preset_prints_the_papers_figures_beside_simulated_ones():
    out = StringIO()
    call_command("validate_estimators", "--preset", "table1", "--reps", "200", stdout=out,
                 stderr=StringIO())
    text = out.getvalue()
    assert text.startswith("The paper's Table 1 settings, simulated (reps=200")
    lines = text.splitlines()
    for b in TABLE1:
        # each benchmark: its K, Ord-Eval accuracy and n_o = 300 (GPQA 120), n_c = (K−1)·n_o
        head = lines.index(f"{b.name} (K={b.k}, Ord-Eval A={b.accuracy}, n_o={b.n_ord}, "
                           f"n_c={(b.k - 1) * b.n_ord})")
        rows = {line.split()[0]: line.split() for line in lines[head + 2:head + 9]}
        assert list(rows) == ["Ord", "Comp-n_o", "Comp-(K-1)", "Comp-Var", "IVW-0.5", "IVW",
                              "ML"]
        assert rows["Comp-(K-1)"][-1] == "—"  # not a row of the paper's table
        for name, (mean, sd_seeds, per_run) in b.paper.items():
            row = rows[name]
            # simulated mean, SD, (SE), then the paper's mean ± SD (per-run SD)
            assert row[-4:] == [f"{mean:.2f}", "±", f"{sd_seeds:.2f}", f"({per_run:.2f})"]
            assert abs(float(row[4]) - per_run) < 0.35 * per_run  # 200 replicates


def test_the_coverage_grid_writes_only_its_own_sections(tmp_path):
    """validate_estimators --grid puts its sections in place and leaves the others of the
    file (the index, the reliance and audit sections other commands write) as they were."""
    doc = tmp_path / "coverage.md"
    doc.write_text("# Coverage\n\n## Every interval a page shows\n\nindex\n\n"
                   "## Partitioned, one query per item: single-source columns (ord, comp), "
                   "exact\n\nold\n\n## Assisted: reliance\n\nkept\n")
    call_command("validate_estimators", "--reps", "10", "--grid", str(doc),
                 "--grid-parts", "single-source", stdout=StringIO(), stderr=StringIO())
    text = doc.read_text()
    assert text.startswith("# Coverage\n\n## Every interval a page shows\n\nindex\n\n"
                           "## Partitioned, one query per item: single-source columns")
    assert "\nold\n" not in text and "| ord | — | 0.97 | 100 | 100 |" in text
    assert text.endswith("## Assisted: reliance\n\nkept\n")
    with pytest.raises(CommandError, match="--grid-parts: unknown"):
        call_command("validate_estimators", "--reps", "10", "--grid", str(doc),
                     "--grid-parts", "everything", stdout=StringIO(), stderr=StringIO())
