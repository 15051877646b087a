"""Cluster-robust intervals with a small-cluster correction (closed form, deterministic):
the assisted reliance figures (clusters = raters, ``estimators.assisted.reliance``: CR2,
below) use this mechanism, and the critique tables its two-way form (clusters = questions
and annotators at once, CR1: ``estimators.numerics.crossed``, on the same Wilson and
Newcombe steps, :func:`wilson_bounds` and :func:`newcombe_bounds`).

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

CR2 (``cr2_proportion``, ``cr2_mean``, ``cr2_difference``; the assisted reliance figures):
the same intervals with Bell & McCaffrey's (2002) bias-reduced variance and degrees of
freedom in place of CR1 and G − 1. For the ratio estimator (an intercept-only regression
on the observations, hat matrix J/N) the CR2 adjustment (I − H_gg)^(−1/2) multiplies a
question's residual sum by (1 − n_q/N)^(−1/2):

    V₂ = Σ_q (s_q − p̂ n_q)² / (1 − n_q/N) / N²,

equal to CR1 when every question has the same n_q. The t quantile's degrees of freedom are
Bell–McCaffrey's Satterthwaite approximation under working independence of the
observations, df = tr(B)² / tr(B²) with B_qr = a_q a_r (n_q [q = r] − n_q n_r / N),
a_q = (1 − n_q/N)^(−1/2); in closed form, with w_q = n_q² / (N − n_q),

    df = N² / (Σ_q n_q² + (Σ_q w_q)² − Σ_q w_q²),

which is G − 1 for equal n_q and less when a few questions hold most observations. In
``cr2_difference`` of two sides with no question in common (two arms rated by different
raters), both sides' limits take the t quantile on the Welch–Satterthwaite degrees of
freedom of V₁ + V₂, (V₁ + V₂)² / (V₁²/df₁ + V₂²/df₂), as a difference of two independent
estimates has more degrees of freedom than either (with each side's own quantile the
MOVER interval over-covers: 97–99 % at 5 raters per arm); with questions in common each
side keeps its own and the correlation comes from the CR2-adjusted residuals.

Rater-clustered coverage (reliance, 3–20 raters per arm; CR1 and CR2): docs/coverage.md,
from ``.venv/bin/python manage.py coverage_tables assisted --reliance``.
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
    df: np.ndarray | None = None  # the t quantile's degrees of freedom

    def interval(self, index: tuple[int, ...] | int = ()) -> Interval:
        return Interval(float(self.value[index]), float(self.lower[index]),
                        float(self.upper[index]), int(self.n[index]),
                        int(self.n_questions[index]))


def _quantile(interval_level: float, df: np.ndarray) -> np.ndarray:
    """The Student t quantile at ``0.5 + interval_level / 2`` on ``df`` (≥ 1) degrees of
    freedom."""
    if not 0 < interval_level < 1:
        raise ValueError(f"interval_level must be in (0, 1), got {interval_level}")
    return np.asarray(special.stdtrit(np.maximum(df, 1).astype(float),
                                      0.5 + interval_level / 2))


def _ratio(n: np.ndarray, x: np.ndarray, *, cr2: bool = False):
    """(value, per-cluster residual, variance, N, G, degrees of freedom) of the ratio
    X/N: CR1 with G − 1 degrees of freedom, or with ``cr2`` CR2 with Bell–McCaffrey's
    (module docstring)."""
    n = np.asarray(n, dtype=float)
    x = np.asarray(x, dtype=float)
    total_n, total_x = n.sum(axis=0), x.sum(axis=0)
    g = (n > 0).sum(axis=0)
    safe_n = np.where(total_n > 0, total_n, 1)
    safe = total_x / safe_n  # 0 where nothing is scored
    value = np.where(total_n > 0, safe, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = np.where(n > 0, x - safe * n, 0.0)
        if cr2:
            rest = np.where(n > 0, safe_n - n, 1.0)  # N − n_g: 1 − h_g = (N − n_g)/N
            variance = (residual ** 2 / rest).sum(axis=0) / safe_n
            w = np.where(n > 0, n ** 2 / rest, 0.0)
            df = total_n ** 2 / ((n ** 2).sum(axis=0) + w.sum(axis=0) ** 2
                                 - (w ** 2).sum(axis=0))
        else:
            variance = g / np.maximum(g - 1, 1) * (residual ** 2).sum(axis=0) / safe_n ** 2
            df = g - 1.0
        variance = np.where(g >= 2, variance, np.nan)
    return value, residual, variance, total_n, g, np.where(g >= 2, df, 1.0)


def _cr2_weight(n: np.ndarray) -> np.ndarray:
    """CR2's per-cluster factor on the residual, (1 − n_g/N)^(−1/2) (0 for empty
    clusters, 1 where one cluster holds everything: such a cell has no interval)."""
    n = np.asarray(n, dtype=float)
    total = n.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.sqrt(total / np.where(n < total, total - n, total))
    return np.where(n > 0, a, 0.0)


def _proportion(n: np.ndarray, s: np.ndarray, interval_level: float,
                cr2: bool, df: np.ndarray | None = None) -> ClusteredArrays:
    n = np.asarray(n, dtype=float)
    s = np.asarray(s, dtype=float)
    if n.shape != s.shape:
        raise ValueError(f"n and s differ in shape: {n.shape} vs {s.shape}")
    if (s < 0).any() or (s > n).any():
        raise ValueError("s must lie in [0, n] for every question")
    p, residual, variance, total_n, g, own_df = _ratio(n, s, cr2=cr2)
    df = own_df if df is None else df
    lower, upper = _wilson_bounds(p, variance, total_n, g, _quantile(interval_level, df))
    return ClusteredArrays(p, lower, upper, total_n.astype(int), g, variance, residual, df)


def clustered_proportion(n: np.ndarray, s: np.ndarray, *,
                         interval_level: float = 0.95) -> ClusteredArrays:
    """Accuracy with its design-effect Wilson interval clustered by question (CR1, t on
    G − 1 degrees of freedom).

    ``n``, ``s``: per-question outputs and correct outputs, questions on axis 0 (any
    further axes are independent cells). Formula and edge rules: module docstring."""
    return _proportion(n, s, interval_level, cr2=False)


def effective_size(p: np.ndarray, variance: np.ndarray, total_n: np.ndarray, g: np.ndarray
                   ) -> np.ndarray:
    """n* = p̂(1−p̂)/V with the module's edge rules: G where p̂ ∈ {0, 1} or V is undefined,
    and at most N / ``MIN_DESIGN_EFFECT``."""
    p, variance = np.asarray(p, dtype=float), np.asarray(variance, dtype=float)
    edge = (p <= 0) | (p >= 1) | ~np.isfinite(variance)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(edge, g, p * (1 - p) / np.where(variance > 0, variance, 1))
        n_eff = np.where(~edge & (variance <= 0), np.inf, n_eff)
    return np.minimum(n_eff, np.asarray(total_n, dtype=float) / MIN_DESIGN_EFFECT)


def wilson_t_bounds(p: np.ndarray, variance: np.ndarray, total_n: np.ndarray, g: np.ndarray,
                    *, interval_level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval for p̂ at the effective size n* = p̂(1−p̂)/V with the
    Student t quantile on G − 1 degrees of freedom, and the edge rules of the module
    docstring (n* = G where p̂ ∈ {0, 1}; design effect floored at ``MIN_DESIGN_EFFECT``;
    [0, 1] with G < 2; NaN with N = 0). Vectorised over cells."""
    g = np.asarray(g)
    return _wilson_bounds(p, variance, total_n, g, _quantile(interval_level, g - 1.0))


