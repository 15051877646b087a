"""The factuality scale of assisted studies and its binarisation (METHODS.md M2; paper 001,
section 2.2 "Analysis").

A rater labels a sentence Inaccurate / Unsupported / Disputed / Accurate / Doesn't require
attribution, or "Can't confidently assess", or skips it. For scoring:

* only ``accurate`` is Accurate; ``inaccurate``, ``unsupported``, ``disputed`` and
  ``no_attribution`` are Inaccurate;
* ``cant_assess`` is its own verdict and is always counted wrong;
* ``skip`` is excluded (no rating).

A rating is correct when its verdict equals the gold label (Accurate or Inaccurate).

Per item, the human label is either each individual rating (the item's human correctness is
then the share of its ratings that are correct — the expected accuracy of one rating drawn
at random) or the majority vote: the modal verdict, ties counted as Inaccurate (paper
section 2.3.2). A majority of "can't assess" votes makes the item wrong whatever its gold.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

INACCURATE, ACCURATE, CANT_ASSESS, SKIPPED = 0, 1, 2, -1

#: Label codes accepted (lower case); display names and short synonyms map onto them.
LABELS = ("accurate", "inaccurate", "unsupported", "disputed", "no_attribution", "cant_assess",
          "skip")

_VERDICT = {
    "accurate": ACCURATE,
    "inaccurate": INACCURATE,
    "unsupported": INACCURATE,
    "disputed": INACCURATE,
    "no_attribution": INACCURATE,
    "doesn't require attribution": INACCURATE,
    "does not require attribution": INACCURATE,
    "no attribution": INACCURATE,
    "doesnt_require_attribution": INACCURATE,
    "cant_assess": CANT_ASSESS,
    "can't confidently assess": CANT_ASSESS,
    "skip": SKIPPED,
    "skipped": SKIPPED,
}

RULES = ("majority", "individual")


def label_key(label: str) -> str:
    """How a label is looked up: lower case, curly apostrophes (’ ‘) as ', every run of
    whitespace as one space, trimmed — "Can’t  confidently assess" is "can't confidently
    assess". The trace parser (``assistants.traces``) reads verdicts the same way."""
    return " ".join(label.replace("\u2019", "'").replace("\u2018", "'").lower().split())


def verdicts(labels: ArrayLike, *, field: str = "labels") -> np.ndarray:
    """int8 verdict per label: ACCURATE 1, INACCURATE 0, CANT_ASSESS 2, SKIPPED −1.

    Labels are the codes of :data:`LABELS` (read by :func:`label_key`: case, spacing and
    curly apostrophes ignored; the display names "Doesn't require attribution" and "Can't
    confidently assess" are accepted). Raises ValueError naming the first unknown label
    and its index."""
    arr = np.asarray(labels, dtype=object)
    if arr.ndim != 1:
        raise ValueError(f"{field}: need a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int8)
    uniq, inverse = np.unique(arr.astype(str), return_inverse=True)
    codes = np.empty(uniq.size, dtype=np.int8)
    for j, u in enumerate(uniq):
        key = label_key(u)
        if key not in _VERDICT:
            first = int(np.argmax(inverse == j))
            raise ValueError(f"{field}[{first}]: unknown factuality label {str(u)!r} "
                             f"(expected one of {', '.join(LABELS)})")
        codes[j] = _VERDICT[key]
    return codes[inverse.reshape(-1)]


def gold_accurate(gold: ArrayLike, *, field: str = "gold") -> np.ndarray:
    """Boolean gold label per item (True = Accurate). Gold must binarise to Accurate or
    Inaccurate; "can't assess" and "skip" are refused."""
    v = verdicts(gold, field=field)
    bad = (v != ACCURATE) & (v != INACCURATE)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{field}[{i}]: a gold label must be accurate or inaccurate, "
                         f"got {str(np.asarray(gold, dtype=object)[i])!r}")
    return v == ACCURATE


