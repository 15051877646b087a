"""Cluster-robust intervals with a small-cluster correction (closed form, deterministic):
the assisted reliance figures (clusters = raters, ``estimators.assisted.reliance``) use
this mechanism, and the critique tables its two-way form (clusters = questions and
annotators at once, ``estimators.numerics.crossed``, on the same Wilson and Newcombe steps:
:func:`wilson_at_effective_size`, :func:`newcombe`).

Observations of one cluster are not independent (a hard question is hard for all seven
responders; a lenient rater is lenient on every sentence), so every interval treats the
*cluster* as the unit (G = number of clusters with at least one scored observation in the
cell). Below, "question" stands for the cluster. Counts come per question: n_q outputs,
s_q of them correct.

Proportion (accuracy): p̂ = S/N with S = Σ s_q, N = Σ n_q — the ratio estimator. Its
cluster-robust (CR1, linearisation) variance is

    V = G/(G−1) · Σ_q (s_q − p̂ n_q)² / N²,

the design effect d = V / (p̂(1−p̂)/N) and the effective number of outputs n* = N/d =
p̂(1−p̂)/V. The interval is Wilson's score interval at n* with the Student t quantile on
G − 1 degrees of freedom in place of z (the usual small-G correction of cluster-robust
inference). Edge rules: where p̂ ∈ {0, 1} the variance says nothing, and n* = G (one
observation per question — conservative when outputs of a question are independent);
d is floored at ``MIN_DESIGN_EFFECT`` (0.5) so that a question set where every question
happens to score the same share does not produce a zero-width interval; with G < 2 the
interval is [0, 1]; with N = 0 everything is NaN.

Why not the question bootstrap: a percentile bootstrap collapses to a point when every
scored output is right (or wrong), which happens per domain at the top levels, and it
under-covers with the ~10–60 questions a domain has; it also costs B resamples per
recompute. Simulated coverage of this interval (Beta-distributed question accuracies,
G = 8…500, 1–5 outputs per question, accuracy 0.5–0.95): 0.93–0.99, ≈ 0.95 from G ≈ 64
(tests/estimators/critique/test_votes.py checks it).

Mean (confidence, minutes): x̄ = X/N with V = G/(G−1) Σ_q (x_q − x̄ n_q)² / N² and the
interval x̄ ± t_{G−1} √V (NaN bounds when G < 2).

Difference of two proportions on the same questions (a level minus its baseline, human
minus AI): Newcombe's hybrid score interval for paired proportions, built from the two
clustered Wilson intervals (l₁, u₁), (l₂, u₂) and the clustered correlation φ of the two
estimates (φ = Ĉov/√(V₁V₂), Ĉov = G/(G−1) Σ_q r₁q r₂q / (N₁N₂), r = s − p̂ n; 0 when a
variance is 0):

    lower = d − √((p̂₁−l₁)² − 2φ(p̂₁−l₁)(u₂−p̂₂) + (u₂−p̂₂)²)
    upper = d + √((u₁−p̂₁)² − 2φ(u₁−p̂₁)(p̂₂−l₂) + (p̂₂−l₂)²),   d = p̂₁ − p̂₂.

Unlike a Wald interval it keeps its coverage where both proportions are near 1 (Wald
fell to 0.6 there in simulation; this one stays ≥ 0.95). Clusters with observations on one
side only (two arms rated by different raters) add to that side's interval and not to φ:
for wholly separate clusters φ = 0 and the interval is the MOVER interval of two
independent proportions.

Rater-clustered coverage (reliance, 3–20 raters per arm): docs/coverage.md, from
``python -m estimators.assisted.coverage --reliance``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

MIN_DESIGN_EFFECT = 0.5


@dataclass(frozen=True)
class Interval:
    """A point estimate with its interval; ``n`` outputs (or votes) and ``n_questions``
    questions behind it. NaN where undefined (nothing scored)."""

    value: float
    lower: float
    upper: float
    n: int
    n_questions: int

    def flat(self, prefix: str) -> dict[str, float | int | None]:
        """``{prefix: value, prefix_lower: …, prefix_upper: …, prefix_n: …}`` (NaN → None)."""
        return {prefix: _num(self.value), f"{prefix}_lower": _num(self.lower),
                f"{prefix}_upper": _num(self.upper), f"{prefix}_n": self.n,
                f"{prefix}_questions": self.n_questions}


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


@dataclass(frozen=True)
class ClusteredArrays:
    """Vectorised results over the trailing (cell) axes."""

    value: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    n: np.ndarray
    n_questions: np.ndarray
    variance: np.ndarray
    residual: np.ndarray  # per question: s_q − p̂ n_q (x_q − x̄ n_q for means)

    def interval(self, index: tuple[int, ...] | int = ()) -> Interval:
        return Interval(float(self.value[index]), float(self.lower[index]),
                        float(self.upper[index]), int(self.n[index]),
                        int(self.n_questions[index]))


def _quantile(interval_level: float, g: np.ndarray) -> np.ndarray:
    if not 0 < interval_level < 1:
        raise ValueError(f"interval_level must be in (0, 1), got {interval_level}")
    df = np.maximum(g - 1, 1).astype(float)
    return np.asarray(special.stdtrit(df, 0.5 + interval_level / 2))


def _ratio(n: np.ndarray, x: np.ndarray):
    n = np.asarray(n, dtype=float)
    x = np.asarray(x, dtype=float)
    total_n, total_x = n.sum(axis=0), x.sum(axis=0)
    g = (n > 0).sum(axis=0)
    safe = total_x / np.where(total_n > 0, total_n, 1)  # 0 where nothing is scored
    value = np.where(total_n > 0, safe, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = np.where(n > 0, x - safe * n, 0.0)
        variance = np.where(g >= 2, g / np.maximum(g - 1, 1) * (residual ** 2).sum(axis=0)
                            / np.where(total_n > 0, total_n, 1) ** 2, np.nan)
    return value, residual, variance, total_n, g


def clustered_proportion(n: np.ndarray, s: np.ndarray, *,
                         interval_level: float = 0.95) -> ClusteredArrays:
    """Accuracy with its design-effect Wilson interval clustered by question.

    ``n``, ``s``: per-question outputs and correct outputs, questions on axis 0 (any
    further axes are independent cells). Formula and edge rules: module docstring."""
    n = np.asarray(n, dtype=float)
    s = np.asarray(s, dtype=float)
    if n.shape != s.shape:
        raise ValueError(f"n and s differ in shape: {n.shape} vs {s.shape}")
    if (s < 0).any() or (s > n).any():
        raise ValueError("s must lie in [0, n] for every question")
    p, residual, variance, total_n, g = _ratio(n, s)
    lower, upper = wilson_at_effective_size(p, variance, total_n, g,
                                            _quantile(interval_level, g))
    return ClusteredArrays(p, lower, upper, total_n.astype(int), g, variance, residual)


def wilson_at_effective_size(p: np.ndarray, variance: np.ndarray, total_n: np.ndarray,
                             g: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval at the effective size n* = p̂(1 − p̂)/V with multiplier c,
    and the module docstring's edge rules (n* = G where p̂ ∈ {0, 1}; design effect ≥
    ``MIN_DESIGN_EFFECT``; [0, 1] with G < 2; NaN with nothing counted). Shared by
    :func:`clustered_proportion` and the question × annotator intervals
    (``estimators.numerics.crossed``)."""
    edge = (p <= 0) | (p >= 1) | ~np.isfinite(variance)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(edge, g, p * (1 - p) / np.where(variance > 0, variance, 1))
        n_eff = np.where(~edge & (variance <= 0), np.inf, n_eff)
    n_eff = np.minimum(n_eff, total_n / MIN_DESIGN_EFFECT)
    with np.errstate(divide="ignore", invalid="ignore"):
        c2n = c ** 2 / np.where(n_eff > 0, n_eff, 1)
        centre = (p + c2n / 2) / (1 + c2n)
        half = c / (1 + c2n) * np.sqrt(p * (1 - p) / n_eff + c2n / (4 * n_eff))
    lower = np.where(g >= 2, np.clip(centre - half, 0, 1), 0.0)
    upper = np.where(g >= 2, np.clip(centre + half, 0, 1), 1.0)
    # Wilson brackets p̂ exactly; rounding must not make it miss it.
    p0 = np.where(total_n > 0, p, 0.0)
    lower, upper = np.minimum(lower, p0), np.maximum(upper, p0)
    nothing = total_n <= 0
    return np.where(nothing, np.nan, lower), np.where(nothing, np.nan, upper)


