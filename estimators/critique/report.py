"""All tables of a recursive-critique study in one call (METHODS.md M3; paper 002 Tables
1–3 and 5), for the Celery recompute and the live dashboard.

Scoring rule everywhere: an output is correct when its final option equals the question's
gold option; an unparseable final (None) is not correct; questions without gold are left
out of every accuracy (their outputs still count for confidence and time).

Tables (each row per author group — "all", plus "human" and "ai" when both kinds occur —
per domain — None = all domains — and per level):

* ``levels`` (Tables 1–2): accuracy of level l; for each higher level t the effort-matched
  majority of voters(t, l) = 2(t−l)+1 level-l outputs anchored at the level-t critiques
  (the paper's "Majority Voting@E(2t+1)" entry of row l) and the paired gain of level t
  over it (level-t accuracy minus the vote's, on the same critiques); for l ≥ 1 the naive
  vote of the 2l finals below each level-l critique and the gain over it; mean confidence
  (1–5) and mean time (minutes).
* ``human_ai`` (Table 3): on questions where the AI's responses are neither all right nor
  all wrong (an AI with one response per question is always one or the other: no question
  qualifies), human and AI accuracy per level and the gain = human accuracy at l − AI
  accuracy at l − 1, paired on the questions that have both.
* ``input_pairs`` (Table 5): critiques split by their two inputs (both correct / one
  correct / both wrong): share, accuracy, and — one correct — how often the critique chose
  the correct input, the wrong one, or neither.

Intervals: ``estimators.numerics.clustered`` (clustered by question).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from estimators.critique.records import CritiqueStudy
from estimators.critique.votes import effort, effort_matched_votes, naive_votes, voters
from estimators.numerics.clustered import (
    ClusteredArrays,
    Interval,
    clustered_difference,
    clustered_mean,
    clustered_proportion,
)

INPUT_KINDS = ("both_wrong", "one_correct", "both_correct")  # index = correct inputs


@dataclass(frozen=True)
class MajorityCell:
    """The effort-matched majority of ``n_voters`` outputs of the row's level, compared
    with the level-``target_level`` critiques (effort ``effort`` = 2t + 1)."""

    target_level: int
    effort: int
    n_voters: int
    n_votes: int
    n_incomplete: int
    accuracy: Interval
    target_minus_majority: Interval


@dataclass(frozen=True)
class NaiveCell:
    """The naive vote of the 2l finals below each level-l critique."""

    n_voters: int
    n_votes: int
    accuracy: Interval
    level_minus_naive: Interval


@dataclass(frozen=True)
class LevelRow:
    author: str
    domain: str | None
    level: int
    n_outputs: int
    n_scored: int
    n_unparsed: int
    accuracy: Interval
    majority: tuple[MajorityCell, ...]
    naive: NaiveCell | None
    confidence: Interval
    minutes: Interval


@dataclass(frozen=True)
class HumanAiRow:
    domain: str | None
    level: int
    n_questions: int
    human_accuracy: Interval
    ai_accuracy: Interval
    gain: Interval | None
    human_confidence: Interval
    human_minutes: Interval


@dataclass(frozen=True)
class InputPairRow:
    author: str
    domain: str | None
    level: int
    inputs: str
    n: int
    share: float
    accuracy: Interval
    picked_correct: Interval | None
    picked_wrong: Interval | None
    picked_neither: Interval


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def _rows(dicts: list[dict]) -> list[dict]:
    """Same keys in every row (first-seen order; missing → None): CSV-ready."""
    keys: dict[str, None] = {}
    for d in dicts:
        keys.update(dict.fromkeys(d))
    return [{k: d.get(k) for k in keys} for d in dicts]


@dataclass(frozen=True)
class CritiqueReport:
    top_level: int
    n_questions: int
    n_scored_questions: int
    n_outputs: int
    domains: tuple[str, ...]
    authors: tuple[str, ...]
    seed: int
    interval_level: float
    levels: tuple[LevelRow, ...]
    human_ai: tuple[HumanAiRow, ...]
    input_pairs: tuple[InputPairRow, ...]

    def level_rows(self) -> list[dict]:
        """Tables 1–2 flat: ``accuracy``/``_lower``/``_upper``/``_n``/``_questions``,
        ``majority_e{E}`` (+ the same suffixes, ``_voters``, ``_incomplete``),
        ``gain_over_majority_e{E}``, ``naive``, ``gain_over_naive``, ``confidence``,
        ``minutes``."""
        out = []
        for r in self.levels:
            d: dict = {"author": r.author, "domain": r.domain, "level": r.level,
                       "n_outputs": r.n_outputs, "n_scored": r.n_scored,
                       "n_unparsed": r.n_unparsed, **r.accuracy.flat("accuracy")}
            for m in r.majority:
                key = f"majority_e{m.effort}"
                d.update(m.accuracy.flat(key))
                d[f"{key}_voters"] = m.n_voters
                d[f"{key}_incomplete"] = m.n_incomplete
                d.update(m.target_minus_majority.flat(f"gain_over_{key}"))
            if r.naive is not None:
                d.update(r.naive.accuracy.flat("naive"))
                d["naive_voters"] = r.naive.n_voters
                d.update(r.naive.level_minus_naive.flat("gain_over_naive"))
            d.update(r.confidence.flat("confidence"))
            d.update(r.minutes.flat("minutes"))
            out.append(d)
        return _rows(out)

    def human_ai_rows(self) -> list[dict]:
        """Table 3 flat: ``human_accuracy``, ``ai_accuracy``, ``gain`` (each with
        ``_lower``/``_upper``/…), ``human_confidence``, ``human_minutes``."""
        out = []
        for r in self.human_ai:
            d: dict = {"domain": r.domain, "level": r.level, "n_questions": r.n_questions,
                       **r.human_accuracy.flat("human_accuracy"),
                       **r.ai_accuracy.flat("ai_accuracy")}
            if r.gain is not None:
                d.update(r.gain.flat("gain"))
            d.update(r.human_confidence.flat("human_confidence"))
            d.update(r.human_minutes.flat("human_minutes"))
            out.append(d)
        return _rows(out)

    def input_pair_rows(self) -> list[dict]:
        """Table 5 flat: ``n``, ``share``, ``accuracy``, ``picked_correct``,
        ``picked_wrong``, ``picked_neither`` (each with ``_lower``/``_upper``/…)."""
        out = []
        for r in self.input_pairs:
            d: dict = {"author": r.author, "domain": r.domain, "level": r.level,
                       "inputs": r.inputs, "n": r.n, "share": _num(r.share),
                       **r.accuracy.flat("accuracy")}
            for name in ("picked_correct", "picked_wrong"):
                value = getattr(r, name)
                if value is not None:
                    d.update(value.flat(name))
            d.update(r.picked_neither.flat("picked_neither"))
            out.append(d)
        return _rows(out)

    def as_dict(self) -> dict:
        """Everything as JSON-ready plain values (NaN → None)."""
        def clean(x):
            if isinstance(x, float):
                return _num(x)
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, list | tuple):
                return [clean(v) for v in x]
            return x

        return clean(asdict(self))


# --- computation ------------------------------------------------------------------------


class _Cells:
    """Per-question sums of per-record values into (Q, n_cells) arrays (bincount)."""

    def __init__(self, qrow: np.ndarray, cell: np.ndarray, n_questions: int, n_cells: int):
        self.index = qrow * n_cells + cell
        self.shape = (n_questions, n_cells)

    def sum(self, values: np.ndarray | None = None) -> np.ndarray:
        flat = np.bincount(self.index, weights=values,
                           minlength=self.shape[0] * self.shape[1])
        return flat.reshape(self.shape).astype(float)


class _Groups:
    """The domain groups of the rows — all domains (None) first, then each domain when
    there are several — as a question × group membership matrix, so that one call of an
    interval function computes every group at once: a (Q, C) array becomes (Q, G, C) with
    zeros where the question is not in the group (questions without outputs in a cell do
    not count in it)."""

    def __init__(self, study: CritiqueStudy, keep: np.ndarray | None = None) -> None:
        self.names: list[str | None] = [None]
        columns = [np.ones(study.n_questions, dtype=bool)]
        if len(study.domains) > 1:
            self.names += list(study.domains)
            columns += [study.domain_index == k for k in range(len(study.domains))]
        member = np.stack(columns, axis=1)
        self.member = member if keep is None else member & keep[:, None]

    def stat(self, fn: Callable[..., ClusteredArrays], *arrays: np.ndarray,
             interval_level: float) -> ClusteredArrays:
        spread = [a[:, None, :] * self.member[:, :, None] for a in arrays]
        return fn(*spread, interval_level=interval_level)

    def total(self, values: np.ndarray) -> np.ndarray:
        """Σ over each group's questions: (G, C)."""
        return self.member.T.astype(float) @ values

    def size(self) -> np.ndarray:
        return self.member.sum(axis=0)


