"""Coverage, at one query per item, of the partitioned dashboard's two corrected ML columns
(issue 18), from simulated studies with known truth, and the Markdown sections of
docs/coverage.md that show it:

* the IPW column (``--ipw``): classes whose queries are answered at unequal rates, where
  the plain estimate is biased;
* the stratified column (``--stratified``): strata sampled out of proportion to the
  population, with different accuracies.

Their outcomes are too many to enumerate (a count per class, or per stratum), so coverage
is simulated; every figure states its Monte-Carlo SE. The several-queries versions of
both columns are :mod:`estimators.partitioned.simulation`'s (``ipw_coverage``,
``stratified_coverage``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from estimators.partitioned.accuracy import estimate
from estimators.partitioned.adjust import (
    binomial_equivalent,
    ipw_class_weights,
    ipw_effective_counts,
    stratified_estimate,
    weighted_effective_counts,
)
from estimators.partitioned.coverage_exact import generated_by, markdown_rows
from estimators.partitioned.simulation import _covers

IPW_HEADING = "## Partitioned, one query per item: the IPW column (completion imbalance)"
STRATIFIED_HEADING = "## Partitioned, one query per item: the stratified column"
KS = (3, 5, 10)
ACCURACIES = (0.3, 0.7, 0.9, 0.97)
ITEMS = (100, 400, 2000)
GOAL_FLOOR = 0.935
BAND = (0.935, 0.965)

# ---------------------------------------------------------------------------------------
# IPW: completion imbalance

COMPLETION = (0.5, 1.0)  # class completion rates, evenly from the slowest to the fastest
COMPLETIONS = ((0.5, 1.0), (0.25, 1.0))  # the table's two imbalances (ratios 2 and 4)


def imbalance_design(k: int, accuracy: float, completion=COMPLETION
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(completion rate r_c, accuracy A_c on items whose true class is c, the AI's wrong
    answers' distribution over classes per true class) of the generator where completion
    imbalance biases the plain estimate: r_c from ``completion[0]`` (class 0) up to
    ``completion[1]``; A_c = A + δ(2c/(K − 1) − 1), δ = min(A, 1 − A)/2 — the slow classes
    are the hard ones, and the classes are equally frequent, so the population accuracy is
    A —; a wrong answer names class j ≠ c with probability ∝ 1/r_j² (it leans on the slow
    classes, where a "no" that would catch it is answered less)."""
    rate = np.linspace(*completion, k)
    acc = accuracy + min(accuracy, 1 - accuracy) / 2 * (2 * np.arange(k) / (k - 1) - 1)
    wrong = np.tile(1 / rate**2, (k, 1))
    np.fill_diagonal(wrong, 0.0)
    return rate, acc, wrong / wrong.sum(axis=1, keepdims=True)


def _imbalance_probabilities(k: int, accuracy: float, completion) -> np.ndarray:
    """P(one item's query is of class c and ends as each of: pending, ordinary right,
    ordinary wrong, complementary hit, complementary miss), c-major (5K values)."""
    rate, acc, wrong = imbalance_design(k, accuracy, completion)
    prior = 1 / k  # the true class, uniform
    hit = prior * ((1 - acc)[:, None] * wrong).sum(axis=0)  # true ≠ c, the AI names c
    p = np.stack([1 - rate, rate * prior * acc, rate * prior * (1 - acc), rate * hit,
                  rate * (1 - prior - hit)], axis=1)
    return (p / k).ravel()  # the class asked: uniform


@dataclass(frozen=True)
class AdjustedCell:
    k: int
    accuracy: float
    n_items: int
    design: str
    labels: float  # mean answered labels per study
    coverage: dict  # interval name → coverage
    bias: dict  # interval name → mean estimate − truth


