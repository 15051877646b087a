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
DEFAULT = "clopper_pearson"
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


def default_grid():
    """The grid of docs/coverage.md (836 s on the shared 2-core machine under load): every
    design at 100 items (K ∈ {2, 4, 10}; 1, 5 agreeing and 20 disagreeing systems; depth 1
    and 2), three designs at 1 000 items (K ∈ {4, 10}, depth 1), and the heaviest weights
    at 10 000."""
    small = itertools.product((2, 4, 10), DESIGNS, (100,), ("1", "5 agree", "20 disagree"),
                              (1, 2))
    middle = itertools.product((4, 10), (DESIGNS[0], DESIGNS[1], DESIGNS[3]), (1000,),
                               ("5 agree", "20 disagree"), (1,))
    large = [(10, DESIGNS[1], 10000, "1 (A 0.99)", 1), (4, DESIGNS[0], 10000, "1", 1)]
    return [*small, *middle, *large]


def fast_grid():
    """A few cells for the test suite (≈ 15 s)."""
    return [(10, DESIGNS[1], 100, "1", 1), (4, DESIGNS[0], 100, "1", 2),
            (2, DESIGNS[3], 100, "1", 1)]


def summary(cells, name: str) -> dict:
    v = np.array([c.coverage[name] for c in cells])
    return {"min": float(v.min()), "median": float(np.median(v)),
            "below_floor": int((v < GOAL_FLOOR).sum()), "above_98_5": int((v > 0.985).sum()),
            "cells": len(v)}


def meets_goal(cells, name: str) -> bool:
    s = summary(cells, name)
    return s["below_floor"] == 0 and GOAL_MEDIAN[0] <= s["median"] <= GOAL_MEDIAN[1]


HEADING = "## Routing designs: the inverse-probability estimate"
NAMES = {"clopper_pearson": "**Clopper–Pearson at n_eff (default)**",
         "wilson": "Wilson at n_eff", "jeffreys": "Jeffreys at n_eff",
         "wald": "Wald on the SE", "t": "Student t on the SE"}


def markdown(cells, reps: int, seconds: float | None = None) -> str:
    """The docs/coverage.md section."""
    from estimators.numerics.coverage_doc import command

    methods = list(cells[0].coverage)
    mc = 100 * np.sqrt(0.95 * 0.05 / reps)
    lines = [
        HEADING, "",
        f"Generated by `{command('partitioned')} --design --write docs/coverage.md`"
        + (f" ({seconds:.0f} s)" if seconds is not None else "") + ". Simulated studies "
        f"with known truth ({reps} per cell; Monte-Carlo SE ≈ {mc:.1f} points at 95 %), "
        "`estimators.partitioned.routing_simulation`; every interval computed by "
        "`design_estimates`, the dashboards' function, on the same draws. A cell is one "
        "system of one study: K, design (uniform, or targeted with ε), N items, the panel "
        "of routed systems (1 at A = 0.9; 5 agreeing at A = 0.5, 0.7, 0.9, 0.97, 0.99; 20 "
        "disagreeing, A from 0.5 to 0.99, five of them shown), depth, plus a newcomer "
        "(A = 0.85) that the targeted design does not follow. Truth: the systems' "
        "superpopulation accuracy. Goal: no cell below 93.5 %, median 95–97 %.", "",
        "| interval | items | cells | min | median | cells < 93.5 % | cells > 98.5 % | "
        "goal |", "|---|---|---|---|---|---|---|---|"]
    sizes = sorted({c.n_items for c in cells})
    for m in methods:
        for size in (None, *sizes):
            mine = [c for c in cells if size is None or c.n_items == size]
            s = summary(mine, m)
            lines.append(f"| {NAMES.get(m, m)} | {'all' if size is None else f'{size:,}'} | "
                         f"{s['cells']} | {100 * s['min']:.1f} | {100 * s['median']:.1f} | "
                         f"{s['below_floor']} | {s['above_98_5']} | "
                         f"{'met' if meets_goal(mine, m) else 'missed'} |")
    flag = np.array([c.flagged for c in cells])
    cov = np.array([c.coverage[DEFAULT] for c in cells])
    ok = flag < 0.5
    by_size = "; ".join(f"{100 * flag[[c.n_items == size for c in cells]].mean():.0f} % at "
                        f"{size:,} items" for size in sizes)
    lines += [
        "",
        f"**Approximate flag** (`Estimate.approximate`): fewer than 5 decisive events, or "
        "one item carrying more than a quarter of the residual sum of squares. It fires in "
        f"{100 * flag.mean():.0f} % of the studies ({by_size}); "
        f"{(~ok).sum()} of {len(cells)} cells have it in most of their studies. The other "
        f"{ok.sum()} cells: default interval's coverage min {100 * cov[ok].min():.1f} %, "
        f"median {100 * np.median(cov[ok]):.1f} %, {(cov[ok] < GOAL_FLOOR).sum()} below "
        "93.5 %.", "",
        "Every cell (coverage in %; flag: share of studies flagged approximate; cap: mean "
        "detectable items, the effective count's cap):", "",
        "| K | design | items | panel | depth | system | " + " | ".join(
            NAMES.get(m, m).strip("*") for m in methods) + " | flag | cap |",
        "|---|---|---|---|---|---|" + "---|" * (len(methods) + 2)]
    for c in cells:
        lines.append(f"| {c.k} | {c.design} | {c.n_items:,} | {c.panel} | {c.depth} | "
                     f"{c.system} | " + " | ".join(f"{100 * c.coverage[m]:.1f}"
                                                  for m in methods)
                     + f" | {100 * c.flagged:.0f} | {c.cap:.0f} |")
    return "\n".join(lines) + "\n"


REPS = 2000


def section(reps: int = REPS, grid=None) -> str:
    started = time.perf_counter()
    cells = grid_cells(default_grid() if grid is None else grid, reps)
    return markdown(cells, reps, time.perf_counter() - started)


def full_grid():
    return itertools.product((2, 4, 10), DESIGNS, (100, 1000, 10000), PANELS, (1, 2))
