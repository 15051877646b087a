"""Coverage of the reliance intervals with few raters, by simulation with known truth
(issue 18; docs/coverage.md "Assisted: reliance with few raters").

    manage.py coverage_tables assisted --reliance            # the Markdown tables
    manage.py coverage_tables assisted --reliance --studies 500 --resamples 500
    manage.py coverage_tables assisted --hybrid        # the sentence figures (curve,
    manage.py coverage_tables assisted --calibration   # held out, …; calibration):
                                                           # estimators.assisted.sentence_coverage

The same command writes the other rater-, model- and agreement-based tables of the assisted
dashboard: ``--reliance-columns`` (:mod:`estimators.assisted.coverage_columns`),
``--regression`` (:mod:`estimators.assisted.coverage_regression`) and ``--alpha``
(:mod:`estimators.assisted.coverage_alpha`).

Generator and truth: :mod:`estimators.assisted.rater_simulation` (two arms, a baseline and an
assisted arm, of G raters each with log-odds rater effects N(0, σ²)).

Intervals compared, each at 95 %:

* ``clustered`` (the default): :mod:`estimators.numerics.clustered`'s CR2 intervals exactly
  as :func:`estimators.assisted.reliance.reliance_by_arm` calls them (a test checks the two
  give the same bounds) — Wilson at the rater-clustered effective size from the
  bias-reduced CR2 variance with t on Bell–McCaffrey's degrees of freedom; Newcombe/MOVER
  for arm − baseline with both arms' limits on the Welch–Satterthwaite degrees of freedom;
* ``cr1`` (the first default of issue 18): the same with the CR1 variance and t on G − 1
  degrees of freedom for every limit;
* ``percentile`` (the default before issue 18): the percentile bootstrap resampling raters
  within their arm, differences from the paired replicates (on the first
  ``n_boot_studies`` studies of a cell: it costs B resamples per study).

Six figures per study: the assisted arm's accuracy, accuracy when the AI was right and when
it was wrong, and its gain, over-reliance and under-reliance against the baseline.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from estimators.assisted import sentence_coverage
from estimators.assisted.rater_simulation import (
    EFFECTS,
    FIGURES,
    RATER_SDS,
    RATERS_PER_ARM,
    Effect,
    simulate_arm,
    true_values,
)
from estimators.assisted.reliance import MIN_RELIABLE_RATERS
from estimators.numerics.clustered import (
    clustered_difference,
    clustered_proportion,
    cr2_difference,
    cr2_proportion,
)
from estimators.numerics.coverage_doc import WRITE_HELP, command, emit

RELIANCE_HEADING = "## Assisted: reliance with few raters (rater-clustered intervals)"


def clustered_bounds(base: np.ndarray, arm: np.ndarray, level: float = 0.95, *,
                     cr2: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper), each (6, n_studies): the default reliance intervals of the six
    figures from per-rater sums (:func:`simulate_arm`); ``cr2=False``: the CR1 ones."""
    proportion, difference = ((cr2_proportion, cr2_difference) if cr2 else
                              (clustered_proportion, clustered_difference))
    one = proportion(arm[..., 0], arm[..., 1], interval_level=level)
    lo, hi = [one.lower[:, j] for j in range(3)], [one.upper[:, j] for j in range(3)]
    zeros = np.zeros_like(arm[..., 0])
    # Separate raters: each arm's rows carry zeros on the other side (φ = 0).
    d_a = np.concatenate([arm[..., 0], zeros], axis=0)
    s_a = np.concatenate([arm[..., 1], zeros], axis=0)
    d_b = np.concatenate([zeros, base[..., 0]], axis=0)
    s_b = np.concatenate([zeros, base[..., 1]], axis=0)
    for j, sign in ((0, 1), (2, -1), (1, -1)):  # gain = a − b; over/under = b − a
        args = (d_a[..., j], s_a[..., j], d_b[..., j], s_b[..., j])
        if sign < 0:
            args = args[2:] + args[:2]
        d = difference(*args, interval_level=level)
        lo.append(d.lower)
        hi.append(d.upper)
    return np.array(lo), np.array(hi)