def ipw_cell(k: int, accuracy: float, n_items: int, reps: int, rng: np.random.Generator,
             completion=COMPLETION, confidence: float = 0.95) -> AdjustedCell:
    """``reps`` studies of ``n_items`` items, one query each, the class asked uniform, each
    query answered with its class's completion rate (:func:`imbalance_design`; the rest
    pending, as in a study seen mid-way). Coverage of the population accuracy A by: the
    IPW column (weights w_c = r̄/r̂_c from the study's own answered/routed counts,
    :func:`estimators.partitioned.adjust.ipw_effective_counts`), its former rule (Kish's
    effective count of each source, :func:`~estimators.partitioned.adjust.
    weighted_effective_counts`), and the plain ML estimate (no weights)."""
    counts = rng.multinomial(n_items, _imbalance_probabilities(k, accuracy, completion),
                             size=reps).reshape(reps, k, 5).transpose(1, 2, 0)
    routed = counts.sum(axis=1)
    n_o, s_o = counts[:, 1] + counts[:, 2], counts[:, 1]
    n_c, s_c = counts[:, 3] + counts[:, 4], counts[:, 4]
    w = ipw_class_weights(routed - counts[:, 0], routed)
    estimates = {
        "ipw": estimate(*ipw_effective_counts(n_o, s_o, n_c, s_c, w, k), k, "ml",
                        confidence),
        "kish": estimate(*weighted_effective_counts(n_o, s_o, w),
                         *weighted_effective_counts(n_c, s_c, w), k, "ml", confidence),
        "plain": estimate(n_o.sum(axis=0), s_o.sum(axis=0), n_c.sum(axis=0),
                          s_c.sum(axis=0), k, "ml", confidence),
    }
    return AdjustedCell(
        k=k, accuracy=accuracy, n_items=n_items,
        design=f"{100 * completion[0]:.0f}–{100 * completion[1]:.0f} %",
        labels=float((n_o + n_c).sum(axis=0).mean()),
        coverage={name: _covers(e, accuracy) for name, e in estimates.items()},
        bias={name: float(np.mean(e.accuracy) - accuracy) for name, e in estimates.items()})


def ipw_cells(reps: int = 4000, seed: int = 0, ks=KS, accuracies=ACCURACIES, items=ITEMS,
              completions=COMPLETIONS,
              progress: Callable[[int, int, AdjustedCell], None] | None = None
              ) -> list[AdjustedCell]:
    rng = np.random.default_rng(seed)
    plan = [(k, a, g, c) for c in completions for k in ks for a in accuracies for g in items]
    return _run(plan, lambda k, a, g, completion: ipw_cell(k, a, g, reps, rng, completion),
                progress)


def _run(plan: list[tuple], make: Callable[..., AdjustedCell],
         progress: Callable[[int, int, AdjustedCell], None] | None) -> list[AdjustedCell]:
    cells: list[AdjustedCell] = []
    for args in plan:
        cells.append(make(*args))
        if progress is not None:
            progress(len(cells), len(plan), cells[-1])
    return cells


# ---------------------------------------------------------------------------------------
# Stratified: strata sampled out of proportion


def strata_designs(accuracy: float) -> Iterator[tuple[str, np.ndarray, np.ndarray,
                                                        np.ndarray]]:
    """(name, the strata's shares of the sampled items, their population shares, their
    accuracies), each design's population-weighted accuracy being A:

    * "2 strata": sampled ½ and ½, population ¾ and ¼, accuracies A + δ and A − 3δ,
      δ = min(A, 1 − A)/4 (as the several-queries table);
    * "4 strata": sampled 0.1, 0.2, 0.3, 0.4, population 0.4, 0.3, 0.2, 0.1 — the
      smallest sample is the largest share of the population —, accuracies A + d·(−1, 0,
      1, 2), d = min(A, 1 − A)/3."""
    d = min(accuracy, 1 - accuracy) / 4
    yield ("2 strata", np.array([0.5, 0.5]), np.array([0.75, 0.25]),
           np.array([accuracy + d, accuracy - 3 * d]))
    d = min(accuracy, 1 - accuracy) / 3
    yield ("4 strata", np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1]),
           accuracy + d * np.array([-1.0, 0.0, 1.0, 2.0]))


