"""The AI rater's trace (METHODS M2): schema, parser, JSONL reader and the format verifier.

A trace holds the target sentence's claims, the search queries with their results (title,
URL, snippet), numbered evidence quotes with URLs, per-claim reasoning citing evidence, and
per-claim and overall verdicts. As JSON (one trace)::

    {"claims": [{"text": "…", "reasoning": "… [1]", "evidence_ids": [1],
                 "verdict": "Accurate"}],
     "searches": [{"query": "…", "results": [{"title": "…", "url": "https://…",
                                              "snippet": "…"}]}],
     "evidence": [{"id": 1, "url": "https://…", "title": "…", "quote": "…"}],
     "verdict": "Accurate", "reasoning": "…"}

Verdicts are the five-way scale, written as the label ("Doesn't require attribution") or
the code ("no_attribution"), any case. ``parse_trace`` checks types and sizes and names the
field path of the first problem (``evidence[2].url``); what the trace *says* (citations,
quotes) is the verifier's business: ``verify`` returns the reasons a trace fails.

Modules: ``schema`` (dataclasses, verdicts, parser), ``verifier``, ``files`` (JSONL); the
public names are re-exported here. Nothing here touches the database; ``read_trace_file``
reuses the shared file reader (``annotations.core.services.records.read_records``: UTF-8, JSON
depth ≤ 64, no NUL).
"""

from assistants.traces.files import RECORD_KEYS, TraceRecord, read_trace_file
from assistants.traces.schema import (
    ACCURATE,
    MAX_CLAIMS,
    MAX_EVIDENCE,
    MAX_RESULTS_PER_SEARCH,
    MAX_SEARCHES,
    MAX_TEXT,
    MAX_URL,
    VERDICT_LABELS,
    VERDICTS,
    Claim,
    Evidence,
    FactualitySentence,
    Search,
    SearchResult,
    Trace,
    TraceInvalid,
    is_accurate,
    parse_trace,
    parse_verdict,
    trace_from_text,
)
from assistants.traces.verifier import cited_ids, normalise, verify

__all__ = [
    "ACCURATE", "MAX_CLAIMS", "MAX_EVIDENCE", "MAX_RESULTS_PER_SEARCH", "MAX_SEARCHES",
    "MAX_TEXT", "MAX_URL", "RECORD_KEYS", "VERDICTS", "VERDICT_LABELS", "Claim", "Evidence",
    "FactualitySentence", "Search", "SearchResult", "Trace", "TraceInvalid", "TraceRecord",
    "cited_ids", "is_accurate", "normalise", "parse_trace", "parse_verdict",
    "read_trace_file", "trace_from_text", "verify",
]
