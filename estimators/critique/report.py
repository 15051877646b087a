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

Intervals: clustered by question and by annotator (``estimators.numerics.crossed``; what
each annotator contributes to a figure — their outputs, the chains above them, the votes
they take part in — from ``estimators.critique.influence``). Records without annotators
(the AI's outputs) add no annotator part, so an AI-only study's intervals are clustered by
question alone. ``LevelRow.n_annotators``: the different annotators behind a row; below
``MIN_RELIABLE_ANNOTATORS`` the dashboard says the intervals are unreliable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from estimators.critique.influence import (
    Chain,
    annotated,
    input_slopes,
    output_links,
    vote_links,
)
from estimators.critique.records import CritiqueStudy
from estimators.critique.tree import rows_of
from estimators.critique.votes import (
    effort,
    effort_matched_votes,
    naive_votes,
    pivots,
    voters,
)
from estimators.numerics import crossed as xc
from estimators.numerics.clustered import ClusteredArrays, Interval

INPUT_KINDS = ("both_wrong", "one_correct", "both_correct")  # index = correct inputs
# Below this many annotators at a level the two-way intervals do not keep their promise
# (coverage under 93 % in simulation: docs/coverage.md, "Critique: …"); the dashboard says so.
MIN_RELIABLE_ANNOTATORS = 7


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
    n_annotators: int
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
                       "n_unparsed": r.n_unparsed, "n_annotators": r.n_annotators,
                       **r.accuracy.flat("accuracy")}
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


