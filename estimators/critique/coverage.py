"""Coverage of every interval the critique dashboard shows, by simulation with known truth
(issue 18; docs/coverage.md "Critique: …").

    manage.py coverage_tables critique --levels [--studies 1000] [--write docs/coverage.md]
    manage.py coverage_tables critique --human-ai [--studies 1000] [--write …]

``--levels``: annotators at every level (the level, effort, naive-vote and input-pair
tables); ``--human-ai``: the mixed mode — the AI writes every level below the top, annotators
the top (``Cell.ai_levels``) — with Table 3 on the questions whose AI responses are neither
all right nor all wrong. Intervals compared, at 95 %: the default, clustered by question and
annotator (:mod:`estimators.numerics.crossed` with the links of
:mod:`estimators.critique.influence`, exactly as the report computes them — a test checks
the two give the same bounds), and the former, clustered by question alone.

Generator (vectorised: every simulated study of a cell at once; the model of
:mod:`estimators.critique.simulation` with annotators added). A study has Q questions, T
whole trees per question (the paper repeats trees; the platform grows one) with
``counts[l]`` outputs of level l per tree, every critique of level l on the first two
outputs of level l − 1 (the chain pair), and a pool of G annotators:

* question q: a difficulty quantile U_q ~ Uniform(0, 1); p_lq = Beta⁻¹(U_q) with mean
  ``accuracy[l]`` and SD ``spread`` (a hard question is hard at every level);
* annotator a: a skill b_a ~ N(0, σ²) on the log-odds scale (the same at every level); an
  output of annotator a at level l on q is right with probability
  expit(logit p_lq + b_a) for a response, and r_k = that + w (k/2 − π_q) for a critique
  whose two inputs hold k right finals (π_q = the population accuracy of the inputs' level
  on q, w = min(``input_weight``, (1 − ·)/(1 − π_q), ·/π_q) as in the simulation module);
* who writes what, per tree: a random order π of the pool; output i of level l is written
  by π[2l + i] — so no annotator writes two outputs of one level of a tree or critiques a
  chain holding their own output (the platform's rules), and every annotator works at every
  level. Needs G ≥ max_l (counts[l] + 2l);
* finals, choices: as the simulation module (a wrong critique follows a wrong input unless
  it says "neither", probability ``neither_rate``; a wrong output's final is otherwise a
  uniformly drawn wrong option; no unparseable finals);
* confidence: clip(c_l + σ_c z_a + κ (½ − U_q), 1, 5) rounded at random (floor +
  Bernoulli of the fraction); minutes: m_l · exp(σ_m z'_a − σ_m²/2) · exp(0.3 z_q − 0.045)
  · log-normal(σ = 0.4, mean 1) — annotators differ in speed and confidence too.

Truth: the population value over questions *and annotators* of each figure (a new study
with other questions and other annotators from the same populations targets the same
numbers). Given q, every output's annotator is a fresh draw from the population
(marginally), so each output is right with the annotator-averaged probability and outputs
of one sibling group are independent given their inputs' finals; the truth of every figure
is then an exact sum over the finals of the chain pairs (k options, concrete), integrated
over q by Gauss–Legendre on U and over b by Gauss–Hermite quadrature (no simulation).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from estimators.critique.influence import (
    Chain,
    input_slopes,
    output_links,
    vote_links,
)
from estimators.critique.votes import majority, pivots, tie_uniforms, voters
from estimators.numerics.clustered import (
    clustered_difference,
    clustered_mean,
    clustered_proportion,
)
from estimators.numerics.coverage_doc import WRITE_HELP, command, emit
from estimators.numerics.crossed import (
    Links,
    crossed_covariance,
    crossed_difference,
    crossed_mean,
    crossed_proportion,
    crossed_totals,
)

N_OPTIONS = 4
NEITHER_RATE = 0.1
INPUT_WEIGHT = 0.6
CONFIDENCE_ANNOTATOR_SD = 0.5
CONFIDENCE_DIFFICULTY = 1.0
MINUTES_ANNOTATOR_SD = 0.3
MINUTES_QUESTION_SD = 0.3
MINUTES_NOISE_SD = 0.4

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(40)
_GH_W = _GH_W / _GH_W.sum()
_GL_X, _GL_W = np.polynomial.legendre.leggauss(400)
U_NODES = (_GL_X + 1) / 2
U_WEIGHTS = _GL_W / 2


@dataclass(frozen=True)
class Cell:
    """One configuration of the grid."""

    n_questions: int
    n_annotators: int
    counts: tuple[int, ...] = (7, 5, 3, 1)
    accuracy: tuple[float, ...] = (0.55, 0.65, 0.72, 0.78)
    annotator_sd: float = 0.5
    trees: int = 1
    spread: float = 0.15
    confidence: tuple[float, ...] = (3.2, 3.5, 3.8, 4.0)
    minutes: tuple[float, ...] = (16.0, 15.0, 14.0, 13.0)
    n_options: int = N_OPTIONS
    neither_rate: float = NEITHER_RATE
    input_weight: float = INPUT_WEIGHT
    ai_levels: int = 0  # levels 0 … ai_levels − 1 written by the AI (the mixed mode)

    @property
    def top(self) -> int:
        return len(self.counts) - 1

    def sd(self, level: int) -> float:
        """The skill spread of the writers of a level (0: the AI, one fixed system)."""
        return 0.0 if level < self.ai_levels else self.annotator_sd

    def human(self, level: int) -> bool:
        return level >= self.ai_levels

    def check(self) -> None:
        if self.ai_levels and self.ai_levels != self.top:
            raise ValueError("the mixed mode: the AI writes every level below the top")
        need = (self.counts[-1] if self.ai_levels
                else max(c + 2 * lv for lv, c in enumerate(self.counts)))
        if self.n_annotators < need:
            raise ValueError(f"counts {self.counts} need at least {need} annotators, got "
                             f"{self.n_annotators}")


def _beta_ppf(u: np.ndarray, mean: float, spread: float) -> np.ndarray:
    if spread == 0:
        return np.full(np.shape(u), mean)
    k = mean * (1 - mean) / spread ** 2 - 1
    return stats.beta.ppf(u, mean * k, (1 - mean) * k)


def _skill_average(logit_p: np.ndarray, sd: float) -> np.ndarray:
    """E_b expit(logit p + b), b ~ N(0, sd²) (Gauss–Hermite)."""
    return (special.expit(logit_p[..., None] + sd * _GH_X) * _GH_W).sum(axis=-1)


def _weight_average(logit_p: np.ndarray, sd: float, pi: np.ndarray, weight: float):
    """E_b w(b), w = min(weight, (1 − p_b)/(1 − π), p_b/π)."""
    p = special.expit(logit_p[..., None] + sd * _GH_X)
    pi = pi[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.minimum.reduce([np.full(p.shape, weight),
                               np.where(pi < 1, (1 - p) / (1 - pi), np.inf),
                               np.where(pi > 0, p / pi, np.inf)])
    return (w * _GH_W).sum(axis=-1)


# --- exact truth ----------------------------------------------------------------------


def _compositions(n: int, k: int) -> np.ndarray:
    """Every count vector of n votes over k options, (m, k)."""
    return np.array([c for c in itertools.product(range(n + 1), repeat=k) if sum(c) == n])


def majority_right(dist: np.ndarray, n: int) -> np.ndarray:
    """P(the plurality of n independent finals drawn from ``dist`` (…, k; option 0 = gold)
    is the gold option, ties broken uniformly) — a sum over every count vector."""
    k = dist.shape[-1]
    comp = _compositions(n, k)
    best = comp.max(axis=1)
    win = np.where(comp[:, 0] == best, 1.0 / (comp == best[:, None]).sum(axis=1), 0.0)
    logcoef = (special.gammaln(n + 1) - special.gammaln(comp + 1).sum(axis=1))
    keep = win > 0
    comp, win, logcoef = comp[keep], win[keep], logcoef[keep]
    logd = np.log(np.maximum(dist, 1e-300))
    terms = (comp * logd[..., None, :]).sum(axis=-1)
    return (np.exp(terms + logcoef) * win).sum(axis=-1)


@dataclass(frozen=True)
class _Chain:
    """Per U node: level accuracies ā_l, the critique accuracies r̄_k per level, and the
    distribution of the chain pair's finals per level (nodes, k, k)."""

    mean_right: np.ndarray  # (L+1, nodes)
    r: np.ndarray  # (L+1, nodes, 3): r̄_k (row 0 unused)
    pair: list[np.ndarray]  # per level: (nodes, k, k)
    child: list[np.ndarray]  # per level ≥ 1: (nodes, k, k, k) final dist given parent pair


