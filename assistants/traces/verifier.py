"""The format verifier of METHODS M2 (paper 001, A.2.2): why a trace does not count."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from assistants.traces.schema import Search, Trace, short

_RANGE = r"\d+(?:\s*[-\u2013]\s*\d+)?"  # 3, 1-2 or 1–2 (en dash)
_MARKER = re.compile(rf"\[\s*({_RANGE}(?:\s*,\s*{_RANGE})*)\s*\]")
_PART = re.compile(r"(\d+)(?:\s*[-\u2013]\s*(\d+))?")


def cited_ids(text: str, known: set[int] | frozenset[int] | None = None) -> set[int]:
    """Evidence numbers cited in a text as ``[1]``, ``[1, 3]`` or a range ``[1-3]``
    (``[1–3]``). With ``known`` (the trace's evidence ids) only those count: a bracketed
    number that is not an evidence id (``data from [2019]``) is text, not a citation. A
    range cites the known ids it spans (every number from its ends, when ``known`` is None
    and it spans at most 100)."""
    found: set[int] = set()
    for group in _MARKER.findall(text):
        for m in _PART.finditer(group):
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) else lo
            if lo > hi:
                continue
            if known is not None:
                found |= {k for k in known if lo <= k <= hi}
            elif hi - lo <= 100:
                found |= set(range(lo, hi + 1))
    return found if known is None else found & set(known)


def normalise(text: str) -> str:
    """What "verbatim" compares: Unicode NFC, every run of whitespace as one space, trimmed.
    Case, punctuation and wording must match exactly."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def verify(trace: Trace, *, given: Sequence[Search] | None = None,
           quote_url_must_match: bool = True) -> tuple[str, ...]:
    """The format verifier (METHODS M2; paper 001 A.2.2): the reasons a trace fails, in
    field order, empty when it passes.

    A claim's citations are its ``evidence_ids`` plus the markers in its reasoning that
    name evidence ids (``[n]``, ``[n, m]``, a range ``[n-m]``; a bracketed number that is no
    evidence id, such as a year, is text: :func:`cited_ids`).
    1. every claim cites ≥ 1 evidence item, and ``evidence_ids`` lists only ids that exist;
    2. every evidence item is cited somewhere (a claim, or the overall reasoning's markers);
       evidence ids are unique;
    3. every quote appears verbatim (``normalise``) in a snippet of the search results —
       with ``quote_url_must_match`` (default, stricter than the paper) in a snippet of a
       result with the evidence's own URL, so the link shown beside a quote is its source;
    4. with ``given`` (results the platform gave the model), quotes are checked against
       those, and every result in the trace must be one of them (same URL and snippet): a
       model cannot invent a page to quote from.
    """
    reasons: list[str] = []
    ids = [e.id for e in trace.evidence]
    known = set(ids)
    first_at: dict[int, int] = {}
    for i, item_id in enumerate(ids):
        if item_id in first_at:
            reasons.append(f"evidence[{i}].id: {item_id} repeats evidence[{first_at[item_id]}]")
        else:
            first_at[item_id] = i
    cited: set[int] = set()
    for i, claim in enumerate(trace.claims):
        cites = set(claim.evidence_ids) | cited_ids(claim.reasoning, known)
        if not cites:
            reasons.append(f"claims[{i}]: cites no evidence")
        for missing in sorted(cites - known):
            reasons.append(f"claims[{i}]: cites evidence {missing}, which does not exist")
        cited |= cites
    cited |= cited_ids(trace.reasoning, known)
    for i, item in enumerate(trace.evidence):
        if item.id not in cited and first_at.get(item.id) == i:
            reasons.append(f"evidence[{i}]: evidence {item.id} is never cited")

    pool = list(given) if given is not None else list(trace.searches)
    if given is not None:
        offered = {(r.url, normalise(r.snippet)) for s in given for r in s.results}
        for i, search in enumerate(trace.searches):
            for j, r in enumerate(search.results):
                if (r.url, normalise(r.snippet)) not in offered:
                    reasons.append(f"searches[{i}].results[{j}]: not among the search "
                                   f"results given to the model")
    snippets = [(r.url, normalise(r.snippet)) for s in pool for r in s.results]
    for i, item in enumerate(trace.evidence):
        quote = normalise(item.quote)
        homes = [url for url, snippet in snippets if quote in snippet]
        if not homes:
            reasons.append(f"evidence[{i}].quote: not found verbatim in any search "
                           f"result snippet")
        elif quote_url_must_match and item.url not in homes:
            reasons.append(f"evidence[{i}].url: the quote is in a snippet of "
                           f"{short(homes[0])}, not of {short(item.url)}")
    return tuple(reasons)
