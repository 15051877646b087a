"""Evaluators the layers above plug into audits (issue 19): the audit layer stands below
``assistants`` and never imports it, so an evaluator that needs the AI provider registers
here (``assistants.audit_evaluator.register``, called by ``AssistantsConfig.ready``).

An ``EvaluatorKind`` has two functions:

* ``check(fields) -> dict`` — at ``audit_start``, before anything is stored: the audit's
  evaluator fields (``ai_base_url``, ``ai_model``, ``ai_strategy``, ``prompt_system``,
  ``prompt_user``) checked and normalised; raises ``ImportFailed`` naming every problem
  (an endpoint the egress rules refuse, a template with an unknown placeholder …);
* ``build(audit, datapoints) -> estimators.nodata.protocol.Evaluator`` — at run time. An
  evaluator that cannot go on (the provider gave no usable answer after its retries, the
  endpoint was refused) raises ``EvaluatorUnavailable``: the audit is recorded as failed
  with the reason, never as a success. Output it cannot parse is a failed round
  (``Commitment.invalid``), never an exception and never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class EvaluatorUnavailable(Exception):
    """The evaluator cannot answer at all (the run fails, naming why)."""


@dataclass(frozen=True)
class EvaluatorKind:
    check: Callable[[dict], dict]
    build: Callable[[Any, Sequence], Any]


_KINDS: dict[str, EvaluatorKind] = {}


def evaluator_register(name: str, *, check: Callable[[dict], dict],
                       build: Callable[[Any, Sequence], Any]) -> None:
    """Register the evaluator ``name`` (an ``Audit.Evaluator`` value); again replaces it."""
    _KINDS[name] = EvaluatorKind(check, build)


def evaluator_kind(name: str) -> EvaluatorKind | None:
    return _KINDS.get(name)
