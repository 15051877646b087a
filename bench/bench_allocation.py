"""The gain of Neyman allocation across strata: the share of a uniform design's answers it
needs for the same precision of the stratified estimate, predicted from the strata's spreads
((Σ W S)² / Σ W S², :func:`estimators.partitioned.allocation.allocation_ratio`) and measured
as the ratio of the estimate's variances in simulated studies with known truth, with the
coverage of the dashboard's stratified interval under each allocation.

    .venv/bin/python bench/bench_allocation.py [--reps 4000] [--answers 400]

One AI system, one uniformly routed query per answered item, strata of known accuracy
(:mod:`estimators.partitioned.allocation_simulation`). The rates are Neyman's from the true
spreads with the platform's floor (``RATE_MIN``); the platform estimates them from a pilot.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from estimators.partitioned.allocation import allocation_ratio, neyman_rates  # noqa: E402
from estimators.partitioned.allocation_simulation import (  # noqa: E402
    answer_spread,
    answers_per_stratum,
    simulate_allocation,
)

# (strata accuracies, strata shares): easy and hard strata, skewed shares, alike strata
GRID = [
    ((0.99, 0.6), (0.5, 0.5)),
    ((0.99, 0.6), (0.8, 0.2)),
    ((0.97, 0.85, 0.6), (0.4, 0.4, 0.2)),
    ((0.995, 0.95, 0.7, 0.5), (0.4, 0.3, 0.2, 0.1)),
    ((0.8, 0.75), (0.5, 0.5)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--answers", type=int, default=400)
    args = parser.parse_args()
    rng = np.random.default_rng(20261129)
    started = time.perf_counter()
    print(f"{args.answers} answers, {args.reps} simulated studies per cell")
    print(f"{'K':>3} {'accuracies':<28} {'shares':<22} {'predicted':>9} {'measured':>9} "
          f"{'cover uniform':>13} {'cover Neyman':>12}")
    for k in (4, 10):
        for acc, w in GRID:
            spreads = answer_spread(acc, k)
            rates = neyman_rates(spreads)
            uniform = simulate_allocation(acc, w, answers_per_stratum(w, np.ones(len(w)),
                                                                      args.answers),
                                          k, args.reps, rng)
            neyman = simulate_allocation(acc, w, answers_per_stratum(w, rates, args.answers),
                                         k, args.reps, rng)
            measured = neyman.accuracy.var() / uniform.accuracy.var()
            print(f"{k:>3} {str(acc):<28} {str(w):<22} "
                  f"{allocation_ratio(w, spreads, rates):>9.3f} {measured:>9.3f} "
                  f"{100 * uniform.coverage:>12.1f}% {100 * neyman.coverage:>11.1f}%")
    print(f"took {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