def clustered_mean(n: np.ndarray, x: np.ndarray, *,
                   interval_level: float = 0.95) -> ClusteredArrays:
    """Mean of a per-output value: x̄ = Σ x_q / Σ n_q with the cluster-robust t interval
    (``x`` holds per-question sums of the value, ``n`` per-question counts)."""
    value, residual, variance, total_n, g = _ratio(n, x)
    half = _quantile(interval_level, g) * np.sqrt(variance)
    ok = g >= 2
    return ClusteredArrays(value, np.where(ok, value - half, np.nan),
                           np.where(ok, value + half, np.nan), total_n.astype(int), g,
                           variance, residual)


def clustered_difference(n1: np.ndarray, s1: np.ndarray, n2: np.ndarray, s2: np.ndarray, *,
                         interval_level: float = 0.95) -> ClusteredArrays:
    """p̂₁ − p̂₂ on the same questions (rows), Newcombe's hybrid score interval with the
    clustered Wilson limits and the clustered correlation (module docstring). Paired
    comparisons pass only questions where both sides have outputs; rows with outputs on one
    side only count for that side and not for the correlation (independent groups: φ = 0).
    ``n`` of the result is the side-1 count and ``n_questions`` the questions with both."""
    a = clustered_proportion(n1, s1, interval_level=interval_level)
    b = clustered_proportion(n2, s2, interval_level=interval_level)
    n1 = np.asarray(n1, dtype=float)
    n2 = np.asarray(n2, dtype=float)
    g = ((n1 > 0) & (n2 > 0)).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = (g / np.maximum(g - 1, 1) * (a.residual * b.residual).sum(axis=0)
               / (n1.sum(axis=0) * n2.sum(axis=0)))
    d, lower, upper = newcombe(a, b, cov)
    with np.errstate(invalid="ignore"):
        variance = a.variance + b.variance - 2 * cov
    return ClusteredArrays(d, lower, upper, a.n, g, variance,
                           a.residual / np.maximum(n1.sum(axis=0), 1)
                           - b.residual / np.maximum(n2.sum(axis=0), 1))


def newcombe(a: ClusteredArrays, b: ClusteredArrays, cov: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p̂₁ − p̂₂, lower, upper): Newcombe's hybrid score interval from the two sides'
    intervals and the correlation φ = cov/√(V₁V₂) (0 where a variance is 0; module
    docstring). Shared by :func:`clustered_difference` and the question × annotator
    intervals (``estimators.numerics.crossed``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where((a.variance > 0) & (b.variance > 0),
                       cov / np.sqrt(a.variance * b.variance), 0.0)
    phi = np.clip(np.where(np.isfinite(phi), phi, 0.0), -1, 1)
    d = a.value - b.value
    down1, up1 = a.value - a.lower, a.upper - a.value
    down2, up2 = b.value - b.lower, b.upper - b.value
    lower = d - np.sqrt(np.maximum(down1 ** 2 - 2 * phi * down1 * up2 + up2 ** 2, 0))
    upper = d + np.sqrt(np.maximum(up1 ** 2 - 2 * phi * up1 * down2 + down2 ** 2, 0))
    return d, np.clip(lower, -1, 1), np.clip(upper, -1, 1)
