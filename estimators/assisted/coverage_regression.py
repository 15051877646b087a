"""Coverage of the paper's regression test — each arm's effect β (and odds ratio e^β) with
its 95 % Wald interval from the mixed-effects logistic regression
(:func:`estimators.assisted.mixed_logit.arm_effects`) — by simulation from the model itself
(issue 18; docs/coverage.md "Assisted: the paper's regression test").

    .venv/bin/python manage.py coverage_tables assisted --regression [--write docs/coverage.md]

Generator: S sentences with random intercepts u_s ~ N(0, τ²); a baseline arm and three
arms with planted effects β = 0, +0.7, −0.7 on the log-odds scale; every sentence is rated
``RATINGS_PER_ARM`` (2) times in every arm, each rating right with probability
σ(β₀ + β_arm + u_s), independently given u_s — exactly the model that is fitted. β₀ is set
by the baseline's accuracy on a typical sentence, σ(β₀). Truth: the planted β (the odds
ratio's truth e^β; its interval is e^ of β's, so it covers exactly when β's does).

Each simulated study is fitted by :func:`arm_effects` itself (adaptive Gauss–Hermite
quadrature with 25 nodes, Wald intervals from the observed information), one fit per study;
BLAS is held to one thread (the optimiser's small dense algebra only loses to threading).
An arm whose ratings are all right or all wrong gets a note on the dashboard instead of an
interval ("no finite effect"); such arms are counted apart, and coverage is over the
intervals the dashboard shows.
"""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np
from scipy.special import expit, logit

from estimators.assisted.mixed_logit import arm_effects

REGRESSION_HEADING = "## Assisted: the paper's regression test (mixed-effects logistic, Wald)"
EFFECTS = (0.0, 0.7, -0.7)
SENTENCES = (20, 50, 100, 200)
TAUS = (0.5, 1.0, 2.0)
BASELINE_ACCURACIES = (0.7, 0.9)
RATINGS_PER_ARM = 2


def _one_thread():
    """BLAS on one thread where threadpoolctl is installed (a no-op elsewhere)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(1)


def simulate_study(rng: np.random.Generator, n_sentences: int, tau: float,
                   baseline_accuracy: float, effects: tuple[float, ...] = EFFECTS,
                   ratings_per_arm: int = RATINGS_PER_ARM
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One study's ratings (correct 0/1, arm label "baseline" / "arm1"…, sentence index)."""
    betas = np.r_[0.0, effects]
    u = tau * rng.standard_normal(n_sentences)
    sentence = np.repeat(np.arange(n_sentences), betas.size * ratings_per_arm)
    arm = np.tile(np.repeat(np.arange(betas.size), ratings_per_arm), n_sentences)
    p = expit(logit(baseline_accuracy) + betas[arm] + u[sentence])
    correct = (rng.random(sentence.size) < p).astype(float)
    labels = np.array(["baseline"] + [f"arm{j}" for j in range(1, betas.size)])[arm]
    return correct, labels, sentence


def regression_cell(n_sentences: int, tau: float, baseline_accuracy: float, n_studies: int,
                    *, seed: int = 0, effects: tuple[float, ...] = EFFECTS
                    ) -> dict[str, np.ndarray | float]:
    """Over ``n_studies`` simulated studies, per arm (``effects`` order): "covered" and
    "shown" counts (intervals shown: finite), "separated" (no finite effect), "below"
    (truth below the interval), "width" (mean width of β's interval); "not_converged": the
    number of studies whose fit reported no convergence."""
    rng = np.random.default_rng([seed, n_sentences, int(tau * 100),
                                 int(baseline_accuracy * 1000)])
    k = len(effects)
    out: dict[str, np.ndarray | float] = {key: np.zeros(k) for key in
                                          ("covered", "shown", "separated", "below", "width")}
    out["not_converged"] = 0.0
    with _one_thread():
        for _ in range(n_studies):
            correct, labels, sentence = simulate_study(rng, n_sentences, tau,
                                                       baseline_accuracy, effects)
            fit = arm_effects(correct, labels, sentence, baseline="baseline")
            out["not_converged"] += not fit.converged
            rows = {e.arm: e for e in fit.effects}
            for j, beta in enumerate(effects):
                e = rows.get(f"arm{j + 1}")
                if e is None or not (math.isfinite(e.lower) and math.isfinite(e.upper)):
                    out["separated"][j] += 1
                    continue
                out["shown"][j] += 1
                out["covered"][j] += e.lower <= beta <= e.upper
                out["below"][j] += beta < e.lower
                out["width"][j] += e.upper - e.lower
    out["width"] = out["width"] / np.maximum(out["shown"], 1)
    return out


