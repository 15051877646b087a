"""Asking the provider: N sampled traces per sentence (M2), one output per critique task (M3).

Made to run inside one Celery task per sentence (or per task): no database, no Django
models; the caller stores what comes back. Two kinds of failure are kept apart:
* the endpoint gives no usable answer (timeouts, 5xx, garbage bodies — retried by
  ``provider.complete``, then ``ProviderError``): raised by default, so the caller's task
  retries later and nothing half-done is stored;
* the model answers but the answer is no valid trace, or fails the format verifier: that
  sample is recorded with its reason (``SampleResult.error`` / ``.reasons``) and does not
  count — exactly as the paper drops samples failing its format verifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Literal

from assistants.aggregation import SampleResult
from assistants.prompts import (
    PromptTemplate,
    TemplateError,
    critique_fields,
    factuality_fields,
    parse_critique,
    parse_response,
    placeholders_in,
    render,
    response_fields,
)
from assistants.provider import Completion, ProviderConfig, ProviderError, complete
from assistants.traces import FactualitySentence, TraceInvalid, trace_from_text, verify

SEED_MODULUS = 2**31


def sample_seed(seed: int, index: int) -> int:
    """The seed sent with sample ``index``: (seed + index) mod 2^31."""
    return (seed + index) % SEED_MODULUS


def sample_traces(config: ProviderConfig, template: PromptTemplate,
                  sentence: FactualitySentence, n: int, seed: int, *, concurrency: int = 1,
                  on_provider_error: Literal["raise", "record"] = "raise",
                  quote_url_must_match: bool = True) -> list[SampleResult]:
    """``n`` samples of the AI rater for one sentence, in index order.

    Sample i renders ``template`` with the sentence, asks ``config``'s endpoint with seed
    ``sample_seed(seed, i)``, reads the trace from the reply (``trace_from_text``) and runs
    the format verifier; when the sentence carries given search results and the reply has
    none, the given ones become the trace's searches (what the model saw is what raters
    see). ``concurrency`` requests run at once (threads). A ProviderError is raised
    (default) or, with ``on_provider_error="record"``, stored as that sample's ``error``.
    """
    if n < 1:
        raise ValueError(f"n: {n}; at least one sample")
    if template.kind != "factuality":
        raise TemplateError([f"kind: a {template.kind} template cannot rate factuality"])
    names = set(placeholders_in(template.system) + placeholders_in(template.user))
    if sentence.searches is not None and "search_results" not in names:
        raise TemplateError(["the sentence has search results to give the model but the "
                             "template has no {{search_results}}"])
    if sentence.searches is None and "search_results" in names:
        raise TemplateError(["the template uses {{search_results}} but the sentence has no "
                             "search results: use a template where the model lists its own "
                             "searches"])
    messages = render(template, factuality_fields(sentence))

    def one(index: int) -> SampleResult:
        try:
            answer = complete(config, messages, seed=sample_seed(seed, index))
        except ProviderError as exc:
            if on_provider_error == "raise":
                raise
            return SampleResult(index=index, trace=None, error=f"provider: {exc}")
        return _trace_sample(index, answer, sentence, quote_url_must_match)

    if concurrency <= 1 or n == 1:
        return [one(i) for i in range(n)]
    with ThreadPoolExecutor(max_workers=min(concurrency, n)) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        try:
            return [f.result() for f in futures]
        except ProviderError:
            for f in futures:
                f.cancel()
            raise


def _trace_sample(index: int, answer: Completion, sentence: FactualitySentence,
                  quote_url_must_match: bool) -> SampleResult:
    meta = {"raw_text": answer.text, "model": answer.model, "latency": answer.latency,
            "usage": answer.usage}
    try:
        trace = trace_from_text(answer.text)
    except TraceInvalid as exc:
        cut = " (the reply was cut at max_tokens)" if answer.finish_reason == "length" else ""
        return SampleResult(index=index, trace=None, error=f"no valid trace: {exc}{cut}",
                            **meta)
    if sentence.searches is not None and not trace.searches:
        trace = replace(trace, searches=tuple(sentence.searches))
    reasons = verify(trace, given=sentence.searches, quote_url_must_match=quote_url_must_match)
    return SampleResult(index=index, trace=trace, reasons=reasons, **meta)


@dataclass(frozen=True)
class GeneratedOutput:
    """One AI output of a critique study: the raw text is always kept; ``final`` (0-based
    option) and ``choice`` (critiques: 1, 2, 0 = neither) are None when unparseable."""

    raw_text: str
    final: int | None
    rationale: str
    choice: int | None = None
    model: str = ""
    latency: float | None = None
    usage: dict | None = None

    @property
    def parsed(self) -> bool:
        return self.final is not None


def generate_response(config: ProviderConfig, template: PromptTemplate, question: str,
                      options: Sequence[str], *, seed: int | None = None) -> GeneratedOutput:
    """A response (level 0): reasoning and a final option. Raises ProviderError."""
    if template.kind != "response":
        raise TemplateError([f"kind: a {template.kind} template cannot write a response"])
    answer = complete(config, render(template, response_fields(question, options)), seed=seed)
    parsed = parse_response(answer.text, len(options))
    return GeneratedOutput(answer.text, parsed.final, parsed.reasoning, None, answer.model,
                           answer.latency, answer.usage)


def generate_critique(config: ProviderConfig, template: PromptTemplate, question: str,
                      options: Sequence[str], level: int, first: str, second: str,
                      chain: str = "", *, seed: int | None = None) -> GeneratedOutput:
    """A level-``level`` critique of ``first`` and ``second`` (in the order shown): choice,
    rationale and final option. Raises ProviderError."""
    if template.kind != "critique":
        raise TemplateError([f"kind: a {template.kind} template cannot write a critique"])
    fields = critique_fields(question, options, level, first, second, chain)
    answer = complete(config, render(template, fields), seed=seed)
    parsed = parse_critique(answer.text, len(options))
    return GeneratedOutput(answer.text, parsed.final, parsed.rationale, parsed.choice,
                           answer.model, answer.latency, answer.usage)
