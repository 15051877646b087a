"""The baselines of recursive critique: effort-matched majority votes and naive votes
(METHODS.md M3; paper 002, eqs. 5–7).

Effort. An output costs one unit (ε(R)); a level-l critique needs its two inputs, their
two inputs, … so E(Cˡ) = 2l + 1 (eq. 5). k outputs of level j that share their lower
levels cost 2j + k, hence level t is matched by the majority of

    voters(t, j) = 2(t − j) + 1

outputs of level j (C¹ ↔ 3 R; C² ↔ 5 R, 3 C¹; C³ ↔ 7 R, 5 C¹, 3 C²).

The effort-matched vote of a level-t critique c at level j < t (the exact rule):

1. Its *ancestor pair* at level j: the two level-j outputs in c's chain (c's inputs for
   j = t − 1, their inputs for j = t − 2, …). Because a critique compares two siblings,
   this is always one pair.
2. The *eligible* level-j outputs: those sharing the same lower levels as the pair — the
   level-j outputs with the same parent pair (in either order); for j = 0 every response
   of c's tree (the paper repeats whole trees per question: a level's vote uses the
   outputs of its own tree; records without ``tree`` numbers make a question one tree).
   With ``author`` given, only outputs of that author kind are eligible.
3. The *voters*, in this order: the pair's eligible members (by output id), then the other
   eligible outputs by ascending output id, until there are voters(t, j). (In the
   sampling tree of paper Figure 4 — 7 R, 5 C¹ on R₁R₂, 3 C² on C¹₁C¹₂, 1 C³ on C²₁C²₂, ids
   in creation order — this is simply the first voters(t, j) outputs of level j.)
4. With fewer eligible outputs than that the vote is *incomplete*: reported with the
   members it has, not scored (it would not be effort-matched).

The naive vote of a level-t critique (eq. 7) is the majority of the final answers of its
whole chain below it: the 2t ancestors (both of each level 0 … t − 1), whoever wrote them
(the critic saw them all); ``author`` then only selects which critiques are anchors.

Majority (eq. 6): the option with the most votes among the voters' parseable finals
(unparseable finals do not vote; if none is parseable the result is "no answer", never
correct). Ties are broken by a seeded draw that depends only on (seed, the voters' ids in
rule order): the same vote gets the same draw wherever it appears (two C² of one pair share
their 3-C¹ vote) and adding outputs elsewhere in the study never changes it. The draw is
uniform over the tied options (splitmix64 of the ids → a uniform in [0, 1)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimators.critique.records import AUTHORS, CritiqueStudy


def effort(level: int) -> int:
    """E(Cˡ) = 2l + 1 response-equivalents (paper eq. 5)."""
    return 2 * int(level) + 1


def voters(target_level: int, voted_level: int) -> int:
    """Number of level-j outputs whose majority matches the effort of level t: 2(t−j)+1."""
    if not 0 <= voted_level < target_level:
        raise ValueError(f"need 0 ≤ voted_level < target_level, got {voted_level}, "
                         f"{target_level}")
    return 2 * (int(target_level) - int(voted_level)) + 1


@dataclass(frozen=True, eq=False)
class Votes:
    """One entry per (anchor critique, voted level). ``members``: output ids of the voters
    in rule order, −1 padded; ``result``: the voted option (−1: no parseable vote or
    incomplete); ``correct``: 1/0, −1 where the question has no gold or the vote is
    incomplete; ``voted_level`` −1 for naive votes."""

    kind: str
    anchor: np.ndarray
    question: np.ndarray
    target_level: np.ndarray
    voted_level: np.ndarray
    members: np.ndarray
    result: np.ndarray
    tied: np.ndarray
    complete: np.ndarray
    correct: np.ndarray
    anchor_row: np.ndarray  # row of the anchor in the study's output arrays

    def __len__(self) -> int:
        return len(self.anchor)

    def members_of(self, anchor_id: int, voted_level: int = -1) -> tuple[int, ...]:
        """The voters' ids of one vote (``voted_level`` −1 for a naive vote)."""
        hit = np.flatnonzero((self.anchor == anchor_id) & (self.voted_level == voted_level))
        if hit.size != 1:
            raise KeyError(f"no {self.kind} vote of output {anchor_id} at level {voted_level}")
        row = self.members[hit[0]]
        return tuple(int(x) for x in row[row >= 0])


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (wrapping uint64 arithmetic)."""
    h = h ^ (h >> np.uint64(30))
    h = h * _M1
    h = h ^ (h >> np.uint64(27))
    h = h * _M2
    return h ^ (h >> np.uint64(31))


def tie_uniforms(seed: int, member_ids: np.ndarray) -> np.ndarray:
    """A uniform in [0, 1) per row of ``member_ids``, from (seed, the row's ids in order);
    −1 padding is skipped, so the draw does not depend on the width of the array."""
    m = len(member_ids)
    h = _mix(np.full(m, np.uint64(int(seed) % 2**64)) + _GOLDEN)
    with np.errstate(over="ignore"):
        for col in np.asarray(member_ids, dtype=np.int64).T:
            h = np.where(col >= 0, _mix(h ^ (col.view(np.uint64) + _GOLDEN)), h)
    return (h >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def majority(finals: np.ndarray, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Majority option per row of ``finals`` (−1 = no vote), ties broken by ``uniforms``:
    the ⌊u·k⌋-th (0-based, ascending option order) of the k tied options. Returns (result,
    tied); result −1 where no row member voted."""
    m = finals.shape[0]
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    k = int(finals.max()) + 1 if finals.size and finals.max() >= 0 else 1
    counts = (finals[:, :, None] == np.arange(k)).sum(axis=1)
    best = counts.max(axis=1)
    top = (counts == best[:, None]) & (best[:, None] > 0)
    n_top = top.sum(axis=1)
    pick = np.minimum((uniforms * n_top).astype(np.int64), np.maximum(n_top - 1, 0))
    rank = np.cumsum(top, axis=1) - 1
    chosen = np.argmax(top & (rank == pick[:, None]), axis=1)
    return np.where(best > 0, chosen, -1), n_top > 1


def _eligible(study: CritiqueStudy, author: str | None) -> np.ndarray:
    if author is None:
        return np.ones(study.n_outputs, dtype=bool)
    if author not in AUTHORS:
        raise ValueError(f"author must be None, 'human' or 'ai', got {author!r}")
    return study.is_ai if author == "ai" else ~study.is_ai


def _finish(study: CritiqueStudy, kind: str, anchors: np.ndarray, target: np.ndarray,
            voted: np.ndarray, member_rows: np.ndarray, complete: np.ndarray,
            seed: int) -> Votes:
    ids = np.where(member_rows >= 0, study.output_id[np.maximum(member_rows, 0)], -1)
    finals = np.where(member_rows >= 0, study.final[np.maximum(member_rows, 0)], -1)
    finals = np.where(complete[:, None], finals, -1)
    result, tied = majority(finals, tie_uniforms(seed, ids))
    result = np.where(complete, result, -1)
    qrow = study.output_question[anchors]
    gold = study.gold[qrow]
    correct = np.where(complete & (gold >= 0), (result == gold) & (result >= 0), -1)
    return Votes(kind=kind, anchor=study.output_id[anchors],
                 question=study.question_id[qrow], target_level=target, voted_level=voted,
                 members=ids, result=result, tied=tied & complete, complete=complete,
                 correct=correct.astype(np.int64), anchor_row=anchors)


def effort_matched_votes(study: CritiqueStudy, *, seed: int = 0,
                         author: str | None = None) -> Votes:
    """Every effort-matched majority vote of the study (rule: module docstring): for each
    critique of level t (of ``author``'s kind, or any) and each level j < t, the majority of
    voters(t, j) eligible level-j outputs of its chain, with the ids used."""
    elig = _eligible(study, author)
    ch = study.chains
    # Eligible outputs sorted by (sibling group, id): a group is a contiguous run.
    rows = np.flatnonzero(elig)
    order = rows[np.lexsort((study.output_id[rows], ch.group[rows]))]
    sorted_group = ch.group[order]
    parts: list[tuple[np.ndarray, ...]] = []
    width = effort(study.top_level)
    for t in range(1, study.top_level + 1):
        anchors = np.flatnonzero((study.level == t) & elig)
        for j in range(t):
            n = voters(t, j)
            pair = ch.ancestors[anchors, j]  # (m, 2) rows, ordered by id
            g = ch.group[pair[:, 0]]
            start = np.searchsorted(sorted_group, g, side="left")
            end = np.searchsorted(sorted_group, g, side="right")
            pos = start[:, None] + np.arange(n)
            valid = pos < end[:, None]
            window = np.where(valid, order[np.minimum(pos, max(len(order) - 1, 0))], -1)
            pair_ok = elig[pair]
            others = valid & (window != pair[:, :1]) & (window != pair[:, 1:])
            need = n - pair_ok.sum(axis=1)
            take_other = others & (np.cumsum(others, axis=1) <= need[:, None])
            cand = np.concatenate([np.where(pair_ok, pair, -1), window], axis=1)
            keep = np.concatenate([pair_ok, take_other], axis=1)
            # Move the kept candidates to the front, preserving rule order.
            idx = np.argsort(~keep, axis=1, kind="stable")[:, :n]
            chosen = np.take_along_axis(np.where(keep, cand, -1), idx, axis=1)
            complete = keep.sum(axis=1) == n
            padded = np.full((len(anchors), width), -1, dtype=np.int64)
            padded[:, :n] = chosen
            parts.append((anchors, np.full(len(anchors), t), np.full(len(anchors), j),
                          padded, complete))
    return _finish(study, "effort_matched", *_concat(parts, width), seed=seed)


def naive_votes(study: CritiqueStudy, *, seed: int = 0, author: str | None = None) -> Votes:
    """Every naive vote (eq. 7): for each critique of level t ≥ 1 (of ``author``'s kind, or
    any), the majority of the finals of its 2t ancestors (levels 0 … t − 1, in that order,
    each pair by id), whoever wrote them."""
    elig = _eligible(study, author)
    ch = study.chains
    width = max(2 * study.top_level, 2)
    parts: list[tuple[np.ndarray, ...]] = []
    for t in range(1, study.top_level + 1):
        anchors = np.flatnonzero((study.level == t) & elig)
        padded = np.full((len(anchors), width), -1, dtype=np.int64)
        padded[:, :2 * t] = ch.ancestors[anchors, :t].reshape(len(anchors), 2 * t)
        parts.append((anchors, np.full(len(anchors), t), np.full(len(anchors), -1), padded,
                      np.ones(len(anchors), dtype=bool)))
    return _finish(study, "naive", *_concat(parts, width), seed=seed)


def _concat(parts: list[tuple[np.ndarray, ...]], width: int) -> tuple[np.ndarray, ...]:
    if not parts:
        return (np.zeros(0, dtype=np.int64),) * 3 + (
            np.zeros((0, width), dtype=np.int64), np.zeros(0, dtype=bool))
    return tuple(np.concatenate([p[i] for p in parts]).astype(
        bool if i == 4 else np.int64) for i in range(5))


def _gold_wins(counts: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """P(``gold`` is drawn as the plurality of ``counts`` (…, K), ties uniform)."""
    best = counts.max(axis=-1)
    g = np.take_along_axis(counts, gold[..., None], axis=-1)[..., 0]
    ties = (counts == best[..., None]).sum(axis=-1)
    return np.where((g == best) & (best > 0), 1.0 / np.maximum(ties, 1), 0.0)


def pivots(finals: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """How much each voter's answer moves a majority vote: for voter i of row m,
    P(the vote is right | i answers gold) − P(the vote is right | i answers the wrong
    option the other voters back most; a new wrong option if they back none), the others'
    answers as they are (ties uniform; −1 = no vote). Rows of ``finals`` (m, width),
    ``gold`` (m,) the right option; 0 for the −1 entries. The linearisation of a vote in
    its voters' correctness that the annotator-clustered intervals use
    (``estimators.critique.report``)."""
    finals = np.asarray(finals, dtype=np.int64)
    gold = np.asarray(gold, dtype=np.int64)
    m, width = finals.shape
    if m == 0 or width == 0:
        return np.zeros(finals.shape)
    k = int(max(finals.max(), gold.max())) + 2  # + a fresh wrong option
    onehot = (finals[:, :, None] == np.arange(k))  # (m, w, k); −1 rows all False
    others = onehot.sum(axis=1)[:, None, :] - onehot  # (m, w, k)
    g = np.broadcast_to(gold[:, None], (m, width))
    is_gold = np.arange(k) == g[..., None]
    wrong_counts = np.where(is_gold, -1, others)
    wrong_counts[..., k - 1] = np.where(wrong_counts.max(axis=-1) > 0, -1, 0)
    worst = np.argmax(wrong_counts, axis=-1)
    with_gold = _gold_wins(others + is_gold, g)
    with_wrong = _gold_wins(others + (np.arange(k) == worst[..., None]), g)
    return np.where(finals >= 0, with_gold - with_wrong, 0.0)
