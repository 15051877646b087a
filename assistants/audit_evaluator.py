"""An AI system as the evaluator of an audit (issue 19; docs/audit.md "An AI system as the
evaluator"): each round it is asked, through the OpenAI-compatible provider
(``assistants.provider.complete``, under the egress rules of ``assistants.egress``), for a
label and a similar datapoint x′, with one of two strategies:

* **pick** (the strategy that worked for LLMs in the paper): the prompt lists ``CANDIDATES``
  datapoints of the audited data set (drawn uniformly from the others, never x itself, with
  the evaluator's seeded Generator) and the model answers ``{"label": 0 or 1, "similar":
  <the candidate's number>}``;
* **generate**: the model writes x′ itself: ``{"label": 0 or 1, "similar": <x′>}``.

Prompt templates are researchers' (``Audit.prompt_system`` / ``prompt_user``; empty: the
defaults below), with the placeholders of the ``audit_pick`` / ``audit_generate`` kinds
(``assistants.prompts.templates``); they are checked when the audit starts.

**Parsing is fixed, never guessed.** The reply (optionally inside one ```json fence) must be
exactly one JSON object with ``label`` the integer 0 or 1 and ``similar`` a candidate number
(pick) or any JSON value but null (generate). Anything else — text around the object, a
label "yes", a number outside the list, x′ equal to x — is an unusable commitment: that
round fails with the reason "unparseable output: …" and the first 200 characters of the
reply. **A provider that gives no usable answer** (a timeout, a connection error, a 5xx, a
body that is not a chat completion) is retried by ``complete`` (``OVERSIGHT_AI_MAX_RETRIES``,
with backoff) and then ends the audit as failed (``EvaluatorUnavailable``: the endpoint, the
model, the last error and the attempts), never as a success; so does an endpoint the egress
rules refuse. The site's API key goes only to the site's endpoint (``config_from_settings``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from annotations.audit.services.evaluators import EvaluatorUnavailable, evaluator_register
from annotations.core.errors import DomainError, ImportFailed
from assistants.prompts.templates import PromptTemplate, TemplateError, render, validate_template
from estimators.nodata.protocol import Commitment

CANDIDATES = 20  # datapoints listed per round for the pick strategy
SHOWN_MAX = 4000  # characters of one datapoint put in a prompt
REPLY_SHOWN = 200  # characters of an unparseable reply kept in the round's reason

DEFAULT_SYSTEM = (
    "You are an evaluator. You label datapoints 0 or 1 and you show why by offering a "
    "datapoint that is similar to the one you labelled: one for which every criterion of the "
    "rubric comes out the same. Answer with a single JSON object, nothing else.")

DEFAULT_PICK = """\
Rubric (the reasons for a label):
{{rubric}}

Datapoint:
{{datapoint}}

Round {{round}}. Label the datapoint (0 or 1), and pick from the numbered datapoints below \
the one most similar to it: the one for which every criterion of the rubric gives the same \
answer as for the datapoint.

{{candidates}}

Answer with this JSON object only: {"label": <0 or 1>, "similar": <the number you pick>}"""

DEFAULT_GENERATE = """\
Rubric (the reasons for a label):
{{rubric}}

Datapoint:
{{datapoint}}

Round {{round}}. Label the datapoint (0 or 1), and write a new datapoint, different from it, \
for which every criterion of the rubric gives the same answer as for the datapoint.

Answer with this JSON object only: {"label": <0 or 1>, "similar": <your new datapoint>}"""

DEFAULTS = {"pick": DEFAULT_PICK, "generate": DEFAULT_GENERATE}
STRATEGIES = ("pick", "generate")
_FENCE = re.compile(r"\A```(?:json)?\s*\n?(.*?)\n?```\Z", re.DOTALL)


def template_of(strategy: str, system: str, user: str) -> PromptTemplate:
    """The prompt an audit uses: the researcher's, else the default of its strategy."""
    return PromptTemplate(kind=f"audit_{strategy}", user=user.strip() or DEFAULTS[strategy],
                          system=system if system.strip() else DEFAULT_SYSTEM)


def shown(x: Any) -> str:
    """A datapoint as the model reads it: a text as it is, anything else as JSON."""
    text = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX] + " …"