def regression_table(n_studies: int = 1000, seed: int = 0,
                     sentences: tuple[int, ...] = SENTENCES, taus: tuple[float, ...] = TAUS,
                     accuracies: tuple[float, ...] = BASELINE_ACCURACIES) -> str:
    """The Markdown section of docs/coverage.md."""
    t0 = time.time()
    cells = [(a, tau, s, regression_cell(s, tau, a, n_studies, seed=seed))
             for a in accuracies for tau in taus for s in sentences]
    se = 100 * math.sqrt(0.95 * 0.05 / n_studies)
    se_pooled = 100 * math.sqrt(0.95 * 0.05 / (n_studies * len(EFFECTS)))

    def cov(c) -> np.ndarray:
        return c["covered"] / np.maximum(c["shown"], 1)

    lines = [
        REGRESSION_HEADING, "",
        f"Generated by `.venv/bin/python manage.py coverage_tables assisted --regression --studies "
        f"{n_studies} --seed {seed} --write docs/coverage.md` ({time.time() - t0:.0f} s). "
        f"{n_studies} simulated studies per cell, each fitted by `arm_effects` as the "
        f"dashboard does (Monte-Carlo SE ≈ {se:.1f} points per arm, ≈ {se_pooled:.1f} for "
        "the three arms of a cell pooled). Generator: the fitted model itself — S sentences "
        "with random intercepts N(0, τ²), a baseline and three arms with planted effects "
        f"β = {', '.join(f'{b:+g}' for b in EFFECTS)} (log-odds), every sentence rated "
        f"{RATINGS_PER_ARM} times in every arm; σ(β₀), the baseline's accuracy on a typical "
        "sentence, 0.7 or 0.9 (`estimators/assisted/coverage_regression.py`). Truth: the "
        "planted β; the odds ratio's interval is e^ of β's, so it covers exactly when β's "
        "does. **Interval**: Wald, β̂ ± 1.96 SE from the observed information. Arms whose "
        "ratings were all right have no finite effect: the dashboard says so instead of "
        "showing an interval; they are counted apart (\"no finite effect\").", "",
        "| σ(β₀) | τ | sentences | coverage, β = "
        + " | coverage, β = ".join(f"{b:+g}" for b in EFFECTS)
        + " | pooled | mean width of β's interval | no finite effect | fit not converged |",
        "|---|---|---|" + "---|" * (len(EFFECTS) + 4),
    ]
    for a, tau, s, c in cells:
        pooled = c["covered"].sum() / max(c["shown"].sum(), 1)
        lines.append(
            f"| {a:g} | {tau:g} | {s} | "
            + " | ".join(f"{100 * v:.1f}" for v in cov(c))
            + f" | {100 * pooled:.1f} | {np.average(c['width'], weights=c['shown'] + 1e-12):.2f}"
            f" | {int(c['separated'].sum())} of {n_studies * len(EFFECTS)}"
            f" | {int(c['not_converged'])} of {n_studies} |")
    pooled = np.array([c["covered"].sum() / max(c["shown"].sum(), 1) for *_, c in cells])
    per_arm = np.concatenate([cov(c) for *_, c in cells])
    shown = sum(c["shown"].sum() for *_, c in cells)
    below = sum(c["below"].sum() for *_, c in cells) / shown
    above = 1 - sum(c["covered"].sum() for *_, c in cells) / shown - below
    lines += ["", f"**Pooled per cell: {100 * pooled.min():.1f}–{100 * pooled.max():.1f} % "
              f"(median {100 * np.median(pooled):.1f} %); per arm {100 * per_arm.min():.1f}–"
              f"{100 * per_arm.max():.1f} %.** Over every interval shown, the truth lay below "
              f"it in {100 * below:.1f} % and above it in {100 * above:.1f} %."]
    return "\n".join(lines) + "\n"
