"""The audits' success-rate interval covers at least 95 % at every p (Clopper–Pearson),
checked by summing binomial probabilities against scipy's own exact interval."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, binomtest

from estimators.nodata.coverage import coverage_markdown, exact_coverage


@pytest.mark.parametrize("n", [1, 5, 20, 60])
def test_exact_coverage_is_at_least_the_level_and_matches_scipys_interval(n):
    ps = np.linspace(0.001, 0.999, 400)
    cov = exact_coverage(n, ps)
    assert cov.min() >= 0.95 - 1e-9
    # the same sum over scipy's Clopper–Pearson ("exact") intervals
    cis = [binomtest(k, n).proportion_ci(0.95, method="exact") for k in range(n + 1)]
    for p, c in zip(ps[::40], cov[::40], strict=True):
        pm = binom.pmf(np.arange(n + 1), n, p)
        assert c == pytest.approx(sum(pm[k] for k, ci in enumerate(cis)
                                      if ci.low <= p <= ci.high), abs=1e-9)


def test_the_docs_section_has_a_row_per_n():
    lines = coverage_markdown(ns=(10, 30), grid=200)
    assert sum(line.startswith("| 10 |") or line.startswith("| 30 |") for line in lines) == 2


def test_the_command_writes_its_section_in_place(tmp_path):
    from estimators.nodata.coverage import AUDIT_HEADING, main

    doc = tmp_path / "coverage.md"
    doc.write_text(f"# Coverage\n\n{AUDIT_HEADING}\n\nold\n\n## Other\n\nkept\n")
    assert main(["--write", str(doc)]) == 0
    text = doc.read_text()
    assert "old" not in text and "| 1000 | 95.0" in text and text.endswith("## Other\n\nkept\n")


def test_each_flag_writes_its_own_section(tmp_path, monkeypatch):
    from estimators.nodata import coverage

    monkeypatch.setattr(coverage, "KAPPA_NS", (20,))
    doc = tmp_path / "coverage.md"
    doc.write_text("# Coverage\n\n## Other\n\nkept\n")
    assert coverage.main(["--kappa", "--write", str(doc)]) == 0
    text = doc.read_text()
    assert coverage.KAPPA_HEADING in text and coverage.AUDIT_HEADING not in text
    assert ".venv/bin/python manage.py coverage_tables nodata --kappa" in text and "## Other\n\nkept" in text
    assert coverage.main(["--success-rate", "--write", str(doc)]) == 0
    text = doc.read_text()
    assert coverage.KAPPA_HEADING in text and coverage.AUDIT_HEADING in text
