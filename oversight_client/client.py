"""The evaluation client: one call per evaluation, retries with exponential backoff on 429
(throttled) and 5xx answers and on connection errors (``oversight_client.http``), typed
results."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from oversight_client.http import ApiError, Transport


@dataclass(frozen=True)
class Estimate:
    """One estimator's figures (None where the service gives none)."""

    accuracy: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    bound: float | None = None
    weight: float | None = None


@dataclass(frozen=True)
class CompEstimate:
    """The complementary estimate: ``raw`` (unbiased, may leave [0, 1]) and ``clipped``."""

    raw: float | None
    clipped: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    bound: float | None


@dataclass(frozen=True)
class Estimates:
    n_o: float
    n_c: float
    q_hat: float | None
    comp: CompEstimate | None
    ivw: Estimate | None
    ml: Estimate | None
    confidence: float
    interval_method: str


@dataclass(frozen=True)
class Budget:
    daily: int
    used: int
    left: int


@dataclass(frozen=True)
class Evaluation:
    """A 201 answer. ``estimates`` is None when the token's Ladder is on (then ``score`` is
    the Ladder's released value and ``improved`` says whether it moved)."""

    candidate: str
    kind: str
    score: float
    items_submitted: int
    items_used: int
    items_not_evaluated: int
    estimates: Estimates | None
    ladder_margin: float | None
    improved: bool | None
    budget: Budget
    raw: dict

    @property
    def interval(self) -> tuple[float, float] | None:
        """The ML estimate's interval; with the Ladder on, ± half the margin (the rounding
        of the released score: no interval is released)."""
        if self.estimates is not None and self.estimates.ml is not None:
            return (self.estimates.ml.ci_low, self.estimates.ml.ci_high)
        if self.ladder_margin is not None:
            half = self.ladder_margin / 2
            return (max(0.0, self.score - half), min(1.0, self.score + half))
        return None

    @classmethod
    def from_json(cls, data: dict) -> Evaluation:
        est = data.get("estimates")
        estimates = None
        if est is not None:
            def cell(c, kind=Estimate):
                if c is None:
                    return None
                names = kind.__dataclass_fields__
                return kind(**{n: c.get(n) for n in names})
            estimates = Estimates(n_o=est["n_o"], n_c=est["n_c"], q_hat=est["q_hat"],
                                  comp=cell(est["comp"], CompEstimate), ivw=cell(est["ivw"]),
                                  ml=cell(est["ml"]), confidence=est["confidence"],
                                  interval_method=est["interval_method"])
        ladder = data.get("ladder") or {}
        return cls(candidate=data["candidate"], kind=data["kind"], score=data["score"],
                   items_submitted=data["items_submitted"], items_used=data["items_used"],
                   items_not_evaluated=data["items_not_evaluated"], estimates=estimates,
                   ladder_margin=ladder.get("margin"), improved=ladder.get("improved"),
                   budget=Budget(**data["budget"]), raw=data)


class EvaluationError(ApiError):
    """A refused evaluation: ``status`` (HTTP), ``code`` (machine-readable), ``detail`` and
    ``errors`` (the offending entries of the request)."""


def entries(predictions) -> list[dict]:
    """The request's entries from a mapping item id → prediction (text: the option's text;
    int: the option's 0-based index; None: no answer), from (item, prediction) pairs, or
    from entries already shaped ``{"item", "prediction" | "index"}``."""
    pairs: Iterable = predictions.items() if isinstance(predictions, Mapping) else predictions
    out = []
    for entry in pairs:
        if isinstance(entry, Mapping):
            out.append(dict(entry))
            continue
        item, value = entry
        if isinstance(value, int) and not isinstance(value, bool):
            out.append({"item": str(item), "index": value})
        else:
            out.append({"item": str(item), "prediction": value})
    return out


class Evaluator:
    """Evaluations of study ``study_id`` at ``base_url`` with an evaluation ``token``.

    Retries (``retries`` times at most) on 429 throttling, 5xx and connection errors,
    waiting ``backoff`` · 2^attempt seconds (capped by ``max_backoff``; a ``Retry-After``
    header wins when shorter than the cap) — :mod:`oversight_client.http`, as every call of
    the client. A spent budget or final report is not retried."""

    def __init__(self, base_url: str, study_id: int, token: str, *, timeout: float = 60.0,
                 retries: int = 5, backoff: float = 0.5, max_backoff: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.base_url = base_url.rstrip("/")
        self.study_id, self.token = study_id, token
        self.http = Transport(self.base_url, {"Authorization": f"Evaluation {token}"},
                              timeout=timeout, retries=retries, backoff=backoff,
                              max_backoff=max_backoff, sleep=sleep, error=EvaluationError)

    def evaluate(self, predictions, candidate: str) -> Evaluation:
        """Score ``candidate``'s ``predictions`` (see :func:`entries`) on the study's labels."""
        return self._post("evaluations/", candidate, predictions)

    def final_report(self, predictions, candidate: str) -> Evaluation:
        """The chosen candidate's one final report, on the holdout."""
        return self._post("evaluations/final/", candidate, predictions)

    def _post(self, path: str, candidate: str, predictions) -> Evaluation:
        body = {"candidate": candidate, "predictions": entries(predictions)}
        return Evaluation.from_json(self.http.json(
            "POST", f"api/studies/{self.study_id}/{path}", body))
