"""Per-worker quality and time: what a study's Workers page shows of each labeller, from one
row per answer (pure numpy; the page's reads are in ``annotations.core.reviews.workers``).

* **Time per answer**: the median, the 10th and 90th percentiles (numpy's linear
  interpolation, ``np.percentile``) of the seconds each answer took, and the counts in
  :data:`TIME_EDGES` bins (answers without a time are left out of all of these).
* **Gold-check accuracy**: correct / checked over the answers whose item has a known answer
  (a quality check, a gold label), with the exact Clopper–Pearson interval
  (``proportion.clopper_pearson``: coverage ≥ the level at every accuracy).
* **Agreement with the others' majority** (:func:`leave_one_out_agreement`): an answer
  agrees when its value is the strict majority of the *other* answers of its unit (an item,
  or an item in one arm or level); a unit where the others have no strict majority (a tie,
  or nobody else) says nothing. A worker's agreement is the share of their answers that
  agree among those that say something."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from estimators.numerics.proportion import clopper_pearson

#: Upper edges (seconds) of the time histogram's bins; the last bin is open.
TIME_EDGES = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)


def leave_one_out_agreement(unit: ArrayLike, value: ArrayLike) -> np.ndarray:
    """Per answer: 1.0 when ``value`` is the strict majority of the other answers of its
    ``unit``, 0.0 when another value is, NaN when the others have none (tie or nobody).
    ``unit`` and ``value`` are non-negative integer codes of equal length."""
    u = np.asarray(unit, dtype=np.int64)
    v = np.asarray(value, dtype=np.int64)
    if u.shape != v.shape or u.ndim != 1:
        raise ValueError(f"unit and value: 1-D of one length, got {u.shape} and {v.shape}")
    if u.size == 0:
        return np.zeros(0)
    if u.min() < 0 or v.min() < 0:
        raise ValueError("unit and value: codes must be non-negative")
    units, ui = np.unique(u, return_inverse=True)
    values, vi = np.unique(v, return_inverse=True)
    counts = np.zeros((units.size, values.size), dtype=np.int64)
    np.add.at(counts, (ui, vi), 1)
    others = counts[ui]
    others[np.arange(u.size), vi] -= 1
    top = others.max(axis=1)
    unique_top = (others == top[:, None]).sum(axis=1) == 1
    says = (top > 0) & unique_top
    out = np.full(u.size, np.nan)
    out[says] = (others.argmax(axis=1) == vi)[says]
    return out


@dataclass(frozen=True)
class WorkerFigures:
    """Per worker (rows in the order of ``workers``): answers, time figures (seconds; NaN
    without a timed answer), time histogram (``len(TIME_EDGES) + 1`` bins), gold checks
    (correct, checked, interval ends; NaN ends without a check) and agreement (agreeing,
    answers that say something)."""

    workers: np.ndarray
    answers: np.ndarray
    median_s: np.ndarray
    p10_s: np.ndarray
    p90_s: np.ndarray
    histogram: np.ndarray
    gold_correct: np.ndarray
    gold_n: np.ndarray
    gold_lo: np.ndarray
    gold_hi: np.ndarray
    agree: np.ndarray
    agree_n: np.ndarray


def worker_figures(worker: ArrayLike, seconds: ArrayLike, correct: ArrayLike,
                   agreement: ArrayLike, *, workers: ArrayLike | None = None,
                   confidence: float = 0.95) -> WorkerFigures:
    """The module's figures per worker from one row per answer: ``worker`` (integer ids),
    ``seconds`` (NaN: no time), ``correct`` (1/0 on a gold check, NaN otherwise) and
    ``agreement`` (:func:`leave_one_out_agreement`, NaN where it says nothing).
    ``workers``: the ids to report (default: those present), in that order — a listed
    worker without answers gets zeros and NaNs."""
    w = np.asarray(worker, dtype=np.int64)
    s = np.asarray(seconds, dtype=float)
    c = np.asarray(correct, dtype=float)
    a = np.asarray(agreement, dtype=float)
    if not (w.shape == s.shape == c.shape == a.shape) or w.ndim != 1:
        raise ValueError("worker, seconds, correct and agreement: 1-D of one length")
    ids = np.unique(w) if workers is None else np.asarray(workers, dtype=np.int64)
    index = {int(x): i for i, x in enumerate(ids)}
    row = np.array([index.get(int(x), -1) for x in w], dtype=np.int64)
    keep = row >= 0
    n = ids.size
    answers = np.bincount(row[keep], minlength=n)
    median, p10, p90 = (np.full(n, np.nan) for _ in range(3))
    hist = np.zeros((n, len(TIME_EDGES) + 1), dtype=np.int64)
    timed = keep & ~np.isnan(s)
    order = np.argsort(row[timed], kind="stable")
    rows_t, secs = row[timed][order], s[timed][order]
    bounds = np.searchsorted(rows_t, np.arange(n + 1))
    for i in range(n):
        mine = secs[bounds[i]:bounds[i + 1]]
        if mine.size:
            p10[i], median[i], p90[i] = np.percentile(mine, [10, 50, 90])
    bins = np.searchsorted(np.asarray(TIME_EDGES), s[timed], side="right")
    np.add.at(hist, (row[timed], bins), 1)
    checked = keep & ~np.isnan(c)
    gold_n = np.bincount(row[checked], minlength=n)
    gold_correct = np.bincount(row[checked], weights=c[checked], minlength=n).astype(np.int64)
    lo, hi = np.full(n, np.nan), np.full(n, np.nan)
    has = gold_n > 0
    if has.any():
        lo[has], hi[has] = clopper_pearson(gold_correct[has], gold_n[has], confidence)
    said = keep & ~np.isnan(a)
    agree_n = np.bincount(row[said], minlength=n)
    agree = np.bincount(row[said], weights=a[said], minlength=n).astype(np.int64)
    return WorkerFigures(ids, answers, median, p10, p90, hist, gold_correct, gold_n, lo, hi,
                         agree, agree_n)
