"""Exact coverage of the audit's success-rate interval (Clopper–Pearson, ``algorithm.
exact_interval``), computed by summing binomial probabilities — no simulation.

For n datapoints and a true success probability p, the coverage is
Σ_k P(K = k | n, p) · 1[p ∈ CI(k, n)]. Clopper–Pearson inverts two one-sided exact tests, so
the coverage is ≥ the level for every n and p by construction; ``coverage_markdown`` gives
the minimum over a grid of p for a few n (the section of docs/coverage.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from estimators.numerics import proportion

NS = (10, 30, 100, 300, 1000)


def exact_coverage(n: int, ps: Sequence[float], level: float = 0.95) -> np.ndarray:
    """Coverage of the level-``level`` Clopper–Pearson interval at each p in ``ps`` (the
    shared exact sum, ``estimators.numerics.proportion.exact_coverage``)."""
    return proportion.exact_coverage(
        n, ps, lambda s, m: proportion.clopper_pearson(s, m, level))


def coverage_markdown(ns: Sequence[int] = NS, grid: int = 2000) -> list[str]:
    """docs/coverage.md's section on the audits' success-rate interval."""
    ps = np.linspace(0.5 / grid, 1 - 0.5 / grid, grid)
    lines = ["## Audits: the success rate's exact interval (Clopper–Pearson)", "",
             "Coverage computed exactly (a sum of binomial probabilities over every number of "
             f"successes; no simulation) at {grid} values of the true success probability p "
             "(`estimators/nodata/coverage.py`). Clopper–Pearson is at least 95 % at every p "
             "by construction; the price is width (it is conservative where n is small).", "",
             "| n datapoints | min coverage | at p | p = 0.5 | p = 0.9 | p = 0.99 |",
             "|---|---|---|---|---|---|"]
    for n in ns:
        cov = exact_coverage(n, ps)
        at = exact_coverage(n, (0.5, 0.9, 0.99))
        lines.append(f"| {n} | {100 * cov.min():.2f} | {ps[cov.argmin()]:.3f} | "
                     f"{100 * at[0]:.2f} | {100 * at[1]:.2f} | {100 * at[2]:.2f} |")
    return [*lines, ""]