def stratified_cell(k: int, accuracy: float, n_items: int, reps: int,
                    rng: np.random.Generator, design: tuple, confidence: float = 0.95
                    ) -> AdjustedCell:
    """``reps`` studies whose ``n_items`` items are split among the strata by their sample
    shares, each answered once (n_o ~ Bin(G_h, 1/K), S_o ~ Bin(n_o, A_h), S_c ~
    Bin(G_h − n_o, q_h)). Coverage of the population accuracy Σ W_h A_h by the stratified
    column (per-stratum ML, :func:`estimators.partitioned.adjust.stratified_estimate`)
    with the per-stratum intervals combined (the one-query default), with its former
    effective-count interval, and by the pooled ML estimate (strata ignored)."""
    name, sample, population, acc_h = design
    truth = float(population @ acc_h / population.sum())
    sizes = np.round(sample * n_items).astype(int)
    fields: dict[str, list] = {"acc": [], "n_eq": [], "low": [], "high": [], "counts": []}
    for size, a_h in zip(sizes, acc_h, strict=True):
        n_o = rng.binomial(size, 1 / k, reps)
        s_o = rng.binomial(n_o, a_h)
        s_c = rng.binomial(size - n_o, (a_h + k - 2) / (k - 1))
        est = estimate(n_o, s_o, size - n_o, s_c, k, "ml", confidence)
        fields["acc"].append(np.asarray(est.accuracy))
        fields["n_eq"].append(binomial_equivalent(est.accuracy, n_o, size - n_o, k))
        fields["low"].append(np.asarray(est.ci_low))
        fields["high"].append(np.asarray(est.ci_high))
        fields["counts"].append(np.stack([n_o, s_o, size - n_o, s_c]))
    f = {key: np.array(v) for key, v in fields.items()}
    pooled = f["counts"].sum(axis=0)
    estimates = {
        "combined": stratified_estimate(f["acc"], f["n_eq"], population, k, confidence,
                                        stratum_intervals=(f["low"], f["high"])),
        "effective": stratified_estimate(f["acc"], f["n_eq"], population, k, confidence),
        "pooled": estimate(*pooled, k, "ml", confidence),
    }
    return AdjustedCell(
        k=k, accuracy=accuracy, n_items=n_items, design=name,
        labels=float(n_items),
        coverage={key: _covers(e, truth) for key, e in estimates.items()},
        bias={key: float(np.mean(e.accuracy) - truth) for key, e in estimates.items()})


def stratified_cells(reps: int = 4000, seed: int = 0, ks=KS, accuracies=ACCURACIES,
                     items=ITEMS,
                     progress: Callable[[int, int, AdjustedCell], None] | None = None
                     ) -> list[AdjustedCell]:
    rng = np.random.default_rng(seed)
    plan = [(k, a, g, design) for k in ks for a in accuracies for g in items
            for design in strata_designs(a)]
    return _run(plan, lambda k, a, g, design: stratified_cell(k, a, g, reps, rng, design),
                progress)


# ---------------------------------------------------------------------------------------
# Markdown


def _range(cells: list[AdjustedCell], name: str) -> dict[str, float]:
    v = np.array([c.coverage[name] for c in cells])
    return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max()),
            "below_floor": int((v < GOAL_FLOOR).sum()),
            "outside": int(((v < BAND[0]) | (v > BAND[1])).sum()), "n": len(v)}


def _summary_rows(cells: list[AdjustedCell], columns: dict[str, str]) -> list[str]:
    lines = ["| interval | min | median | max | cells < 93.5 % | outside 93.5–96.5 % |",
             "|---|---|---|---|---|---|"]
    for name, title in columns.items():
        s = _range(cells, name)
        lines.append(f"| {title} | {100 * s['min']:.1f} | {100 * s['median']:.1f} | "
                     f"{100 * s['max']:.1f} | {s['below_floor']} of {s['n']} | "
                     f"{s['outside']} of {s['n']} |")
    return lines


