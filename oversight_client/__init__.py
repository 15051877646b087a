"""Client of the Oversight evaluation service (issue 20; docs/evaluation-service.md),
importable without Django (standard library only)::

    from oversight_client import Evaluator
    ev = Evaluator("https://oversight.example", study_id=3, token="ev_…")
    result = ev.evaluate({"q17": "Paris", "q18": "Lyon"}, candidate="cot-v3")
    result.score, result.interval, result.budget.left

Adapters for the loops' own shapes are in :mod:`oversight_client.adapters`."""

from oversight_client.client import (
    Budget,
    CompEstimate,
    Estimate,
    Estimates,
    Evaluation,
    EvaluationError,
    Evaluator,
)

__all__ = ["Budget", "CompEstimate", "Estimate", "Estimates", "Evaluation", "EvaluationError",
           "Evaluator"]