def parse_commitment(text: str, *, strategy: str, n_candidates: int = 0
                     ) -> tuple[int, Any] | str:
    """(label, similar) — for pick, ``similar`` is the candidate's 1-based number — or the
    reason the reply is unusable (module docstring: fixed rules, never guessed)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except ValueError:
        return "not one JSON object"
    if not isinstance(value, dict):
        return "not one JSON object"
    extra = sorted(set(value) - {"label", "similar"})
    if extra:
        return f"unknown field {extra[0]!r}"
    label = value.get("label")
    if isinstance(label, bool) or label not in (0, 1):
        return f"label must be the integer 0 or 1, got {label!r}"
    similar = value.get("similar")
    if similar is None:
        return "similar: missing"
    numbered = isinstance(similar, int) and not isinstance(similar, bool) \
        and 1 <= similar <= n_candidates
    if strategy == "pick" and not numbered:
        return f"similar must be a number from 1 to {n_candidates}, got {similar!r}"
    return int(label), similar


@dataclass
class ProviderEvaluator:
    """``estimators.nodata.protocol.Evaluator`` through the provider (module docstring)."""

    config: Any  # assistants.provider.ProviderConfig
    template: PromptTemplate
    strategy: str
    rubric_text: str
    pool: Sequence[tuple[Hashable, Any]] = ()
    policy: Any = None  # assistants.egress.EgressPolicy (default: the settings')
    _by_item: dict = field(default_factory=dict, init=False, repr=False)

    def prepare(self, items: Sequence[tuple[Hashable, Any]]) -> None:
        if not self.pool:
            self.pool = list(items)

    def _candidates(self, item: Hashable, rng: np.random.Generator) -> list[Any]:
        others = [x for it, x in self.pool if it != item]
        if not others:
            return []
        k = min(CANDIDATES, len(others))
        return [others[int(i)] for i in rng.choice(len(others), size=k, replace=False)]

    def commit(self, item: Hashable, x: Any, round_index: int,
               rng: np.random.Generator) -> Commitment:
        from assistants.provider import ProviderError, complete

        fields = {"datapoint": shown(x), "round": str(round_index), "rubric": self.rubric_text}
        candidates: list[Any] = []
        if self.strategy == "pick":
            candidates = self._candidates(item, rng)
            if not candidates:
                return Commitment.invalid("no other datapoint to pick from")
            fields["candidates"] = "\n".join(f"{i}. {shown(c)}"
                                             for i, c in enumerate(candidates, start=1))
        seed = int(rng.integers(2**31 - 1))
        try:
            reply = complete(self.config, render(self.template, fields), seed=seed,
                             policy=self.policy)
        except ProviderError as exc:
            raise EvaluatorUnavailable(f"the AI provider: {exc}") from None
        parsed = parse_commitment(reply.text, strategy=self.strategy,
                                  n_candidates=len(candidates))
        if isinstance(parsed, str):
            return Commitment.invalid(f"unparseable output ({parsed}): "
                                      f"{reply.text[:REPLY_SHOWN]!r}")
        label, similar = parsed
        if self.strategy == "pick":
            similar = candidates[similar - 1]
        elif similar == x:
            return Commitment.invalid("unparseable output (x′ is the datapoint itself): "
                                      f"{reply.text[:REPLY_SHOWN]!r}")
        return Commitment(label, similar)


# ----------------------------------------------------------- registration with audits


def check(fields: dict) -> dict:
    """The evaluator fields of an audit about to start (``audit.services.evaluators``):
    the strategy, the endpoint (egress rules), the prompt templates. ImportFailed naming
    every problem."""
    from assistants.endpoints import ai_endpoint_check

    problems = []
    strategy = fields.get("ai_strategy") or "pick"
    if strategy not in STRATEGIES:
        problems.append(f"ai_strategy: one of {', '.join(STRATEGIES)}, got {strategy!r}")
        strategy = "pick"
    base_url = (fields.get("ai_base_url") or "").strip()
    try:
        ai_endpoint_check(base_url)
    except DomainError as exc:
        problems.append(exc.message)
    try:
        validate_template(template_of(strategy, fields.get("prompt_system") or "",
                                      fields.get("prompt_user") or ""))
    except TemplateError as exc:
        problems += [f"prompt: {p}" for p in exc.problems]
    if problems:
        raise ImportFailed(problems)
    return {"ai_strategy": strategy, "ai_base_url": base_url,
            "ai_model": (fields.get("ai_model") or "").strip(),
            "prompt_system": fields.get("prompt_system") or "",
            "prompt_user": fields.get("prompt_user") or ""}


def build(audit, datapoints: Sequence) -> ProviderEvaluator:
    """The evaluator of a stored audit (its endpoint, model, strategy and templates)."""
    from annotations.audit.services.rubrics import core_rubric
    from assistants.provider import config_from_settings

    rubric = core_rubric(audit.rubric_snapshot)
    return ProviderEvaluator(
        config=config_from_settings(base_url=audit.ai_base_url, model=audit.ai_model),
        template=template_of(audit.ai_strategy, audit.prompt_system, audit.prompt_user),
        strategy=audit.ai_strategy,
        rubric_text="\n".join(f"- {c.name}: {c.description}" for c in rubric.criteria),
        pool=[(d.item, d.x) for d in datapoints])


def register() -> None:
    evaluator_register("ai", check=check, build=build)
