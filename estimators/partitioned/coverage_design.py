"""Coverage of the design-based estimate's intervals under routing designs (issue 28;
docs/coverage.md, "Routing designs: the inverse-probability estimate"):

    .venv/bin/python manage.py coverage_tables partitioned --design --write docs/coverage.md

Simulation with known truth (:mod:`estimators.partitioned.routing_simulation`): every
figure is the share of R replicate studies whose interval holds the system's
superpopulation accuracy A_s. Each cell is one system of one study configuration: K,
design (uniform, or targeted with ε), N items, a panel of systems (1, 5 or 20, agreeing
or disagreeing, plus a newcomer that the targeted design does not follow), depth 1 or 2.
Every candidate interval of :func:`estimators.partitioned.design_estimate.interval` is
computed on the same draws (:func:`~estimators.partitioned.design_estimate.
design_estimates`, the dashboards' function)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from estimators.partitioned.design_estimate import INTERVALS, design_estimates
from estimators.partitioned.designs import TARGETED, UNIFORM
from estimators.partitioned.routing_simulation import simulate

GOAL_FLOOR = 0.935
GOAL_MEDIAN = (0.95, 0.97)
DEFAULT = "wilson"
NEWCOMER_ACCURACY = 0.85
# panels: name → (routed accuracies, agree, the routed systems evaluated)
PANELS = {
    "1": ((0.9,), True, (0,)),
    "1 (A 0.99)": ((0.99,), True, (0,)),
    "1 (A 0.5)": ((0.5,), False, (0,)),
    "5 agree": ((0.5, 0.7, 0.9, 0.97, 0.99), True, (0, 1, 2, 3, 4)),
    "5 disagree": ((0.5, 0.7, 0.9, 0.97, 0.99), False, (0, 1, 2, 3, 4)),
    "20 agree": (tuple(np.round(np.linspace(0.5, 0.99, 20), 3)), True, (0, 8, 15, 18, 19)),
    "20 disagree": (tuple(np.round(np.linspace(0.5, 0.99, 20), 3)), False,
                    (0, 8, 15, 18, 19)),
}
FLAG_RULES = {
    "events < 3": lambda d: d["events"] < 3,
    "events < 5": lambda d: d["events"] < 5,
    "events < 10": lambda d: d["events"] < 10,
    "share > 0.25": lambda d: d["share"] > 0.25,
    "share > 0.1": lambda d: d["share"] > 0.1,
    "cap < 30": lambda d: d["cap"] < 30,
}
DESIGNS = (("uniform", None), ("targeted", 0.05), ("targeted", 0.1), ("targeted", 0.2),
           ("targeted", 0.5))


@dataclass(frozen=True)
class Cell:
    k: int
    design: str  # "uniform" or "ε 0.2"
    n_items: int
    panel: str
    depth: int
    system: str  # "A 0.9" or "newcomer A 0.85"
    accuracy: float
    reps: int
    coverage: dict  # interval → share of studies covering
    coverage_unflagged: dict  # interval → the same among studies not flagged approximate
    width: dict
    flagged: float  # share of studies flagged approximate
    rules: dict  # flag rule → (share flagged, {interval: coverage unflagged})
    cap: float  # mean detectable items


def study_cells(rng, k, design, epsilon, n_items, panel, depth, reps, chunk_units=3e6,
                methods=INTERVALS) -> list[Cell]:
    """The cells of one study configuration (each evaluated system), R replicates drawn in
    chunks of at most ``chunk_units`` item-steps × systems."""
    accs, agree, shown = PANELS[panel]
    accuracies = (*accs, NEWCOMER_ACCURACY)
    evaluate = (*shown, len(accs))
    per_rep = n_items * depth * len(evaluate) * 2
    size = max(1, int(chunk_units // per_rep))
    hits = {m: np.zeros(len(evaluate)) for m in methods}
    hits_ok = {m: np.zeros(len(evaluate)) for m in methods}
    widths = {m: np.zeros(len(evaluate)) for m in methods}
    flagged = np.zeros(len(evaluate))
    rule_flags = {r: np.zeros(len(evaluate)) for r in FLAG_RULES}
    rule_hits = {r: {m: np.zeros(len(evaluate)) for m in methods} for r in FLAG_RULES}
    caps = np.zeros(len(evaluate))
    done = 0
    while done < reps:
        r = min(size, reps - done)
        st = simulate(rng, r, n_items, k, accuracies, agree=agree,
                      design=UNIFORM if design == "uniform" else TARGETED,
                      epsilon=epsilon or 0.2, routed=range(len(accs)), depth=depth,
                      evaluate=evaluate)
        found, diag = design_estimates(st.steps, interval_methods=methods, diagnostics=True)
        flag = found[methods[0]].approximate
        flagged += flag.sum(axis=0)
        caps += diag["cap"].sum(axis=0)
        rflag = {name: rule(diag) for name, rule in FLAG_RULES.items()}
        for name, f in rflag.items():
            rule_flags[name] += f.sum(axis=0)
        for m, est in found.items():
            cover = (est.ci_low <= st.truth) & (st.truth <= est.ci_high)
            hits[m] += cover.sum(axis=0)
            hits_ok[m] += (cover & ~flag).sum(axis=0)
            widths[m] += (est.ci_high - est.ci_low).sum(axis=0)
            for name, f in rflag.items():
                rule_hits[name][m] += (cover & ~f).sum(axis=0)
        done += r
    label = "uniform" if design == "uniform" else f"ε {epsilon}"
    cells = []
    for i, a in enumerate(accuracies[j] for j in evaluate):
        newcomer = i == len(evaluate) - 1
        unflagged = reps - flagged[i]
        cells.append(Cell(
            k=k, design=label, n_items=n_items, panel=panel, depth=depth,
            system=("newcomer " if newcomer else "") + f"A {a:g}", accuracy=float(a),
            reps=reps, coverage={m: hits[m][i] / reps for m in methods},
            coverage_unflagged={m: (hits_ok[m][i] / unflagged if unflagged else np.nan)
                                for m in methods},
            width={m: widths[m][i] / reps for m in methods}, flagged=flagged[i] / reps,
            rules={r: (rule_flags[r][i] / reps,
                       {m: (rule_hits[r][m][i] / (reps - rule_flags[r][i])
                            if reps > rule_flags[r][i] else np.nan) for m in methods})
                   for r in FLAG_RULES},
            cap=caps[i] / reps))
    return cells


def grid_cells(grid, reps: int, seed: int = 20261129, progress=None) -> list[Cell]:
    """Every cell of ``grid``: an iterable of (K, (design, ε), N, panel, depth)."""
    rng = np.random.default_rng(seed)
    cells = []
    for k, (design, eps), n, panel, depth in grid:
        started = time.perf_counter()
        cells += study_cells(rng, k, design, eps, n, panel, depth, reps)
        if progress:
            progress(k, design, eps, n, panel, depth, time.perf_counter() - started)
    return cells


def full_grid():
    return itertools.product((2, 4, 10), DESIGNS, (100, 1000, 10000), PANELS, (1, 2))
