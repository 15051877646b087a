"""Routing designs: the probabilities with which a partitioned study asks each class about an
item, and the draws of an item's class order under them (issue 28; docs/estimators.md,
"Routing designs").

A design gives every routed item a vector π over the K classes (π_k > 0, Σ π_k = 1),
independent of the item's truth:

* **uniform** (the paper's): π_k = 1/K.
* **targeted** (an ε-mixture): π_k = ε/K + (1 − ε) m_k / M, where m_k is how many of the
  routed AI systems predicted class k for the item and M = Σ m_k (an item no routed system
  predicted is asked uniformly). ε ≥ ``EPSILON_MIN`` keeps every class at probability
  ≥ ε/K, so no inverse-probability weight exceeds K/ε.

An item's class order (its first ``depth`` classes: several queries per item) is drawn by
**successive sampling**: the first class from π, each next one from π over the classes not
yet drawn, renormalised. The conditional probability of the class asked at step j is

    π_j(k_j) = π(k_j) / (1 − Σ_{i<j} π(k_i)),

and that of any class c not among k_0 … k_{j−1} is π(c) / (1 − Σ_{i<j} π(k_i)). Successive
sampling is drawn as an exponential race: with E_k ~ Exp(1) independent, the classes sorted
by E_k / π_k are in successive-sampling order (each next minimum falls on class c with
probability ∝ π_c among those left). The uniform design keeps the draws of before, bit for
bit (``uniform_orders_draw``: K uniforms argsorted), whose conditional probabilities are
1/(K − j).
"""

from __future__ import annotations

import numpy as np

UNIFORM = "uniform"
TARGETED = "targeted"
KINDS = (UNIFORM, TARGETED)
# Below this the largest weight K/ε explodes (200 at K = 10) and intervals lose coverage.
EPSILON_MIN = 0.05
EPSILON_DEFAULT = 0.2


def check_epsilon(epsilon: float) -> float:
    """ε as a float in [EPSILON_MIN, 1]; a ValueError naming the allowed range otherwise."""
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(
            f"epsilon: must be a number in [{EPSILON_MIN}, 1], got {epsilon!r}") from None
    if not EPSILON_MIN <= eps <= 1 or not np.isfinite(eps):
        raise ValueError(f"epsilon: must lie in [{EPSILON_MIN}, 1] so that every class keeps "
                         f"a probability of at least ε/K; got {epsilon!r}")
    return eps


def targeted_probabilities(counts, epsilon: float) -> np.ndarray:
    """π = ε/K + (1 − ε) m/M per row of ``counts`` (…, K): m_k = how many routed systems
    predicted class k for the item. Rows with M = 0 get the uniform 1/K."""
    m = np.asarray(counts, dtype=float)
    if m.ndim < 1 or m.shape[-1] < 2:
        raise ValueError("counts: need one column per class (K ≥ 2)")
    if (m < 0).any():
        raise ValueError("counts: must be non-negative")
    eps = check_epsilon(epsilon)
    k = m.shape[-1]
    total = m.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, m / np.where(total > 0, total, 1.0), 1.0 / k)
    return eps / k + (1 - eps) * share


def check_probabilities(pi) -> np.ndarray:
    """π as a float array (…, K) whose rows are positive and sum to 1 (within 1e-9); a
    ValueError naming the first bad row otherwise (a class of probability 0 could never be
    asked, and its weight would be infinite)."""
    p = np.asarray(pi, dtype=float)
    if p.ndim < 1 or p.shape[-1] < 2:
        raise ValueError("probabilities: need one column per class (K ≥ 2)")
    flat = p.reshape(-1, p.shape[-1])
    bad = ~np.isfinite(flat).all(axis=1) | (flat <= 0).any(axis=1) | (
        np.abs(flat.sum(axis=1) - 1) > 1e-9)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f"probabilities: row {row} must be positive for every class and sum "
                         f"to 1, got {flat[row].tolist()}")
    return p


def uniform_orders_draw(rng: np.random.Generator, n: int, k: int, depth: int) -> np.ndarray:
    """The uniform design's class orders (n, depth): K uniforms per item, argsorted — the
    draws the platform always made (paper 000's routing)."""
    return rng.random((n, k)).argsort(axis=1)[:, :depth]


def successive_orders_draw(rng: np.random.Generator, pi, depth: int) -> np.ndarray:
    """Class orders (n, depth) by successive sampling from the rows of ``pi`` (n, K): an
    exponential race, classes sorted by E_k / π_k."""
    p = check_probabilities(pi)
    if p.ndim != 2:
        raise ValueError("pi: need a 2-d array (items × classes)")
    race = rng.exponential(size=p.shape) / p
    return race.argsort(axis=1)[:, :depth]


def step_probabilities(pi, orders) -> np.ndarray:
    """π_j(k_j) = π(k_j) / (1 − Σ_{i<j} π(k_i)) for every step j of ``orders`` (n, depth)
    under the rows of ``pi`` (n, K): the conditional probability of the class asked at step
    j given the classes asked before it."""
    p = np.asarray(pi, dtype=float)
    o = np.asarray(orders, dtype=np.int64)
    drawn = np.take_along_axis(p, o, axis=1)
    before = np.cumsum(drawn, axis=1) - drawn
    return drawn / (1 - before)


def conditional_probability(pi, asked_before, c) -> np.ndarray:
    """The probability the design gave class ``c`` at the step after the classes
    ``asked_before``: π(c) / (1 − Σ_{i ∈ asked_before} π(i)), 0 if c was already asked.
    ``pi``: (K,) one item's design; ``asked_before``: a sequence of class indices; ``c``:
    a class index or an array of them."""
    p = np.asarray(pi, dtype=float)
    before = np.asarray(list(asked_before), dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    rest = 1 - p[before].sum() if before.size else 1.0
    out = p[c] / rest
    if before.size:
        out = np.where(np.isin(c, before), 0.0, out)
    return out


__all__ = [
    "EPSILON_DEFAULT", "EPSILON_MIN", "KINDS", "TARGETED", "UNIFORM", "check_epsilon",
    "check_probabilities", "conditional_probability", "step_probabilities",
    "successive_orders_draw", "targeted_probabilities", "uniform_orders_draw",
]
