import json
import time
from pathlib import Path

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from annotations.core.charts import line_chart_svg
from estimators.numerics.coverage_doc import write_section
from estimators.partitioned.coverage import markdown, single_source_cells
from estimators.partitioned.simulation import (
    CLUSTER_GRID,
    COVERAGE_BAND,
    ESTIMATORS,
    NOTE_SHARE,
    PRESETS,
    SMALL_STUDIES,
    STANDARD_GRID,
    band_report,
    clustered_figures,
    clustered_grid,
    coverage_grid,
    table1_study,
    validation_study,
    variance_curve,
)

# This command's sections of docs/coverage.md (each written in place by --grid).
ML_HEADING = "## Partitioned, one query per item: the ML interval"
EVERY_CELL_HEADING = "## Partitioned, one query per item: every cell of the ML grid"
CLUSTERED_HEADING = ("## Partitioned, several queries per item: every estimator, clustered "
                     "by item")
SMALL_HEADING = "## Partitioned, several queries per item: smaller studies (100 and 300 items)"
GRID_PARTS = ("one-query", "single-source", "several", "small")


class Command(BaseCommand):
    help = ("The paper's statistical validation on simulated data: replicate studies of one "
            "cell (K, true accuracy, n_o, n_c) through the partitioned protocol, reported "
            "per estimator in the layout of the paper's Table 1 (mean, across-replicate SD, "
            "mean within-run SE, 95 % interval coverage and width); optionally the variance "
            "against n_c/n_o as an SVG (the paper's Figure 2) and, with --grid, the coverage "
            "tables of docs/coverage.md (one query per item: 480 cells; several queries per "
            "item: every estimator with the item-clustered variance). --preset table1 "
            "runs the settings of the paper's Table 1 instead (its five benchmarks: K, "
            "Ord-Eval accuracy, n_o = 300 or 120, n_c = (K−1)·n_o) and prints the paper's "
            "standard deviations beside the simulated ones.")

    def add_arguments(self, parser):
        parser.add_argument("--preset", choices=sorted(PRESETS),
                            help="table1: the paper's Table 1 settings (every benchmark), "
                                 "with its published SDs beside the simulated ones; "
                                 "--k/--accuracy/--n-ord/--n-comp are then ignored")
        parser.add_argument("--k", type=int, default=10, help="number of classes K")
        parser.add_argument("--accuracy", type=float, default=0.97, help="true accuracy A")
        parser.add_argument("--n-ord", type=int, default=40)
        parser.add_argument("--n-comp", type=int, default=360)
        parser.add_argument("--reps", type=int, default=10_000)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        parser.add_argument("--figure", type=Path,
                            help="write the variance-vs-n_c/n_o plot (SVG) to this path")
        parser.add_argument("--ratios", default="0.5,1,2,3,4,6,8,12,16,20",
                            help="n_c/n_o values for --figure")
        parser.add_argument("--grid", type=Path,
                            help="also run the coverage studies (docs/coverage.md): the "
                                 "standard grid (480 cells; exact sums where the outcomes "
                                 "are few, else --grid-reps replicates) and the grid of "
                                 "several queries per item (--cluster-reps replicates), "
                                 "written as Markdown to this path")
        parser.add_argument("--grid-parts", default=",".join(GRID_PARTS),
                            help="which of this command's sections of the file to write "
                                 f"(comma-separated; default all: {', '.join(GRID_PARTS)}); "
                                 "the file's other sections are left as they are")
        parser.add_argument("--grid-reps", type=int, default=4000)
        parser.add_argument("--cluster-reps", type=int, default=8000,
                            help="replicates per cell of the several-queries grid, 1 000 "
                                 "items (0: skip both several-queries tables)")
        parser.add_argument("--adjusted-reps", type=int, default=4000,
                            help="replicates per cell of the IPW and stratified columns")
        parser.add_argument("--small-reps", type=int, default=4000,
                            help="replicates per cell of the several-queries table of "
                                 "smaller studies (100 and 300 items; 0: skip it)")

    def handle(self, *args, **o):
        started = time.perf_counter()
        if o["preset"] == "table1":
            self._table1(o["reps"], o["seed"], o["json"])
            return
        try:
            rows = validation_study(k=o["k"], accuracy=o["accuracy"], n_ord=o["n_ord"],
                                    n_comp=o["n_comp"], reps=o["reps"], seed=o["seed"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        elapsed = time.perf_counter() - started
        if o["json"]:
            self.stdout.write(json.dumps([r.as_dict() for r in rows], indent=1))
        else:
            self.stdout.write(
                f"K={o['k']} A={o['accuracy']} n_o={o['n_ord']} n_c={o['n_comp']} "
                f"reps={o['reps']} ({elapsed:.2f} s)\n"
                f"{'estimator':<11} {'n_o':>6} {'n_c':>7} {'mean':>7} {'SD':>7} {'(SE)':>8} "
                f"{'cover':>6} {'width':>7} {'asympt.cover':>12} {'width':>7}")
            for r in rows:
                self.stdout.write(
                    f"{r.estimator:<11} {r.n_ord:>6} {r.n_comp:>7} {r.mean:7.4f} {r.sd:7.4f} "
                    f"({r.mean_se:6.4f}) {r.coverage:6.3f} {r.width:7.4f} "
                    f"{r.coverage_asymptotic:12.3f} {r.width_asymptotic:7.4f}")
        if o["figure"]:
            ratios = [float(x) for x in o["ratios"].split(",")]
            points = variance_curve(k=o["k"], accuracy=o["accuracy"], n_ord=o["n_ord"],
                                    ratios=ratios, reps=min(o["reps"], 4000), seed=o["seed"])
            series = {
                "IVW, fixed w = 0.5": [(p.ratio, p.var_ivw_fixed) for p in points],
                "IVW, plug-in w": [(p.ratio, p.var_ivw) for p in points],
                "IVW, optimal w": [(p.ratio, p.var_ivw_pilot) for p in points],
                "ML": [(p.ratio, p.var_ml) for p in points],
                "Comp only": [(p.ratio, p.var_comp) for p in points],
            }
            o["figure"].write_text(line_chart_svg(
                series, title=f"Variance vs n_c/n_o (K={o['k']}, A={o['accuracy']}, "
                              f"n_o={o['n_ord']})",
                x_label="n_c / n_o", y_label="variance across replicates", log_y=True))
            self.stderr.write(f"wrote {o['figure']}")
        if o["grid"]:
            parts = tuple(p.strip() for p in o["grid_parts"].split(",") if p.strip())
            unknown = set(parts) - set(GRID_PARTS)
            if unknown or not parts:
                raise CommandError(f"--grid-parts: unknown {sorted(unknown) or 'none'} "
                                   f"(any of {', '.join(GRID_PARTS)})")
            self._grid(o["grid"], o["grid_reps"], o["seed"], o["cluster_reps"],
                       o["adjusted_reps"], o["small_reps"], parts)

    def _table1(self, reps: int, seed: int, as_json: bool) -> None:
        """The paper's Table 1 settings, simulated, beside the paper's figures."""
        started = time.perf_counter()
        try:
            results = table1_study(reps=reps, seed=seed)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if as_json:
            self.stdout.write(json.dumps([
                {"benchmark": b.name, "k": b.k, "accuracy": b.accuracy, "n_ord": b.n_ord,
                 "rows": [{**r.as_dict(), "paper": dict(zip(
                     ("mean", "sd_seeds", "sd_per_run"), b.paper[r.estimator], strict=True))
                           if r.estimator in b.paper else None} for r in rows]}
                for b, rows in results], indent=1))
            return
        self.stdout.write(
            f"The paper's Table 1 settings, simulated (reps={reps}, seed={seed}, "
            f"{time.perf_counter() - started:.1f} s). Truth: the benchmark's Ord-Eval "
            "accuracy; n_c = (K−1)·n_o for IVW-0.5, IVW and ML. Accuracy points. "
            "Simulated: mean, SD across replicates, (mean within-run SE). Paper: mean ± SD "
            "across 3 seeds (mean per-run SD) — compare SD with the per-run SD; the paper's "
            "runs sat at their own accuracies (its means), not exactly at Ord-Eval.")
        for b, rows in results:
            self.stdout.write(
                f"\n{b.name} (K={b.k}, Ord-Eval A={b.accuracy}, n_o={b.n_ord}, "
                f"n_c={b.n_comp})\n"
                f"{'estimator':<11} {'n_o':>5} {'n_c':>5} {'mean':>7} {'SD':>6} {'(SE)':>8}"
                f"   {'paper: mean':>11} {'± SD':>7} {'(per-run SD)':>13}")
            for r in rows:
                paper = b.paper.get(r.estimator)
                per_run = f"({paper[2]:.2f})" if paper else ""
                theirs = (f"{paper[0]:11.2f} ± {paper[1]:5.2f} {per_run:>13}" if paper
                          else f"{'—':>11}")
                self.stdout.write(
                    f"{r.estimator:<11} {r.n_ord:>5} {r.n_comp:>5} {100 * r.mean:7.2f} "
                    f"{100 * r.sd:6.2f} ({100 * r.mean_se:6.2f})   {theirs}".rstrip())

    def _grid(self, path: Path, reps: int, seed: int, cluster_reps: int, adjusted_reps: int,
              small_reps: int, parts: tuple[str, ...]) -> None:
        """Write this command's sections of docs/coverage.md in place (each replaces its
        own, ``estimators.numerics.coverage_doc``); the file's other sections stay."""
        started = time.perf_counter()
        if "one-query" in parts:
            for section in self._one_query(path, reps, seed):
                write_section(path, section)
        if "single-source" in parts:
            single_started = time.perf_counter()
            write_section(path, markdown(single_source_cells(),
                                         time.perf_counter() - single_started))
        if "several" in parts and cluster_reps:
            write_section(path, self._clustered(path, cluster_reps, adjusted_reps, seed))
        if "small" in parts and small_reps:
            write_section(path, self._small(path, small_reps, min(adjusted_reps, small_reps),
                                            seed + 1000))
        self.stderr.write(f"wrote {path} ({time.perf_counter() - started:.0f} s)")

    def _one_query(self, path: Path, reps: int, seed: int) -> tuple[str, str]:
        """The ML grid's summary section and its every-cell section."""
        started = time.perf_counter()
        total = 1
        for values in STANDARD_GRID.values():
            total *= len(values)
        self.stderr.write(f"coverage grid: {total} cells (exact sums where the outcomes are "
                          f"few, else {reps} replicates) …")

        def progress(done: int, total: int, cell) -> None:
            if done % 20 == 0 or done == total:
                self.stderr.write(
                    f"  {done}/{total} cells ({100 * done / total:.0f} %), "
                    f"{time.perf_counter() - started:.0f} s; last K={cell.k} "
                    f"A={cell.accuracy} n_o={cell.n_ord} n_c={cell.n_comp}: "
                    f"coverage {100 * cell.coverage:.1f} %")

        cells = coverage_grid(**STANDARD_GRID, reps=reps, seed=seed, progress=progress)
        grid_seconds = time.perf_counter() - started
        n_exact = sum(c.exact for c in cells)

        def summary(values: list[float]) -> str:
            v = np.array(values)
            return (f"{100 * v.min():.1f} | {100 * np.median(v):.1f} | {100 * v.max():.1f} | "
                    f"{int((v < 0.93).sum())} | {int((v < 0.935).sum())} | "
                    f"{int((v > 0.985).sum())} |")

        lines = [
            ML_HEADING,
            "",
            f"Generated by `.venv/bin/python manage.py validate_estimators --grid {path} "
            f"--grid-parts one-query` (seed {seed}; {grid_seconds:.0f} s). Explained in "
            "[estimators.md](estimators.md). The grid: K ∈ {3, 5, 10, 16}, A ∈ {0.05, 0.3, "
            "0.6, 0.9, 0.97, 0.99}, n_o ∈ {20, 40, 200, 2000}, n_c ∈ {0, 40, 360, 2000, "
            f"20000}}: {len(cells)} cells. {n_exact} of them (the small, discrete ones, where "
            "the intervals differ most) are computed **exactly** (a sum over every probable "
            "outcome: no simulation noise); the other "
            f"{len(cells) - n_exact} from {reps} simulated studies each (Monte-Carlo SE ≈ "
            f"{100 * (0.95 * 0.05 / reps) ** 0.5:.2f} points). Counts use unrounded "
            "coverages. Every cell: the last section of this page.",
            "",
            "| interval | min | median | max | cells < 93 % | cells < 93.5 % | cells > 98.5 % |",
            "|---|---|---|---|---|---|---|",
            "| **default** (mid-p exact where events are few, likelihood ratio elsewhere) | "
            + summary([c.coverage for c in cells]),
            "| conservative (for audits) | " + summary([c.coverage_conservative for c in cells]),
            "| likelihood ratio alone | " + summary([c.coverage_lr for c in cells]),
            "| the paper's plug-in Wald (IVW) | " + summary([c.coverage_wald for c in cells]),
            "",
            self._note_summary(cells),
        ]
        every = [
            EVERY_CELL_HEADING,
            "",
            f"Written with the section \"{ML_HEADING[3:]}\" by the same command. ⚠: below "
            "93 %. note: the probability that the default interval is marked approximate "
            "([few events](#approximate-intervals-few-events)).",
            "",
            "| K | A | n_o | n_c | default | mean width | note | conservative | its width "
            "| LR alone | plug-in Wald (IVW) | how |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in cells:
            mark = " ⚠" if c.coverage < 0.93 else ""
            every.append(f"| {c.k} | {c.accuracy} | {c.n_ord} | {c.n_comp} | "
                         f"{100 * c.coverage:.1f}{mark} | {c.width:.4f} | "
                         f"{100 * c.approximate:.0f} % | "
                         f"{100 * c.coverage_conservative:.1f} | {c.width_conservative:.4f} | "
                         f"{100 * c.coverage_lr:.1f} | {100 * c.coverage_wald:.1f} | "
                         f"{'exact' if c.exact else 'simulated'} |")
        return "\n".join(lines), "\n".join(every)

    def _run_clustered(self, grid: dict, reps: int, adjusted_reps: int, seed: int) -> tuple:
        started = time.perf_counter()
        total = len(grid["designs"]) * len(grid["accuracies"]) * len(grid["n_items"])
        self.stderr.write(f"several queries per item, {grid['n_items']} items: {total} cells "
                          f"× {reps} replicates (IPW, stratified: {adjusted_reps}) …")

        def progress(done: int, total: int, cell) -> None:
            self.stderr.write(f"  {done}/{total}, {time.perf_counter() - started:.0f} s; "
                              f"K={cell.k} Q={cell.queries} A={cell.accuracy} "
                              f"items={cell.n_items}")

        cells = clustered_grid(**grid, reps=reps, adjusted_reps=adjusted_reps, seed=seed,
                               progress=progress)
        return cells, time.perf_counter() - started

    @staticmethod
    def _note_summary(cells: list) -> str:
        """The one-query grid against the band, with the approximate note."""
        low, high = COVERAGE_BAND
        report = band_report((c, "ml", c.coverage, c.approximate) for c in cells)
        return (f"**The default interval against {100 * low:.1f}–{100 * high:.1f} %:** "
                f"{report.inside} of {report.figures} cells inside. "
                + _outside_words(report, lambda c, m, v, share: (
                    f"K = {c.k}, A = {c.accuracy}, n_o = {c.n_ord}, n_c = {c.n_comp}: "
                    f"{100 * v:.1f} %, marked in {100 * share:.0f} % of outcomes")) + ".")

    @staticmethod
    def _table(cells: list, with_items: bool) -> list[str]:
        methods = list(cells[0].coverage)
        low, high = COVERAGE_BAND
        head = "| K | Q | A | " + ("items | " if with_items else "") + "labels/item | d | "
        lines = [head + " | ".join(methods) + " |",
                 "|---" * (head.count("|") - 1 + len(methods)) + "|"]
        for c in cells:
            figures = []
            for m in methods:
                v = c.coverage[m]
                mark = " ↓" if v < low else (" ↑" if v > high else "")
                if c.approximate.get(m, 0.0) >= NOTE_SHARE:
                    mark += " †"
                figures.append(f"{100 * v:.1f}{mark} ({100 * c.coverage_independent[m]:.1f})")
            lines.append(f"| {c.k} | {c.queries} | {c.accuracy} | "
                         + (f"{c.n_items} | " if with_items else "")
                         + f"{c.labels_per_item:.2f} | {c.design_effect:.2f} | "
                         + " | ".join(figures) + " |")
        return lines

    @staticmethod
    def _summary(cells: list) -> str:
        """The band, the note and the single-source columns' promise, in words."""
        methods = list(cells[0].coverage)
        clustered = np.array([[c.coverage[m] for m in methods] for c in cells])
        naive = np.array([[c.coverage_independent[m] for m in methods] for c in cells])
        low, high = COVERAGE_BAND
        report = band_report(clustered_figures(cells))
        text = (f"{report.inside} of {report.figures} coverages within {100 * low:.1f}–"
                f"{100 * high:.1f} %, range {100 * clustered.min():.1f}–"
                f"{100 * clustered.max():.1f} %, median {100 * np.median(clustered):.1f} %. ")
        text += _outside_words(report, lambda c, m, v, _: (
            f"{m} at K = {c.k}, Q = {c.queries}, A = {c.accuracy}, {c.n_items} items: "
            f"{100 * v:.1f} %"))
        text += (f". Labels taken as independent: range {100 * naive.min():.1f}–"
                 f"{100 * naive.max():.1f} %.")
        return text

    def _clustered(self, path: Path, reps: int, adjusted_reps: int, seed: int) -> str:
        cells, seconds = self._run_clustered(CLUSTER_GRID, reps, adjusted_reps, seed)
        walds = [c.stratified_wald for c in cells if c.stratified_wald is not None]
        mc = 100 * (0.95 * 0.05 / reps) ** 0.5
        mc_adj = 100 * (0.95 * 0.05 / max(adjusted_reps, 1)) ** 0.5
        lines = [
            CLUSTERED_HEADING,
            "",
            f"Generated by `.venv/bin/python manage.py validate_estimators --grid {path} "
            f"--grid-parts several` (seed {seed}; {seconds:.0f} s). "
            f"1 000 items per study, routed as on the platform (queries in a random class "
            "order, distinct classes, stopping at the first \"yes\"). The six estimators: "
            f"{reps} simulated studies per cell (Monte-Carlo SE ≈ {mc:.2f} points); the "
            f"IPW and stratified columns: {adjusted_reps} studies each (SE ≈ {mc_adj:.2f}) "
            "of their own — IPW with classes answered at 60 to 100 % (a study seen "
            "mid-way), stratified with two strata of accuracies A + δ and A − 3δ sampled "
            "half and half, population shares 3/4 and 1/4 (δ = min(A, 1 − A)/4). "
            "Q = queries per item, labels/item = answered queries per item, d = mean design "
            "effect of the ML score. Each coverage cell: clustered (independent labels; for "
            "IPW, Kish's effective counts; for stratified, Wald on the per-stratum SEs); "
            "↑/↓ outside 93.5–96.5 %; † most of the cell's studies mark the interval "
            "approximate ([few events](#approximate-intervals-few-events)).",
            "",
            "**Clustered: " + self._summary(cells) + "**"
            + (f" The stratified column's former interval (Wald on the clustered SEs) "
               f"covered {100 * min(walds):.1f}–{100 * max(walds):.1f} %." if walds else ""),
            "",
            *self._table(cells, with_items=False),
        ]
        return "\n".join(lines)

    def _small(self, path: Path, reps: int, adjusted_reps: int, seed: int) -> str:
        cells, seconds = self._run_clustered(SMALL_STUDIES, reps, adjusted_reps, seed)
        mc = 100 * (0.95 * 0.05 / reps) ** 0.5
        mc_adj = 100 * (0.95 * 0.05 / max(adjusted_reps, 1)) ** 0.5
        lines = [
            SMALL_HEADING,
            "",
            f"Generated by `.venv/bin/python manage.py validate_estimators --grid {path} "
            f"--grid-parts small` (seed {seed}; {seconds:.0f} s). The simulation of the "
            f"section above with studies of 100 and 300 items: {reps} studies per cell for "
            f"the six estimators (Monte-Carlo SE ≈ {mc:.2f} points), {adjusted_reps} for "
            f"IPW and stratified (SE ≈ {mc_adj:.2f}); marks as above.",
            "",
            "**Clustered: " + self._summary(cells) + "**",
            "",
            "Where a figure leaves the band here it is for want of events, not of the "
            "clustering: at A = 0.97 a study of 100 items holds about 3 wrong AI answers, "
            "one of 300 about 9 (fewer still after the design effect), and an interval "
            "resting on so few can only be exact at some accuracies, above 95 % at others "
            "and below at the rest — as on the one-query grid. The dashboard marks such an "
            "interval \"≈ approximate\" and says why "
            "([few events](#approximate-intervals-few-events)); the IPW column's studies, "
            "seen mid-way (classes answered at 60 to 100 %), hold fewer labels and carry the "
            "note more often.",
            "",
            *self._table(cells, with_items=True),
        ]
        return "\n".join(lines)


def _outside_words(report, name) -> str:
    """A :class:`estimators.partitioned.simulation.BandReport`'s figures outside the band,
    in words: those most studies mark approximate († in the tables), the single-source
    columns above it (Blaker's promise: at least 95 %), and every other one by
    ``name(cell, method, coverage, note share)``."""
    text = ""
    if report.noted:
        cov = [f[2] for f in report.noted]
        text += (f"Outside it where most studies mark the interval approximate (†, "
                 f"[few events](#approximate-intervals-few-events)): {len(report.noted)}, "
                 f"{100 * min(cov):.1f}–{100 * max(cov):.1f} %. ")
    if report.conservative:
        cov = [f[2] for f in report.conservative]
        text += (f"Above it without the mark, the single-source columns (Blaker's interval, "
                 f"at least 95 % by construction): {len(report.conservative)}, up to "
                 f"{100 * max(cov):.1f} %. ")
    text += f"Outside it otherwise: {len(report.unexplained)}"
    if report.unexplained:
        text += " (" + "; ".join(name(*f) for f in report.unexplained) + ")"
    return text


__all__ = ["Command", "ESTIMATORS"]