def ratings_correct(verdict: ArrayLike, gold_is_accurate: ArrayLike) -> np.ndarray:
    """Per rating: verdict equals the gold label (Accurate vs Inaccurate). "Can't assess"
    and skips are never correct (skips should be excluded before scoring)."""
    v = np.asarray(verdict)
    g = np.asarray(gold_is_accurate, dtype=bool)
    if v.shape != g.shape:
        raise ValueError(f"gold_is_accurate: shape {g.shape} differs from verdict {v.shape}")
    return np.where(g, v == ACCURATE, v == INACCURATE)


def _check_items(item: ArrayLike, verdict: ArrayLike, n_items: int) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    it = np.asarray(item)
    v = np.asarray(verdict)
    if it.ndim != 1 or v.shape != it.shape:
        raise ValueError(f"verdict: shape {v.shape} differs from item {it.shape}")
    if it.size and (it.dtype.kind not in "iu" or it.min() < 0 or it.max() >= n_items):
        bad = (it < 0) | (it >= n_items) if it.dtype.kind in "iu" else np.ones(it.size, bool)
        i = int(np.argmax(bad))
        raise ValueError(f"item[{i}]: {it[i]} is not an item index in 0..{n_items - 1}")
    bad = ~np.isin(v, (ACCURATE, INACCURATE, CANT_ASSESS, SKIPPED))
    if bad.any():
        raise ValueError(f"verdict[{int(np.argmax(bad))}]: not a verdict code")
    return it.astype(np.int64), v.astype(np.int64)


def vote_counts(item: ArrayLike, verdict: ArrayLike, n_items: int) -> np.ndarray:
    """(n_items, 3) counts of Inaccurate, Accurate and Can't-assess votes (skips ignored)."""
    it, v = _check_items(item, verdict, n_items)
    keep = v != SKIPPED
    return np.bincount(it[keep] * 3 + v[keep], minlength=n_items * 3).reshape(n_items, 3)


def majority_verdicts(item: ArrayLike, verdict: ArrayLike, n_items: int) -> np.ndarray:
    """Majority verdict per item: ACCURATE iff Accurate has strictly the most votes,
    CANT_ASSESS iff "can't assess" has strictly the most, otherwise INACCURATE (Inaccurate
    most, or any tie for the most — the paper's tie rule); SKIPPED where the item has no
    non-skip rating."""
    counts = vote_counts(item, verdict, n_items)
    ina, acc, cant = counts[:, 0], counts[:, 1], counts[:, 2]
    out = np.full(n_items, INACCURATE, dtype=np.int8)
    out[acc > np.maximum(ina, cant)] = ACCURATE
    out[cant > np.maximum(ina, acc)] = CANT_ASSESS
    out[counts.sum(axis=1) == 0] = SKIPPED
    return out


def item_human_correct(item: ArrayLike, verdict: ArrayLike, gold_is_accurate: ArrayLike, *,
                       n_items: int, rule: str = "majority") -> np.ndarray:
    """Human correctness per item (float, NaN where the item has no non-skip rating).

    ``rule="majority"``: 1.0 when the majority verdict (:func:`majority_verdicts`) equals
    the gold, else 0.0. ``rule="individual"``: the share of the item's non-skip ratings that
    are correct. ``item`` and ``verdict`` are per rating; ``gold_is_accurate`` per item.
    For one arm's human labels pass that arm's ratings only."""
    if rule not in RULES:
        raise ValueError(f"rule: expected one of {RULES}, got {rule!r}")
    gold = np.asarray(gold_is_accurate, dtype=bool)
    if gold.shape != (n_items,):
        raise ValueError(f"gold_is_accurate: need {n_items} entries (one per item), "
                         f"got shape {gold.shape}")
    if rule == "majority":
        maj = majority_verdicts(item, verdict, n_items)
        out = ratings_correct(maj, gold).astype(float)
        out[maj == SKIPPED] = np.nan
        return out
    counts = vote_counts(item, verdict, n_items)
    n = counts.sum(axis=1)
    right = np.where(gold, counts[:, 1], counts[:, 0])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, right / np.maximum(n, 1), np.nan)