def _chain(cell: Cell, u: np.ndarray) -> _Chain:
    k = cell.n_options
    n_lv = cell.top + 1
    logit_p = np.stack([special.logit(_beta_ppf(u, a, cell.spread)) for a in cell.accuracy])
    mean_right = np.stack([_skill_average(logit_p[lv], cell.sd(lv)) for lv in range(n_lv)])
    r = np.zeros((n_lv, len(u), 3))
    d0 = np.concatenate([mean_right[0][:, None],
                         np.repeat(((1 - mean_right[0]) / (k - 1))[:, None], k - 1, 1)], 1)
    pair = [d0[:, :, None] * d0[:, None, :]]
    child: list[np.ndarray] = [np.zeros(0)]
    nu = cell.neither_rate
    for lv in range(1, n_lv):
        pi = mean_right[lv - 1]
        w = _weight_average(logit_p[lv], cell.sd(lv), pi, cell.input_weight)
        for kk in range(3):
            r[lv, :, kk] = mean_right[lv] + w * (kk / 2 - pi)
        c = np.zeros((len(u), k, k, k))
        for f1, f2 in itertools.product(range(k), repeat=2):
            n_right = (f1 == 0) + (f2 == 0)
            right = r[lv, :, n_right]
            wrong = 1 - right
            out = np.zeros((len(u), k))
            out[:, 0] = right
            uniform = wrong * (nu if n_right < 2 else 1.0) / (k - 1)
            out[:, 1:] += uniform[:, None]
            wrong_inputs = [f for f in (f1, f2) if f != 0]
            for f in wrong_inputs:
                out[:, f] += wrong * (1 - nu) / len(wrong_inputs)
            c[:, f1, f2] = out
        child.append(c)
        pair.append(np.einsum("nab,nabx,naby->nxy", pair[-1], c, c))
    return _Chain(mean_right=mean_right, r=r, pair=pair, child=child)


def _expect(values: np.ndarray) -> float:
    return float((values * U_WEIGHTS).sum())


def _ratio(num: np.ndarray, den: np.ndarray) -> float:
    return _expect(num) / _expect(den)


