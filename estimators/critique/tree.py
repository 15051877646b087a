"""The chain structure of a critique study: parents, sibling groups, ancestors (arrays).

A critique of level l compares two siblings of level l − 1 (two outputs with the same
parent pair), so its ancestors at every lower level j form one pair, and that pair's
siblings — the level-j outputs with the same parent pair; for j = 0 every response of the
question's tree (the paper repeats whole trees: a level's vote uses its own tree's outputs)
— are the outputs that "share the same lower levels" (METHODS.md M3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def rows_of(ids: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Row of each queried id in ``ids`` (−1 where absent or where the query is −1)."""
    ids = np.asarray(ids, dtype=np.int64)
    query = np.asarray(query, dtype=np.int64)
    if len(ids) == 0:
        return np.full(query.shape, -1, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    pos = np.clip(np.searchsorted(ids[order], query), 0, len(ids) - 1)
    rows = order[pos]
    return np.where(ids[rows] == query, rows, -1)


@dataclass(frozen=True)
class Chains:
    """``parents``: (n, 2) rows of (parent_a, parent_b) as stored (−1 for responses).
    ``group``: sibling-group number of each output (same question and same parent pair in
    any order; the responses of one tree of a question form one group).
    ``ancestors``: (n, L, 2) rows of the output's ancestor pair at level j = 0..L−1, the
    pair ordered by output id; −1 for j ≥ the output's own level."""

    parents: np.ndarray
    group: np.ndarray
    ancestors: np.ndarray


def chains(output_id: np.ndarray, output_question: np.ndarray, level: np.ndarray,
           parent_a: np.ndarray, parent_b: np.ndarray, tree: np.ndarray | None = None) -> Chains:
    """Index the tree (assumes a checked study: parents exist, one level below, siblings).
    ``tree``: each output's tree number within its question (−1: not given, the question's
    one tree); None: one tree per question."""
    n = len(output_id)
    parents = np.stack([rows_of(output_id, parent_a), rows_of(output_id, parent_b)], axis=1)
    # Sibling key: the (unordered) parent-row pair, or (question, tree) for responses.
    lo, hi = parents.min(axis=1), parents.max(axis=1)
    tree = np.full(n, -1, dtype=np.int64) if tree is None else np.asarray(tree, np.int64)
    _, tree_code = np.unique(tree, return_inverse=True)
    n_trees = int(tree_code.max()) + 1 if n else 1
    key = np.where(level > 0, (lo + 1) * (n + 1) + (hi + 1),
                   (n + 1) ** 2 + output_question * n_trees + tree_code.reshape(-1))
    _, group = np.unique(key, return_inverse=True)
    top = int(level.max()) if n else 0
    ancestors = np.full((n, max(top, 1), 2), -1, dtype=np.int64)
    crit = level > 0
    pair = parents[crit]
    swap = output_id[pair[:, 0]] > output_id[pair[:, 1]]
    pair[swap] = pair[swap][:, ::-1]
    sorted_parents = np.full((n, 2), -1, dtype=np.int64)
    sorted_parents[crit] = pair
    ancestors[crit, level[crit] - 1] = pair
    for j in range(top - 2, -1, -1):
        deep = np.flatnonzero(level >= j + 2)
        ancestors[deep, j] = sorted_parents[ancestors[deep, j + 1, 0]]
    return Chains(parents=parents, group=group.astype(np.int64), ancestors=ancestors)
