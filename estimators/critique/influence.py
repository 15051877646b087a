"""Which annotators' skill moves each figure of a critique study, and by how much: the
*links* of the question × annotator intervals (:mod:`estimators.numerics.crossed`).

An output's correctness depends on its author and — through its inputs — on the authors of
its chain: a critique of two right responses is right more often than one of two wrong
ones (the paper's Table 5), so a strong responder lifts the accuracy of every critique of
their responses. The links write each figure, to first order, as a sum of per-output
*own parts* over the outputs it rests on:

* the residual of output o of level l, r_o = y_o − p̂ (y = 1 if right; p̂ the accuracy of
  its level among outputs of its author kind), splits into its own part and its inputs'
  residuals,

      r_o = e_o + (b_l / 2) (r_in₁ + r_in₂),

  with b_l the slope of a level-l critique's correctness on the share of its inputs that
  are right (:func:`input_slopes`; 0 for responses). The two inputs share their own inputs
  (they are siblings), so unrolling the chain gives

      r_o = e_o + Σ_{j < l} c_{l,j} Σ_{a in the chain pair of level j} e_a,
      c_{l,j} = ½ b_l b_{l−1} ⋯ b_{j+1};

* a majority vote is linearised in its voters (:func:`estimators.critique.votes.pivots`):
  vote − p̂ ≈ Σ_i Δ_i r_i, each voter's residual unrolled as above (a naive vote's voters
  are the chain itself).

The link of output a to an observation is (a's author, weight × e_a); the observation's
own output carries its residual about the figure's own estimate instead (``self_piece``).
Outputs without an annotator (the AI's) have no links: the AI is one fixed system. Pure
numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimators.numerics.crossed import Links


def input_slopes(level: np.ndarray, right: np.ndarray, use: np.ndarray,
                 parents: np.ndarray, group: np.ndarray, n_groups: int,
                 n_levels: int) -> np.ndarray:
    """b per (group, level), (n_groups, n_levels), b[:, 0] = 0: the least-squares slope of
    a level-l critique's correctness on the share of its two inputs that are right, over
    the critiques in ``use`` (scored, with scored inputs) of each group (a study; several
    in a simulation), clipped to [−1, 1]; 0 where the share does not vary."""
    b = np.zeros((n_groups, n_levels))
    y = right.astype(float)
    for lv in range(1, n_levels):
        rows = np.flatnonzero((level == lv) & use)
        if rows.size == 0:
            continue
        g = group[rows]
        x = y[parents[rows]].mean(axis=1)
        count = np.maximum(np.bincount(g, minlength=n_groups), 1)
        dx = x - (np.bincount(g, weights=x, minlength=n_groups) / count)[g]
        dy = y[rows] - (np.bincount(g, weights=y[rows], minlength=n_groups) / count)[g]
        num = np.bincount(g, weights=dx * dy, minlength=n_groups)
        den = np.bincount(g, weights=dx * dx, minlength=n_groups)
        b[:, lv] = np.clip(np.where(den > 1e-12, num / np.where(den > 1e-12, den, 1), 0.0),
                           -1, 1)
    return b


@dataclass(frozen=True)
class Chain:
    """Per output row: level, author (−1: none), the chain pair at each lower level
    (``ancestors`` (n, L, 2) rows, −1 beyond its level), the slope b of its own level in
    its study, its residual r (centred within its author kind and level) and own part e."""

    level: np.ndarray
    author: np.ndarray
    ancestors: np.ndarray
    slope: np.ndarray
    residual: np.ndarray
    own: np.ndarray
    annotated_below: np.ndarray  # some output of its chain below it has an annotator

    @classmethod
    def build(cls, level: np.ndarray, author: np.ndarray, ancestors: np.ndarray,
              slope: np.ndarray, residual: np.ndarray) -> Chain:
        parents = ancestors[np.arange(len(level)), np.maximum(level - 1, 0)]
        has = author >= 0
        below = ((ancestors >= 0) & has[np.maximum(ancestors, 0)]).any(axis=(1, 2))
        return cls(level=level, author=author, ancestors=ancestors, slope=slope,
                   residual=residual, own=residual - slope / 2 * _inputs(residual, parents,
                                                                       level),
                   annotated_below=below)

    def input_part(self, rows: np.ndarray) -> np.ndarray:
        """(b_l / 2)(r_in₁ + r_in₂) of each output row (0 for responses)."""
        parents = self.ancestors[rows, np.maximum(self.level[rows] - 1, 0)]
        return self.slope[rows] / 2 * _inputs(self.residual, parents, self.level[rows])


def _inputs(residual: np.ndarray, parents: np.ndarray, level: np.ndarray) -> np.ndarray:
    has = (level > 0) & (parents[:, 0] >= 0)
    return np.where(has, residual[np.maximum(parents, 0)].sum(axis=1), 0.0)


def unrolled_links(obs: np.ndarray, rows: np.ndarray, weight: np.ndarray,
                   self_piece: np.ndarray, chain: Chain) -> Links:
    """Links of observations resting on outputs: observation ``obs[i]`` moves with
    ``weight[i]`` × the residual of output ``rows[i]``; that output's own link carries
    ``self_piece[i]``, each chain ancestor a at level j the piece weight × c_{l,j} × e_a
    (module docstring)."""
    keep = rows >= 0
    obs, rows, weight, self_piece = obs[keep], rows[keep], weight[keep], self_piece[keep]
    po, pr, pp = [obs], [rows], [self_piece]
    # only outputs with an annotator somewhere below them have chain links
    deep = chain.annotated_below[rows]
    obs, rows, weight = obs[deep], rows[deep], weight[deep]
    lv = chain.level[rows]
    coef = chain.slope[rows] / 2
    top = chain.ancestors.shape[1]
    for j in range(top - 1, -1, -1):
        has = lv > j
        if not has.any():
            continue
        pair = chain.ancestors[rows[has], j]
        for side in (0, 1):
            po.append(obs[has])
            pr.append(pair[:, side])
            pp.append(weight[has] * coef[has] * chain.own[np.maximum(pair[:, side], 0)])
        # the next lower level's coefficient gains this level's slope
        below = np.where(has, chain.slope[np.maximum(chain.ancestors[rows, j, 0], 0)], 1.0)
        coef = np.where(has & (j > 0), coef * below, coef)
    o, r, p = np.concatenate(po), np.concatenate(pr), np.concatenate(pp)
    ok = (r >= 0) & (chain.author[np.maximum(r, 0)] >= 0) & (p != 0)
    return Links(o[ok], chain.author[r[ok]], p[ok])


def vote_links(voter_rows: np.ndarray, delta: np.ndarray, chain: Chain) -> Links:
    """Links of votes (rows of ``voter_rows``, −1 padded): each voter with its pivot Δ
    (``delta``, :func:`estimators.critique.votes.pivots`), its own part Δ·e and its chain
    unrolled with weight Δ."""
    m, width = voter_rows.shape
    rows = voter_rows.reshape(-1)
    delta = delta.reshape(-1)
    obs = np.repeat(np.arange(m), width)
    return unrolled_links(obs, rows, delta, delta * chain.own[np.maximum(rows, 0)], chain)


def annotated(chain: Chain) -> np.ndarray:
    """Per output: whether it or an output of its chain has an annotator (else it has no
    links)."""
    return (chain.author >= 0) | chain.annotated_below


def output_links(rows: np.ndarray, cell_residual: np.ndarray, chain: Chain) -> Links:
    """Links of observations that are outputs (one per row of ``rows``): the output's own
    part about the figure's estimate (``cell_residual`` minus its input part) and its chain."""
    obs = np.arange(rows.size)
    return unrolled_links(obs, rows, np.ones(rows.size),
                          cell_residual - chain.input_part(rows), chain)
