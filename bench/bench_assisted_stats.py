"""Cost of the assisted-study statistics (no database).

    .venv/bin/python bench/bench_assisted_stats.py

* ``threshold_curve`` on 100 000 items (confidences k/50 and, harder, 100 000 distinct
  values). Budget (issue 9): ≤ 100 ms.
* Rater-clustered intervals for all arms (closed form since issue 18; it was a 2 000-resample
  rater bootstrap): ``reliance_by_arm`` on 50 000 ratings (5 arms, 160 raters each, 64
  ratings per rater less 2 % skips). Budget: ≤ 2 s. Also with 5 000 raters (11 ratings
  each) and with raters spread over several arms.
* For scale, on the 4 000 items of that study (the paper had 1 918): ``curve_band``
  (closed form since issue 18; it was a 500–1 000-resample sentence bootstrap),
  ``reliability_bins`` with its ECE interval (Blaker per bin, simultaneous; it was a
  1 000-resample bootstrap), every sentence figure of the analysis as
  ``annotations.assisted.services.analysis`` computes them (curves, held-out thresholds
  under five budgets, bands and the results table, per arm and pooled, for both rules:
  8.9 s with the former bootstraps on a loaded machine, 0.5 s closed form, same load),
  ``krippendorff_alpha_nominal`` with its interval for one arm and, as the analysis calls
  it, for every arm and pooled (the profile likelihood since issue 18: 13 ms and 113 ms,
  where the former BCa on the dashboard's 500 sentence resamples took 35 ms and 261 ms,
  back to back on a quiet machine).

Each figure is the median of ``--repeat`` runs (after one warm-up run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from estimators.assisted.agreement import krippendorff_alpha_nominal  # noqa: E402
from estimators.assisted.calibration import reliability_bins  # noqa: E402
from estimators.assisted.factuality import (  # noqa: E402
    SKIPPED,
    gold_accurate,
    item_human_correct,
    ratings_correct,
    verdicts,
)
from estimators.assisted.hybridization import (  # noqa: E402
    best_band_sources,
    calibration_split,
    curve_band,
    held_out_threshold,
    threshold_curve,
)
from estimators.assisted.mixed_logit import arm_effects  # noqa: E402
from estimators.assisted.reliance import overall_accuracy, reliance_by_arm  # noqa: E402
from estimators.assisted.simulation import ArmBehaviour, AssistedDesign, simulate_assisted  # noqa: E402


def timed(fn: Callable[[], object], repeat: int) -> float:
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def report(name: str, seconds: float, budget: float | None = None) -> None:
    verdict = "" if budget is None else (
        f" (budget {budget * 1e3:.0f} ms: {'ok' if seconds <= budget else 'OVER'})")
    print(f"{name:<72} {seconds * 1e3:9.1f} ms{verdict}")


ARMS = tuple(ArmBehaviour(name, r, w, None if name == "baseline" else (0.2, 0.5, 0.3), 120.0)
             for name, r, w in [("baseline", 0.76, 0.64), ("search", 0.78, 0.66),
                                ("evidence", 0.80, 0.66), ("trace", 0.88, 0.50),
                                ("full", 0.92, 0.42)])


def reliance_inputs(raters_per_arm: int, items_per_rater: int, n_items: int) -> dict:
    sim = simulate_assisted(AssistedDesign(arms=ARMS, n_items=n_items,
                                           raters_per_arm=raters_per_arm,
                                           items_per_rater=items_per_rater), seed=1)
    v = verdicts(sim.label)
    keep = v != SKIPPED
    ai_v = verdicts(sim.ai_label)
    return {"rater": sim.rater[keep], "arm": sim.arm[keep],
            "correct": ratings_correct(v, gold_accurate(sim.gold)[sim.item])[keep],
            "ai_correct": sim.ai_correct[sim.item][keep],
            "agrees_with_ai": (v == ai_v[sim.item])[keep],
            "helpfulness": sim.helpfulness[keep], "seconds": sim.seconds[keep],
            "_sim": sim}


def sentence_figures(sim, v: np.ndarray, gold: np.ndarray) -> None:
    """The hybridization figures of the analysis payload, as ``_rule_figures`` computes
    them (without Django): curves, held-out thresholds under five budgets, bands and the
    results table, for each arm and all arms pooled, for both rules."""
    n = sim.confidence.size
    c, a = sim.confidence, sim.ai_correct.astype(float)
    cal = calibration_split(np.arange(n), 0.5)
    for rule in ("individual", "majority"):
        arms = {b.name: item_human_correct(sim.item[sim.arm == b.name], v[sim.arm == b.name],
                                           gold, n_items=n, rule=rule) for b in ARMS}
        pooled = item_human_correct(sim.item, v, gold, n_items=n, rule=rule)
        for h in (*arms.values(), pooled):
            curve_band(c, a, h)
            for budget in (1.0, 0.5, 0.3, 0.2, 0.1):
                held_out_threshold(c, a, h, cal, max_human_share=budget)
        best_band_sources(c, a, arms, (0.7, 0.9), calibration=cal)
        overall_accuracy(c, a, arms, 0.8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = 100_000

    c50 = rng.integers(25, 51, n) / 50
    a = (rng.random(n) < c50).astype(float)
    h = (rng.random(n) < 0.75).astype(float)
    report("threshold_curve, 100 000 items, 26 distinct confidences",
           timed(lambda: threshold_curve(c50, a, h), args.repeat), 0.100)
    c_all = rng.random(n)
    report("threshold_curve, 100 000 items, 100 000 distinct confidences",
           timed(lambda: threshold_curve(c_all, a, h), args.repeat), 0.100)

    x = reliance_inputs(raters_per_arm=160, items_per_rater=64, n_items=4000)
    sim = x.pop("_sim")
    print(f"  (study: {x['rater'].size} ratings, {np.unique(x['rater']).size} raters, "
          f"{len(ARMS)} arms)")
    report("reliance_by_arm, rater-clustered, all arms",
           timed(lambda: reliance_by_arm(**x, baseline="baseline"),
                 args.repeat), 2.0)
    y = reliance_inputs(raters_per_arm=1000, items_per_rater=11, n_items=4000)
    y.pop("_sim")
    print(f"  (study: {y['rater'].size} ratings, {np.unique(y['rater']).size} raters)")
    report("reliance_by_arm, rater-clustered, 5 000 raters",
           timed(lambda: reliance_by_arm(**y, baseline="baseline"),
                 args.repeat), 2.0)
    # raters in several arms: their correlation enters the differences
    z = dict(x)
    z["rater"] = rng.integers(0, 800, x["rater"].size)
    report("reliance_by_arm, raters spread over arms (800 raters)",
           timed(lambda: reliance_by_arm(**z, baseline="baseline"),
                 args.repeat), 2.0)

    item = sim.item[verdicts(sim.label) != SKIPPED]
    report("arm_effects: correct ~ arm + (1 | sentence), 25-node adaptive quadrature",
           timed(lambda: arm_effects(x["correct"], x["arm"], item, baseline="baseline"),
                 args.repeat))

    v = verdicts(sim.label)
    gold = gold_accurate(sim.gold)
    m = sim.arm == "evidence"
    hc = item_human_correct(sim.item[m], v[m], gold, n_items=sim.confidence.size,
                            rule="majority")
    report(f"curve_band, {sim.confidence.size} items",
           timed(lambda: curve_band(sim.confidence, sim.ai_correct, hc), args.repeat))
    report(f"reliability_bins, {sim.confidence.size} items, 10 bins, ECE interval",
           timed(lambda: reliability_bins(sim.confidence, sim.ai_correct, ece_interval=True),
                 args.repeat))
    report(f"every sentence figure of the analysis, {sim.confidence.size} items, "
           f"{len(ARMS)} arms + pooled, 2 rules",
           timed(lambda: sentence_figures(sim, v, gold), args.repeat))
    keep = (v != SKIPPED) & m
    report(f"krippendorff_alpha_nominal with its interval, one arm, {int(keep.sum())} ratings",
           timed(lambda: krippendorff_alpha_nominal(sim.item[keep], v[keep], interval=True),
                 args.repeat))

    def every_alpha() -> None:
        rated = v != SKIPPED
        for b in ARMS:
            here = rated & (sim.arm == b.name)
            krippendorff_alpha_nominal(sim.item[here], v[here], interval=True)
        krippendorff_alpha_nominal(sim.item[rated], v[rated], interval=True)

    report(f"krippendorff_alpha_nominal with its interval, {len(ARMS)} arms + pooled",
           timed(every_alpha, args.repeat))


if __name__ == "__main__":
    main()