def critique_report(study: CritiqueStudy, *, seed: int = 0,
                    interval_level: float = 0.95) -> CritiqueReport:
    """Tables 1–3 and 5 of the study (module docstring); ties of the votes broken with
    ``seed`` (``estimators.critique.votes``)."""
    if not 0 < interval_level < 1:
        raise ValueError(f"interval_level must be in (0, 1), got {interval_level}")
    top = study.top_level
    n_lv = top + 1
    q_n = study.n_questions
    qrow = study.output_question
    gold = study.gold[qrow]
    scored = gold >= 0
    correct = scored & (study.final == gold)
    both_kinds = bool(study.is_ai.any() and (~study.is_ai).any())
    authors = ("all", "human", "ai") if both_kinds else ("all",)
    in_author = {"all": np.ones(study.n_outputs, dtype=bool), "human": ~study.is_ai,
                 "ai": study.is_ai}
    groups = _Groups(study)
    kw = {"interval_level": interval_level}

    # Levels: cells (author group, level).
    n_a = len(authors)
    sel = [np.flatnonzero(in_author[a]) for a in authors]
    rec = np.concatenate(sel)
    cell = np.concatenate([k * n_lv + study.level[s] for k, s in enumerate(sel)])
    cells = _Cells(qrow[rec], cell, q_n, n_a * n_lv)
    n_sc = cells.sum(scored[rec])
    conf, mins = study.confidence[rec], study.time_ms[rec] / 60000.0
    has_c, has_t = np.isfinite(conf), np.isfinite(mins)
    acc = groups.stat(clustered_proportion, n_sc, cells.sum(correct[rec]), **kw)
    confidence = groups.stat(clustered_mean, cells.sum(has_c),
                             cells.sum(np.where(has_c, conf, 0.0)), **kw)
    minutes = groups.stat(clustered_mean, cells.sum(has_t),
                          cells.sum(np.where(has_t, mins, 0.0)), **kw)
    n_out = groups.total(cells.sum())
    n_unp = groups.total(cells.sum(study.final[rec] < 0))
    n_scored = groups.total(n_sc)

    # Effort-matched votes: cells (target t, voted j) per author group.
    n_mv = n_lv * n_lv
    maj: list[tuple[ClusteredArrays, ClusteredArrays, np.ndarray, np.ndarray]] = []
    for a in authors:
        v = effort_matched_votes(study, seed=seed, author=None if a == "all" else a)
        use = v.correct >= 0
        c = _Cells(qrow[v.anchor_row[use]], v.target_level[use] * n_lv + v.voted_level[use],
                   q_n, n_mv)
        n_v = c.sum()
        s_v = c.sum(v.correct[use])
        s_anchor = c.sum(correct[v.anchor_row[use]])
        incomplete = _Cells(qrow[v.anchor_row], v.target_level * n_lv + v.voted_level, q_n,
                            n_mv).sum(~v.complete)
        maj.append((groups.stat(clustered_proportion, n_v, s_v, **kw),
                    groups.stat(clustered_difference, n_v, s_anchor, n_v, s_v, **kw),
                    groups.total(n_v), groups.total(incomplete)))

    # Naive votes: cells (author group, level); anchors filtered by author.
    nv = naive_votes(study, seed=seed)
    nv_use = nv.correct >= 0
    nv_sel = [np.flatnonzero(nv_use & in_author[a][nv.anchor_row]) for a in authors]
    nv_rec = np.concatenate(nv_sel)
    nv_cells = _Cells(qrow[nv.anchor_row[nv_rec]],
                      np.concatenate([k * n_lv + nv.target_level[s]
                                      for k, s in enumerate(nv_sel)]), q_n, n_a * n_lv)
    n_nv = nv_cells.sum()
    s_nv = nv_cells.sum(nv.correct[nv_rec])
    s_nv_anchor = nv_cells.sum(correct[nv.anchor_row[nv_rec]])
    naive_acc = groups.stat(clustered_proportion, n_nv, s_nv, **kw)
    naive_gain = groups.stat(clustered_difference, n_nv, s_nv_anchor, n_nv, s_nv, **kw)
    n_naive = groups.total(n_nv)

    levels: list[LevelRow] = []
    for k, a in enumerate(authors):
        m_acc, m_gain, m_n, m_inc = maj[k]
        for gi, domain in enumerate(groups.names):
            for lv in range(n_lv):
                col = k * n_lv + lv
                majority = tuple(
                    MajorityCell(
                        target_level=t, effort=effort(t), n_voters=voters(t, lv),
                        n_votes=int(m_n[gi, t * n_lv + lv]),
                        n_incomplete=int(m_inc[gi, t * n_lv + lv]),
                        accuracy=m_acc.interval((gi, t * n_lv + lv)),
                        target_minus_majority=m_gain.interval((gi, t * n_lv + lv)))
                    for t in range(lv + 1, n_lv))
                naive = None if lv == 0 else NaiveCell(
                    n_voters=2 * lv, n_votes=int(n_naive[gi, col]),
                    accuracy=naive_acc.interval((gi, col)),
                    level_minus_naive=naive_gain.interval((gi, col)))
                levels.append(LevelRow(
                    author=a, domain=domain, level=lv, n_outputs=int(n_out[gi, col]),
                    n_scored=int(n_scored[gi, col]), n_unparsed=int(n_unp[gi, col]),
                    accuracy=acc.interval((gi, col)), majority=majority, naive=naive,
                    confidence=confidence.interval((gi, col)),
                    minutes=minutes.interval((gi, col))))

    human_ai = _human_ai(study, correct, scored, interval_level) if both_kinds else []
    pairs = _input_pairs(study, authors, in_author, groups, correct, scored, interval_level)
    return CritiqueReport(
        top_level=top, n_questions=q_n, n_scored_questions=int((study.gold >= 0).sum()),
        n_outputs=study.n_outputs, domains=study.domains, authors=authors, seed=int(seed),
        interval_level=float(interval_level), levels=tuple(levels),
        human_ai=tuple(human_ai), input_pairs=tuple(pairs))


