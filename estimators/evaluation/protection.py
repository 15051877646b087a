"""The boosting figures of docs/evaluation-service.md ("Protection analysis"), over seeds.

Seed s draws the study's labels with ``default_rng(s)`` and the attacker's submissions with
``default_rng(100 + s)`` (s = 0 … seeds − 1; 2 000 items); each cell reports the mean
overfit of :func:`estimators.evaluation.attacks.boosting_attack` over the seeds and its
standard error sd/√seeds (sd with ddof 1), with the mean number of released moves, of kept
submissions, and of the two excesses that bound the overfit (see :class:`BoostingStudy`).

    python -m estimators.evaluation.protection [--seeds 50] [--items 2000]

prints both tables (under a minute at 50 seeds on one core).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from estimators.evaluation.attacks import boosting_attack, simulated_labels

N_ITEMS = 2000
ATTACKER_SEED_OFFSET = 100
MAIN_CELLS = (  # (column, calls, margin, budget): the docs' boosting table
    ("raw, 100 calls", 100, None, None),
    ("raw, 1 000 calls", 1000, None, None),
    ("Ladder η = 0.02, 1 000 calls", 1000, 0.02, None),
    ("raw, budget 20", 1000, None, 20),
    ("Ladder + budget 20", 1000, 0.02, 20),
)
MARGINS = (None, 0.01, 0.02, 0.05)  # None: raw scores
BUDGETS = (20, 100, 1000)


@dataclass(frozen=True)
class BoostingStudy:
    """Per-seed results of one cell: ``overfit`` (service score − true accuracy of the
    final vote), ``moves`` and ``kept`` (random submissions whose release changed / kept
    for the vote), ``kept_excess`` (their mean raw − true excess: the vote, a per-item
    mixture of the kept submissions, inherits about this much) and ``best_excess`` (the
    largest excess among the answered submissions: what an attacker who knew the best one
    would get; against the Ladder the last move is the best raw score, so this is the
    ceiling)."""

    overfit: np.ndarray
    moves: np.ndarray
    kept: np.ndarray
    kept_excess: np.ndarray
    best_excess: np.ndarray

    @property
    def seeds(self) -> int:
        return len(self.overfit)

    @property
    def mean(self) -> float:
        return float(np.mean(self.overfit))

    @property
    def se(self) -> float:
        """sd/√seeds of the overfit (0 with one seed)."""
        if self.seeds < 2:
            return 0.0
        return float(np.std(self.overfit, ddof=1) / np.sqrt(self.seeds))


def boosting_study(n_classes: int, calls: int, seeds: int, margin: float | None = None,
                   budget: int | None = None, n_items: int = N_ITEMS) -> BoostingStudy:
    """:func:`boosting_attack` on ``seeds`` simulated studies (seeding as the module says)."""
    results = []
    for seed in range(seeds):
        labels = simulated_labels(n_items, n_classes, np.random.default_rng(seed))
        rng = np.random.default_rng(ATTACKER_SEED_OFFSET + seed)
        results.append(boosting_attack(labels, calls, rng, margin=margin, budget=budget))
    return BoostingStudy(
        overfit=np.array([r.overfit for r in results]),
        moves=np.array([r.moves for r in results]),
        kept=np.array([r.kept for r in results]),
        kept_excess=np.array([r.kept_excess for r in results]),
        best_excess=np.array([r.best_excess for r in results]))


def _cell(study: BoostingStudy) -> str:
    return f"{study.mean:.3f} ± {study.se:.3f}"


def main_table(seeds: int, classes: tuple[int, ...] = (4, 10), n_items: int = N_ITEMS) -> str:
    """The docs' boosting table: mean overfit ± SE per K and release policy."""
    lines = ["| K | " + " | ".join(c[0] for c in MAIN_CELLS) + " |",
             "|---" * (len(MAIN_CELLS) + 1) + "|"]
    for k in classes:
        cells = [_cell(boosting_study(k, calls, seeds, margin, budget, n_items))
                 for _, calls, margin, budget in MAIN_CELLS]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def margin_budget_table(seeds: int, n_classes: int = 10, n_items: int = N_ITEMS) -> str:
    """Overfit ± SE (moves; kept excess; best excess) for each margin and budget B: the
    attacker makes B random submissions (the budget refuses the rest), then its vote is
    scored once more."""
    lines = [f"| K = {n_classes} | " + " | ".join(f"B = {b}" for b in BUDGETS) + " |",
             "|---" * (len(BUDGETS) + 1) + "|"]
    for margin in MARGINS:
        cells = []
        for b in BUDGETS:
            s = boosting_study(n_classes, b + 1, seeds, margin, b, n_items)
            cells.append(f"{_cell(s)} ({np.mean(s.moves):.1f} moves, kept "
                         f"{np.mean(s.kept_excess):.3f}, best {np.mean(s.best_excess):.3f})")
        name = "raw" if margin is None else f"Ladder η = {margin}"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m estimators.evaluation.protection",
        description="Boosting tables of docs/evaluation-service.md (Protection analysis).")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--items", type=int, default=N_ITEMS)
    args = parser.parse_args(argv)
    seeds, items = args.seeds, args.items
    for title, make in (("boosting overfit", lambda: main_table(seeds, n_items=items)),
                        ("margin × budget, K = 4",
                         lambda: margin_budget_table(seeds, 4, items)),
                        ("margin × budget, K = 10",
                         lambda: margin_budget_table(seeds, 10, items))):
        start = time.perf_counter()
        table = make()
        print(f"{title} ({seeds} seeds, {items} items, {time.perf_counter() - start:.1f} s)"
              f"\n{table}\n", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
