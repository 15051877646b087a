"""Coverage of the reliance table's other columns — agreement with the AI, helpfulness and
time — by simulation with known truth (issue 18; docs/coverage.md "Assisted: the reliance
table's other columns").

    manage.py coverage_tables assisted --reliance-columns [--write docs/coverage.md]

Generator (every simulated study of a cell at once): one arm of G raters; rater r gives
m_r ~ Uniform{10, …, 60} ratings, k_r ~ Binomial(m_r, 0.3) of them on sentences the AI
judged wrongly, as in :mod:`estimators.assisted.rater_simulation`. Three independent rater effects,
each N(0, σ²) on its own scale:

* agreement with the AI: the rater is right with probability logistic(logit(p) + b) (p the
  arm's accuracy when the AI is right / wrong, b as in :func:`estimators.assisted.rater_simulation.
  simulate_arm`); a rating agrees with the AI when it is right on a sentence the AI got
  right or wrong on one the AI got wrong (no "can't assess");
* helpfulness 0 / 1 / 2: an ordered logit, P(H ≤ j) = logistic(c_j − b), the cut points
  c_j set so that a rater with b = 0 answers with the planted shares;
* time: log T = log 40 s + b + s·ε, ε ~ N(0, 1) per rating (s the within-rater spread);
  ratings over 3 600 s are left out, as the dashboard does.

Truth: the population value over raters, E[Σ num] / E[Σ den], which (m_r, k_r independent
of the effects) is the mean over raters of the rater's expected value — 0.7 E[acc | AI
right] + 0.3 (1 − E[acc | AI wrong]) for agreement, E[2 − P(H ≤ 0) − P(H ≤ 1)] for
helpfulness and E[T 1{T ≤ 3600}] / P(T ≤ 3600) (log-normal partial moments) for time — by
60-point Gauss–Hermite quadrature over the rater effect.

Two settings per (σ, G): **A** the assisted arm of the "over-reliance" effect (0.90 / 0.45),
helpfulness shares 0.2 / 0.5 / 0.3, within-rater time spread s = 0.8; **B** the "near
ceiling" arm (0.98 / 0.60), shares 0.05 / 0.25 / 0.7 (most raters say "extremely"), s = 1.2.

Intervals compared at 95 %: the default (as :func:`estimators.assisted.reliance.
reliance_by_arm` makes them: ``cr2_proportion``, ``cr2_bounded_mean``, ``cr2_log_mean`` of
:mod:`estimators.numerics.clustered`) and CR1 (``clustered_proportion``, ``clustered_mean``:
the symmetric t interval on G − 1 degrees of freedom, the default before).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import expit, logit

from estimators.assisted.rater_simulation import (
    _W,
    _X,
    EFFECTS,
    RATER_SDS,
    RATERS_PER_ARM,
    RATINGS_PER_RATER,
    SHARE_AI_WRONG,
    simulate_arm,
    true_values,
)
from estimators.assisted.reliance import MIN_RELIABLE_RATERS
from estimators.numerics.clustered import (
    clustered_mean,
    clustered_proportion,
    cr2_bounded_mean,
    cr2_log_mean,
    cr2_proportion,
)
from estimators.numerics.coverage_doc import command

COLUMNS_HEADING = ("## Assisted: the reliance table's other columns (agreement with the AI, "
                   "helpfulness, time)")
COLUMNS = ("agreement_with_ai", "helpfulness", "seconds")
MEDIAN_SECONDS = 40.0
MAX_SECONDS = 3600.0
SPREAD_RULE = 0.5  # the SD of raters' log mean times a spread-based rule would accept


@dataclass(frozen=True)
class Setting:
    """One setting of the three columns' generators (module docstring)."""

    name: str
    effect: int  # index into rater_simulation.EFFECTS (its assisted arm)
    helpfulness_shares: tuple[float, float, float]
    time_spread: float


SETTINGS = (Setting("A", 1, (0.2, 0.5, 0.3), 0.8), Setting("B", 2, (0.05, 0.25, 0.7), 1.2))