def _human_ai(study: CritiqueStudy, correct: np.ndarray, scored: np.ndarray,
              interval_level: float) -> list[HumanAiRow]:
    n_lv = study.top_level + 1
    q_n = study.n_questions
    qrow = study.output_question
    kw = {"interval_level": interval_level}
    cells = _Cells(qrow, study.level + n_lv * study.is_ai, q_n, 2 * n_lv)
    n_all = cells.sum(scored)
    s_all = cells.sum(correct)
    n_h, n_ai = n_all[:, :n_lv], n_all[:, n_lv:]
    s_h, s_ai = s_all[:, :n_lv], s_all[:, n_lv:]
    keep = (n_ai[:, 0] > 0) & (s_ai[:, 0] > 0) & (s_ai[:, 0] < n_ai[:, 0])
    groups = _Groups(study, keep)
    human = ~study.is_ai
    conf, mins = study.confidence, study.time_ms / 60000.0
    has_c, has_t = human & np.isfinite(conf), human & np.isfinite(mins)
    hc = _Cells(qrow, study.level, q_n, n_lv)
    h_acc = groups.stat(clustered_proportion, n_h, s_h, **kw)
    ai_acc = groups.stat(clustered_proportion, n_ai, s_ai, **kw)
    h_conf = groups.stat(clustered_mean, hc.sum(has_c), hc.sum(np.where(has_c, conf, 0.0)),
                         **kw)
    h_min = groups.stat(clustered_mean, hc.sum(has_t), hc.sum(np.where(has_t, mins, 0.0)),
                        **kw)
    # Gain at l: human level l vs AI level l − 1, on questions with both.
    both = (n_h[:, 1:] > 0) & (n_ai[:, :-1] > 0)
    gain = (groups.stat(clustered_difference, n_h[:, 1:] * both, s_h[:, 1:] * both,
                        n_ai[:, :-1] * both, s_ai[:, :-1] * both, **kw)
            if n_lv > 1 else None)
    sizes = groups.size()
    return [HumanAiRow(domain=domain, level=lv, n_questions=int(sizes[gi]),
                       human_accuracy=h_acc.interval((gi, lv)),
                       ai_accuracy=ai_acc.interval((gi, lv)),
                       gain=None if lv == 0 or gain is None else gain.interval((gi, lv - 1)),
                       human_confidence=h_conf.interval((gi, lv)),
                       human_minutes=h_min.interval((gi, lv)))
            for gi, domain in enumerate(groups.names) for lv in range(n_lv)]