def wilson_bounds(p: np.ndarray, variance: np.ndarray, total_n: np.ndarray, g: np.ndarray,
                  c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`wilson_t_bounds` with the multiplier ``c`` given (a t quantile on other
    degrees of freedom: the question × annotator intervals, ``estimators.numerics.crossed``)."""
    return _wilson_bounds(p, variance, total_n, g, c)


def _wilson_bounds(p: np.ndarray, variance: np.ndarray, total_n: np.ndarray, g: np.ndarray,
                   c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`wilson_t_bounds` with the quantile ``c`` given."""
    p, total_n, g = np.asarray(p, dtype=float), np.asarray(total_n, dtype=float), np.asarray(g)
    n_eff = effective_size(p, variance, total_n, g)
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


def _mean(n: np.ndarray, x: np.ndarray, interval_level: float, cr2: bool
          ) -> ClusteredArrays:
    value, residual, variance, total_n, g, df = _ratio(n, x, cr2=cr2)
    half = _quantile(interval_level, df) * np.sqrt(variance)
    ok = g >= 2
    return ClusteredArrays(value, np.where(ok, value - half, np.nan),
                           np.where(ok, value + half, np.nan), total_n.astype(int), g,
                           variance, residual, df)


def _difference(n1: np.ndarray, s1: np.ndarray, n2: np.ndarray, s2: np.ndarray,
                interval_level: float, cr2: bool) -> ClusteredArrays:
    a = _proportion(n1, s1, interval_level, cr2)
    b = _proportion(n2, s2, interval_level, cr2)
    n1 = np.asarray(n1, dtype=float)
    n2 = np.asarray(n2, dtype=float)
    if cr2:
        # Separate clusters (two arms of different raters): both limits on the
        # Welch–Satterthwaite degrees of freedom of V₁ + V₂.
        with np.errstate(divide="ignore", invalid="ignore"):
            welch = (a.variance + b.variance) ** 2 / (a.variance ** 2 / a.df
                                                      + b.variance ** 2 / b.df)
        separate = ~((n1 > 0) & (n2 > 0)).any(axis=0) & np.isfinite(welch)
        if separate.any():
            a = _proportion(n1, s1, interval_level, cr2, np.where(separate, welch, a.df))
            b = _proportion(n2, s2, interval_level, cr2, np.where(separate, welch, b.df))
    r1, r2 = a.residual, b.residual
    if cr2:
        r1, r2 = r1 * _cr2_weight(n1), r2 * _cr2_weight(n2)
    g = ((n1 > 0) & (n2 > 0)).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = 1.0 if cr2 else g / np.maximum(g - 1, 1)
        cov = scale * (r1 * r2).sum(axis=0) / (n1.sum(axis=0) * n2.sum(axis=0))
        phi = np.where((a.variance > 0) & (b.variance > 0),
                       cov / np.sqrt(a.variance * b.variance), 0.0)
    phi = np.clip(np.where(np.isfinite(phi), phi, 0.0), -1, 1)
    d = a.value - b.value
    lower, upper = newcombe_bounds(a.value, a.lower, a.upper, b.value, b.lower, b.upper, phi)
    with np.errstate(invalid="ignore"):
        variance = a.variance + b.variance - 2 * cov
    return ClusteredArrays(d, lower, upper,
                           a.n, g, variance, a.residual / np.maximum(n1.sum(axis=0), 1)
                           - b.residual / np.maximum(n2.sum(axis=0), 1),
                           np.minimum(a.df, b.df))


def clustered_mean(n: np.ndarray, x: np.ndarray, *,
                   interval_level: float = 0.95) -> ClusteredArrays:
    """Mean of a per-output value: x̄ = Σ x_q / Σ n_q with the cluster-robust t interval
    (``x`` holds per-question sums of the value, ``n`` per-question counts; CR1, G − 1
    degrees of freedom)."""
    return _mean(n, x, interval_level, cr2=False)


def clustered_difference(n1: np.ndarray, s1: np.ndarray, n2: np.ndarray, s2: np.ndarray, *,
                         interval_level: float = 0.95) -> ClusteredArrays:
    """p̂₁ − p̂₂ on the same questions (rows), Newcombe's hybrid score interval with the
    clustered Wilson limits and the clustered correlation (module docstring). Paired
    comparisons pass only questions where both sides have outputs; rows with outputs on one
    side only count for that side and not for the correlation (independent groups: φ = 0).
    ``n`` of the result is the side-1 count and ``n_questions`` the questions with both."""
    return _difference(n1, s1, n2, s2, interval_level, cr2=False)


def cr2_proportion(n: np.ndarray, s: np.ndarray, *,
                   interval_level: float = 0.95) -> ClusteredArrays:
    """:func:`clustered_proportion` with the bias-reduced CR2 variance and the t quantile
    on Bell–McCaffrey's degrees of freedom (module docstring, "CR2")."""
    return _proportion(n, s, interval_level, cr2=True)


def cr2_mean(n: np.ndarray, x: np.ndarray, *,
             interval_level: float = 0.95) -> ClusteredArrays:
    """:func:`clustered_mean` with CR2 and Bell–McCaffrey's degrees of freedom."""
    return _mean(n, x, interval_level, cr2=True)


def cr2_difference(n1: np.ndarray, s1: np.ndarray, n2: np.ndarray, s2: np.ndarray, *,
                   interval_level: float = 0.95) -> ClusteredArrays:
    """:func:`clustered_difference` from the two :func:`cr2_proportion` intervals (the
    correlation from the CR2-adjusted residuals)."""
    return _difference(n1, s1, n2, s2, interval_level, cr2=True)


def newcombe_bounds(p1: np.ndarray, l1: np.ndarray, u1: np.ndarray, p2: np.ndarray,
                    l2: np.ndarray, u2: np.ndarray, phi: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Newcombe's hybrid score (MOVER) bounds of p̂₁ − p̂₂ from the two intervals and the
    correlation φ of the estimates (module docstring), clipped to [−1, 1]."""
    d = p1 - p2
    down1, up1 = p1 - l1, u1 - p1
    down2, up2 = p2 - l2, u2 - p2
    lower = d - np.sqrt(np.maximum(down1 ** 2 - 2 * phi * down1 * up2 + up2 ** 2, 0))
    upper = d + np.sqrt(np.maximum(up1 ** 2 - 2 * phi * up1 * down2 + down2 ** 2, 0))
    return np.clip(lower, -1, 1), np.clip(upper, -1, 1)


def cr2_log_mean(n: np.ndarray, x: np.ndarray, *,
                 interval_level: float = 0.95) -> ClusteredArrays:
    """Mean of a positive per-output value (time on task) with the CR2 interval on the log
    scale: x̄ · exp(± t_df √V₂ / x̄) (delta method; df Bell–McCaffrey's). Asymmetric like
    the mean of a right-skewed quantity: between-cluster spread of such a value is mostly
    multiplicative (a slow rater is slow on every item), and the symmetric t interval
    missed the truth above it several times as often as below. NaN bounds where G < 2 or
    x̄ ≤ 0."""
    m = _mean(n, x, interval_level, cr2=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = _quantile(interval_level, m.df) * np.sqrt(m.variance) / m.value
        ok = (m.n_questions >= 2) & (m.value > 0)
        lower = np.where(ok, m.value * np.exp(-spread), np.nan)
        upper = np.where(ok, m.value * np.exp(spread), np.nan)
    return ClusteredArrays(m.value, lower, upper, m.n, m.n_questions, m.variance,
                           m.residual, m.df)


def cr2_bounded_mean(n: np.ndarray, x: np.ndarray, *, top: float,
                     interval_level: float = 0.95) -> ClusteredArrays:
    """Mean of a per-output value in [0, ``top``] (a 0/1/2 rating: ``top`` = 2) with the CR2
    interval on the logit scale of m = x̄ / top:

        top · expit(logit(m) ± t_df √V₂ / (top · m (1 − m)))

    (df Bell–McCaffrey's). Where m ∈ {0, 1} or V₂ = 0 the spread says nothing and the
    interval is :func:`cr2_proportion`'s edge rule, Wilson's at n* = G on m. NaN bounds
    where G < 2."""
    n = np.asarray(n, dtype=float)
    x = np.asarray(x, dtype=float)
    m = _mean(n, x / top, interval_level, cr2=True)
    p = m.value
    edge = _proportion(n, np.clip(x / top, 0, n), interval_level, cr2=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = (p > 0) & (p < 1) & (m.variance > 0)
        safe = np.where(inner, p, 0.5)
        spread = _quantile(interval_level, m.df) * np.sqrt(np.where(inner, m.variance, 0)) \
            / (safe * (1 - safe))
        centre = np.log(safe / (1 - safe))
        lower = np.where(inner, special.expit(centre - spread), edge.lower)
        upper = np.where(inner, special.expit(centre + spread), edge.upper)
    ok = m.n_questions >= 2
    return ClusteredArrays(top * p, np.where(ok, top * lower, np.nan),
                           np.where(ok, top * upper, np.nan), m.n, m.n_questions,
                           top ** 2 * m.variance, top * m.residual, m.df)