def _cuts(shares: tuple[float, float, float]) -> tuple[float, float]:
    return float(logit(shares[0])), float(logit(shares[0] + shares[1]))


def true_columns(setting: Setting, rater_sd: float) -> np.ndarray:
    """The three columns' population values (``COLUMNS`` order; module docstring)."""
    arm = true_values(EFFECTS[setting.effect], rater_sd)
    agreement = ((1 - SHARE_AI_WRONG) * arm["accuracy_ai_right"]
                 + SHARE_AI_WRONG * (1 - arm["accuracy_ai_wrong"]))
    b = rater_sd * _X
    c0, c1 = _cuts(setting.helpfulness_shares)
    helpfulness = float((_W * (2 - expit(c0 - b) - expit(c1 - b))).sum())
    s, mu, top = setting.time_spread, math.log(MEDIAN_SECONDS), math.log(MAX_SECONDS)
    kept = stats.norm.cdf((top - mu - b) / s)
    kept_time = np.exp(mu + b + s * s / 2) * stats.norm.cdf((top - mu - b - s * s) / s)
    return np.array([agreement, helpfulness, float((_W * kept_time).sum() / (_W * kept).sum())])


def simulate_columns(rng: np.random.Generator, setting: Setting, rater_sd: float,
                     n_raters: int, n_studies: int) -> np.ndarray:
    """Per rater and study, (n_raters, n_studies, 3, 2): for each column (``COLUMNS``) the
    (denominator, numerator) sums of the rater's ratings."""
    sums = simulate_arm(rng, EFFECTS[setting.effect].assisted, rater_sd, n_raters, n_studies)
    m, k = sums[..., 0, 0], sums[..., 2, 0]
    agree = sums[..., 1, 1] + (k - sums[..., 2, 1])
    shape = (n_raters, n_studies)
    c0, c1 = _cuts(setting.helpfulness_shares)
    b = rater_sd * rng.standard_normal(shape)
    p0, p01 = expit(c0 - b), expit(c1 - b)
    n0 = rng.binomial(m.astype(int), p0)
    n1 = rng.binomial((m - n0).astype(int), (p01 - p0) / (1 - p0))
    helpful = n1 + 2 * (m - n0 - n1)
    b = rater_sd * rng.standard_normal(shape)
    kept, total = np.zeros(shape), np.zeros(shape)
    upto = np.arange(RATINGS_PER_RATER[1])
    for r in range(n_raters):  # one rater at a time: (studies, 60) draws
        t = np.exp(math.log(MEDIAN_SECONDS) + b[r][:, None]
                   + setting.time_spread * rng.standard_normal((n_studies, upto.size)))
        keep = (upto[None, :] < m[r][:, None]) & (t <= MAX_SECONDS)
        kept[r], total[r] = keep.sum(axis=1), np.where(keep, t, 0.0).sum(axis=1)
    return np.stack([np.stack([m, agree], -1), np.stack([m, helpful], -1),
                     np.stack([kept, total], -1)], axis=2).astype(float)


def column_bounds(sums: np.ndarray, level: float = 0.95, *, cr2: bool = True
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper), each (3, n_studies): the default intervals of the three columns from
    :func:`simulate_columns`'s sums (``cr2=False``: the CR1 ones)."""
    if cr2:
        out = (cr2_proportion(sums[..., 0, 0], sums[..., 0, 1], interval_level=level),
               cr2_bounded_mean(sums[..., 1, 0], sums[..., 1, 1], top=2.0,
                                interval_level=level),
               cr2_log_mean(sums[..., 2, 0], sums[..., 2, 1], interval_level=level))
    else:
        out = (clustered_proportion(sums[..., 0, 0], sums[..., 0, 1], interval_level=level),
               clustered_mean(sums[..., 1, 0], sums[..., 1, 1], interval_level=level),
               clustered_mean(sums[..., 2, 0], sums[..., 2, 1], interval_level=level))
    return np.array([o.lower for o in out]), np.array([o.upper for o in out])


