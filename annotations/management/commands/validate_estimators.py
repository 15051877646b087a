import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotations.charts import line_chart_svg
from estimators.simulation import (
    ESTIMATORS,
    STANDARD_GRID,
    coverage_grid,
    validation_study,
    variance_curve,
)


class Command(BaseCommand):
    help = ("The paper's statistical validation on simulated data: replicate studies of one "
            "cell (K, true accuracy, n_o, n_c) through the partitioned protocol, reported "
            "per estimator in the layout of the paper's Table 1 (mean, across-replicate SD, "
            "mean within-run SE, 95 % interval coverage and width); optionally the variance "
            "against n_c/n_o as an SVG (the paper's Figure 2).")

    def add_arguments(self, parser):
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
                            help="also run the coverage study on the standard grid (480 cells, "
                                 "--grid-reps each) and write it as Markdown to this path")
        parser.add_argument("--grid-reps", type=int, default=4000)

    def handle(self, *args, **o):
        started = time.perf_counter()
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
            self._grid(o["grid"], o["grid_reps"], o["seed"])

    def _grid(self, path: Path, reps: int, seed: int) -> None:
        started = time.perf_counter()
        total = 1
        for values in STANDARD_GRID.values():
            total *= len(values)
        self.stderr.write(f"coverage grid: {total} cells × {reps} replicates …")

        def progress(done: int, total: int, cell) -> None:
            if done % 20 == 0 or done == total:
                self.stderr.write(
                    f"  {done}/{total} cells ({100 * done / total:.0f} %), "
                    f"{time.perf_counter() - started:.0f} s; last K={cell.k} "
                    f"A={cell.accuracy} n_o={cell.n_ord} n_c={cell.n_comp}: "
                    f"coverage {100 * cell.coverage:.1f} %")

        cells = coverage_grid(**STANDARD_GRID, reps=reps, seed=seed, progress=progress)
        low = [c for c in cells if c.coverage < 0.935]
        high = [c for c in cells if c.coverage > 0.985]

        def summary(values: list[float]) -> str:
            return (f"{sum(v < 0.935 for v in values)} cells below 93.5 %, "
                    f"{sum(v > 0.985 for v in values)} above 98.5 %, range "
                    f"{100 * min(values):.1f}–{100 * max(values):.1f} %")

        lines = [
            f"Coverage of the default 95 % ML interval on {len(cells)} cells, {reps} "
            f"replicates each (Monte-Carlo SE ≈ {100 * (0.95 * 0.05 / reps) ** 0.5:.2f} "
            f"points), {time.perf_counter() - started:.0f} s: "
            f"{summary([c.coverage for c in cells])}. For comparison, the non-randomised "
            f"\"conservative\" option: {summary([c.coverage_conservative for c in cells])}; "
            f"the likelihood-ratio interval alone: {summary([c.coverage_lr for c in cells])};"
            f" the paper's plug-in IVW Wald interval: "
            f"{summary([c.coverage_wald for c in cells])}. (Counts use unrounded coverages.)",
            "",
            "| K | A | n_o | n_c | coverage | mean width | conservative | its width "
            "| LR alone | plug-in Wald (IVW) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in cells:
            mark = " ⚠" if not 0.935 <= c.coverage <= 0.985 else ""
            lines.append(f"| {c.k} | {c.accuracy} | {c.n_ord} | {c.n_comp} | "
                         f"{100 * c.coverage:.1f}{mark} | {c.width:.4f} | "
                         f"{100 * c.coverage_conservative:.1f} | {c.width_conservative:.4f} | "
                         f"{100 * c.coverage_lr:.1f} | {100 * c.coverage_wald:.1f} |")
        path.write_text("\n".join(lines) + "\n")
        self.stderr.write(f"wrote {path}: {len(low)} cells below 93.5 %, {len(high)} above "
                          "98.5 %")


__all__ = ["Command", "ESTIMATORS"]
