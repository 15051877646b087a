"""Cost of ``estimators.partitioned.estimate`` over many cells (no database).

    .venv/bin/python bench/bench_estimators.py --cells 100000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from estimators.partitioned import METHODS, estimate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=100_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n_o = rng.integers(200, 2000, args.cells).astype(float)
    n_c = rng.integers(200, 20000, args.cells).astype(float)
    a = rng.uniform(0.05, 0.99, args.cells)
    k = 5
    s_o = rng.binomial(n_o.astype(int), a).astype(float)
    s_c = rng.binomial(n_c.astype(int), (a + k - 2) / (k - 1)).astype(float)
    for method in METHODS:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            estimate(n_o, s_o, n_c, s_c, k, method=method)
            times.append(time.perf_counter() - t0)
        median_ms = statistics.median(times) * 1000
        print(f"{method:10s} {args.cells:,} cells: median {median_ms:7.1f} ms")


if __name__ == "__main__":
    main()
