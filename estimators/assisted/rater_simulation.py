"""The rater model behind the reliance coverage tables (docs/coverage.md "Assisted: reliance
with few raters" and "the reliance table's other columns"): ``estimators.assisted.coverage``
and ``estimators.assisted.coverage_columns`` simulate raters with it.

Generator (vectorised: every simulated study of a cell at once). Two arms, a baseline and an
assisted arm, of G raters each (between-subjects, as the platform randomises raters). Rater r
rates m_r ~ Uniform{10, …, 60} sentences, of which k_r ~ Binomial(m_r, 0.3) are sentences
the AI judged wrongly. Rater r has two effects on the log-odds scale,
b_right = σ z₁ and b_wrong = σ (ρ z₁ + √(1 − ρ²) z₂) with z ~ N(0, 1), ρ = 0.5 (a rater
good when the AI is right tends to be good when it is wrong, not exactly so), and gets each
sentence right with probability logistic(logit(p) + b), p the arm's planted accuracy when
the AI is right or wrong. The sentences are held fixed, as on the platform (the figures
are "on these sentences"); within an AI-right / AI-wrong class they are exchangeable.

Truth: the population value over raters of each ratio figure, E[Σ num] / E[Σ den]; as m_r
and k_r are independent of the rater's effects this is the mean over raters of the
rater's accuracy, E logistic(logit(p) + b), by 60-point Gauss–Hermite quadrature
(accuracy: 0.3 × AI-wrong + 0.7 × AI-right).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

FIGURES = ("accuracy", "accuracy_ai_right", "accuracy_ai_wrong", "gain", "over_reliance",
           "under_reliance")
SHARE_AI_WRONG = 0.3
RATINGS_PER_RATER = (10, 60)
RHO = 0.5
RATERS_PER_ARM = (3, 5, 8, 12, 20)
RATER_SDS = (0.25, 0.5, 1.0)


@dataclass(frozen=True)
class Effect:
    """Planted accuracies (AI right, AI wrong) of the baseline and the assisted arm."""

    name: str
    baseline: tuple[float, float]
    assisted: tuple[float, float]


EFFECTS = (
    Effect("no effect", (0.75, 0.65), (0.75, 0.65)),
    Effect("over-reliance", (0.75, 0.65), (0.90, 0.45)),
    Effect("near ceiling", (0.95, 0.80), (0.98, 0.60)),
)

_X, _W = np.polynomial.hermite_e.hermegauss(60)
_W = _W / _W.sum()


def _mean_accuracy(p: float, sd: float) -> float:
    return float((_W * expit(logit(p) + sd * _X)).sum())


def true_values(effect: Effect, rater_sd: float) -> dict[str, float]:
    """The six figures' population values (module docstring)."""
    def arm(p: tuple[float, float]) -> tuple[float, float, float]:
        right, wrong = _mean_accuracy(p[0], rater_sd), _mean_accuracy(p[1], rater_sd)
        return SHARE_AI_WRONG * wrong + (1 - SHARE_AI_WRONG) * right, right, wrong
    b, a = arm(effect.baseline), arm(effect.assisted)
    return dict(zip(FIGURES, (*a, a[0] - b[0], b[2] - a[2], b[1] - a[1]), strict=True))


def simulate_arm(rng: np.random.Generator, p: tuple[float, float], rater_sd: float,
                 n_raters: int, n_studies: int) -> np.ndarray:
    """Per rater and study: (n_raters, n_studies, 3, 2) — for accuracy, AI right, AI wrong
    the (denominator, numerator) sums of the rater's ratings."""
    shape = (n_raters, n_studies)
    z1, z2 = rng.standard_normal(shape), rng.standard_normal(shape)
    b_right = rater_sd * z1
    b_wrong = rater_sd * (RHO * z1 + math.sqrt(1 - RHO ** 2) * z2)
    m = rng.integers(RATINGS_PER_RATER[0], RATINGS_PER_RATER[1] + 1, shape)
    k = rng.binomial(m, SHARE_AI_WRONG)
    c_wrong = rng.binomial(k, expit(logit(p[1]) + b_wrong))
    c_right = rng.binomial(m - k, expit(logit(p[0]) + b_right))
    return np.stack([np.stack([m, c_wrong + c_right], -1), np.stack([m - k, c_right], -1),
                     np.stack([k, c_wrong], -1)], axis=2).astype(float)
