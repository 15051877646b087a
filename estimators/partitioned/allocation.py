"""Neyman allocation of a partitioned study's answers across its strata (a routing design:
which items are asked first, not which class; the classes stay uniform).

With strata h of N_h items (W_h = N_h / N) and the population-weighted (stratified)
estimate Â_j = Σ_h W_h Â_hj of each AI system j, where stratum h's answers are a simple
random sample of its items, the variances summed over the study's J systems are

    Σ_j Var(Â_j) ≈ J · Σ_h W_h² S_h² / n_h,        S_h² = (1/J) Σ_j S_hj²,

S_hj² the variance one answer of stratum h brings to system j's estimate of the stratum
(estimated from a pilot as n_h · SE_hj²: the dashboard's per-stratum standard errors).
Minimising it subject to Σ_h n_h = n (a Lagrange multiplier; Neyman 1934, Cochran 1977
§5.5 and §5A.3 for several characteristics) gives

    n_h = n · W_h S_h / Σ_g W_g S_g,

so the share of stratum h's items answered, n_h / N_h, is proportional to S_h: strata
whose answers vary more (accuracies nearer ½, systems that disagree) are asked more. Its
variance against proportional allocation (every stratum answered at the same rate, the
uniform design) at the same n is (Σ_h W_h S_h)² / Σ_h W_h S_h² ≤ 1 (Cauchy–Schwarz), the
share of the answers Neyman allocation needs for the same precision.

The study serves items in queue-rank order. Ranks u uniform on [0, U) stretched per
stratum, rank = u · r_min / r_h with rates r_h = S_h / max_g S_g, answer stratum h at a
share of its items proportional to r_h at every depth of the queue (until a stratum runs
out) and in uniformly random order within it, so each stratum's answered items stay a
simple random sample of it and the stratified estimate stays unbiased. Every stratum keeps
a rate of at least RATE_MIN (a stratum never asked could never be estimated, and a pilot's
spread of a small stratum is itself uncertain).
"""

from __future__ import annotations

import numpy as np

RATE_MIN = 0.1
SCALE_BITS = 20
SCALE_ONE = 1 << SCALE_BITS
PILOT_MIN = 20  # a system's answers in a stratum before its SE there counts as a spread


def stratum_spreads(se, answers, min_answers: int = PILOT_MIN) -> np.ndarray:
    """S_h = √(mean_j n_hj · SE_hj²) per stratum from a pilot: ``se`` (H, J) each system's
    standard error in each stratum (NaN where it has none), ``answers`` (H,) or (H, J) the
    answers n_hj behind it. A system's figure counts from ``min_answers`` answers on; a
    stratum without a usable figure gets the largest spread of the others (asked at the
    full rate until its own pilot says more); all NaN when no stratum has one."""
    se = np.atleast_2d(np.asarray(se, float))
    n = np.asarray(answers, float)
    n = np.broadcast_to(n[:, None] if n.ndim == 1 else n, se.shape)
    with np.errstate(invalid="ignore"):
        var = np.where((n >= max(min_answers, 1)) & np.isfinite(se), n * se * se, np.nan)
    usable = np.isfinite(var).any(axis=1)
    spread = np.full(se.shape[0], np.nan)
    spread[usable] = np.sqrt(np.nanmean(var[usable], axis=1))
    if usable.any():
        spread[~usable] = np.nanmax(spread)
    return spread


def neyman_rates(spreads, floor: float = RATE_MIN) -> np.ndarray:
    """Each stratum's answering rate relative to the fastest, r_h = max(S_h / max S, floor)
    (a share of its items; n_h / N_h ∝ r_h). Spreads must be finite and not all 0."""
    s = np.asarray(spreads, float)
    if not np.isfinite(s).all() or (s < 0).any() or s.max() <= 0:
        raise ValueError("spreads must be finite, non-negative and not all 0")
    return np.maximum(s / s.max(), floor)


def allocation_ratio(weights, spreads, rates=None) -> float:
    """The summed variance under the allocation ``rates`` (default: Neyman's, unfloored)
    over that of proportional allocation at the same number of answers:
    Σ_h W_h² S_h² / n_h with n_h ∝ W_h r_h, against n_h ∝ W_h — the share of a uniform
    design's answers the allocation needs for the same precision (< 1: fewer)."""
    w = np.asarray(weights, float)
    w = w / w.sum()
    s = np.asarray(spreads, float)
    r = s / s.max() if rates is None else np.asarray(rates, float)
    n = w * r / (w * r).sum()
    return float((w * w * s * s / n).sum() / (w * s * s).sum())


def stretched_ranks(u, rates, r_min: float) -> np.ndarray:
    """Queue ranks u (int64, uniform on [0, U)) stretched per item by its stratum's rate
    r_h (``rates``, one per item; ``r_min`` the allocation's smallest, so that batches
    routed at different times share one scale): ⌊u · r_min / r_h⌋ ≤ u, so no rank leaves
    [0, U) and serving by rank answers each stratum at a share of its items proportional
    to r_h (computed as ⌊u / 2^20⌋ · round(2^20 r_min / r_h), exact in 64-bit integers)."""
    u = np.asarray(u, np.int64)
    # in integers (floats would round 62-bit ranks up): the scale to 20 bits, u to its top
    # 42 bits, so the product stays below u < 2^62
    scale = np.maximum(np.round(float(r_min) / np.asarray(rates, float) * SCALE_ONE), 1)
    return (u >> SCALE_BITS) * scale.astype(np.int64)