def _below_floor(cells: list[AdjustedCell], name: str) -> str:
    low = [c for c in cells if c.coverage[name] < GOAL_FLOOR]
    return "Default cells below 93.5 %: " + ("none." if not low else "; ".join(
        f"K = {c.k}, A = {c.accuracy}, {c.n_items} items, {c.design}: "
        f"{100 * c.coverage[name]:.1f} %" for c in low) + ".")


def _mark(v: float) -> str:
    return f"{100 * v:.1f}" + (" ↓" if v < BAND[0] else " ↑" if v > BAND[1] else "")


IPW_COLUMNS = {"ipw": "**IPW (default)**: weighted likelihood, d = max(sandwich, model)",
               "kish": "IPW, former rule: Kish's effective count per source",
               "plain": "plain ML (no weights)"}
STRATIFIED_COLUMNS = {"combined": "**stratified (default)**: per-stratum intervals "
                                  "combined",
                      "effective": "stratified, former interval: effective count n*",
                      "pooled": "pooled ML (strata ignored)"}


def _simulated(reps: int) -> str:
    return (f". Simulated: {reps} studies per cell (seed 0; Monte-Carlo SE ≈ "
            f"{100 * np.sqrt(0.95 * 0.05 / reps):.2f} points)")


def ipw_markdown(cells: list[AdjustedCell], reps: int, seconds: float | None = None) -> str:
    lines = [
        IPW_HEADING,
        "",
        generated_by("ipw", seconds) + _simulated(reps) + ". The generator: G items, one "
        "query each, the class asked uniform; the "
        "queries of class c are answered at rate r_c, evenly from 50 % (class 0) to 100 %, "
        "or from 25 % — completion ratios 2 and 4 (the rest still pending, a study seen "
        "mid-way: the imbalance the dashboard warns about from a ratio of 1.25); the "
        "classes are equally frequent as the truth, the AI's accuracy on items "
        "of class c is A + δ(2c/(K − 1) − 1), δ = min(A, 1 − A)/2 — the slow classes are "
        "the hard ones —, and its wrong answers name class j with probability ∝ 1/r_j². "
        "The truth is the population accuracy A. The IPW column weighs each label of class "
        "c by w_c = r̄/r̂_c (the study's own completion rates) and gives the ML estimate of "
        "the weighted labels, with effective counts (weighted counts)/d, d the larger of "
        "the weighted score's sandwich and its model expectation "
        "(`estimators.partitioned.adjust.ipw_effective_counts`, as the several-queries "
        "column takes the sandwich). Its former rule took Kish's effective count of each "
        "source. Grid: K ∈ {3, 5, 10}, A ∈ {0.3, 0.7, 0.9, 0.97}, G ∈ {100, 400, 2000} "
        "items (three quarters, or five eighths, of them answered), both imbalances. Goal: "
        "no cell below 93.5 %, median 95–97 %.",
        "",
    ]
    lines += _summary_rows(cells, IPW_COLUMNS)
    bias = np.array([abs(c.bias["plain"]) for c in cells])
    ipw_bias = np.array([abs(c.bias["ipw"]) for c in cells])
    largest = max(c.n_items for c in cells)
    ipw_bias_large = max(abs(c.bias["ipw"]) for c in cells if c.n_items == largest)
    worst = max(cells, key=lambda c: abs(c.bias["ipw"]))
    lines += [
        "",
        _below_floor(cells, "ipw"),
        "",
        f"The plain estimate is off by up to {100 * bias.max():.1f} points (its coverage "
        f"falls to {100 * min(c.coverage['plain'] for c in cells):.1f} %); "
        f"the IPW estimate by at most {100 * ipw_bias.max():.2f} points (K = {worst.k}, "
        f"A = {worst.accuracy}, {worst.n_items} items, completion {worst.design}: with few "
        "items the slowest class has a handful of answers and its weight is itself "
        "uncertain, a ratio estimator's small-sample bias) and by at most "
        f"{100 * ipw_bias_large:.2f} with {largest} items. Kish's count of "
        "each source treats the weighted labels as if accuracy were the same in every "
        "class: where the slow (heavily weighted) classes are the hard ones, the weighted "
        "proportion varies more than that, and the sandwich of the weighted score sees it. "
        "Where errors are few the sandwich is a count of a few weighted events, small by "
        "chance when they fell on light classes; the model expectation (Kish's formula over "
        "the information) is the floor then.",
        "",
        "| completion | K | A | items | labels | IPW (default) | former (Kish) | plain | "
        "bias of plain |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += markdown_rows(cells, lambda c: [
        c.design, str(c.k), str(c.accuracy), str(c.n_items), f"{c.labels:.0f}",
        *(_mark(c.coverage[name]) for name in IPW_COLUMNS), f"{100 * c.bias['plain']:+.1f}"])
    lines += ["", "↓/↑: outside 93.5–96.5 %."]
    return "\n".join(lines) + "\n"


