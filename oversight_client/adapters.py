"""The evaluation service in the shapes three automated design loops consume:

* ADAS (Hu et al. 2025) reduces per-item scores to a bootstrap interval and keeps its text
  as the archive's ``fitness``: :class:`AdasFitness` returns the same text (and the numbers)
  from the service's score and interval.
* AFlow (Zhang et al. 2025) wants ``(average score, average cost, total cost)`` over its
  validation rounds: :class:`AFlowEvaluator`.
* DSPy's ``Evaluate`` runs a program over a dev set and returns a float metric (a
  percentage): :class:`ProgramEvaluator` runs any callable program over the study's items
  and scores its answers through the service.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from oversight_client.client import Evaluation, Evaluator


@dataclass(frozen=True)
class Fitness:
    """A score with its interval (fractions), and ``text`` as ADAS writes its fitness."""

    score: float
    low: float
    high: float
    evaluation: Evaluation

    @property
    def text(self) -> str:
        return (f"95% Bootstrap Confidence Interval: ({100 * self.low:.1f}%, "
                f"{100 * self.high:.1f}%), Median: {100 * self.score:.1f}%")

    def __str__(self) -> str:
        return self.text


class AdasFitness:
    """``fitness(predictions, candidate)`` → :class:`Fitness` (``str()`` is ADAS's text)."""

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator

    def __call__(self, predictions, candidate: str) -> Fitness:
        result = self.evaluator.evaluate(predictions, candidate=candidate)
        low, high = result.interval or (result.score, result.score)
        return Fitness(score=result.score, low=low, high=high, evaluation=result)


class AFlowEvaluator:
    """``evaluate(candidate, rounds)`` with ``rounds`` a sequence of (predictions, costs)
    — one per validation round, costs per item in that round — → (average score, average
    cost per round, total cost), as AFlow's ``evaluate_graph`` returns. Each round is one
    evaluation (one call of the budget)."""

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator

    def evaluate(self, candidate: str,
                 rounds: Sequence[tuple[object, Iterable[float]]]) -> tuple[float, float, float]:
        scores, costs = [], []
        for predictions, round_costs in rounds:
            scores.append(self.evaluator.evaluate(predictions, candidate=candidate).score)
            costs.append(float(sum(round_costs)))
        total = float(sum(costs))
        return float(sum(scores) / len(scores)), total / len(costs), total


class ProgramEvaluator:
    """A DSPy-style evaluator: ``ProgramEvaluator(evaluator, devset)(program)`` → the score
    as a percentage. ``devset``: (item id, inputs mapping) pairs; ``program(**inputs)``
    returns the answer, or an object whose ``answer_field`` holds it (a DSPy Prediction).
    The candidate's name is ``name`` or the program's ``__name__``/class name."""

    def __init__(self, evaluator: Evaluator, devset: Iterable[tuple[str, Mapping]],
                 answer_field: str = "answer") -> None:
        self.evaluator, self.devset, self.answer_field = evaluator, list(devset), answer_field
        self.last: Evaluation | None = None

    def __call__(self, program: Callable, name: str | None = None) -> float:
        predictions = {}
        for item, inputs in self.devset:
            out = program(**inputs)
            predictions[item] = getattr(out, self.answer_field, out)
        candidate = name or getattr(program, "__name__", type(program).__name__)
        self.last = self.evaluator.evaluate(predictions, candidate=candidate)
        return 100.0 * self.last.score