def columns_cell(setting: Setting, rater_sd: float, n_raters: int, n_studies: int, *,
                 seed: int = 0) -> dict[str, np.ndarray]:
    """Coverage of the three columns over ``n_studies`` simulated studies: {"default": (3,),
    "cr1": (3,), "above": (3,) the default's share of studies with the truth above the
    interval, "below": (3,) below it, "alike_share" (1,): the share of studies whose raters'
    log mean times have an SD ≤ ``SPREAD_RULE``, "alike_coverage" (1,): time's coverage in
    those}."""
    rng = np.random.default_rng([seed, n_raters, int(rater_sd * 1000),
                                 SETTINGS.index(setting) if setting in SETTINGS else 99])
    sums = simulate_columns(rng, setting, rater_sd, n_raters, n_studies)
    truth = true_columns(setting, rater_sd)[:, None]
    out = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for key, cr2 in (("default", True), ("cr1", False)):
            lo, hi = column_bounds(sums, cr2=cr2)
            out[key] = ((lo <= truth) & (truth <= hi)).mean(axis=1)
            if cr2:
                out["above"], out["below"] = (truth > hi).mean(axis=1), (truth < lo).mean(axis=1)
                # a rule that trusted time's interval only where the raters' mean times
                # look alike (SD of their logs ≤ SPREAD_RULE): coverage where it would
                timed = sums[..., 2, 0] > 0
                logs = np.where(timed, np.log(sums[..., 2, 1] / np.where(timed, sums[..., 2, 0],
                                                                          1)), np.nan)
                alike = np.nanstd(logs, axis=0, ddof=1) <= SPREAD_RULE
                hit = (lo[2] <= truth[2]) & (truth[2] <= hi[2])
                out["alike_share"] = np.array([alike.mean()])
                out["alike_coverage"] = np.array([hit[alike].mean() if alike.any() else np.nan])
    return out


def _first_upper(text: str) -> str:
    return text[:1].upper() + text[1:]


