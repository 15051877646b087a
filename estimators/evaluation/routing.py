"""Which candidates a targeted routing design helps the evaluation service score
(docs/evaluation-service.md, "Routing designs"): the design-weighted estimate's standard
error of candidates that agree with the routed AI systems and of candidates that do not, at
the same answer count, under the uniform and the targeted design.

A study: N items of true class y uniform over K, one truthful answer each (depth 1); two
routed systems right with probabilities ``routed`` (errors shared with probability 0.7,
``routing_simulation.draw_predictions``); the targeted design π_k = ε/K + (1 − ε) m_k/M
follows their picks. The candidates (never routed), each right with probability ``a``:

* **routed**: a candidate equal to the second routed system (right with ``routed[1]``);
* **independent**: right with probability a independently of the routed systems, a wrong
  pick uniform over the other classes;
* **disagreeing**: right with probability a; a wrong pick is a class no routed system
  picked (when one is left) — its errors are never what the design asks about;
* **contrarian**: always a class no routed system picked (when one is left): the true
  class with probability a where the routed systems missed it — its picks are asked
  with probability ε/K (targeted items never ask an unpicked class at depth 1).

A candidate's pick is asked with probability π(pick): often where it agrees with a routed
system, ε/K where it does not. Its estimate's "yes on my pick" part
(x = 1{k = ŷ, yes}/π(ŷ)) rests on the items where ŷ was asked; where it rarely is, the
estimate rests on the control variates' "yes elsewhere" part (a "yes" on another class
tells that ŷ was wrong), whose weights 1/π(k) are large for the unrouted classes, so its
variance grows. Run ``python -m estimators.evaluation.routing`` (seconds)."""

from __future__ import annotations

import numpy as np

from estimators.partitioned.design_estimate import design_estimate, design_steps
from estimators.partitioned.routing_simulation import (
    design_pi,
    draw_answers,
    draw_orders,
    draw_predictions,
)

CANDIDATES = ("routed", "independent", "disagreeing", "contrarian")


def candidates_draw(rng: np.random.Generator, y, routed_pred, k: int, a: float) -> np.ndarray:
    """(R, N, 4) picks of the candidates of the module docstring."""
    reps, n = y.shape
    right = rng.random((reps, n, 2)) < a
    other = (y[..., None] + 1 + rng.integers(k - 1, size=(reps, n, 2))) % k
    independent = np.where(right[..., 0], y, other[..., 0])
    picked = (routed_pred[..., None] == np.arange(k)).any(axis=-2)  # (R, N, K)
    free = ~picked & (np.arange(k) != y[..., None])
    # a random free class (a uniform key, the picked and the true class last)
    key = np.where(free, rng.random((reps, n, k)), 2.0)
    unpicked = np.where(free.any(axis=-1), key.argmin(axis=-1), other[..., 1])
    disagreeing = np.where(right[..., 1], y, unpicked)
    y_free = ~picked[np.arange(reps)[:, None], np.arange(n)[None, :], y]
    contrarian = np.where(y_free & right[..., 1], y, unpicked)
    return np.stack([routed_pred[..., 1], independent, disagreeing, contrarian], axis=-1)


def candidate_errors(rng: np.random.Generator, *, reps: int = 300, n_items: int = 1000,
                     k: int = 5, epsilon: float = 0.2, routed=(0.85, 0.7), a: float = 0.7
                     ) -> dict[str, dict[str, np.ndarray]]:
    """Per design ("uniform", "targeted"): the candidates' (4,) mean estimated SE, the sd
    of Â − their accuracy on the items over ``reps`` studies, the mean of that error (the
    bias), the share of items where the pick was asked and the mean π(pick)."""
    y, routed_pred = draw_predictions(rng, reps, n_items, k, routed)
    picks = candidates_draw(rng, y, routed_pred, k, a)
    truth = (picks == y[..., None]).mean(axis=1)  # (R, 4)
    out = {}
    for design in ("uniform", "targeted"):
        pi = design_pi(routed_pred, k, design, epsilon)
        orders = draw_orders(rng, pi, 1)
        answers = draw_answers(rng, y, orders)
        est = design_estimate(design_steps(orders, pi, answers, picks, 1))
        err = np.asarray(est.accuracy) - truth
        p_pick = np.take_along_axis(pi, picks, axis=-1)  # (R, N, 4)
        out[design] = {"se": np.asarray(est.se).mean(axis=0), "sd": err.std(axis=0, ddof=1),
                       "bias": err.mean(axis=0), "asked": (orders == picks).mean(axis=(0, 1)),
                       "pi": p_pick.mean(axis=(0, 1)), "accuracy": truth.mean(axis=0)}
    return out


def markdown(found: dict, n_items: int, reps: int) -> str:
    """The docs' table: per candidate its accuracy, how often its pick was asked, the
    released SE (it includes the items' own variation, √(a(1 − a)/N)) and the sd of the
    error against its accuracy on the items (what decides a comparison of candidates on
    the same items), uniform and targeted, and the answers a uniform design would need for
    the targeted sd."""
    lines = [f"| candidate (N = {n_items} answers, {reps} studies) | accuracy | pick asked, "
             "uniform / targeted | SE uniform / targeted | sd of the error, uniform / "
             "targeted | uniform answers for the targeted sd |",
             "|---|---|---|---|---|---|"]
    u, t = found["uniform"], found["targeted"]
    for j, name in enumerate(CANDIDATES):
        need = n_items * (u["sd"][j] / t["sd"][j]) ** 2
        lines.append(f"| {name} | {t['accuracy'][j]:.3f} | {u['asked'][j]:.2f} / "
                     f"{t['asked'][j]:.2f} | {u['se'][j]:.4f} / {t['se'][j]:.4f} | "
                     f"{u['sd'][j]:.4f} / {t['sd'][j]:.4f} | {need:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the docs' table
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    found = candidate_errors(np.random.default_rng(args.seed), reps=args.reps,
                             n_items=args.items)
    print(markdown(found, args.items, args.reps))
