"""Unsure steps under a targeted routing design: bias (points) and coverage of the default
interval (Clopper–Pearson, default coefficients) before and after the inverse-probability
weighting of the available steps (docs/estimators.md, "Unsure and pending steps").

    .venv/bin/python bench/bench_design_unsure.py [--reps 4000]

"Before" is design_estimate.py at commit 3a1e378 (read with ``git show``); "after" the
working tree's. Targeted ε = 0.2, K = 4, three agreeing systems at A = 0.6, 0.9, 0.97,
200 items, depth 2 and 3, 10 % and 30 % unsure; truth = the superpopulation accuracy;
± is the Monte-Carlo standard error of the bias.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from dataclasses import fields
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from estimators.partitioned.design_estimate import design_estimate  # noqa: E402
from estimators.partitioned.routing_simulation import simulate  # noqa: E402

BEFORE = "3a1e378"
ACCURACIES = [0.6, 0.9, 0.97]


def _old_module():
    source = subprocess.run(["git", "-C", str(ROOT), "show",
                             f"{BEFORE}:estimators/partitioned/design_estimate.py"],
                            check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_design_estimate.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_design_estimate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--chunk", type=int, default=500)
    args = parser.parse_args()
    old = _old_module()
    print(f"{args.reps} studies per cell; bias in points ± MC SE | coverage % "
          f"(A = {', '.join(map(str, ACCURACIES))})")
    for depth in (2, 3):
        for unsure in (0.1, 0.3):
            rng = np.random.default_rng(1000 + depth * 10 + round(unsure * 10))
            found = {"before": [], "after": []}
            for lo in range(0, args.reps, args.chunk):
                st = simulate(rng, min(args.chunk, args.reps - lo), 200, 4, ACCURACIES,
                              design="targeted", epsilon=0.2, depth=depth, unsure=unsure)
                ostep = old.DesignSteps(**{f.name: getattr(st.steps, f.name)
                                           for f in fields(st.steps)})
                for name, e in (("before", old.design_estimate(ostep)),
                                ("after", design_estimate(st.steps))):
                    found[name].append((e.accuracy - st.truth,
                                        (e.ci_low <= st.truth) & (st.truth <= e.ci_high)))
            for name, rows in found.items():
                err = np.concatenate([r[0] for r in rows])
                cover = np.concatenate([r[1] for r in rows]).mean(axis=0)
                bias = 100 * err.mean(axis=0)
                mc = 100 * err.std(axis=0, ddof=1) / np.sqrt(len(err))
                print(f"depth {depth}, {unsure:.0%} unsure, {name:6s}: bias "
                      + ", ".join(f"{b:+.2f} ± {m:.2f}" for b, m in zip(bias, mc, strict=True))
                      + " | coverage " + ", ".join(f"{100 * c:.1f}" for c in cover),
                      flush=True)


if __name__ == "__main__":
    main()