def stratified_markdown(cells: list[AdjustedCell], reps: int, seconds: float | None = None
                        ) -> str:
    lines = [
        STRATIFIED_HEADING,
        "",
        generated_by("stratified", seconds) + _simulated(reps) + ". G items, one query "
        "each, in strata sampled out of proportion to the "
        "population: *2 strata* — sampled ½ and ½, population shares ¾ and ¼, accuracies "
        "A + δ and A − 3δ, δ = min(A, 1 − A)/4; *4 strata* — sampled 10, 20, 30 and 40 % "
        "of the items, population shares 40, 30, 20 and 10 % (the smallest sample is the "
        "largest share), accuracies A + d·(−1, 0, 1, 2), d = min(A, 1 − A)/3. The truth is "
        "the population accuracy Σ W_h A_h = A. The stratified column is Σ W_h Â_h of the "
        "per-stratum ML estimates; its interval, with one query per item, combines the "
        "per-stratum ML intervals (the ones the per-stratum table shows): "
        "Â ∓ √(Σ W_h² (Â_h − bound_h)²) (MOVER, `estimators.partitioned.adjust."
        "stratified_estimate(…, stratum_intervals=…)`). Its former interval (still the "
        "several-queries one) was that of a proportion of n* = Â(1 − Â)/V effective trials, "
        "V = Σ W_h² Â_h(1 − Â_h)/n*_h. Grid: K ∈ {3, 5, 10}, A ∈ {0.3, 0.7, 0.9, 0.97}, "
        "G ∈ {100, 400, 2000}, both designs. Goal: no cell below 93.5 %, median 95–97 %.",
        "",
    ]
    lines += _summary_rows(cells, STRATIFIED_COLUMNS)
    lines += [
        "",
        _below_floor(cells, "combined"),
        "",
        "The effective-count interval borrows one binomial variance for the whole "
        "estimate; a small stratum that weighs much (4 strata: 40 % of the population from "
        "10 % of the items, a few labels) is far from binomial at its count, and its "
        "estimated variance is itself noisy. Combining the per-stratum intervals keeps "
        "each stratum's own small-sample interval (exact where its events are few, "
        "asymmetric near 0 or 1). The pooled estimate, which ignores the strata, is biased "
        "towards the over-sampled strata.",
        "",
        "| K | A | items | design | stratified (default) | former (n*) | pooled |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += markdown_rows(cells, lambda c: [
        str(c.k), str(c.accuracy), str(c.n_items), c.design,
        *(_mark(c.coverage[name]) for name in STRATIFIED_COLUMNS)])
    lines += ["", "↓/↑: outside 93.5–96.5 %."]
    return "\n".join(lines) + "\n"


__all__ = ["AdjustedCell", "imbalance_design", "ipw_cell", "ipw_cells", "ipw_markdown",
           "stratified_cell", "stratified_cells", "stratified_markdown", "strata_designs"]
