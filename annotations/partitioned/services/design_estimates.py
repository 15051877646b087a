"""Design-weighted estimates: every AI system's accuracy from every answer, whatever routing
design drew it (``estimators.partitioned.design_estimate``; docs/estimators.md, "Routing
designs"). Each answer enters with the probability its design gave the class asked and the
classes each system picked, both recomputed exactly from what the query stores
(``Query.draw_p``, ``draw_targets``, the design's ε and the item's class order)."""

from __future__ import annotations

import numpy as np

from annotations.partitioned.selectors import DesignRows
from estimators.partitioned.designs import mixture_conditional

ANSWER_YES, ANSWER_UNSURE = 1, 2


def chain_kept(rows: DesignRows) -> np.ndarray:
    """Which rows enter: each item's answers at sequences 0, 1, 2, … while they are 'yes' or
    'no'. A 'not sure' answer, or a missing step (a rejected answer), ends the item's chain
    there: a later step's probabilities assume the truth was not among the classes asked
    before, which only 'no' answers tell."""
    n = len(rows.item)
    kept = np.zeros(n, dtype=bool)
    expected = 0
    broken = False
    for r in range(n):
        if r == 0 or rows.item[r] != rows.item[r - 1]:
            expected, broken = 0, False
        if broken or rows.sequence[r] != expected or rows.answer[r] == ANSWER_UNSURE:
            broken = True
            continue
        kept[r] = True
        expected += 1
    return kept


def pick_probabilities(rows: DesignRows, kept: np.ndarray, k: int) -> np.ndarray:
    """p_own (rows, systems): π_j(ŷ_s | the item's classes asked before) — the probability
    the row's step gave system s's pick; 0 where s picked nothing or its pick was asked
    before. Uniform rows: 1/(K − j); targeted rows: ``mixture_conditional`` on the stored
    targets and ε, grouped by (step, ε)."""
    picks = rows.picks[rows.item]
    out = np.zeros(picks.shape)
    orders = rows.class_orders
    for j in np.unique(rows.sequence[kept]):
        at_j = kept & (rows.sequence == j)
        idx = np.flatnonzero(at_j)
        prefix = np.array([orders[rows.item[r]][:j] for r in idx], dtype=np.int64).reshape(
            len(idx), j)
        cand = picks[idx]
        asked = (cand[:, :, None] == prefix[:, None, :]).any(axis=2) | (cand < 0)
        eps = rows.epsilon[idx]
        uniform = np.isnan(eps) | np.array([rows.targets[r] is None for r in idx])
        out[idx] = np.where(asked, 0.0, 1.0 / (k - j))
        for e in np.unique(eps[~uniform]):
            sub = ~uniform & (eps == e)
            counts = np.zeros((int(sub.sum()), k))
            for i, r in enumerate(idx[sub]):
                for c, m in rows.targets[r]:
                    counts[i, int(c)] = m
            out[idx[sub]] = mixture_conditional(counts, float(e), prefix[sub], cand[sub])
    return out


def design_step_arrays(rows: DesignRows, k: int, depth: int) -> dict:
    """The per-step arrays of ``estimators.partitioned.design_estimate.DesignSteps`` for the
    kept rows (:func:`chain_kept`): item, step, yes, unsure (all False: chains end before a
    'not sure'), p_asked (the stored π_j(k_j); 1/(K − j) for the uniform default), remaining
    (K − j), own, p_own, present (systems last), valid, depth."""
    kept = chain_kept(rows)
    p_own = pick_probabilities(rows, kept, k)[kept]
    picks = rows.picks[rows.item[kept]]
    seq = rows.sequence[kept]
    p_asked = np.where(np.isnan(rows.draw_p[kept]), 1.0 / (k - seq), rows.draw_p[kept])
    n = int(kept.sum())
    return {
        "item": rows.item[kept], "step": seq, "yes": rows.answer[kept] == ANSWER_YES,
        "unsure": np.zeros(n, dtype=bool), "p_asked": p_asked, "remaining": k - seq,
        "own": picks == rows.k[kept][:, None], "p_own": p_own, "present": picks >= 0,
        "valid": np.ones(n, dtype=bool), "depth": depth,
    }
