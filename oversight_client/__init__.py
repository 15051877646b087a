"""Clients of the Oversight platform, importable without Django (standard library only).

The platform, for every study type (docs/eval-logs.md, docs/researcher.md, "API")::

    from oversight_client import Platform
    platform = Platform("https://oversight.example", token="…")  # an API token
    study = platform.create_study("partitioned", "MMLU check", classes=["A", "B", "C", "D"])
    platform.import_eval_log(study.id, "logs/…_mmlu_abc.eval")
    rows = platform.export(study.id)  # every answer, streamed

The evaluation service (issue 20; docs/evaluation-service.md)::

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
from oversight_client.http import ApiError
from oversight_client.platform import ImportJob, Member, Platform, Study

__all__ = ["ApiError", "Budget", "CompEstimate", "Estimate", "Estimates", "Evaluation",
           "EvaluationError", "Evaluator", "ImportJob", "Member", "Platform", "Study"]