def true_values(cell: Cell) -> dict[str, float]:
    """Every figure's population value (module docstring), keyed as :func:`observations`
    names them."""
    ch = _chain(cell, U_NODES)
    k = cell.n_options
    truth: dict[str, float] = {}
    top = cell.top
    for lv in range(top + 1):
        truth[f"accuracy_{lv}"] = _expect(ch.mean_right[lv])
        if cell.human(lv):
            truth[f"minutes_{lv}"] = cell.minutes[lv]
            truth[f"confidence_{lv}"] = _expect(_confidence(cell, lv))
    if cell.ai_levels:
        truth.update(_human_ai_truth(cell, ch))
    d0 = ch.pair[0].sum(axis=2)  # a response's final distribution
    for t in range(1, top + 1):
        for j in range(t):
            n = voters(t, j)
            if j == 0:
                vote = majority_right(d0, n)
            else:
                vote = np.einsum("nab,nab->n", ch.pair[j - 1],
                                 majority_right(ch.child[j], n))
            truth[f"vote_{t}_{j}"] = _expect(vote)
            truth[f"gain_{t}_{j}"] = truth[f"accuracy_{t}"] - truth[f"vote_{t}_{j}"]
        truth[f"naive_{t}"] = _expect(_naive_right(ch, t, k))
        truth[f"gain_naive_{t}"] = truth[f"accuracy_{t}"] - truth[f"naive_{t}"]
        # input pairs of level t: the chain pair of level t − 1
        p_pair = ch.pair[t - 1]
        gold = np.arange(k) == 0
        n_right = gold[:, None].astype(int) + gold[None, :].astype(int)
        nu = cell.neither_rate
        for kk, name in enumerate(("both_wrong", "one_correct", "both_correct")):
            share = (p_pair * (n_right == kk)).sum(axis=(1, 2))
            rk = ch.r[t, :, kk]
            truth[f"pairs_{t}_{name}_accuracy"] = _ratio(share * rk, share)
            neither = (rk + (1 - rk) * nu, np.full_like(rk, nu), rk * nu + (1 - rk))[kk]
            truth[f"pairs_{t}_{name}_neither"] = _ratio(share * neither, share)
            if kk == 1:
                truth[f"pairs_{t}_{name}_correct"] = _ratio(share * rk * (1 - nu), share)
                truth[f"pairs_{t}_{name}_wrong"] = _ratio(share * (1 - rk) * (1 - nu), share)
    return truth


def _confidence(cell: Cell, lv: int) -> np.ndarray:
    """E_b clip(c_l + σ_c b + κ(½ − U), 1, 5) per U node."""
    c = (cell.confidence[lv] + CONFIDENCE_ANNOTATOR_SD * _GH_X[None, :]
         + CONFIDENCE_DIFFICULTY * (0.5 - U_NODES[:, None]))
    return (np.clip(c, 1, 5) * _GH_W).sum(axis=1)


def _human_ai_truth(cell: Cell, ch: _Chain) -> dict[str, float]:
    """Table 3 (the mixed mode: the AI below the top level, annotators at the top L) on the
    questions whose AI responses are neither all right nor all wrong: the chain pairs'
    distributions weighted by the chance that the other responses keep the question."""
    top, c0 = cell.top, cell.counts[0]
    a0 = ch.mean_right[0]
    gold = np.arange(cell.n_options) == 0
    n_right = gold[:, None].astype(int) + gold[None, :].astype(int)
    keep0 = np.where(n_right == 2, 1 - a0[:, None, None] ** (c0 - 2),
                     np.where(n_right == 0, 1 - (1 - a0[:, None, None]) ** (c0 - 2), 1.0))
    kept = [ch.pair[0] * keep0]
    for lv in range(1, top):
        c = ch.child[lv]
        kept.append(np.einsum("nab,nabx,naby->nxy", kept[-1], c, c))
    p_kept = kept[0].sum(axis=(1, 2))

    def by_inputs(level: int) -> np.ndarray:
        """E[a level-``level`` output right, kept | q]: over its inputs' pair."""
        pair = kept[level - 1]
        return sum((pair * (n_right == kk)).sum(axis=(1, 2)) * ch.r[level, :, kk]
                   for kk in range(3))

    human = _ratio(by_inputs(top), p_kept)
    below = _ratio(a0 - a0 ** c0, p_kept) if top == 1 else _ratio(by_inputs(top - 1), p_kept)
    return {f"ha_human_{top}": human, f"ha_ai_below_{top}": below,
            f"ha_gain_{top}": human - below,
            f"ha_confidence_{top}": _ratio(p_kept * _confidence(cell, top), p_kept),
            f"ha_minutes_{top}": cell.minutes[top]}


def _naive_right(ch: _Chain, t: int, k: int) -> np.ndarray:
    """P(the plurality of the 2t chain finals below a level-t critique is gold), per node:
    the chain's pairs' finals tracked with their running counts."""
    nodes = ch.pair[0].shape[0]
    d0 = ch.pair[0]
    # state: (f1, f2, counts) → probability per node
    states: dict[tuple, np.ndarray] = {}
    for f1, f2 in itertools.product(range(k), repeat=2):
        cnt = [0] * k
        cnt[f1] += 1
        cnt[f2] += 1
        key = (f1, f2, tuple(cnt))
        states[key] = states.get(key, np.zeros(nodes)) + d0[:, f1, f2]
    for lv in range(1, t):
        nxt: dict[tuple, np.ndarray] = {}
        c = ch.child[lv]
        for (f1, f2, cnt), prob in states.items():
            for g1, g2 in itertools.product(range(k), repeat=2):
                new = list(cnt)
                new[g1] += 1
                new[g2] += 1
                key = (g1, g2, tuple(new))
                add = prob * c[:, f1, f2, g1] * c[:, f1, f2, g2]
                nxt[key] = nxt[key] + add if key in nxt else add
        states = nxt
    total = np.zeros(nodes)
    for (_, _, cnt), prob in states.items():
        best = max(cnt)
        if cnt[0] == best:
            total += prob / sum(1 for x in cnt if x == best)
    return total


# --- simulation -------------------------------------------------------------------------


@dataclass(frozen=True)
class Level:
    """The outputs of one level of every tree of every study: arrays (R, Q, T, count)."""

    right: np.ndarray
    final: np.ndarray
    choice: np.ndarray  # −1 neither, 0/1 the input picked (critiques)
    n_right_inputs: np.ndarray  # −1 for responses
    annotator: np.ndarray
    confidence: np.ndarray
    minutes: np.ndarray


