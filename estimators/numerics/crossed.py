"""Intervals clustered two ways at once — by question *and* by annotator (crossed random
effects): the critique tables (``estimators.critique.report``), where every annotator
answers many questions and every question is answered by several annotators.

Why. A question-clustered interval (:mod:`estimators.numerics.clustered`) treats the
annotators as fixed: it covers what *these* annotators would do on more questions. When
annotators differ in skill, speed or confidence, a study of other annotators from the same
population would give other numbers, and with a pool of 5–30 people that difference
dominates; question clustering then covers far below 95 % (docs/coverage.md, "Critique:
…"). These intervals add the annotator dimension.

Data. Observations in cells (each cell an independent figure): observation o has a
question and a count n_o with a sum s_o (proportions: correct outputs; means: the summed
value). Its residual is r_o = s_o − θ̂ n_o, θ̂ = S/N per cell. *Links* tie observations to
annotators: link ℓ = (observation, annotator, piece x_ℓ), the part of the residual that
annotator's skill moves — for an output written by one annotator x = r_o
(:func:`crossed_totals`' ``own_links``); for outputs resting on a chain and for majority
votes the pieces of ``estimators.critique.influence``. Outputs without an annotator (the
AI's) have no links: the AI is one fixed system, not a sample.

Variance (Cameron, Gelbach & Miller's two-way cluster-robust variance, with the
annotator part written as the within-annotator covariance across questions):

    V = V_Q + A,
    V_Q = G_Q/(G_Q − 1) Σ_q R_q² / N²,        R_q = Σ_{o in q} r_o,
    A   = max(0, G_A/(G_A − 1) [Σ_a X_a² − Σ_{q,a} x_qa²] / N²),

X_a = Σ of annotator a's pieces, x_qa = the same on question q alone; G_Q, G_A = the
questions and annotators present. A is the covariance of one annotator's pieces on
*different* questions — zero in expectation when annotators do not differ — floored at 0,
so the interval is never narrower than the question-clustered one.

Interval: Wilson's score interval at the effective size n* = θ̂(1 − θ̂)/V (the edge rules
of :func:`estimators.numerics.clustered.clustered_proportion`: n* = G_Q where θ̂ ∈ {0, 1},
design effect ≥ ``MIN_DESIGN_EFFECT``) with Student's t on Satterthwaite's degrees of
freedom ν = V² / (V_Q²/(G_Q − 1) + A²/(G_A − 1)) — G_Q − 1 when annotators add nothing —
and never more than G_A − 1 when they add anything (A > 0); means: θ̂ ± t_ν √V; paired
differences: Newcombe's hybrid interval from the two sides' intervals with the correlation
of their two-way covariance (Σ_q R1_q R2_q plus the annotator part of Σ_a X1_a X2_a, the
latter at most (A₁ + A₂)/2 so that the difference's own annotator part A₁ + A₂ − 2·cov is
never negative either), as :func:`estimators.numerics.clustered.clustered_difference` does
with questions alone. Without links every interval is exactly the question-clustered one.

Coverage (simulated, known truth): docs/coverage.md, "Critique: …", from
``.venv/bin/python manage.py coverage_tables critique``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from estimators.numerics.clustered import (
    ClusteredArrays,
    _quantile,
    newcombe_bounds,
    wilson_bounds,
)


@dataclass(frozen=True)
class Links:
    """Which annotator's skill moves which observation, and by how much: per link the
    observation's index, the annotator (any integer id) and the piece x."""

    obs: np.ndarray
    annotator: np.ndarray
    piece: np.ndarray


@dataclass(frozen=True)
class Crossed:
    """Per cell: estimate, the two variance parts, their covariance pieces, sizes."""

    value: np.ndarray
    total: np.ndarray
    v_question: np.ndarray
    v_annotator: np.ndarray
    g_question: np.ndarray
    g_annotator: np.ndarray
    residual: np.ndarray  # per observation

    @property
    def variance(self) -> np.ndarray:
        return self.v_question + self.v_annotator

    def df(self) -> np.ndarray:
        """Satterthwaite's degrees of freedom (module docstring), ≥ 1."""
        vq, va = self.v_question, self.v_annotator
        gq, ga = self.g_question, self.g_annotator
        with np.errstate(divide="ignore", invalid="ignore"):
            den = vq ** 2 / np.maximum(gq - 1, 1) + va ** 2 / np.maximum(ga - 1, 1)
            df = np.where(den > 0, (vq + va) ** 2 / den, np.maximum(gq - 1, 1))
        df = np.where(va > 0, np.minimum(df, ga - 1), df)
        return np.maximum(np.nan_to_num(df, nan=1.0), 1.0)


