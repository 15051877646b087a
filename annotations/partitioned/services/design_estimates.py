"""Design-weighted estimates: every AI system's accuracy from every answer, whatever routing
design drew it (``estimators.partitioned.design_estimate``; docs/estimators.md, "Routing
designs"). Each answer enters with the probability its design gave the class asked and the
classes each system picked, both recomputed exactly from what the query stores
(``Query.draw_p``, ``draw_targets``, the design's ε and the item's class order)."""

from __future__ import annotations

import numpy as np

from annotations.core.models import Study
from annotations.partitioned.selectors import DesignRows, study_design_rows, study_designs
from annotations.partitioned.services.routing import counts_of
from estimators.partitioned.design_estimate import DesignSteps, design_estimate
from estimators.partitioned.designs import mixture_conditional
from estimators.partitioned.likelihood import fisher_se

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


def _row_counts(rows: DesignRows, idx: np.ndarray, k: int) -> np.ndarray:
    """The predicted-class counts m (len(idx), K) of rows ``idx`` from ``draw_targets``
    (``routing.counts_of``, the routing's own reading of them)."""
    return np.array([counts_of(rows.targets[r], k) for r in idx]).reshape(len(idx), k)


def step_probabilities(rows: DesignRows, kept: np.ndarray, k: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per kept row, from what the query stores: p_own (rows, systems) = π_j(ŷ_s | the
    item's classes asked before) — 0 where s picked nothing or its pick was asked before;
    rest = 1 − Σ_{i<j} π(k_i), the first step's probability mass left; inv_total =
    Σ_{c ∈ R_j} 1/π_j(c). Uniform rows: 1/(K − j), 1 − j/K, (K − j)²; targeted rows:
    ``mixture_conditional`` on the stored targets and ε, grouped by (step, ε). Rows not
    kept get 0."""
    picks = rows.picks[rows.item]
    n = len(rows.item)
    p_own, rest, inv_total = np.zeros(picks.shape), np.zeros(n), np.zeros(n)
    orders = rows.class_orders
    every = np.arange(k)
    for j in np.unique(rows.sequence[kept]):
        idx = np.flatnonzero(kept & (rows.sequence == j))
        prefix = np.array([orders[rows.item[r]][:j] for r in idx], dtype=np.int64).reshape(
            len(idx), j)
        cand = picks[idx]
        asked = (cand[:, :, None] == prefix[:, None, :]).any(axis=2) | (cand < 0)
        eps = rows.epsilon[idx]
        uniform = np.isnan(eps) | np.array([rows.targets[r] is None for r in idx], dtype=bool)
        p_own[idx] = np.where(asked, 0.0, 1.0 / (k - j))
        rest[idx] = 1.0 - j / k
        inv_total[idx] = float((k - j) ** 2)
        for e in np.unique(eps[~uniform]):
            sub = ~uniform & (eps == e)
            at, counts = idx[sub], _row_counts(rows, idx[sub], k)
            p_own[at] = mixture_conditional(counts, float(e), prefix[sub], cand[sub])
            first = mixture_conditional(counts, float(e), prefix[sub][:, :0],
                                        np.tile(every, (len(at), 1)))
            rest[at] = 1.0 - np.take_along_axis(first, prefix[sub], axis=1).sum(axis=1)
            every_j = mixture_conditional(counts, float(e), prefix[sub],
                                          np.tile(every, (len(at), 1)))
            with np.errstate(divide="ignore"):
                inv_total[at] = np.where(every_j > 0, 1.0 / np.where(every_j > 0, every_j, 1.0),
                                         0.0).sum(axis=1)
    return p_own, rest, inv_total


def design_step_arrays(rows: DesignRows, k: int, depth: int) -> dict:
    """The per-step arrays of ``estimators.partitioned.design_estimate.DesignSteps`` for the
    kept rows (:func:`chain_kept`): item, step, yes, unsure (all False: chains end before a
    'not sure'), p_asked (the stored π_j(k_j); 1/(K − j) for the uniform default), remaining
    (K − j), own, p_own, present (systems last), valid, depth, rest, inv_total
    (:func:`step_probabilities`)."""
    kept = chain_kept(rows)
    p_own, rest, inv_total = step_probabilities(rows, kept, k)
    p_own = p_own[kept]
    picks = rows.picks[rows.item[kept]]
    seq = rows.sequence[kept]
    p_asked = np.where(np.isnan(rows.draw_p[kept]), 1.0 / (k - seq), rows.draw_p[kept])
    n = int(kept.sum())
    return {
        "item": rows.item[kept], "step": seq, "yes": rows.answer[kept] == ANSWER_YES,
        "unsure": np.zeros(n, dtype=bool), "p_asked": p_asked, "remaining": k - seq,
        "own": picks == rows.k[kept][:, None], "p_own": p_own, "present": picks >= 0,
        "valid": np.ones(n, dtype=bool), "depth": depth, "rest": rest[kept],
        "inv_total": inv_total[kept],
    }


def uniform_equivalent(accuracy, se, k: int) -> np.ndarray:
    """The answers a uniform design with one query per item would need for the same
    standard error: its ML estimate's SE is SE₁/√n with SE₁ the Fisher SE of one answer
    (1/K ordinary, (K−1)/K complementary; ``estimators.partitioned.likelihood.fisher_se``),
    so n = (SE₁ / SE)². NaN where either SE is 0 or missing."""
    a = np.clip(np.asarray(accuracy, float), 0.01, 0.99)
    one = fisher_se(a, np.full_like(a, 1.0 / k), np.full_like(a, (k - 1) / k), k)
    se = np.asarray(se, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((se > 0) & (one > 0), (one / np.where(se > 0, se, 1.0)) ** 2, np.nan)


def design_payload(*, study: Study, systems: list, k: int, confidence: float,
                   kept=None) -> dict:
    """The design-weighted estimate of every system from every answer (``design_estimate``
    on :func:`design_step_arrays`), each with the answers a uniform design would have needed
    for the same standard error (:func:`uniform_equivalent`), and the study's designs with
    the answers each drew. Payload key ``design``; each system's cell is ``design_cells``
    [j]. ``kept``: the study's maintained types (``services.tally_designs.KeptDesign``),
    read instead of the answers when they are of these systems, K and depth."""
    depth = min(study.queries_per_item, k)
    sig = (k, depth, tuple(s.ordinal for s in systems))
    if kept is not None and kept.signature != sig:
        kept = None  # of other systems (one added since the fold): the reference
    if kept is not None:
        answers, items = kept.types.answers, kept.types.items
        steps = kept.steps() if systems and answers else None
    else:
        rows = study_design_rows(study=study, ordinals=[s.ordinal for s in systems])
        arrays = design_step_arrays(rows, k, depth=depth)
        answers = len(arrays["item"])
        items = len(np.unique(arrays["item"]))
        steps = DesignSteps(**arrays) if systems and answers else None
    cells = []
    if steps is not None:
        est = design_estimate(steps, confidence=confidence)
        fields = {f: np.asarray(getattr(est, f), float).reshape(-1)
                  for f in ("accuracy", "se", "ci_low", "ci_high")}
        flags = np.asarray(est.approximate, bool).reshape(-1)
        needed = uniform_equivalent(fields["accuracy"], fields["se"], k)
        for j in range(len(systems)):
            need = float(needed[j])
            cells.append({**{f: float(v[j]) for f, v in fields.items()},
                          "approximate": bool(flags[j]),
                          "uniform_answers": round(need) if np.isfinite(need) else None})
    return {
        "answers": answers, "items": items, "cells": cells,
        "designs": [{"number": d.number, "kind": d.kind, "label": d.label,
                     "epsilon": d.epsilon, "answered": d.answered}
                    for d in study_designs(study=study, counts=None if kept is None
                                           else kept.types.design_counts())],
    }