def simulate(cell: Cell, n_studies: int, rng: np.random.Generator) -> list[Level]:
    """``n_studies`` studies of the cell (model: module docstring), level by level."""
    cell.check()
    r_n, q_n, t_n, g = n_studies, cell.n_questions, cell.trees, cell.n_annotators
    k = cell.n_options
    u = rng.random((r_n, q_n))
    skill = cell.annotator_sd * rng.standard_normal((r_n, g))
    conf_shift = CONFIDENCE_ANNOTATOR_SD * rng.standard_normal((r_n, g))
    speed = np.exp(MINUTES_ANNOTATOR_SD * rng.standard_normal((r_n, g))
                   - MINUTES_ANNOTATOR_SD ** 2 / 2)
    q_time = np.exp(MINUTES_QUESTION_SD * rng.standard_normal((r_n, q_n))
                    - MINUTES_QUESTION_SD ** 2 / 2)
    gold = np.zeros((r_n, q_n), dtype=np.int64)  # option 0 is gold (options are symmetric)
    need = min(g, max(c + 2 * lv for lv, c in enumerate(cell.counts)))
    order = np.argsort(rng.random((r_n, q_n, t_n, g)), axis=-1)[..., :need]
    logit_p = [special.logit(_beta_ppf(u, a, cell.spread)) for a in cell.accuracy]
    levels: list[Level] = []
    studies = np.arange(r_n)[:, None, None, None]
    for lv, count in enumerate(cell.counts):
        if not cell.human(lv):
            who = np.full((r_n, q_n, t_n, count), -1)
        elif cell.ai_levels:  # annotators beside the AI's chain: any count of them
            who = order[..., :count]
        else:
            who = order[..., 2 * lv:2 * lv + count]
        b = np.where(who >= 0, skill[studies, np.maximum(who, 0)], 0.0)
        p = special.expit(logit_p[lv][:, :, None, None] + b)
        shape = (r_n, q_n, t_n, count)
        wrong_option = (gold[:, :, None, None] + rng.integers(1, k, shape)) % k
        choice = np.full(shape, -1)
        if lv == 0:
            right = rng.random(shape) < p
            final = np.where(right, gold[:, :, None, None], wrong_option)
            n_in = np.full(shape, -1)
        else:
            below = levels[-1]
            in_final, in_right = below.final[..., :2], below.right[..., :2]
            pi = _skill_average(logit_p[lv - 1], cell.sd(lv - 1))[:, :, None, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                w = np.minimum.reduce([np.full(shape, cell.input_weight),
                                       np.where(pi < 1, (1 - p) / (1 - pi), np.inf),
                                       np.where(pi > 0, p / pi, np.inf)])
            n_in = np.broadcast_to(in_right.sum(axis=-1, keepdims=True), shape)
            right = rng.random(shape) < p + w * (n_in / 2 - pi)
            coin = rng.integers(0, 2, shape)
            neither = rng.random(shape) < cell.neither_rate
            first_right = in_right[..., :1]
            correct_pick = np.where(n_in == 2, coin, np.where(first_right, 0, 1))
            wrong_pick = np.where(n_in == 0, coin, np.where(first_right, 1, 0))
            follow = ~right & (n_in < 2) & ~neither
            choice = np.where(right & (n_in > 0) & ~neither, correct_pick, choice)
            choice = np.where(follow, wrong_pick, choice)
            followed = np.take_along_axis(np.broadcast_to(in_final, shape[:3] + (2,)),
                                          np.where(follow, wrong_pick, 0), axis=-1)
            final = np.where(right, gold[:, :, None, None],
                             np.where(follow, followed, wrong_option))
        c = np.clip(cell.confidence[lv] + conf_shift[studies, np.maximum(who, 0)]
                    + CONFIDENCE_DIFFICULTY * (0.5 - u)[:, :, None, None], 1, 5)
        confidence = np.floor(c) + (rng.random(shape) < c - np.floor(c))
        minutes = (cell.minutes[lv] * speed[studies, np.maximum(who, 0)]
                   * q_time[:, :, None, None]
                   * np.exp(MINUTES_NOISE_SD * rng.standard_normal(shape)
                            - MINUTES_NOISE_SD ** 2 / 2))
        if not cell.human(lv):  # the AI's outputs carry neither
            confidence = np.full(shape, np.nan)
            minutes = np.full(shape, np.nan)
        levels.append(Level(right=right, final=final, choice=choice, n_right_inputs=n_in,
                            annotator=who, confidence=confidence, minutes=minutes))
    return levels


def plurality_right(flat: Flat, voter_rows: np.ndarray, seed: int) -> np.ndarray:
    """1.0 where the majority of the voters' finals is gold (option 0), ties broken as the
    report breaks them (:func:`estimators.critique.votes.majority`, the voters' ids being
    their rows + 1 — the ids :func:`study_records` gives them)."""
    result, _ = majority(flat.final[voter_rows], tie_uniforms(seed, voter_rows + 1))
    return (result == 0).astype(float)


@dataclass(frozen=True)
class Flat:
    """Every output of every simulated study of a chunk as one row: what the report sees
    (levels, authors, chains) plus the simulation's own columns. Annotator ids are the
    study's own (0 … G − 1; every interval is per study); ``parents`` / ``ancestors`` hold
    rows (−1: none)."""

    study: np.ndarray
    question: np.ndarray
    tree: np.ndarray
    level: np.ndarray
    right: np.ndarray
    final: np.ndarray
    choice: np.ndarray
    n_right_inputs: np.ndarray
    author: np.ndarray
    confidence: np.ndarray
    minutes: np.ndarray
    parents: np.ndarray
    ancestors: np.ndarray
    first_input_right: np.ndarray
    blocks: list  # per level: row numbers, shape (R, Q, T, count)


def flatten(cell: Cell, levels: list[Level]) -> Flat:
    r_n, q_n, t_n = levels[0].right.shape[:3]
    blocks, start = [], 0
    for lv in levels:
        size = lv.right.size
        blocks.append(start + np.arange(size).reshape(lv.right.shape))
        start += size
    n = start
    top = len(levels) - 1
    parents = np.full((n, 2), -1, dtype=np.int64)
    ancestors = np.full((n, max(top, 1), 2), -1, dtype=np.int64)
    first_right = np.zeros(n, dtype=bool)
    cols = {f: [] for f in ("study", "question", "tree", "level")}
    for lv, rows in enumerate(blocks):
        shape = rows.shape
        cols["study"].append(np.broadcast_to(np.arange(r_n)[:, None, None, None], shape))
        cols["question"].append(np.broadcast_to(np.arange(q_n)[None, :, None, None], shape))
        cols["tree"].append(np.broadcast_to(np.arange(t_n)[None, None, :, None], shape))
        cols["level"].append(np.full(shape, lv))
        for j in range(lv):
            pair = np.broadcast_to(blocks[j][..., None, :2], shape + (2,))
            ancestors[rows.reshape(-1), j] = pair.reshape(-1, 2)
        if lv:
            parents[rows.reshape(-1)] = ancestors[rows.reshape(-1), lv - 1]
            first_right[rows.reshape(-1)] = np.broadcast_to(
                levels[lv - 1].right[..., :1], shape).reshape(-1)

    def cat(xs):
        return np.concatenate([np.asarray(x).reshape(-1) for x in xs])

    study = cat(cols["study"])
    return Flat(study=study, question=cat(cols["question"]), tree=cat(cols["tree"]),
                level=cat(cols["level"]),
                right=cat(x.right for x in levels), final=cat(x.final for x in levels),
                choice=cat(x.choice for x in levels),
                n_right_inputs=cat(x.n_right_inputs for x in levels),
                author=cat(x.annotator for x in levels),
                confidence=cat(x.confidence for x in levels),
                minutes=cat(x.minutes for x in levels), parents=parents,
                ancestors=ancestors, first_input_right=first_right, blocks=blocks)


@dataclass(frozen=True)
class Obs:
    """One figure's observations in every study of a chunk: per observation its study,
    question, count n and sum s (a paired difference: also the other side's s2); the
    output row it rests on (``row``: single-output figures and a difference's anchor;
    ``chain``: whether its annotator links unroll the chain) and, for votes, the voters'
    rows (−1 padded)."""

    kind: str  # "p" proportion, "m" mean, "d" paired difference, "d2" two sides by question
    study: np.ndarray
    question: np.ndarray
    n: np.ndarray
    s: np.ndarray
    s2: np.ndarray | None = None
    row: np.ndarray | None = None
    chain: bool = False
    voters: np.ndarray | None = None
    n2: np.ndarray | None = None  # "d2": side 2's counts (side 1's are n)
    pivots: np.ndarray | None = None  # votes: each voter's pivot (rows as ``voters``)


def _human_ai_observations(cell: Cell, flat: Flat) -> dict[str, Obs]:
    """Table 3 (the mixed mode): on questions whose AI responses are neither all right nor
    all wrong, the annotators' level L, the AI's level L − 1 and their difference by
    question (two sides of different outputs), the annotators' confidence and minutes."""
    top = cell.top
    responses = flat.blocks[0]
    right = flat.right[responses].sum(axis=(2, 3))
    kept = (right > 0) & (right < responses.shape[2] * responses.shape[3])
    kept_row = kept[flat.study, flat.question]
    out = {}
    human = flat.blocks[top].reshape(-1)
    human = human[kept_row[human]]
    below = flat.blocks[top - 1].reshape(-1)
    below = below[kept_row[below]]

    def side(rows, kind, values, chain):
        return Obs(kind, flat.study[rows], flat.question[rows], np.ones(rows.size),
                   np.asarray(values, float)[rows], row=rows, chain=chain)

    out[f"ha_human_{top}"] = side(human, "p", flat.right, True)
    out[f"ha_ai_below_{top}"] = side(below, "p", flat.right, False)
    out[f"ha_confidence_{top}"] = side(human, "m", flat.confidence, False)
    out[f"ha_minutes_{top}"] = side(human, "m", flat.minutes, False)
    rows = np.concatenate([human, below])
    one = np.r_[np.ones(human.size), np.zeros(below.size)]
    y = flat.right[rows].astype(float)
    out[f"ha_gain_{top}"] = Obs("d2", flat.study[rows], flat.question[rows], one, one * y,
                                (1 - one) * y, row=rows, chain=True, n2=1 - one)
    return out


def observations(cell: Cell, flat: Flat, seed: int = 0) -> dict[str, Obs]:
    """Every figure of every simulated study of the chunk as observations (:class:`Obs`);
    votes' ties broken with ``seed``."""
    out: dict[str, Obs] = {}
    blocks = flat.blocks

    def single(kind, rows, values, mask=None, chain=False):
        rows = rows.reshape(-1)
        if mask is not None:
            rows = rows[mask[rows]]
        return Obs(kind, flat.study[rows], flat.question[rows], np.ones(rows.size),
                   np.asarray(values, float)[rows], row=rows, chain=chain)

    for lv, rows in enumerate(blocks):
        out[f"accuracy_{lv}"] = single("p", rows, flat.right, chain=True)
        if cell.human(lv):
            out[f"confidence_{lv}"] = single("m", rows, flat.confidence)
            out[f"minutes_{lv}"] = single("m", rows, flat.minutes)
    if cell.ai_levels:
        out.update(_human_ai_observations(cell, flat))
    for t in range(1, cell.top + 1):
        anchors = blocks[t]
        a_rows = anchors.reshape(-1)
        st, qu = flat.study[a_rows], flat.question[a_rows]
        ones = np.ones(a_rows.size)
        a_right = flat.right[a_rows].astype(float)

        def spread(voter_rows, shape=anchors.shape):
            """A tree's voters and their pivots, once per anchor of the tree."""
            width = voter_rows.shape[-1]
            flat_rows = voter_rows.reshape(-1, width)
            delta = pivots(flat.final[flat_rows], np.zeros(len(flat_rows), np.int64))
            return tuple(np.broadcast_to(x.reshape(voter_rows.shape)[..., None, :],
                                         shape + (width,)).reshape(-1, width)
                         for x in (voter_rows, delta))

        for j in range(t):
            n = voters(t, j)
            if cell.counts[j] < n:
                continue  # incomplete: not scored
            who, delta = spread(blocks[j][..., :n])
            vote = plurality_right(flat, who, seed)
            out[f"vote_{t}_{j}"] = Obs("p", st, qu, ones, vote, voters=who, pivots=delta)
            out[f"gain_{t}_{j}"] = Obs("d", st, qu, ones, a_right, vote, row=a_rows,
                                       chain=True, voters=who, pivots=delta)
        who, delta = spread(np.concatenate([blocks[j][..., :2] for j in range(t)], axis=-1))
        naive = plurality_right(flat, who, seed)
        out[f"naive_{t}"] = Obs("p", st, qu, ones, naive, voters=who, pivots=delta)
        out[f"gain_naive_{t}"] = Obs("d", st, qu, ones, a_right, naive, row=a_rows,
                                     chain=True, voters=who, pivots=delta)
        is_t = flat.level == t
        picked = np.where(flat.first_input_right, 0, 1)
        for kk, name in enumerate(("both_wrong", "one_correct", "both_correct")):
            mask = is_t & (flat.n_right_inputs == kk)
            out[f"pairs_{t}_{name}_accuracy"] = single("p", anchors, flat.right, mask)
            out[f"pairs_{t}_{name}_neither"] = single("p", anchors, flat.choice < 0, mask)
            if kk == 1:
                out[f"pairs_{t}_{name}_correct"] = single("p", anchors,
                                                          flat.choice == picked, mask)
                out[f"pairs_{t}_{name}_wrong"] = single("p", anchors,
                                                        flat.choice == 1 - picked, mask)
    return out


def study_records(flat: Flat, study: int = 0, trees: int = 1):
    """(questions, outputs) records of one simulated study, as the platform would pass them
    to :func:`estimators.critique.critique_report`: output ids = rows + 1, option 0 gold,
    minutes as milliseconds, each output's annotator (the AI's outputs: none); ``tree``
    numbers when a question has several trees."""
    from estimators.critique.records import OutputRecord, QuestionRecord

    rows = np.flatnonzero(flat.study == study)
    questions = [QuestionRecord(int(q), 0, None) for q in np.unique(flat.question[rows])]

    def opt(x):
        return None if x < 0 else int(x)

    outputs = [OutputRecord(int(r) + 1, int(flat.question[r]), int(flat.level[r]),
                            opt(flat.parents[r, 0] + 1) if flat.parents[r, 0] >= 0 else None,
                            opt(flat.parents[r, 1] + 1) if flat.parents[r, 1] >= 0 else None,
                            int(flat.final[r]), opt(flat.choice[r]),
                            float(flat.confidence[r]), float(flat.minutes[r]) * 60000.0,
                            "human" if flat.author[r] >= 0 else "ai",
                            int(flat.tree[r]) if trees > 1 else None, opt(flat.author[r]))
               for r in rows]
    return questions, outputs


def question_sums(obs: Obs, r_n: int, q_n: int) -> tuple[np.ndarray, ...]:
    """(questions, studies) sums of an observation set: (n, s) or (n, s, s2)."""
    key = obs.question * r_n + obs.study
    size = q_n * r_n

    def total(v):
        return np.bincount(key, weights=v, minlength=size).reshape(q_n, r_n)

    sums = (total(obs.n), total(obs.s))
    sums += (total(obs.s2),) if obs.s2 is not None else ()
    return sums + ((total(obs.n2),) if obs.n2 is not None else ())


def question_bounds(obs: Obs, r_n: int, q_n: int, level: float = 0.95):
    """The question-clustered interval (the former default) of every study: (lower, upper)."""
    sums = question_sums(obs, r_n, q_n)
    if obs.kind == "p":
        ci = clustered_proportion(*sums, interval_level=level)
    elif obs.kind == "m":
        ci = clustered_mean(*sums, interval_level=level)
    else:
        n, s1, s2 = sums[:3]
        n2 = sums[3] if obs.kind == "d2" else n
        ci = clustered_difference(n, s1, n2, s2, interval_level=level)
    return ci.lower, ci.upper


def chain_of(cell: Cell, flat: Flat, r_n: int) -> Chain:
    """The annotator links' view of every output (:class:`estimators.critique.influence.
    Chain`), exactly as the report builds it for one study: residuals about each study's
    level accuracy, slopes per study and level."""
    n_lv = cell.top + 1
    key = flat.study * n_lv + flat.level
    y = flat.right.astype(float)
    acc = (np.bincount(key, weights=y, minlength=r_n * n_lv)
           / np.maximum(np.bincount(key, minlength=r_n * n_lv), 1))
    slopes = input_slopes(flat.level, flat.right, np.ones(y.size, dtype=bool), flat.parents,
                          flat.study, r_n, n_lv)
    return Chain.build(flat.level, flat.author, flat.ancestors,
                       slopes[flat.study, flat.level], y - acc[key])


def _cell_residual(obs: Obs, s: np.ndarray, r_n: int, n: np.ndarray) -> np.ndarray:
    total = np.bincount(obs.study, weights=n, minlength=r_n)
    value = np.bincount(obs.study, weights=s, minlength=r_n) / np.maximum(total, 1)
    return s - value[obs.study] * n


def crossed_bounds(obs: Obs, flat: Flat, chain: Chain, r_n: int, level: float = 0.95):
    """The two-way (question × annotator) interval of every study: (lower, upper)."""
    def side(s, vote, n=obs.n):
        if vote:
            links = vote_links(obs.voters, obs.pivots, chain)
        elif obs.chain:
            links = output_links(obs.row, _cell_residual(obs, s, r_n, n), chain)
        else:
            who = flat.author[obs.row]
            own = (np.flatnonzero(who >= 0), who[who >= 0])
            c = crossed_totals(n, s, obs.study, obs.question, r_n, own_links=own)
            return c, Links(own[0], own[1], c.residual[own[0]])
        return crossed_totals(n, s, obs.study, obs.question, r_n, links), links

    if obs.kind in ("p", "m"):
        c, _ = side(obs.s, obs.voters is not None)
        ci = (crossed_proportion if obs.kind == "p" else crossed_mean)(c, interval_level=level)
        return ci.lower, ci.upper
    if obs.kind == "d2":  # side 2 (the AI's outputs) has no annotators
        a, links_a = side(obs.s, False)
        b = crossed_totals(obs.n2, obs.s2, obs.study, obs.question, r_n)
        links_b = Links(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        cov = crossed_covariance(a, b, obs.study, obs.question, r_n, links_a, links_b)
        ci = crossed_difference(a, b, cov, interval_level=level)
        return ci.lower, ci.upper
    a, links_a = side(obs.s, False)
    b, links_b = side(obs.s2, True)
    cov = crossed_covariance(a, b, obs.study, obs.question, r_n, links_a, links_b)
    ci = crossed_difference(a, b, cov, interval_level=level)
    return ci.lower, ci.upper


# --- the grid and its tables ---------------------------------------------------------------

FAMILIES = (  # (figure-name prefix, what the dashboard calls it)
    ("accuracy_", "accuracy per level"),
    ("vote_", "effort-matched vote"),
    ("gain_", "level − vote"),
    ("naive_", "naive vote"),
    ("gain_naive_", "level − naive"),
    ("confidence_", "confidence"),
    ("minutes_", "minutes"),
    ("pairs_", "input pairs"),
)
QUESTIONS = (20, 50, 200)
SKILL_SDS = (0.0, 0.5, 1.0)
TREES = {  # annotators → (counts, accuracy): the smallest tree they can write, or the paper's
    3: ((3, 1), (0.55, 0.65)),
    5: ((3, 3, 1), (0.55, 0.65, 0.72)),
}
PAPER = ((7, 5, 3, 1), (0.55, 0.65, 0.72, 0.78))
ANNOTATORS = (3, 5, 7, 12, 30)
LEVELS_HEADING = ("## Critique: every interval of the dashboard (clustered by question and "
                  "annotator)")


def grid(questions=QUESTIONS, annotators=ANNOTATORS, skills=SKILL_SDS) -> list[Cell]:
    cells = []
    for g in annotators:
        counts, accuracy = TREES.get(g, PAPER)
        for sd in skills:
            for q in questions:
                cells.append(Cell(n_questions=q, n_annotators=g, counts=counts,
                                  accuracy=accuracy, annotator_sd=sd))
    # whole trees repeated per question (the paper's design): three per question
    for sd in skills:
        for q in questions:
            cells.append(Cell(n_questions=q, n_annotators=12, annotator_sd=sd, trees=3))
    return cells


def coverage(cell: Cell, n_studies: int, seed: int, chunk: int = 200,
             level: float = 0.95) -> dict[str, tuple[float, float, int]]:
    """Per figure: (coverage of the default two-way interval, of the former
    question-clustered one, studies with an interval) over ``n_studies`` studies."""
    truth = true_values(cell)
    rng = np.random.default_rng([seed, cell.n_questions, cell.n_annotators,
                                 int(cell.annotator_sd * 100), cell.trees])
    hits: dict[str, np.ndarray] = {}
    for start in range(0, n_studies, chunk):
        r_n = min(chunk, n_studies - start)
        flat = flatten(cell, simulate(cell, r_n, rng))
        obs = observations(cell, flat, seed=seed + start)
        chain = chain_of(cell, flat, r_n)
        for name, o in obs.items():
            t = truth[name]
            row = hits.setdefault(name, np.zeros(3))
            for k, (lo, hi) in enumerate((crossed_bounds(o, flat, chain, r_n, level),
                                          question_bounds(o, r_n, cell.n_questions, level))):
                ok = np.isfinite(lo) & np.isfinite(hi)
                row[k] += np.sum(ok & (lo <= t + 1e-12) & (t - 1e-12 <= hi))
                if k == 0:
                    row[2] += ok.sum()
    return {name: (h[0] / h[2], h[1] / h[2], int(h[2])) for name, h in hits.items()}


def _pct(x: float) -> str:
    return "—" if not np.isfinite(x) else f"{100 * x:.1f}"


HUMAN_AI_HEADING = ("## Critique: annotators against the AI (the mixed mode, the paper's "
                    "Table 3)")
HUMAN_AI_FAMILIES = (
    ("ha_human_", "Table 3: annotators"),
    ("ha_ai_below_", "Table 3: AI below"),
    ("ha_gain_", "Table 3: annotators − AI below"),
    ("ha_confidence_", "Table 3: confidence"),
    ("ha_minutes_", "Table 3: minutes"),
) + FAMILIES
MIXED = {1: ((7, 3), (0.62, 0.7)), 2: ((7, 5, 3), (0.62, 0.68, 0.78))}


def grid_human_ai(questions=QUESTIONS, annotators=(3, 5, 12, 30), skills=SKILL_SDS,
                  tops=(1, 2)) -> list[Cell]:
    """The mixed mode as the platform runs it: the AI writes levels 0 … L − 1 (the
    demo's accuracies), annotators write three level-L critiques per question."""
    return [Cell(n_questions=q, n_annotators=g, counts=MIXED[top][0],
                 accuracy=MIXED[top][1], annotator_sd=sd, ai_levels=top)
            for top in tops for g in annotators for sd in skills for q in questions]


def _family(name: str, families) -> str | None:
    match = [p for p, _ in families if name.startswith(p)]
    return max(match, key=len) if match else None


TABLES = {
    "levels": (LEVELS_HEADING, FAMILIES, (
        "Trees: (3, 1) for 3 annotators, (3, 3, 1) for 5, the paper's (7, 5, 3, 1) from 7; "
        "the rows marked ×3 repeat three whole trees per question. Every figure of the level, "
        "effort, naive-vote and input-pair tables is checked in every study ({n} figures per "
        "study with the paper's tree).")),
    "human-ai": (HUMAN_AI_HEADING, HUMAN_AI_FAMILIES, (
        "The platform's mixed mode: the AI writes levels 0 … L − 1 (7 responses, 5 "
        "critiques; accuracies 0.62, 0.68 as in the demo), annotators write 3 level-L "
        "critiques of the AI's chain per question (accuracy 0.7 at L = 1, 0.78 at L = 2); "
        "Table 3 keeps the questions whose AI responses are neither all right nor all wrong, "
        "and its truth is taken on those (the chain's outcomes weighted by the chance that "
        "the other responses keep the question). Rows: L = 1 and L = 2; the level table's "
        "figures of the mixed mode are checked too ({n} figures per study at L = 2); the "
        "AI's own figures have no annotators, so their two intervals are the same.")),
}


def section(table: str, results: list[tuple[Cell, dict]], n_studies: int, seed: int,
            seconds: float, command: str) -> str:
    """A Markdown section of docs/coverage.md: ``table`` "levels" or "human-ai"."""
    heading, families, about = TABLES[table]
    se = math.sqrt(0.95 * 0.05 / n_studies) * 100
    n_fig = max((len(r) for _, r in results), default=0)
    lines = [heading, "",
             f"Generated by `{command}` ({seconds:.0f} s). {n_studies} simulated studies per "
             f"cell (Monte-Carlo SE ≈ {se:.1f} points at 95 %), seed {seed}. Generator and "
             "truth: the docstring of `estimators/critique/coverage.py` — questions of "
             "differing difficulty, annotators whose skill differs by σ on the log-odds scale "
             "(and who differ in speed and confidence), critiques that depend on their inputs "
             "as in the paper's Table 5, the platform's rule for who writes what; the truth of "
             "every figure is exact (sums over every chain outcome, quadrature over question "
             "difficulty and annotator skill), the population value over questions *and* "
             "annotators. " + about.format(n=n_fig) + " **Default**: Wilson / t clustered by "
             "question and annotator (`estimators/numerics/crossed.py`, annotator links from "
             "`estimators/critique/influence.py`); **former**: clustered by question alone.",
             ""]
    lines += ["| annotators | L | σ | default min | default median | cells < 93 % | "
              "cells < 93.5 % | former min | former median |",
              "|---|---|---|---|---|---|---|---|---|"]

    def key(c: Cell):
        return (c.n_annotators, c.trees, c.top, c.annotator_sd)

    for k in sorted({key(c) for c, _ in results}):
        vals = [v for c, r in results if key(c) == k for v in r.values() if v[2]]
        new, old = [v[0] for v in vals], [v[1] for v in vals]
        label = f"{k[0]}" + (f" ×{k[1]}" if k[1] > 1 else "")
        lines.append(f"| {label} | {k[2]} | {k[3]:g} | {_pct(min(new))} | "
                     f"{_pct(float(np.median(new)))} | {sum(x < 0.93 for x in new)} of "
                     f"{len(new)} | {sum(x < 0.935 for x in new)} | {_pct(min(old))} | "
                     f"{_pct(float(np.median(old)))} |")
    lines += ["", "Every cell: the lowest coverage of each kind of figure, default (former in "
              "parentheses), in %:", ""]
    lines.append("| annotators | L | σ | questions | " + " | ".join(d for _, d in families)
                 + " |")
    lines.append("|---|---|---|---|" + "---|" * len(families))
    for c, r in sorted(results, key=lambda x: key(x[0]) + (x[0].n_questions,)):
        cells = []
        for prefix, _ in families:
            vals = [v for name, v in r.items() if _family(name, families) == prefix and v[2]]
            cells.append("—" if not vals else
                         f"{_pct(min(v[0] for v in vals))} ({_pct(min(v[1] for v in vals))})")
        label = f"{c.n_annotators}" + (f" ×{c.trees}" if c.trees > 1 else "")
        lines.append(f"| {label} | {c.top} | {c.annotator_sd:g} | {c.n_questions} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import time

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--levels", action="store_true",
                       help="every interval of the level, effort, naive-vote and input-pair "
                            "tables (annotators at every level)")
    which.add_argument("--human-ai", action="store_true",
                       help="the mixed mode: Table 3 (annotators against the AI) and the "
                            "level table's figures")
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", metavar="FILE", help=WRITE_HELP)
    args = parser.parse_args(argv)
    table = "levels" if args.levels else "human-ai"
    started = time.process_time()
    cells = grid() if args.levels else grid_human_ai()
    results = [(c, coverage(c, args.studies, args.seed)) for c in cells]
    line = f"{command('critique')} --{table}"
    if args.studies != 1000:
        line += f" --studies {args.studies}"
    if args.seed:
        line += f" --seed {args.seed}"
    line += " --write docs/coverage.md"
    emit(section(table, results, args.studies, args.seed, time.process_time() - started,
                 line), args.write, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