def columns_table(n_studies: int = 20000, seed: int = 0,
                  raters: tuple[int, ...] = RATERS_PER_ARM,
                  rater_sds: tuple[float, ...] = RATER_SDS) -> str:
    """The Markdown section of docs/coverage.md."""
    t0 = time.time()
    cells = [(s, sd, g, columns_cell(s, sd, g, n_studies, seed=seed))
             for s in SETTINGS for sd in rater_sds for g in raters]
    se = 100 * math.sqrt(0.95 * 0.05 / n_studies)
    names = {"agreement_with_ai": "agreement with the AI", "helpfulness": "helpfulness",
             "seconds": "time"}
    lines = [
        COLUMNS_HEADING, "",
        f"Generated by `{command('assisted')} --reliance-columns --studies "
        f"{n_studies} --seed {seed} --write docs/coverage.md` ({time.time() - t0:.0f} s). "
        f"{n_studies} simulated studies per cell (Monte-Carlo SE ≈ {se:.2f} points at 95 %). "
        "Generator and truth: the docstring of `estimators/assisted/coverage_columns.py` "
        "(one arm of G raters, 10–60 ratings each; independent rater effects N(0, σ²): on "
        "the log-odds of a right rating for agreement, on an ordered logit for helpfulness "
        "0 / 1 / 2, on log seconds for time (typical 40 s; one rater's times spread by a "
        "factor e^s, s = 0.8 or 1.2); setting A: assisted arm of the over-reliance effect, "
        "helpfulness mostly \"somewhat\"; B: near ceiling, mostly \"extremely\"). The "
        "dashboard shows these three columns without intervals; the intervals are in the "
        "reliance CSV. **Default**: agreement with the AI as every proportion of the reliance "
        "table (CR2 Wilson, Bell–McCaffrey degrees of freedom); helpfulness the CR2 t interval "
        "on the logit scale of helpfulness / 2; time the CR2 t interval on the log scale. "
        "**CR1**: the symmetric t interval on G − 1 degrees of freedom for both means (the "
        "default before) and CR1 Wilson for agreement.", "",
        "| raters per arm | σ | "
        + " | ".join(f"{names[c]}: default min | CR1 min" for c in COLUMNS) + " |",
        "|---|---|" + "---|---|" * len(COLUMNS),
    ]
    for g in raters:
        for sd in rater_sds:
            here = [c for _, s, gg, c in cells if gg == g and s == sd]
            row = f"| {g} | {sd:g} | "
            row += " | ".join(f"{100 * min(c['default'][j] for c in here):.1f} | "
                              f"{100 * min(c['cr1'][j] for c in here):.1f}"
                              for j in range(len(COLUMNS)))
            lines.append(row + " |")
    big = [(sd, c) for _, sd, g, c in cells if g >= MIN_RELIABLE_RATERS]
    summary = []
    for j, col in enumerate(COLUMNS):
        new = np.array([c["default"][j] for _, c in big])
        old = np.array([c["cr1"][j] for _, c in big])
        part = (f"{names[col]} {100 * new.min():.1f}–{100 * new.max():.1f} % (median "
                f"{100 * np.median(new):.1f} %; CR1 {100 * old.min():.1f}–"
                f"{100 * old.max():.1f} %)")
        summary.append(part)
    mild = np.array([c["default"][2] for sd, c in big if sd <= 0.5])
    wide = [(sd, c) for sd, c in big if sd > 0.5]
    above = np.mean([c["above"][2] for _, c in wide]) if wide else math.nan
    alike = [c for sd, c in big if sd >= 1]
    weights = np.array([c["alike_share"][0] for c in alike])
    alike_share = weights.mean() if alike else math.nan
    alike_cov = (np.nansum([w * c["alike_coverage"][0] for w, c in zip(weights, alike,
                                                                       strict=True)])
                 / weights.sum()) if alike and weights.sum() > 0 else math.nan
    below = np.mean([c["below"][2] for _, c in wide]) if wide else math.nan
    keep = [names[col] for j, col in enumerate(COLUMNS)
            if min(c["default"][j] for _, c in big) >= 0.93]
    lines += ["", f"**From {MIN_RELIABLE_RATERS} raters per arm, the default: "
              + "; ".join(summary) + ".**", "",
              (_first_upper(" and ".join(keep)) + " keep" + ("s" if len(keep) == 1 else "")
               + f" 93 % from {MIN_RELIABLE_RATERS} raters per arm. " if keep else "")
              + "Time is approximate: with σ ≤ 0.5 (95 % of raters within a factor "
              f"{math.exp(1.96 * 0.5):.1f} of the typical rater's time) it covered "
              f"{100 * mild.min():.1f}–{100 * mild.max():.1f} %; with σ = 1 (a factor "
              f"{math.exp(1.96):.0f}) the truth lay above the interval in "
              f"{100 * above:.1f} % of studies and below it in {100 * below:.1f} %: a mean "
              "over a few raters misses the rare very slow rater, and nothing in a small "
              "sample shows that one is missing. A rule on the raters' measured spread "
              "cannot tell either: with σ = 1, the studies whose raters' log mean times had "
              f"an SD ≤ {SPREAD_RULE:g} ({100 * alike_share:.0f} % of them) covered only "
              f"{100 * alike_cov:.0f} % — they are the ones that missed the slow raters. The "
              "dashboard's Time column says the interval is approximate.", "",
              "Every cell (setting, σ, G): default coverage, CR1's in parentheses.", "",
              "| setting | σ | G | " + " | ".join(names[c] for c in COLUMNS) + " |",
              "|---|---|---|" + "---|" * len(COLUMNS)]
    for s, sd, g, c in cells:
        lines.append(f"| {s.name} | {sd:g} | {g} | " + " | ".join(
            f"{100 * c['default'][j]:.1f} ({100 * c['cr1'][j]:.1f})"
            for j in range(len(COLUMNS))) + " |")
    return "\n".join(lines) + "\n"