def _rest_key(parts: tuple[np.ndarray, ...]) -> tuple[np.ndarray, int]:
    """One int64 code per row from non-negative integer columns, and its range: the
    columns' own values as digits when that range is small, else dense codes."""
    cols = [np.asarray(p, dtype=np.int64) for p in parts]
    sizes = [int(c.max()) + 1 if c.size else 1 for c in cols]
    if math.prod(sizes) > 2 ** 40:
        recoded = [np.unique(c, return_inverse=True) for c in cols]
        cols = [inv.reshape(-1).astype(np.int64) for _, inv in recoded]
        sizes = [max(len(u), 1) for u, _ in recoded]
    key = np.zeros(cols[0].size, dtype=np.int64)
    for c, size in zip(cols, sizes, strict=True):
        key = key * size + c
    return key, math.prod(sizes)


def _per_cell(cell: np.ndarray, parts: tuple[np.ndarray, ...], a: np.ndarray,
              b: np.ndarray | None, n_cells: int) -> np.ndarray:
    """Per cell, Σ over the groups of its rows with equal ``parts`` of (Σ a)(Σ b); b = a
    when None (the sum of squared group sums)."""
    if cell.size == 0:
        return np.zeros(n_cells)
    rest, size = _rest_key(parts)
    if n_cells * size <= max(8 * cell.size, 1 << 22):
        key = cell * size + rest
        sa = np.bincount(key, weights=a, minlength=n_cells * size)
        sb = sa if b is None else np.bincount(key, weights=b, minlength=n_cells * size)
        return (sa * sb).reshape(n_cells, size).sum(axis=1)
    pairs, inverse = np.unique(np.stack([cell, rest]), axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    sa = np.bincount(inverse, weights=a)
    sb = sa if b is None else np.bincount(inverse, weights=b)
    return np.bincount(pairs[0], weights=sa * sb, minlength=n_cells)


def _count_distinct(cell: np.ndarray, ids: np.ndarray, n_cells: int) -> np.ndarray:
    """Per cell, how many distinct ``ids`` its rows hold."""
    if cell.size == 0:
        return np.zeros(n_cells, dtype=np.int64)
    rest, size = _rest_key((ids,))
    if n_cells * size <= max(8 * cell.size, 1 << 22):
        seen = np.zeros(n_cells * size, dtype=bool)
        seen[cell * size + rest] = True
        return seen.reshape(n_cells, size).sum(axis=1)
    return np.bincount(np.unique(np.stack([cell, rest]), axis=1)[0], minlength=n_cells)


def _annotator_cross(cell: np.ndarray, question: np.ndarray, annotator: np.ndarray,
                     a: np.ndarray, b: np.ndarray | None, n_cells: int) -> np.ndarray:
    """Σ_a X_a Y_a − Σ_{q,a} x_qa y_qa per cell: the products of one annotator's pieces on
    different questions."""
    return (_per_cell(cell, (annotator,), a, b, n_cells)
            - _per_cell(cell, (question, annotator), a, b, n_cells))


def crossed_totals(n: np.ndarray, s: np.ndarray, cell: np.ndarray, question: np.ndarray,
                   n_cells: int, links: Links | None = None, *,
                   own_links: tuple[np.ndarray, np.ndarray] | None = None) -> Crossed:
    """Estimates and two-way variance parts per cell (module docstring). ``links`` carry
    their own pieces; ``own_links`` = (obs, annotator) links whose piece is the
    observation's residual (single authors)."""
    n = np.asarray(n, dtype=float)
    s = np.asarray(s, dtype=float)
    cell = np.asarray(cell, dtype=np.int64)
    question = np.asarray(question, dtype=np.int64)
    total_n = np.bincount(cell, weights=n, minlength=n_cells)
    total_s = np.bincount(cell, weights=s, minlength=n_cells)
    value = np.where(total_n > 0, total_s / np.where(total_n > 0, total_n, 1), np.nan)
    theta = np.nan_to_num(value)[cell]
    residual = s - theta * n
    has = n > 0
    g_q = _count_distinct(cell[has], question[has], n_cells)
    n2 = np.where(total_n > 0, total_n, 1) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        v_q = np.where(g_q >= 2, g_q / np.maximum(g_q - 1, 1)
                       * _per_cell(cell, (question,), residual, None, n_cells) / n2, np.nan)
    obs_l, ann_l, piece_l = [], [], []
    if links is not None:
        obs_l.append(np.asarray(links.obs, np.int64))
        ann_l.append(np.asarray(links.annotator, np.int64))
        piece_l.append(np.asarray(links.piece, float))
    if own_links is not None:
        o, a = own_links
        obs_l.append(np.asarray(o, np.int64))
        ann_l.append(np.asarray(a, np.int64))
        piece_l.append(residual[np.asarray(o, np.int64)])
    v_a = np.zeros(n_cells)
    g_a = np.zeros(n_cells, dtype=np.int64)
    if obs_l:
        lo, la, lp = np.concatenate(obs_l), np.concatenate(ann_l), np.concatenate(piece_l)
        cross = _annotator_cross(cell[lo], question[lo], la, lp, None, n_cells)
        g_a = _count_distinct(cell[lo], la, n_cells)
        with np.errstate(divide="ignore", invalid="ignore"):
            v_a = np.where(g_a >= 2, np.maximum(g_a / np.maximum(g_a - 1, 1) * cross, 0)
                           / n2, 0.0)
    return Crossed(value=value, total=total_n, v_question=v_q, v_annotator=v_a,
                   g_question=g_q, g_annotator=g_a, residual=residual)


def crossed_proportion(c: Crossed, *, interval_level: float = 0.95) -> ClusteredArrays:
    """Wilson at the two-way effective size with t on Satterthwaite's df (module
    docstring); the same edge rules as the question-clustered interval."""
    lower, upper = wilson_bounds(c.value, c.variance, c.total, c.g_question,
                                 _quantile(interval_level, c.df()))
    return ClusteredArrays(c.value, lower, upper, c.total.astype(int), c.g_question,
                           c.variance, c.residual)


def crossed_mean(c: Crossed, *, interval_level: float = 0.95) -> ClusteredArrays:
    """θ̂ ± t_ν √V (NaN bounds with fewer than 2 questions)."""
    half = _quantile(interval_level, c.df()) * np.sqrt(c.variance)
    ok = c.g_question >= 2
    return ClusteredArrays(c.value, np.where(ok, c.value - half, np.nan),
                           np.where(ok, c.value + half, np.nan), c.total.astype(int),
                           c.g_question, c.variance, c.residual)


def crossed_covariance(a: Crossed, b: Crossed, cell: np.ndarray, question: np.ndarray,
                       n_cells: int, links_a: Links, links_b: Links) -> np.ndarray:
    """Two-way covariance of two estimates on the same observations (rows): questions'
    Σ R1_q R2_q plus the annotators' cross-question part, each with its G/(G − 1)."""
    g_q = np.minimum(a.g_question, b.g_question)
    den = np.where(a.total > 0, a.total, 1) * np.where(b.total > 0, b.total, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = (g_q / np.maximum(g_q - 1, 1)
               * _per_cell(cell, (question,), a.residual, b.residual, n_cells) / den)
    lo = np.concatenate([links_a.obs, links_b.obs]).astype(np.int64)
    if lo.size:
        la = np.concatenate([links_a.annotator, links_b.annotator]).astype(np.int64)
        zeros_a, zeros_b = np.zeros(links_a.obs.size), np.zeros(links_b.obs.size)
        pa = np.concatenate([links_a.piece, zeros_b])
        pb = np.concatenate([zeros_a, links_b.piece])
        cross = _annotator_cross(cell[lo], question[lo], la, pa, pb, n_cells)
        g_a = _count_distinct(cell[lo], la, n_cells)
        with np.errstate(divide="ignore", invalid="ignore"):
            cov_a = np.where(g_a >= 2, g_a / np.maximum(g_a - 1, 1) * cross / den, 0.0)
        # The difference's annotator part, v_a(1) + v_a(2) − 2 cov_a, is floored at 0
        # like each side's: the difference is never narrower than with questions alone.
        cov = cov + np.minimum(cov_a, (a.v_annotator + b.v_annotator) / 2)
    return cov


def crossed_difference(a: Crossed, b: Crossed, cov: np.ndarray, *,
                       interval_level: float = 0.95) -> ClusteredArrays:
    """θ̂₁ − θ̂₂ with Newcombe's hybrid interval from the two sides' two-way Wilson
    intervals and their two-way correlation (module docstring)."""
    ia = crossed_proportion(a, interval_level=interval_level)
    ib = crossed_proportion(b, interval_level=interval_level)
    va, vb = a.variance, b.variance
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where((va > 0) & (vb > 0), cov / np.sqrt(va * vb), 0.0)
    phi = np.clip(np.where(np.isfinite(phi), phi, 0.0), -1, 1)
    d = ia.value - ib.value
    lower, upper = newcombe_bounds(ia.value, ia.lower, ia.upper, ib.value, ib.lower, ib.upper,
                                   phi)
    with np.errstate(invalid="ignore"):
        variance = va + vb - 2 * cov
    return ClusteredArrays(d, lower, upper, ia.n, np.minimum(a.g_question, b.g_question),
                           variance,
                           a.residual - b.residual)
