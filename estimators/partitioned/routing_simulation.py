"""Simulated partitioned studies under a routing design, with known truth (issue 28): the
input of :func:`estimators.partitioned.design_estimate.design_estimate` for a stack of R
replicate studies, drawn at once.

A study: N items, each of true class y uniform over K; S AI systems, system s right with
probability A_s independently per item (the **superpopulation** accuracy: the truth every
coverage figure is measured against, since the estimate's SE includes the item-to-item
variation of c). A wrong system picks

* ``agree=True``: the item's common wrong class (one per item, uniform over the K − 1 wrong
  ones) with probability ``share``, else a wrong class of its own — errors shared, so a
  targeted design that follows the majority asks the shared wrong class often;
* ``agree=False``: a wrong class of its own (uniform), independently.

A system may have no prediction (probability ``missing``; it then counts as wrong, so its
truth is A_s(1 − missing)). The design: ``"uniform"`` (π_k = 1/K), or ``"targeted"``: π_k =
ε/K + (1 − ε)·m_k/M over the systems in ``routed`` (default: all); a system outside it is a
**newcomer**, added after the answers. Class orders are drawn by successive sampling
(:mod:`estimators.partitioned.designs`); specialists are truthful; each answered step is
"unsure" with probability ``unsure`` (then the item's next step is asked, as after a "no").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimators.partitioned.design_estimate import NO, UNSURE, YES, DesignSteps, design_steps
from estimators.partitioned.designs import TARGETED, UNIFORM, check_epsilon, targeted_probabilities


@dataclass(frozen=True)
class RoutingStudy:
    """R simulated studies: ``steps`` (stack shape (R,)), the superpopulation accuracies
    ``truth`` (S,) and each study's finite-population accuracy ``sample_accuracy`` (R, S);
    ``items`` holds the raw draws (``truth_class`` (R, N), ``predictions`` (R, N, S),
    ``pi`` (R, N, K), ``orders`` and ``answers`` (R, N, depth)) for other estimators."""

    steps: DesignSteps
    truth: np.ndarray
    sample_accuracy: np.ndarray
    items: dict


def draw_predictions(rng: np.random.Generator, reps: int, n_items: int, k: int,
                     accuracies, agree: bool = True, share: float = 0.7,
                     missing: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(true classes (R, N), predictions (R, N, S), −1 for none) — module docstring."""
    a = np.asarray(accuracies, dtype=float)
    s = a.size
    y = rng.integers(k, size=(reps, n_items))
    correct = rng.random((reps, n_items, s)) < a
    own_wrong = (y[..., None] + 1 + rng.integers(k - 1, size=(reps, n_items, s))) % k
    if agree:
        common = (y + 1 + rng.integers(k - 1, size=(reps, n_items))) % k
        wrong = np.where(rng.random((reps, n_items, s)) < share, common[..., None], own_wrong)
    else:
        wrong = own_wrong
    pred = np.where(correct, y[..., None], wrong)
    if missing > 0:
        pred = np.where(rng.random(pred.shape) < missing, -1, pred)
    return y, pred


def design_pi(predictions, k: int, design: str = UNIFORM, epsilon: float = 0.2,
              routed=None) -> np.ndarray:
    """π (..., N, K) of each item: uniform, or targeted on the ``routed`` systems' picks."""
    pred = np.asarray(predictions)
    if design == UNIFORM:
        return np.full((*pred.shape[:-1], k), 1.0 / k)
    if design != TARGETED:
        raise ValueError(f"design: unknown '{design}' (uniform or targeted)")
    chosen = pred if routed is None else pred[..., list(routed)]
    counts = (chosen[..., None] == np.arange(k)).sum(axis=-2)
    return targeted_probabilities(counts, check_epsilon(epsilon))


def draw_orders(rng: np.random.Generator, pi, depth: int) -> np.ndarray:
    """Class orders (..., N, depth) by successive sampling from π (an exponential race)."""
    p = np.asarray(pi, dtype=float)
    race = rng.exponential(size=p.shape) / p
    return np.argsort(race, axis=-1)[..., :depth]


def draw_answers(rng: np.random.Generator, truth_class, orders, unsure: float = 0.0
                 ) -> np.ndarray:
    """Truthful answers (..., N, depth): YES where the class asked is the truth, NO
    otherwise, UNSURE with probability ``unsure``; −1 after a yes (no follow-up)."""
    hit = orders == np.asarray(truth_class)[..., None]
    doubt = rng.random(orders.shape) < unsure if unsure > 0 else np.zeros(orders.shape, bool)
    said_yes = hit & ~doubt
    reached = (np.cumsum(said_yes, axis=-1) - said_yes) == 0
    code = np.where(doubt, UNSURE, np.where(hit, YES, NO))
    return np.where(reached, code, -1)


def simulate(rng: np.random.Generator, reps: int, n_items: int, k: int, accuracies,
             agree: bool = True, design: str = UNIFORM, epsilon: float = 0.2,
             routed=None, depth: int = 1, unsure: float = 0.0, share: float = 0.7,
             missing: float = 0.0, evaluate=None) -> RoutingStudy:
    """R studies (module docstring); ``routed``: indices of the systems the targeted design
    follows (default all); ``evaluate``: the systems whose steps are built (default all;
    ``truth`` and ``sample_accuracy`` follow them)."""
    if not 1 <= depth <= k:
        raise ValueError(f"depth: must lie in 1..K={k}, got {depth}")
    y, pred = draw_predictions(rng, reps, n_items, k, accuracies, agree, share, missing)
    pi = design_pi(pred, k, design, epsilon, routed)
    orders = draw_orders(rng, pi, depth)
    answers = draw_answers(rng, y, orders, unsure)
    if evaluate is not None:
        pred = pred[..., list(evaluate)]
    steps = design_steps(orders, pi, answers, pred, depth)
    truth = np.asarray(accuracies, dtype=float) * (1 - missing)
    if evaluate is not None:
        truth = truth[list(evaluate)]
    return RoutingStudy(steps=steps, truth=truth,
                        sample_accuracy=(pred == y[..., None]).mean(axis=1),
                        items={"truth_class": y, "predictions": pred, "pi": pi,
                               "orders": orders, "answers": answers})


__all__ = ["RoutingStudy", "design_pi", "draw_answers", "draw_orders", "draw_predictions",
           "simulate"]
