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

An item's class order (its first ``depth`` classes: several queries per item, a follow-up
only after a non-"yes" answer) is drawn under the targeted design as an **item-level
mixture**: with probability ε the whole order is the uniform design's (a uniform
permutation), otherwise the targeted component's — successive sampling from m/M over the
predicted classes (each next class ∝ m_k among the predicted ones not yet drawn), then the
unpredicted classes in uniform random order. The first class has probability π_k above;
the conditional probability of class c at step j given the prefix P = (k_0 … k_{j−1}) is

    π_j(c | P) = [ε U(P) U_j(c) + (1 − ε) T(P) T_j(c)] / [ε U(P) + (1 − ε) T(P)],

with U, T the two components' probabilities of the prefix and of c next (0 for c ∈ P):
U_j(c) = 1/(K − j); T_j(c) = m_c / m(R_j) while a predicted class remains in R_j (the
classes not in P), else 1/(K − j). Why an item-level coin: the items whose coin chose the
uniform component form an exact uniform-design sub-study (a random ε share of the items,
their whole chain uniform), so the paper's estimators and the checks that assume uniform
draws run unchanged on that "uniform part" (``Query.draw_uniform``).

``successive_orders_draw`` (successive sampling straight from π) is the library's other
sequential design, used by simulations; the uniform design keeps the draws of before, bit
for bit (``uniform_orders_draw``: K uniforms argsorted), whose conditional probabilities are
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


def mixture_orders_draw(rng: np.random.Generator, counts, epsilon: float, depth: int
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The targeted design's class orders (n, depth) for the rows of ``counts`` (n, K), and
    each item's coin (True: the uniform component). Uniform items: K uniforms argsorted;
    targeted items: an exponential race E_k / m_k over the predicted classes, then the
    others by a uniform key (``np.lexsort``)."""
    m = np.asarray(counts, dtype=float)
    eps = check_epsilon(epsilon)
    n, k = m.shape
    coin = rng.random(n) < eps
    uniform = rng.random((n, k)).argsort(axis=1)
    with np.errstate(divide="ignore"):
        race = np.where(m > 0, rng.exponential(size=(n, k)) / np.where(m > 0, m, 1.0), np.inf)
    tie = rng.random((n, k))
    targeted = np.lexsort((tie, race), axis=1)
    orders = np.where(coin[:, None], uniform, targeted)[:, :depth]
    return orders, coin


def mixture_conditional(counts, epsilon: float, prefix, candidates) -> np.ndarray:
    """π_j(c | P) of the targeted design (module docstring) for each row: ``counts`` (n, K)
    the item's m, ``prefix`` (n, j) the classes asked before (j ≥ 0), ``candidates`` (n, S)
    class indices (−1: none → 0). Returns (n, S); 0 for a candidate already in the prefix."""
    m = np.asarray(counts, dtype=float)
    eps = check_epsilon(epsilon)
    n, k = m.shape
    prefix = np.asarray(prefix, dtype=np.int64).reshape(n, -1)
    cand = np.asarray(candidates, dtype=np.int64).reshape(n, -1)
    rows = np.arange(n)[:, None]
    u_p = np.ones(n)
    t_p = np.ones(n)
    left = m.copy()  # m over the classes not yet drawn
    for i in range(prefix.shape[1]):
        ki = prefix[:, i]
        remaining_m = left.sum(axis=1)
        mk = left[np.arange(n), ki]
        u_p = u_p / (k - i)
        t_p = t_p * np.where(remaining_m > 0, mk / np.where(remaining_m > 0, remaining_m, 1.0),
                             1.0 / (k - i))
        left[np.arange(n), ki] = 0.0
    j = prefix.shape[1]
    asked = (cand[:, :, None] == prefix[:, None, :]).any(axis=2) | (cand < 0)
    safe = np.clip(cand, 0, k - 1)
    remaining_m = left.sum(axis=1)[:, None]
    t_c = np.where(remaining_m > 0, left[rows, safe] / np.where(remaining_m > 0, remaining_m,
                                                                1.0), 1.0 / (k - j))
    u_c = 1.0 / (k - j)
    num = eps * u_p[:, None] * u_c + (1 - eps) * t_p[:, None] * t_c
    den = eps * u_p + (1 - eps) * t_p
    return np.where(asked, 0.0, num / den[:, None])


def mixture_step_probabilities(counts, epsilon: float, orders) -> np.ndarray:
    """π_j(k_j | k_0 … k_{j−1}) of every step of ``orders`` (n, depth) under the targeted
    design: the probability stored with each query (``Query.draw_p``)."""
    o = np.asarray(orders, dtype=np.int64)
    return np.stack([mixture_conditional(counts, epsilon, o[:, :j], o[:, j:j + 1])[:, 0]
                     for j in range(o.shape[1])], axis=1)


__all__ = [
    "EPSILON_DEFAULT", "EPSILON_MIN", "KINDS", "TARGETED", "UNIFORM", "check_epsilon",
    "check_probabilities", "conditional_probability", "mixture_conditional",
    "mixture_orders_draw", "mixture_step_probabilities", "step_probabilities",
    "successive_orders_draw", "targeted_probabilities", "uniform_orders_draw",
]