def _input_pairs(study: CritiqueStudy, authors, in_author, groups: _Groups,
                 correct: np.ndarray, scored: np.ndarray,
                 interval_level: float) -> list[InputPairRow]:
    top = study.top_level
    if top < 1:
        return []
    kw = {"interval_level": interval_level}
    parents = study.chains.parents
    crit = np.flatnonzero((study.level > 0) & scored)
    pc = correct[parents[crit]]  # (m, 2): parent_a, parent_b correct
    kind = pc.sum(axis=1)
    # The correct input's index in the stored pair (meaningful where kind == 1).
    right = np.where(pc[:, 0], 0, 1)
    choice = study.choice[crit]
    picked_right = (kind == 1) & (choice == right)
    picked_wrong = (kind == 1) & (choice == 1 - right)
    neither = choice < 0
    n_k = len(INPUT_KINDS)
    rows = []
    for a in authors:
        m = in_author[a][crit]
        s = crit[m]
        c = _Cells(study.output_question[s], (study.level[s] - 1) * n_k + kind[m],
                   study.n_questions, top * n_k)
        n = c.sum()
        res = {k: groups.stat(clustered_proportion, n, c.sum(v), **kw) for k, v in (
            ("acc", correct[s]), ("right", picked_right[m]), ("wrong", picked_wrong[m]),
            ("neither", neither[m]))}
        totals = groups.total(n)
        for gi, domain in enumerate(groups.names):
            for lv in range(1, top + 1):
                level_total = totals[gi, (lv - 1) * n_k:lv * n_k].sum()
                for kk, name in enumerate(INPUT_KINDS[::-1]):
                    col = (lv - 1) * n_k + (n_k - 1 - kk)
                    one = name == "one_correct"
                    at = (gi, col)
                    rows.append(InputPairRow(
                        author=a, domain=domain, level=lv, inputs=name, n=int(totals[at]),
                        share=float(totals[at] / level_total) if level_total else float("nan"),
                        accuracy=res["acc"].interval(at),
                        picked_correct=res["right"].interval(at) if one else None,
                        picked_wrong=res["wrong"].interval(at) if one else None,
                        picked_neither=res["neither"].interval(at)))
    return rows
