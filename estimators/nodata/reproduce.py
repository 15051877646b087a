"""Reproduce the paper's synthetic experiments (Tables 2 and 3) on the shipped data.

    python -m estimators.nodata.reproduce --json PATH [--seeds 20] [--rounds 3] [--markdown]

Every run is the library's No-Data Algorithm (``algorithm.run_ev`` then ``flip_failures`` with
the three streams of ``algorithm.streams(seed)``, exactly what ``no_data_algorithm`` does); one
EV run per seed and setting is shared by every φ it is scored with. Seeds 0 … n−1; each row is
the mean and the standard deviation (ddof = 1) over the seeds, in percent.

Settings (docs/nodata.md shows which produced each published number):

* ``table2.<dt_number|dt_bits>.<ip|oop>.known`` — the tree's own test accuracy/F1;
  ``…unknown`` — honest tree, oracle generator, φ = 0.5 (flip probability).
* ``table3.<no_sigma|no_f|probabilistic|no_lie>.<ip|oop>`` — the published "Flips" column:
  the honest tree with the lying generator, φ = 0.4, the probabilistic liar's p = 1/4.
* ``table3_no_flips.…`` — the published "No Flips" column: the lying tree (wrong label w.p.
  1/10 per round), every failed label negated (φ = 1), p = 1/4.
* ``table3_as_text.…`` — the settings the paper's text states: the lying tree, φ = 0.6,
  p = 1/10.
* ``phi_sweep.<evaluator>.<ip|oop>`` — Table 2's unknown setting for φ = 0, 0.1, …, 1, with
  Theorem 1's bound at α = the known accuracy.
* ``paper`` — the published numbers, keyed alike.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import synthetic
from .algorithm import flip_failures, run_ev, streams, theorem1_bound
from .protocol import EVOutcome

PHENOMENA = ("ip", "oop")
EVALUATORS = ("dt_number", "dt_bits")
LIES = ("no_sigma", "no_f", "probabilistic", "no_lie")
GENERATOR_OF = {"no_sigma": "no_sigma", "no_f": "no_f", "probabilistic": "probabilistic",
                "no_lie": "oracle"}
PHI_TABLE2 = 0.5
PHI_TABLE3 = 0.4
PHI_TEXT = 0.6
LIAR_P_CODE = 0.25
LIAR_P_TEXT = 0.1
EVALUATOR_LIE = 0.1
PHI_SWEEP = tuple(round(0.1 * i, 1) for i in range(11))

#: The published numbers (paper 004, Tables 2 and 3), in percent; None where the paper has "—".
PAPER = {
    "table2": {
        "dt_number": {
            "ip": {"known": {"successes": None, "flips": None, "accuracy": 62.2, "f1": 58.8},
                   "unknown": {"successes": 100.0, "flips": 0.0, "accuracy": 62.2, "f1": 59.8}},
            "oop": {"known": {"successes": None, "flips": None, "accuracy": 54.2, "f1": 54.2},
                    "unknown": {"successes": 4.8, "flips": 46.4, "accuracy": 52.8, "f1": 52.1}},
        },
    },
    "table3": {
        "no_lie": {"ip": {"successes": 100.0, "flips": 0.0, "accuracy": 60.6, "f1": 58.8},
                   "oop": {"successes": 6.0, "flips": 35.3, "accuracy": 48.6, "f1": 47.3}},
        "no_sigma": {"ip": {"successes": 17.0, "flips": 35.1, "accuracy": 58.6, "f1": 58.8},
                     "oop": {"successes": 2.8, "flips": 35.1, "accuracy": 52.4, "f1": 53.8}},
        "no_f": {"ip": {"successes": 0.6, "flips": 37.4, "accuracy": 50.6, "f1": 48.1},
                 "oop": {"successes": 3.0, "flips": 35.7, "accuracy": 51.4, "f1": 52.2}},
        "probabilistic": {"ip": {"successes": 43.6, "flips": 24.9, "accuracy": 55.8, "f1": 54.2},
                          "oop": {"successes": 4.4, "flips": 37.9, "accuracy": 47.6,
                                  "f1": 49.5}},
    },
    "table3_no_flips": {
        "no_lie": {"ip": {"successes": 100.0, "flips": None, "accuracy": 59.0, "f1": 57.4},
                   "oop": {"successes": 6.4, "flips": None, "accuracy": 45.6, "f1": 44.8}},
        "no_sigma": {"ip": {"successes": 15.1, "flips": None, "accuracy": 42.6, "f1": 45.0},
                     "oop": {"successes": 2.2, "flips": None, "accuracy": 49.0, "f1": 49.4}},
        "no_f": {"ip": {"successes": 0.2, "flips": None, "accuracy": 39.4, "f1": 42.4},
                 "oop": {"successes": 2.8, "flips": None, "accuracy": 51.2, "f1": 52.8}},
        "probabilistic": {"ip": {"successes": 51.3, "flips": None, "accuracy": 49.0, "f1": 49.4},
                          "oop": {"successes": 4.6, "flips": None, "accuracy": 46.6,
                                  "f1": 48.6}},
    },
}

METRICS = ("successes", "flips", "accuracy", "f1")


def scores(labels: Sequence[int | None], truth: Sequence[int]) -> tuple[float, float]:
    """Accuracy and F1 (positive class 1) in percent; a missing label counts as wrong."""
    tp = fp = fn = correct = 0
    for y_hat, y in zip(labels, truth, strict=True):
        correct += y_hat == y
        if y_hat == 1:
            tp += y == 1
            fp += y == 0
        elif y == 1:
            fn += 1
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return 100.0 * correct / len(truth), 100.0 * f1


def _summary(values: list[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=float)
    return {"mean": round(float(a.mean()), 3),
            "sd": round(float(a.std(ddof=1)) if a.size > 1 else 0.0, 3)}


class _Rows:
    """Collects per-seed metrics under a key and summarises them."""

    def __init__(self) -> None:
        self.cells: dict[tuple, dict[str, list[float]]] = {}

    def add(self, key: tuple, **metrics: float) -> None:
        cell = self.cells.setdefault(key, {})
        for name, value in metrics.items():
            cell.setdefault(name, []).append(value)

    def nested(self) -> dict:
        out: dict = {}
        for key, cell in self.cells.items():
            node = out
            for part in key[:-1]:
                node = node.setdefault(part, {})
            node[key[-1]] = {name: _summary(v) for name, v in cell.items()}
        return out


def _run(data: Sequence[str], phenomenon: str, evaluator: str, gen: str, *, p: float,
         label_noise: float, rounds: int, seed: int):
    ev_rng, ver_rng, flip_rng = streams(seed)
    ev = synthetic.tree_evaluator(evaluator, gen, p=p, label_noise=label_noise)
    outcomes = run_ev(data, ev, synthetic.verifier(phenomenon),
                      rounds=rounds, evaluator_rng=ev_rng, verifier_rng=ver_rng)
    return outcomes, _ev_stats(outcomes), flip_rng


def _ev_stats(outcomes: Sequence[EVOutcome]) -> dict[str, float]:
    """Success rate and per-round pass rate of one EV run, in percent.

    The per-round pass rate is the share of runs whose first round passed: every run plays
    round 1, so it estimates one round's pass probability without the survivor bias of later
    rounds (only runs that passed reach them). Lemma 1 puts it at ≤ 25 % for a liar.
    """
    n = len(outcomes)
    return {"successes": 100.0 * sum(o.success for o in outcomes) / n,
            "round_pass": 100.0 * sum(o.rounds[0].passed for o in outcomes) / n}


def _score(outcomes: Sequence[EVOutcome], stats: dict[str, float], phi: float,
           rng: np.random.Generator, truth: Sequence[int]) -> dict[str, float]:
    labels, flipped = flip_failures(outcomes, phi, rng)
    acc, f1 = scores(labels, truth)
    return {**stats, "flips": 100.0 * float(flipped.sum()) / len(outcomes), "accuracy": acc,
            "f1": f1}


def reproduce(seeds: int = 20, rounds: int = 3) -> dict:
    """Every table of the module docstring, over seeds 0 … seeds−1."""
    if seeds < 1:
        raise ValueError(f"seeds: need at least one seed, got {seeds}")
    started = time.perf_counter()
    rows = _Rows()
    sweep: dict = {}
    known_accuracy: dict[tuple[str, str], float] = {}
    for ph in PHENOMENA:
        test = synthetic.load(ph, "test")
        data = [x for x, _ in test]
        truth = [y for _, y in test]
        for evaluator in EVALUATORS:
            predicted = synthetic.tree_evaluator(evaluator).predict(data)
            acc, f1 = scores([int(v) for v in predicted], truth)
            known_accuracy[(evaluator, ph)] = acc
            rows.add(("table2", evaluator, ph, "known"), accuracy=acc, f1=f1)
        for seed in range(seeds):
            def run(evaluator: str, gen: str, *, p: float = LIAR_P_CODE,
                    label_noise: float = 0.0, seed: int = seed, ph: str = ph, data=data):
                return _run(data, ph, evaluator, gen, p=p, label_noise=label_noise,
                            rounds=rounds, seed=seed)

            def score(run_out, phi: float, rng=None, truth=truth):
                outcomes, stats, flip_rng = run_out
                return _score(outcomes, stats, phi, flip_rng if rng is None else rng, truth)

            def extra(j: int, seed: int = seed) -> np.random.Generator:
                return np.random.default_rng([seed, j])

            for evaluator in EVALUATORS:
                honest = run(evaluator, "oracle")
                rows.add(("table2", evaluator, ph, "unknown"), **score(honest, PHI_TABLE2))
                for j, phi in enumerate(PHI_SWEEP):
                    rows.add(("phi_sweep", evaluator, ph, phi), **score(honest, phi, extra(j)))
                if evaluator == "dt_number":  # Table 3's honest no-lie row: the same runs
                    rows.add(("table3", "no_lie", ph), **score(honest, PHI_TABLE3, extra(99)))
            for lie in LIES:
                gen = GENERATOR_OF[lie]
                if lie != "no_lie":
                    rows.add(("table3", lie, ph), **score(run("dt_number", gen), PHI_TABLE3))
                lying = run("dt_number", gen, label_noise=EVALUATOR_LIE)
                rows.add(("table3_no_flips", lie, ph), **score(lying, 1.0))
                if lie == "probabilistic":
                    lying = run("dt_number", gen, p=LIAR_P_TEXT, label_noise=EVALUATOR_LIE)
                rows.add(("table3_as_text", lie, ph), **score(lying, PHI_TEXT, extra(98)))
    out = rows.nested()
    for evaluator in EVALUATORS:  # the known case has no EV run: no successes, no flips
        for ph in PHENOMENA:
            out["table2"][evaluator][ph]["known"].update(successes=None, flips=None)
    for evaluator in EVALUATORS:
        for ph in PHENOMENA:
            cells = out["phi_sweep"][evaluator][ph]
            alpha = known_accuracy[(evaluator, ph)] / 100.0
            sweep.setdefault(evaluator, {})[ph] = [
                {"phi": phi, **cells[phi],
                 "bound": round(100.0 * theorem1_bound(alpha, phi, rounds), 3)}
                for phi in PHI_SWEEP]
    out["phi_sweep"] = sweep
    out["paper"] = PAPER
    out["meta"] = {
        "seeds": seeds, "rounds": rounds, "n_test": len(synthetic.load("ip", "test")),
        "phi": {"table2": PHI_TABLE2, "table3": PHI_TABLE3, "table3_no_flips": 1.0,
                "table3_as_text": PHI_TEXT},
        "probabilistic_liar_p": {"table3": LIAR_P_CODE, "table3_no_flips": LIAR_P_CODE,
                                 "table3_as_text": LIAR_P_TEXT},
        "evaluator_label_noise": {"table3": 0.0, "table3_no_flips": EVALUATOR_LIE,
                                  "table3_as_text": EVALUATOR_LIE},
        "units": "percent; mean and sd (ddof=1) over seeds 0..seeds-1; phi = flip probability",
        "elapsed_s": round(time.perf_counter() - started, 3),
    }
    return out


def _cell(row: dict | None, paper: dict | None, metric: str) -> str:
    ours = "—" if row is None or row.get(metric) is None else (
        f"{row[metric]['mean']:.1f} ± {row[metric]['sd']:.1f}")
    theirs = "—" if paper is None or paper.get(metric) is None else f"{paper[metric]:.1f}"
    return f"{ours} ({theirs})"


def markdown(result: dict) -> str:
    """The tables for docs/nodata.md: ours as mean ± sd, the paper's in parentheses."""
    lines = []
    head = "| row | successes | flips | accuracy | F1 |\n|---|---|---|---|---|"
    lines += ["Table 2", "", head]
    for evaluator in EVALUATORS:
        for ph in PHENOMENA:
            for case in ("known", "unknown"):
                row = result["table2"][evaluator][ph][case]
                paper = PAPER["table2"].get(evaluator, {}).get(ph, {}).get(case)
                lines.append(f"| {evaluator} {ph} {case} | " + " | ".join(
                    _cell(row, paper, m) for m in METRICS) + " |")
    for table in ("table3", "table3_no_flips", "table3_as_text"):
        lines += ["", table, "", head.replace("| F1 |", "| F1 | per-round pass |")
                  .replace("|---|---|---|---|---|", "|---|---|---|---|---|---|")]
        for lie in LIES:
            for ph in PHENOMENA:
                row = result[table][lie][ph]
                paper = PAPER.get(table, {}).get(lie, {}).get(ph)
                rp = row["round_pass"]
                lines.append(f"| {lie} {ph} | " + " | ".join(
                    _cell(row, paper, m) for m in METRICS)
                    + f" | {rp['mean']:.1f} ± {rp['sd']:.1f} |")
    lines += ["", "φ sweep (dt_number; accuracy, flips, Theorem 1 bound at α = known accuracy)",
              "", "| φ | IP accuracy | IP flips | IP bound | OOP accuracy | OOP flips "
              "| OOP bound |", "|---|---|---|---|---|---|---|"]
    ip, oop = result["phi_sweep"]["dt_number"]["ip"], result["phi_sweep"]["dt_number"]["oop"]
    for a, b in zip(ip, oop, strict=True):
        lines.append(f"| {a['phi']:.1f} | {a['accuracy']['mean']:.1f} | {a['flips']['mean']:.1f} | "
                     f"{a['bound']:.1f} | {b['accuracy']['mean']:.1f} | {b['flips']['mean']:.1f} | "
                     f"{b['bound']:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m estimators.nodata.reproduce",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="write the results here")
    parser.add_argument("--seeds", type=int, default=20, help="number of seeds (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="EV rounds r (default 3)")
    parser.add_argument("--markdown", action="store_true", help="print the docs tables")
    args = parser.parse_args(argv)
    result = reproduce(seeds=args.seeds, rounds=args.rounds)
    args.json.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if args.markdown:
        print(markdown(result))
    print(f"{args.seeds} seeds, r = {args.rounds}: {result['meta']['elapsed_s']:.2f} s "
          f"→ {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