def percentile_bounds(rng: np.random.Generator, base: np.ndarray, arm: np.ndarray,
                      n_resamples: int, level: float = 0.95, chunk: int = 50
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The former default: percentile bootstrap of raters within their arm (paired
    replicates for the differences), (lower, upper) each (6, n_studies)."""
    g, n_studies = arm.shape[:2]
    q = [(1 - level) / 2, (1 + level) / 2]
    lo, hi = np.empty((6, n_studies)), np.empty((6, n_studies))
    for start in range(0, n_studies, chunk):
        sl = slice(start, min(start + chunk, n_studies))
        reps = []
        for sums in (arm[:, sl], base[:, sl]):
            idx = rng.integers(0, g, (n_resamples, g, sums.shape[1]))
            tot = np.take_along_axis(sums[None], idx[..., None, None], axis=1).sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                reps.append(np.where(tot[..., 0] > 0, tot[..., 1] / tot[..., 0], np.nan))
        a, b = reps  # (B, studies, 3)
        stats = np.stack([a[..., 0], a[..., 1], a[..., 2], a[..., 0] - b[..., 0],
                          b[..., 2] - a[..., 2], b[..., 1] - a[..., 1]])
        ql = np.nanquantile(stats, q, axis=1)
        lo[:, sl], hi[:, sl] = ql[0], ql[1]
    return lo, hi


def cell_coverage(effect: Effect, rater_sd: float, n_raters: int, n_studies: int, *,
                  seed: int = 0, n_resamples: int = 0, n_boot_studies: int | None = None
                  ) -> dict[str, np.ndarray]:
    """Coverage of the six figures (``FIGURES`` order) over ``n_studies`` simulated
    studies: {"clustered": (6,), "cr1": (6,), their mean widths "clustered_width",
    "cr1_width", and with ``n_resamples`` > 0 "percentile": (6,) over the first
    ``n_boot_studies`` of them (all by default)}."""
    rng = np.random.default_rng([seed, n_raters, int(rater_sd * 1000),
                                 EFFECTS.index(effect) if effect in EFFECTS else 99])
    base = simulate_arm(rng, effect.baseline, rater_sd, n_raters, n_studies)
    arm = simulate_arm(rng, effect.assisted, rater_sd, n_raters, n_studies)
    truth = np.array(list(true_values(effect, rater_sd).values()))[:, None]
    out = {}
    for key, cr2 in (("clustered", True), ("cr1", False)):
        lo, hi = clustered_bounds(base, arm, cr2=cr2)
        out[key] = ((lo <= truth) & (truth <= hi)).mean(axis=1)
        out[f"{key}_width"] = (hi - lo).mean(axis=1)
    if n_resamples:
        nb = slice(0, n_studies if n_boot_studies is None else min(n_boot_studies, n_studies))
        lo, hi = percentile_bounds(rng, base[:, nb], arm[:, nb], n_resamples)
        out["percentile"] = ((lo <= truth) & (truth <= hi)).mean(axis=1)
    return out


def reliance_table(n_studies: int = 40000, n_resamples: int = 1000, seed: int = 0,
                   raters: tuple[int, ...] = RATERS_PER_ARM,
                   rater_sds: tuple[float, ...] = RATER_SDS,
                   effects: tuple[Effect, ...] = EFFECTS, n_boot_studies: int = 2000) -> str:
    """The Markdown section of docs/coverage.md (summary per raters per arm, then every
    cell: the default's coverage, CR1's and the percentile bootstrap's in parentheses)."""
    t0 = time.time()
    cells = []
    for effect in effects:
        for sd in rater_sds:
            for g in raters:
                cells.append((effect, sd, g, cell_coverage(
                    effect, sd, g, n_studies, seed=seed, n_resamples=n_resamples,
                    n_boot_studies=n_boot_studies)))
    n_boot = min(n_boot_studies, n_studies)
    se = 100 * math.sqrt(0.95 * 0.05 / n_studies)
    se_boot = 100 * math.sqrt(0.9 * 0.1 / n_boot)
    boot = (f"the percentile bootstrap with {n_resamples} rater resamples on the first "
            f"{n_boot} of them (SE ≈ {se_boot:.1f} points at 90 %)" if n_resamples else
            "the percentile bootstrap not run")
    lines = [
        RELIANCE_HEADING,
        "",
        f"Generated by `{command('assisted')} --reliance --studies {n_studies} "
        f"--boot-studies {n_boot_studies} --resamples {n_resamples} --seed {seed} "
        f"--write docs/coverage.md` ({time.time() - t0:.0f} s). {n_studies} simulated "
        f"studies per cell (Monte-Carlo SE ≈ {se:.2f} points at 95 %); {boot}. Generator "
        "and truth: the docstring of `estimators/assisted/rater_simulation.py` (two arms of G "
        "raters each, 10–60 ratings per rater, 30 % of them on sentences the AI got wrong, rater "
        "effects N(0, σ²) on the log-odds scale). Six figures per study: the assisted arm's "
        "accuracy, accuracy when the AI was right / wrong, and gain, over-reliance and "
        "under-reliance against the baseline. **Default**: Wilson at the rater-clustered "
        "effective size from the bias-reduced CR2 variance, with Student t on Bell–McCaffrey's "
        "degrees of freedom; Newcombe (MOVER) for the differences with both arms' limits on "
        "the Welch–Satterthwaite degrees of freedom (`cr2_proportion`, `cr2_difference` of "
        "`estimators/numerics/clustered.py`). **CR1** (the first default, still "
        "the critique tables'): the CR1 variance and t on G − 1 degrees of freedom for every "
        "limit. **Bootstrap** (the default before CR1): percentile bootstrap of raters within "
        "arms. "
        "Width: the mean width of the six intervals, in points of accuracy.",
        "",
        "| raters per arm | "
        + " | ".join(f"default min, σ = {sd:g}" for sd in rater_sds)
        + " | default median | default width | CR1 min | CR1 median | CR1 width "
          "| bootstrap min | bootstrap median |",
        "|---|" + "---|" * (len(rater_sds) + 7),
    ]

    def pooled(key: str, g: int, sd: float | None = None) -> np.ndarray:
        return np.concatenate([c[key] for _, s, gg, c in cells
                               if gg == g and (sd is None or s == sd)])

    for g in raters:
        new, old = pooled("clustered", g), pooled("cr1", g)
        row = (f"| {g} | " + " | ".join(f"{100 * pooled('clustered', g, sd).min():.1f}"
                                        for sd in rater_sds)
               + f" | {100 * np.median(new):.1f} | {100 * pooled('clustered_width', g).mean():.1f}"
               f" | {100 * old.min():.1f} | {100 * np.median(old):.1f}"
               f" | {100 * pooled('cr1_width', g).mean():.1f} |")
        if n_resamples:
            boot_cov = pooled("percentile", g)
            row += f" {100 * boot_cov.min():.1f} | {100 * np.median(boot_cov):.1f} |"
        else:
            row += " – | – |"
        lines.append(row)
    big = [c for _, _, g, c in cells if g >= MIN_RELIABLE_RATERS]
    if big:
        new = np.concatenate([c["clustered"] for c in big])
        old = np.concatenate([c["cr1"] for c in big])
        short_sds = sorted({sd for _, sd, g, c in cells
                            if g >= MIN_RELIABLE_RATERS and (c["cr1"] < 0.93).any()})
        summary = (f"**From {MIN_RELIABLE_RATERS} raters per arm (`MIN_RELIABLE_RATERS`): "
                   f"default {100 * new.min():.1f}–{100 * new.max():.1f} % (median "
                   f"{100 * np.median(new):.1f} %; {int((new < 0.93).sum())} of {new.size} "
                   f"figure-cells below 93 %).** CR1: {100 * old.min():.1f}–"
                   f"{100 * old.max():.1f} % (median {100 * np.median(old):.1f} %; "
                   f"{int((old < 0.93).sum())} below 93 %"
                   + (f", with rater effects σ = {', '.join(f'{s:g}' for s in short_sds)}"
                      if short_sds else "") + ").")
        if n_resamples:
            boot_cov = np.concatenate([c["percentile"] for c in big])
            summary += (f" The bootstrap: {100 * boot_cov.min():.1f}–"
                        f"{100 * boot_cov.max():.1f} %.")
        at_min = [c for _, _, g, c in cells if g == MIN_RELIABLE_RATERS]
        diff_cr1 = np.concatenate([c["cr1"][3:] for c in at_min]) if at_min else new
        width = (np.mean([c["clustered_width"].mean() for c in big])
                 / np.mean([c["cr1_width"].mean() for c in big]))
        lines += ["", summary, "",
                  "Why CR2 with these degrees of freedom: raters rate different numbers of "
                  "sentences, so the ratio estimator leans on the busiest raters and the "
                  "spread between G raters carries fewer than G − 1 degrees of freedom "
                  "(Bell–McCaffrey's count); with very unequal raters near an accuracy of 0.9 "
                  "the rater accuracies are also skewed, and CR1 on G − 1 missed the truth "
                  "more often below the interval than above it. The difference of two arms "
                  "of different raters has up to twice the degrees of freedom of either arm "
                  "(Welch–Satterthwaite); with each arm's own quantile, CR1's differences "
                  f"covered {100 * diff_cr1.min():.1f}–{100 * diff_cr1.max():.1f} % at "
                  f"{MIN_RELIABLE_RATERS} raters. From {MIN_RELIABLE_RATERS} raters per arm "
                  f"the default's intervals are on average {width:.3f} times as wide as "
                  "CR1's.", "",
                  f"Below {MIN_RELIABLE_RATERS} raters per arm the dashboard says the arm's "
                  "intervals are unreliable: they still cover here, but only by being very "
                  "wide (Student t on about 2 degrees of freedom), and how wide rests on a spread "
                  "between raters estimated from 3 or 4 of them. No interval helps with a rare "
                  "outlying rater (a careless 1 in 10): it is missing from most small samples."]
    lines += ["", "Every cell: default coverage, CR1's and the bootstrap's in parentheses.", "",
              "| effect | σ | G | " + " | ".join(f.replace("_", " ") for f in FIGURES) + " |",
              "|---|---|---|" + "---|" * len(FIGURES)]
    for effect, sd, g, c in cells:
        vals = []
        for j in range(len(FIGURES)):
            v = f"{100 * c['clustered'][j]:.1f} ({100 * c['cr1'][j]:.1f}"
            if "percentile" in c:
                v += f"; {100 * c['percentile'][j]:.1f}"
            vals.append(v + ")")
        lines.append(f"| {effect.name} | {sd:g} | {g} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag, what in (
            ("--reliance", "the reliance intervals"),
            ("--reliance-columns", "the reliance table's agreement with the AI, helpfulness "
                                   "and time (estimators.assisted.coverage_columns)"),
            ("--regression", "the paper's regression test, each arm's effect "
                             "(estimators.assisted.coverage_regression)"),
            ("--alpha", "Krippendorff's α's interval (estimators.assisted.coverage_alpha)"),
            ("--hybrid", "the sentence intervals of the hybridization figures "
                         "(estimators.assisted.sentence_coverage)"),
            ("--calibration", "the calibration bars and the ECE's interval")):
        parser.add_argument(flag, action="store_true", help=f"coverage of {what}")
    parser.add_argument("--studies", type=int, default=None,
                        help="simulated studies per cell (default: 40000 for --reliance, "
                             "20000 for --reliance-columns, 1000 for --regression, 4000 for "
                             "--alpha, 600 for --hybrid, 1000 for --calibration)")
    parser.add_argument("--boot-studies", type=int, default=2000,
                        help="--reliance: of which the percentile bootstrap runs on "
                             "(default 2000)")
    parser.add_argument("--resamples", type=int, default=1000,
                        help="bootstrap resamples of the former interval; 0 skips it")
    parser.add_argument("--former", type=int, default=None,
                        help="--alpha / --hybrid / --calibration: studies per cell also "
                             "scored with the former bootstrap (default 600 / 200 / 300; 0 "
                             "skips it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", metavar="PATH", help=WRITE_HELP)
    args = parser.parse_args(argv)
    tables = ("reliance", "reliance_columns", "regression", "alpha", "hybrid", "calibration")
    if sum(bool(getattr(args, name)) for name in tables) != 1:
        parser.error("say which table: --reliance, --reliance-columns, --regression, "
                     "--alpha, --hybrid or --calibration")
    if args.reliance:
        section = reliance_table(args.studies or 40000, args.resamples, args.seed,
                                 n_boot_studies=args.boot_studies)
    elif args.reliance_columns:
        from estimators.assisted.coverage_columns import columns_table

        section = columns_table(args.studies or 20000, args.seed)
    elif args.regression:
        from estimators.assisted.coverage_regression import regression_table

        section = regression_table(args.studies or 1000, args.seed)
    elif args.alpha:
        from estimators.assisted.coverage_alpha import alpha_table

        section = alpha_table(args.studies or 4000, 600 if args.former is None else args.former,
                              args.seed)
    elif args.hybrid:
        section = sentence_coverage.hybrid_table(
            args.studies or 600, 200 if args.former is None else args.former, args.seed)
    else:
        section = sentence_coverage.calibration_table(
            args.studies or 1000, 300 if args.former is None else args.former, args.seed)
    emit(section, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