class _Groups:
    """The domain groups of the rows — all domains (None) first, then each domain when
    there are several — as a question × group membership matrix (``keep``: only those
    questions)."""

    def __init__(self, study: CritiqueStudy, keep: np.ndarray | None = None) -> None:
        self.names: list[str | None] = [None]
        columns = [np.ones(study.n_questions, dtype=bool)]
        if len(study.domains) > 1:
            self.names += list(study.domains)
            columns += [study.domain_index == k for k in range(len(study.domains))]
        member = np.stack(columns, axis=1)
        self.member = member if keep is None else member & keep[:, None]

    def __len__(self) -> int:
        return len(self.names)

    def spread(self, question_row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(observation, group) for every group each observation's question is in."""
        obs, group = np.nonzero(self.member[question_row])
        return obs, group

    def size(self) -> np.ndarray:
        return self.member.sum(axis=0)


class _Figures:
    """Observations → intervals clustered by question and annotator
    (``estimators.numerics.crossed``, links from ``estimators.critique.influence``), every
    cell of a figure in one call. An observation set is given once and spread over the
    domain groups; cells are (group, column) → ``group * n_columns + column``."""

    def __init__(self, study: CritiqueStudy, groups: _Groups, correct: np.ndarray,
                 scored: np.ndarray, interval_level: float) -> None:
        self.study, self.groups, self.level = study, groups, interval_level
        self.correct, self.scored = correct, scored
        n_lv = study.top_level + 1
        ch = study.chains
        use = scored & (study.level > 0)
        if use.any():
            use &= scored[np.maximum(ch.parents, 0)].all(axis=1)
        slopes = input_slopes(study.level, correct, use, ch.parents,
                              np.zeros(study.n_outputs, dtype=np.int64), 1, n_lv)[0]
        self.chains = []
        key = study.is_ai.astype(np.int64) * n_lv + study.level
        for gi in range(len(groups)):
            inside = groups.member[study.output_question, gi] & scored
            num = np.bincount(key[inside], weights=correct[inside], minlength=2 * n_lv)
            den = np.bincount(key[inside], minlength=2 * n_lv)
            acc = num / np.maximum(den, 1)
            residual = np.where(inside, correct - acc[key], 0.0)
            self.chains.append(Chain.build(study.level, study.annotator, ch.ancestors,
                                           slopes[study.level], residual))
        self.annotated = annotated(self.chains[0])
        self._pivots: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def pivots(self, voter_rows: np.ndarray) -> np.ndarray:
        """Δ of every voter (``pivots``), once per vote set; 0 for votes whose voters and
        chains have no annotator (they have no links)."""
        key = id(voter_rows)
        if key not in self._pivots:
            need = (self.annotated[np.maximum(voter_rows, 0)] & (voter_rows >= 0)).any(axis=1)
            delta = np.zeros(voter_rows.shape)
            sub = voter_rows[need]
            if sub.size:
                finals = np.where(sub >= 0, self.study.final[np.maximum(sub, 0)], -1)
                gold = self.study.gold[self.study.output_question[np.maximum(sub[:, 0], 0)]]
                delta[need] = pivots(finals, gold)
            self._pivots[key] = (voter_rows, delta)  # keeps the array alive with its id
        return self._pivots[key][1]

    def _expand(self, question_row, column, n_columns, arrays):
        obs, group = self.groups.spread(question_row)
        cell = group * n_columns + np.asarray(column)[obs]
        return obs, group, cell, [None if a is None else np.asarray(a)[obs] for a in arrays]

    def _links(self, obs, group, spec, cell_residual) -> xc.Links | None:
        """Links of the expanded observations: ``spec`` = ("own", rows) single authors,
        ("chain", rows) outputs and their chains, ("vote", voter rows) votes; None."""
        if spec is None or not self.annotated.any():
            return None
        what, rows = spec
        delta = self.pivots(rows)[obs] if what == "vote" else None
        rows = np.asarray(rows)[obs]
        if what == "own":
            keep = self.study.annotator[rows] >= 0
            idx = np.flatnonzero(keep)
            return xc.Links(idx, self.study.annotator[rows[keep]], cell_residual[idx])
        parts = []
        for gi in np.unique(group):
            at = np.flatnonzero(group == gi)
            chain = self.chains[gi]
            if what == "chain":
                lk = output_links(rows[at], cell_residual[at], chain)
            else:
                lk = vote_links(rows[at], delta[at], chain)
            parts.append(xc.Links(at[lk.obs], lk.annotator, lk.piece))
        if not parts:
            return None
        return xc.Links(*(np.concatenate([getattr(p, f) for p in parts])
                       for f in ("obs", "annotator", "piece")))

    def _totals(self, obs, group, cell, question, n, s, n_cells, spec):
        n = np.asarray(n, float)
        s = np.asarray(s, float)
        total = np.bincount(cell, weights=n, minlength=n_cells)
        value = np.bincount(cell, weights=s, minlength=n_cells) / np.maximum(total, 1e-300)
        residual = s - np.where(total > 0, value, 0.0)[cell] * n
        links = self._links(obs, group, spec, residual)
        return xc.crossed_totals(n, s, cell, question, n_cells, links), links

    def proportion(self, question_row, column, n_columns, n, s, spec=None,
                   mean: bool = False) -> ClusteredArrays:
        """One figure over its cells: a proportion (or a mean) of the observations."""
        obs, group, cell, (n_, s_) = self._expand(question_row, column, n_columns, (n, s))
        n_cells = len(self.groups) * n_columns
        c, _ = self._totals(obs, group, cell, question_row[obs], n_, s_, n_cells, spec)
        fn = xc.crossed_mean if mean else xc.crossed_proportion
        return fn(c, interval_level=self.level)

    def difference(self, question_row, column, n_columns, n1, s1, spec1, n2, s2,
                   spec2) -> ClusteredArrays:
        """Side 1 − side 2 on the same questions (Newcombe, two-way correlation)."""
        obs, group, cell, (a1, b1, a2, b2) = self._expand(question_row, column, n_columns,
                                                         (n1, s1, n2, s2))
        n_cells = len(self.groups) * n_columns
        q = question_row[obs]
        side1, links1 = self._totals(obs, group, cell, q, a1, b1, n_cells, spec1)
        side2, links2 = self._totals(obs, group, cell, q, a2, b2, n_cells, spec2)
        empty = xc.Links(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        cov = xc.crossed_covariance(side1, side2, cell, q, n_cells, links1 or empty,
                                 links2 or empty)
        return xc.crossed_difference(side1, side2, cov, interval_level=self.level)

    def annotators(self, question_row, column, n_columns, rows) -> np.ndarray:
        """Distinct annotators per cell among the outputs ``rows``."""
        obs, _, cell, (r,) = self._expand(question_row, column, n_columns, (rows,))
        who = self.study.annotator[r]
        keep = who >= 0
        n_cells = len(self.groups) * n_columns
        if not keep.any():
            return np.zeros(n_cells, dtype=np.int64)
        pairs = np.unique(np.stack([cell[keep], who[keep]]), axis=1)
        return np.bincount(pairs[0], minlength=n_cells)

    def total(self, question_row, column, n_columns, values=None) -> np.ndarray:
        obs, _, cell, (v,) = self._expand(question_row, column, n_columns,
                                          (np.ones(len(question_row)) if values is None
                                           else values,))
        return np.bincount(cell, weights=v, minlength=len(self.groups) * n_columns)


def critique_report(study: CritiqueStudy, *, seed: int = 0,
                    interval_level: float = 0.95) -> CritiqueReport:
    """Tables 1–3 and 5 of the study (module docstring); ties of the votes broken with
    ``seed`` (``estimators.critique.votes``)."""
    if not 0 < interval_level < 1:
        raise ValueError(f"interval_level must be in (0, 1), got {interval_level}")
    top = study.top_level
    n_lv = top + 1
    qrow = study.output_question
    gold = study.gold[qrow]
    scored = gold >= 0
    correct = scored & (study.final == gold)
    both_kinds = bool(study.is_ai.any() and (~study.is_ai).any())
    authors = ("all", "human", "ai") if both_kinds else ("all",)
    in_author = {"all": np.ones(study.n_outputs, dtype=bool), "human": ~study.is_ai,
                 "ai": study.is_ai}
    groups = _Groups(study)
    fig = _Figures(study, groups, correct, scored, interval_level)
    n_groups = len(groups)

    # Levels: columns (author group, level).
    n_a = len(authors)
    n_col = n_a * n_lv
    rec = np.concatenate([np.flatnonzero(in_author[a]) for a in authors])
    col = np.concatenate([k * n_lv + study.level[in_author[a]]
                          for k, a in enumerate(authors)])
    q = qrow[rec]
    conf, mins = study.confidence[rec], study.time_ms[rec] / 60000.0
    has_c, has_t = np.isfinite(conf), np.isfinite(mins)
    acc = fig.proportion(q, col, n_col, scored[rec], correct[rec], ("chain", rec))
    confidence = fig.proportion(q, col, n_col, has_c, np.where(has_c, conf, 0.0),
                                ("own", rec), mean=True)
    minutes = fig.proportion(q, col, n_col, has_t, np.where(has_t, mins, 0.0),
                             ("own", rec), mean=True)
    n_out = fig.total(q, col, n_col).reshape(n_groups, n_col)
    n_unp = fig.total(q, col, n_col, study.final[rec] < 0).reshape(n_groups, n_col)
    n_scored = fig.total(q, col, n_col, scored[rec]).reshape(n_groups, n_col)
    n_ann = fig.annotators(q, col, n_col, rec).reshape(n_groups, n_col)

    # Effort-matched votes: columns (target t, voted j) per author group.
    n_mv = n_lv * n_lv
    maj = []
    for a in authors:
        v = effort_matched_votes(study, seed=seed, author=None if a == "all" else a)
        use = v.correct >= 0
        anchor = v.anchor_row[use]
        vq = qrow[anchor]
        vcol = v.target_level[use] * n_lv + v.voted_level[use]
        voter_rows = rows_of(study.output_id, v.members[use])
        ones = np.ones(anchor.size)
        vote_right = v.correct[use].astype(float)
        maj.append((fig.proportion(vq, vcol, n_mv, ones, vote_right, ("vote", voter_rows)),
                    fig.difference(vq, vcol, n_mv, ones, correct[anchor], ("chain", anchor),
                                   ones, vote_right, ("vote", voter_rows)),
                    fig.total(vq, vcol, n_mv).reshape(n_groups, n_mv),
                    fig.total(qrow[v.anchor_row], v.target_level * n_lv + v.voted_level,
                              n_mv, ~v.complete).reshape(n_groups, n_mv)))

    # Naive votes: columns (author group, level); anchors filtered by author.
    nv = naive_votes(study, seed=seed)
    nv_use = nv.correct >= 0
    nv_sel = [np.flatnonzero(nv_use & in_author[a][nv.anchor_row]) for a in authors]
    nv_rec = np.concatenate(nv_sel)
    nv_anchor = nv.anchor_row[nv_rec]
    nv_q = qrow[nv_anchor]
    nv_col = np.concatenate([k * n_lv + nv.target_level[s] for k, s in enumerate(nv_sel)])
    nv_voters = rows_of(study.output_id, nv.members[nv_rec])
    ones = np.ones(nv_rec.size)
    nv_right = nv.correct[nv_rec].astype(float)
    naive_acc = fig.proportion(nv_q, nv_col, n_col, ones, nv_right, ("vote", nv_voters))
    naive_gain = fig.difference(nv_q, nv_col, n_col, ones, correct[nv_anchor],
                                ("chain", nv_anchor), ones, nv_right, ("vote", nv_voters))
    n_naive = fig.total(nv_q, nv_col, n_col).reshape(n_groups, n_col)

    levels: list[LevelRow] = []
    for k, a in enumerate(authors):
        m_acc, m_gain, m_n, m_inc = maj[k]
        for gi, domain in enumerate(groups.names):
            for lv in range(n_lv):
                c = k * n_lv + lv
                at = gi * n_col + c
                majority = tuple(
                    MajorityCell(
                        target_level=t, effort=effort(t), n_voters=voters(t, lv),
                        n_votes=int(m_n[gi, t * n_lv + lv]),
                        n_incomplete=int(m_inc[gi, t * n_lv + lv]),
                        accuracy=m_acc.interval(gi * n_mv + t * n_lv + lv),
                        target_minus_majority=m_gain.interval(gi * n_mv + t * n_lv + lv))
                    for t in range(lv + 1, n_lv))
                naive = None if lv == 0 else NaiveCell(
                    n_voters=2 * lv, n_votes=int(n_naive[gi, c]),
                    accuracy=naive_acc.interval(at),
                    level_minus_naive=naive_gain.interval(at))
                levels.append(LevelRow(
                    author=a, domain=domain, level=lv, n_outputs=int(n_out[gi, c]),
                    n_scored=int(n_scored[gi, c]), n_unparsed=int(n_unp[gi, c]),
                    n_annotators=int(n_ann[gi, c]),
                    accuracy=acc.interval(at), majority=majority, naive=naive,
                    confidence=confidence.interval(at), minutes=minutes.interval(at)))

    human_ai = _human_ai(study, correct, scored, interval_level) if both_kinds else []
    pairs = _input_pairs(study, authors, in_author, fig, correct, scored)
    return CritiqueReport(
        top_level=top, n_questions=study.n_questions,
        n_scored_questions=int((study.gold >= 0).sum()),
        n_outputs=study.n_outputs, domains=study.domains, authors=authors, seed=int(seed),
        interval_level=float(interval_level), levels=tuple(levels),
        human_ai=tuple(human_ai), input_pairs=tuple(pairs))


def _human_ai(study: CritiqueStudy, correct: np.ndarray, scored: np.ndarray,
              interval_level: float) -> list[HumanAiRow]:
    n_lv = study.top_level + 1
    q_n = study.n_questions
    qrow = study.output_question
    # Questions where the AI's responses are neither all right nor all wrong.
    ai0 = study.is_ai & (study.level == 0) & scored
    n_ai0 = np.bincount(qrow[ai0], minlength=q_n)
    s_ai0 = np.bincount(qrow[ai0], weights=correct[ai0], minlength=q_n)
    keep = (n_ai0 > 0) & (s_ai0 > 0) & (s_ai0 < n_ai0)
    groups = _Groups(study, keep)
    fig = _Figures(study, groups, correct, scored, interval_level)
    human = np.flatnonzero(~study.is_ai)
    ai = np.flatnonzero(study.is_ai)
    hq, aq = qrow[human], qrow[ai]
    h_acc = fig.proportion(hq, study.level[human], n_lv, scored[human], correct[human],
                           ("chain", human))
    ai_acc = fig.proportion(aq, study.level[ai], n_lv, scored[ai], correct[ai])
    conf, mins = study.confidence[human], study.time_ms[human] / 60000.0
    has_c, has_t = np.isfinite(conf), np.isfinite(mins)
    h_conf = fig.proportion(hq, study.level[human], n_lv, has_c, np.where(has_c, conf, 0.0),
                            ("own", human), mean=True)
    h_min = fig.proportion(hq, study.level[human], n_lv, has_t, np.where(has_t, mins, 0.0),
                           ("own", human), mean=True)
    gain = None
    if n_lv > 1:
        # Gain at l: human level l vs AI level l − 1, on questions with both.
        n_h = np.zeros((q_n, n_lv))
        np.add.at(n_h, (hq, study.level[human]), scored[human])
        n_ai = np.zeros((q_n, n_lv))
        np.add.at(n_ai, (aq, study.level[ai]), scored[ai])
        h_sel = human[(study.level[human] >= 1)]
        h_sel = h_sel[n_ai[qrow[h_sel], study.level[h_sel] - 1] > 0]
        a_sel = ai[study.level[ai] < n_lv - 1]
        a_sel = a_sel[n_h[qrow[a_sel], study.level[a_sel] + 1] > 0]
        rows = np.concatenate([h_sel, a_sel])
        column = np.concatenate([study.level[h_sel] - 1, study.level[a_sel]])
        side1 = np.r_[np.ones(h_sel.size), np.zeros(a_sel.size)]
        n1 = side1 * scored[rows]
        n2 = (1 - side1) * scored[rows]
        gain = fig.difference(qrow[rows], column, n_lv - 1, n1, n1 * correct[rows],
                              ("chain", rows), n2, n2 * correct[rows], None)
    sizes = groups.size()
    return [HumanAiRow(domain=domain, level=lv, n_questions=int(sizes[gi]),
                       human_accuracy=h_acc.interval(gi * n_lv + lv),
                       ai_accuracy=ai_acc.interval(gi * n_lv + lv),
                       gain=None if lv == 0 or gain is None
                       else gain.interval(gi * (n_lv - 1) + lv - 1),
                       human_confidence=h_conf.interval(gi * n_lv + lv),
                       human_minutes=h_min.interval(gi * n_lv + lv))
            for gi, domain in enumerate(groups.names) for lv in range(n_lv)]


def _input_pairs(study: CritiqueStudy, authors, in_author, fig: _Figures,
                 correct: np.ndarray, scored: np.ndarray) -> list[InputPairRow]:
    top = study.top_level
    if top < 1:
        return []
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
    n_col = top * n_k
    rows = []
    for a in authors:
        m = in_author[a][crit]
        s = crit[m]
        q = study.output_question[s]
        col = (study.level[s] - 1) * n_k + kind[m]
        ones = np.ones(s.size)
        res = {k: fig.proportion(q, col, n_col, ones, v, ("own", s)) for k, v in (
            ("acc", correct[s]), ("right", picked_right[m]), ("wrong", picked_wrong[m]),
            ("neither", neither[m]))}
        totals = fig.total(q, col, n_col).reshape(len(fig.groups), n_col)
        for gi, domain in enumerate(fig.groups.names):
            for lv in range(1, top + 1):
                level_total = totals[gi, (lv - 1) * n_k:lv * n_k].sum()
                for kk, name in enumerate(INPUT_KINDS[::-1]):
                    c = (lv - 1) * n_k + (n_k - 1 - kk)
                    one = name == "one_correct"
                    at = gi * n_col + c
                    rows.append(InputPairRow(
                        author=a, domain=domain, level=lv, inputs=name,
                        n=int(totals[gi, c]),
                        share=float(totals[gi, c] / level_total) if level_total
                        else float("nan"),
                        accuracy=res["acc"].interval(at),
                        picked_correct=res["right"].interval(at) if one else None,
                        picked_wrong=res["wrong"].interval(at) if one else None,
                        picked_neither=res["neither"].interval(at)))
    return rows
