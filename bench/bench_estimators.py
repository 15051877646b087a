"""Cost of ``estimators.partitioned.accuracy.estimate`` over many cells (no database), of the exact
interval per small-sample cell, and of one validation study.

    .venv/bin/python bench/bench_estimators.py --cells 100000

Large cells: n_o ∈ [200, 2000], n_c ∈ [200, 20000], K = 5, A ∈ [0.05, 0.99], drawn until
every kind of event is plentiful (the "auto" interval then uses no exact cell); the exact
interval's cost is measured separately on small-sample cells (n_o ∈ [20, 200], n_c ∈ [0,
2000], A ∈ [0.9, 0.995]), each a distinct outcome, with cold memos: the randomised interval
(the default) and the conservative one. Validation studies: the hard cell of docs/
estimators.md and the grid's slowest (thousands of distinct outcomes needing the exact
interval); ``--every-cell`` times all 480 cells of the validation grid.
Budgets (issue 3): "ivw" ≤ 50 ms and "ml" with intervals ≤ 1 s for 100 000 cells; the
validation study of one cell with 10 000 replicates ≤ 2 s.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from estimators.partitioned.accuracy import METHODS, estimate  # noqa: E402
from estimators.partitioned.clustered import Clusters, design_effects, estimate_clustered  # noqa: E402
from estimators.partitioned.exact import clear_memo, exact_interval  # noqa: E402
from estimators.partitioned.intervals import few_events  # noqa: E402
from estimators.partitioned.likelihood import ml_accuracy  # noqa: E402
from estimators.partitioned.simulation import (  # noqa: E402
    STANDARD_GRID,
    simulate_routed_items,
    validation_study,
)

K = 5


def large_cells(rng: np.random.Generator, cells: int):
    out = [[], [], [], []]
    while len(out[0]) < cells:
        n_o = rng.integers(200, 2001, cells).astype(float)
        n_c = rng.integers(200, 20001, cells).astype(float)
        a = rng.uniform(0.05, 0.99, cells)
        s_o = rng.binomial(n_o.astype(int), a).astype(float)
        s_c = rng.binomial(n_c.astype(int), (a + K - 2) / (K - 1)).astype(float)
        keep = ~np.logical_or(*few_events(n_o, s_o, n_c, s_c))
        for arr, new in zip(out, (n_o, s_o, n_c, s_c), strict=True):
            arr.extend(new[keep].tolist())
    return [np.array(arr[:cells]) for arr in out]


def timed(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=300, help="small-sample cells to time")
    parser.add_argument("--items", type=int, default=250_000,
                        help="items of the clustered (several queries per item) timing")
    parser.add_argument("--every-cell", action="store_true",
                        help="also time the validation study on every cell of the grid")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n_o, s_o, n_c, s_c = large_cells(rng, args.cells)
    print(f"{args.cells:,} large cells (n_o, n_c ≥ 200, ≥ 30 events of each kind), K = {K}:")
    for method in METHODS:
        auto = timed(lambda m=method: estimate(n_o, s_o, n_c, s_c, K, method=m))
        asym = timed(lambda m=method: estimate(n_o, s_o, n_c, s_c, K, method=m,
                                               interval="asymptotic"))
        print(f"  {method:10s} median {auto:7.1f} ms (asymptotic intervals only: "
              f"{asym:7.1f} ms)")

    small_o = rng.integers(20, 201, args.small).astype(float)
    small_c = rng.integers(0, 2001, args.small).astype(float)
    a = rng.uniform(0.9, 0.995, args.small)
    so = rng.binomial(small_o.astype(int), a).astype(float)
    sc = rng.binomial(small_c.astype(int), (a + K - 2) / (K - 1)).astype(float)
    share = np.logical_or(*few_events(small_o, so, small_c, sc)).mean()
    print(f"exact interval, small-sample cells (n_o 20–200, n_c 0–2000, A 0.9–0.995; "
          f"{100 * share:.0f} % of them with a few-event source), per cell:")
    mle = ml_accuracy(small_o, so, small_c, sc, K)
    for label, u in (("mid-p (default)", np.full(args.small, 0.5)),
                     ("conservative", None), ("randomised (library)", rng.random(args.small))):
        clear_memo()
        t0 = time.perf_counter()
        exact_interval(small_o, so, small_c, sc, K, 0.95, mle, u=u)
        print(f"  {label:22s} {(time.perf_counter() - t0) / args.small * 1000:.2f} ms")

    for cell in ({"k": 10, "accuracy": 0.97, "n_ord": 40, "n_comp": 360},
                 {"k": 10, "accuracy": 0.05, "n_ord": 40, "n_comp": 20000}):
        clear_memo()
        t0 = time.perf_counter()
        validation_study(**cell, reps=10_000)
        print(f"validation study, K={cell['k']} A={cell['accuracy']} n_o={cell['n_ord']} "
              f"n_c={cell['n_comp']}, 10 000 replicates, 7 estimators: "
              f"{(time.perf_counter() - t0) * 1000:.0f} ms")
    clustered(rng, args.items)
    if args.every_cell:
        every_cell()


def clustered(rng: np.random.Generator, n_items: int) -> None:
    """Several queries per item: the six estimators with the item-clustered variance for
    20 systems from per-item sums (K = 5, 4 queries per item), as a recompute does."""
    systems = 20
    design = simulate_routed_items(rng, 1, n_items, 0.8, K, 4)  # shared by the systems
    right = rng.random((n_items, systems)) < np.linspace(0.3, 0.95, systems)
    hit = ~right & (rng.random((n_items, systems)) < design.n_comp / (K - 1))
    c = Clusters(design.n_ord, design.n_ord * right, design.n_comp, design.n_comp - hit)

    def run():
        effects = design_effects(c, K)
        for method in METHODS:
            estimate_clustered(c, K, method, effects=effects)

    print(f"clustered estimators, {n_items:,} items × {systems} systems, 6 methods: "
          f"median {timed(run):.0f} ms")


def every_cell() -> None:
    """The validation study (10 000 replicates, 7 estimators, cold memos) on each cell of
    the coverage grid: the distribution of its cost and the slowest cells."""
    costs = []
    for k, a, n_o, n_c in itertools.product(*STANDARD_GRID.values()):
        clear_memo()
        t0 = time.perf_counter()
        validation_study(k=k, accuracy=a, n_ord=n_o, n_comp=n_c, reps=10_000)
        costs.append((time.perf_counter() - t0, k, a, n_o, n_c))
    costs.sort()
    seconds = [c[0] for c in costs]
    print(f"validation study on each of the {len(costs)} grid cells: median "
          f"{statistics.median(seconds) * 1000:.0f} ms, 95th percentile "
          f"{seconds[int(0.95 * len(seconds))] * 1000:.0f} ms; slowest:")
    for t, k, a, n_o, n_c in costs[-5:][::-1]:
        print(f"  K={k} A={a} n_o={n_o} n_c={n_c}: {t * 1000:.0f} ms")


if __name__ == "__main__":
    main()
