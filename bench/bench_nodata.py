"""Cost of the No-Data Algorithm's reproduction (issue 19) and of a 1 000-item audit.

    .venv/bin/python bench/bench_nodata.py [--seeds 20] [--repeat 3]

1. The whole reproduction as a user runs it: ``python -m estimators.nodata.reproduce --json``
   in a fresh process (imports, both data sets, both trees, Tables 2 and 3 with their three
   settings, the φ sweep; 20 seeds, r = 3) — wall clock and the child's CPU time.
2. An audit of 1 000 items with imported commitments (JSONL read included) and the
   programmatic verifier, r = 3.
Budgets (issue 19): reproduction ≤ 10 s; the 1 000-item audit ≤ 5 s. On a shared machine the
wall clock includes waiting for a core; the CPU time is what the work costs.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_reproduction(seeds: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "nodata.json"
        cpu0, t0 = _child_cpu(), time.perf_counter()
        subprocess.run([sys.executable, "-m", "estimators.nodata.reproduce", "--json", str(out),
                        "--seeds", str(seeds)], cwd=ROOT, check=True, capture_output=True)
        wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
        inner = json.loads(out.read_text())["meta"]["elapsed_s"]
    return wall, cpu, inner


def bench_audit(n: int = 1000) -> tuple[float, float]:
    import numpy as np

    from estimators.nodata.algorithm import no_data_algorithm
    from estimators.nodata.commitments import read_commitments
    from estimators.nodata.evaluators import CommitmentsEvaluator
    from estimators.nodata.synthetic import IP_RUBRIC, generator, universe
    from estimators.nodata.verifiers import ProgrammaticVerifier

    rng = np.random.default_rng(0)
    u = universe()
    data = [u[int(i)] for i in rng.integers(len(u), size=n)]
    oracle = generator("oracle")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "commitments.jsonl"
        path.write_text("\n".join(
            json.dumps({"item": str(i), "round": r, "label": IP_RUBRIC.label(x),
                        "similar": oracle.similar(x, 0, rng) if i % 3 else u[i]})
            for i, x in enumerate(data) for r in (1, 2, 3)))
        cpu0, t0 = time.process_time(), time.perf_counter()
        evaluator = CommitmentsEvaluator(read_commitments(path, rounds=3,
                                                          items=[str(i) for i in range(n)]))
        result = no_data_algorithm(data, evaluator, ProgrammaticVerifier(IP_RUBRIC), rounds=3,
                                   phi=0.5, seed=0)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert result.n == n
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = [bench_reproduction(args.seeds) for _ in range(args.repeat)]
    best = min(runs)
    print(f"reproduction ({args.seeds} seeds, r = 3), best of {args.repeat}: "
          f"wall {best[0]:.2f} s, CPU {best[1]:.2f} s (inside reproduce(): {best[2]:.2f} s) "
          f"[budget 10 s] {'OK' if best[0] <= 10 else 'OVER'}")
    audits = [bench_audit() for _ in range(args.repeat)]
    wall, cpu = min(audits)
    print(f"audit of 1 000 items, imported commitments, programmatic verifier, r = 3: "
          f"wall {wall:.2f} s, CPU {cpu:.2f} s [budget 5 s] {'OK' if wall <= 5 else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
