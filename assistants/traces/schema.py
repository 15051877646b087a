"""The trace: its dataclasses, the five-way verdict scale, and the parser from JSON.

``parse_trace`` checks types and sizes and names the field path of every problem
(``evidence[2].url``) — all of them in one pass, in the order of the trace's fields; what the
trace *says* (citations, quotes) is the verifier's business.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from annotations.core.inputs import InputRejected, json_loads
from estimators.assisted.factuality import label_key

# The five-way scale; codes are those of estimators.assisted.factuality (m2stats).
VERDICTS = ("inaccurate", "unsupported", "disputed", "accurate", "no_attribution")
ACCURATE = "accurate"
VERDICT_LABELS = {
    "inaccurate": "Inaccurate",
    "unsupported": "Unsupported",
    "disputed": "Disputed",
    "accurate": "Accurate",
    "no_attribution": "Doesn't require attribution",
}
_VERDICT_SPELLINGS = {
    **{code: code for code in VERDICTS},
    **{label.lower(): code for code, label in VERDICT_LABELS.items()},
    "does not require attribution": "no_attribution",
    "no attribution": "no_attribution",
}

# Size guards (per trace): enough for any real trace, small enough for a page.
MAX_CLAIMS = 50
MAX_SEARCHES = 50
MAX_RESULTS_PER_SEARCH = 20
MAX_EVIDENCE = 100
MAX_TEXT = 20_000  # characters per text field
MAX_URL = 2_000
TRACE_KEYS = frozenset({"claims", "searches", "evidence", "verdict", "reasoning"})


def is_accurate(verdict: str) -> bool:
    """METHODS M2 binarisation: only "accurate" is Accurate."""
    return verdict == ACCURATE


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class Search:
    query: str
    results: tuple[SearchResult, ...]


@dataclass(frozen=True)
class Evidence:
    id: int
    url: str
    quote: str
    title: str = ""


@dataclass(frozen=True)
class Claim:
    text: str
    reasoning: str
    evidence_ids: tuple[int, ...]
    verdict: str  # a code of VERDICTS


@dataclass(frozen=True)
class Trace:
    claims: tuple[Claim, ...]
    searches: tuple[Search, ...]
    evidence: tuple[Evidence, ...]
    verdict: str  # overall, a code of VERDICTS
    reasoning: str = ""

    def to_dict(self) -> dict:
        """The JSON form (``parse_trace(trace.to_dict()) == trace``); verdicts as codes."""
        return {
            "claims": [{"text": c.text, "reasoning": c.reasoning,
                        "evidence_ids": list(c.evidence_ids), "verdict": c.verdict}
                       for c in self.claims],
            "searches": [{"query": s.query,
                          "results": [{"title": r.title, "url": r.url, "snippet": r.snippet}
                                      for r in s.results]} for s in self.searches],
            "evidence": [{"id": e.id, "url": e.url, "title": e.title, "quote": e.quote}
                         for e in self.evidence],
            "verdict": self.verdict,
            "reasoning": self.reasoning,
        }


@dataclass(frozen=True)
class FactualitySentence:
    """What the AI rater judges: the target sentence in its prompt and full response.
    ``searches``: search results given to the model (collected by the researcher's own
    search tool); then the trace must quote from them (``verify(given=…)``)."""

    prompt: str
    response: str
    sentence: str
    searches: tuple[Search, ...] | None = None


class TraceInvalid(ValueError):
    """The JSON is not a trace; ``path`` names the field (``evidence[2].url``) of the first
    problem, ``problems`` lists every problem of the trace (this one first), each a
    TraceInvalid with its own path."""

    def __init__(self, path: str, message: str,
                 problems: list[TraceInvalid] | None = None) -> None:
        self.path = path
        self.message = message
        self.problems = problems or [self]
        super().__init__(f"{path}: {message}" if path else message)


# ---------------------------------------------------------------------------- parsing


class _Problems(list):
    """The problems of one trace, collected while parsing goes on past each of them."""

    def take(self, fn, *args, default=None, **kwargs):
        """``fn(*args, **kwargs)``, or ``default`` with its TraceInvalid (every one it
        collected) recorded."""
        try:
            return fn(*args, **kwargs)
        except TraceInvalid as exc:
            self.extend(exc.problems)
            return default


def parse_verdict(value: object, path: str = "verdict") -> str:
    """A verdict code from its code or label (any case, curly apostrophes allowed)."""
    if not isinstance(value, str):
        raise TraceInvalid(path, f"must be one of {_scale()}, not {_kind(value)}")
    key = label_key(value)
    code = _VERDICT_SPELLINGS.get(key)
    if code is None:
        raise TraceInvalid(path, f"'{short(value)}' is not one of {_scale()}")
    return code


def parse_trace(obj: object, *, strict: bool = True) -> Trace:
    """A Trace from a decoded JSON object. ``strict`` refuses unknown keys (a typo in a
    file); model output is read with ``strict=False`` (extra keys ignored). Raises
    TraceInvalid naming the first bad field, with every bad field of the trace in its
    ``problems`` (parsing goes on past each one)."""
    if not isinstance(obj, Mapping):
        raise TraceInvalid("", f"a trace must be a JSON object, not {_kind(obj)}")
    found = _Problems()
    if strict:
        found.extend(_unknown(obj, TRACE_KEYS, ""))
    claims = tuple(found.take(_claim, c, f"claims[{i}]", strict)
                   for i, c in enumerate(found.take(_list, obj, "claims", "", MAX_CLAIMS,
                                                    default=[])))
    searches = tuple(found.take(_search, s, f"searches[{i}]", strict)
                     for i, s in enumerate(found.take(_list, obj, "searches", "",
                                                      MAX_SEARCHES, required=False,
                                                      default=[])))
    evidence = tuple(found.take(_evidence, e, f"evidence[{i}]", strict)
                     for i, e in enumerate(found.take(_list, obj, "evidence", "",
                                                      MAX_EVIDENCE, required=False,
                                                      default=[])))
    verdict = found.take(lambda: parse_verdict(_required(obj, "verdict", ""), "verdict"))
    reasoning = found.take(_text, obj, "reasoning", "", required=False)
    _raise_all(found)
    return Trace(claims, searches, evidence, verdict, reasoning)


def _raise_all(found: list[TraceInvalid]) -> None:
    if found:
        first = found[0]
        raise TraceInvalid(first.path, first.message, list(found))


def trace_from_text(text: str) -> Trace:
    """The trace in a model's reply: the last fenced block (```json … ```) holding an
    object if there is one, else the text from the first "{" to the last "}". Extra keys are
    ignored. Raises TraceInvalid (path "") when there is no JSON object or it is no trace."""
    candidate = None
    for block in reversed(_FENCE.findall(text)):
        if block.strip().startswith("{"):
            candidate = block
            break
    if candidate is None:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            raise TraceInvalid("", "the reply holds no JSON object")
        candidate = text[start:end + 1]
    try:
        obj = json_loads(candidate)
    except InputRejected as exc:
        raise TraceInvalid("", str(exc)) from None
    except ValueError as exc:
        raise TraceInvalid("", f"the reply's JSON is malformed ({exc})") from None
    return parse_trace(obj, strict=False)


_FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n(.*?)```", re.DOTALL)


def _claim(obj: object, path: str, strict: bool) -> Claim:
    _object(obj, path)
    assert isinstance(obj, Mapping)
    found = _Problems()
    if strict:
        found.extend(_unknown(obj, {"text", "reasoning", "evidence_ids", "verdict"}, path))
    text = found.take(_text, obj, "text", path)
    reasoning = found.take(_text, obj, "reasoning", path)
    ids = tuple(found.take(_int_id, v, f"{path}.evidence_ids[{j}]")
                for j, v in enumerate(found.take(_list, obj, "evidence_ids", path,
                                                 MAX_EVIDENCE, required=False, default=[])))
    verdict = found.take(lambda: parse_verdict(_required(obj, "verdict", path),
                                               f"{path}.verdict"))
    _raise_all(found)
    return Claim(text=text, reasoning=reasoning, evidence_ids=ids, verdict=verdict)


def _search(obj: object, path: str, strict: bool) -> Search:
    _object(obj, path)
    assert isinstance(obj, Mapping)
    found = _Problems()
    if strict:
        found.extend(_unknown(obj, {"query", "results"}, path))
    query = found.take(_text, obj, "query", path)
    results = tuple(found.take(_result, r, f"{path}.results[{j}]", strict)
                    for j, r in enumerate(found.take(_list, obj, "results", path,
                                                     MAX_RESULTS_PER_SEARCH, default=[])))
    _raise_all(found)
    return Search(query=query, results=results)


def _result(obj: object, path: str, strict: bool) -> SearchResult:
    _object(obj, path)
    assert isinstance(obj, Mapping)
    found = _Problems()
    if strict:
        found.extend(_unknown(obj, {"title", "url", "snippet"}, path))
    title = found.take(_text, obj, "title", path, required=False)
    url = found.take(_url, obj, "url", path)
    snippet = found.take(_text, obj, "snippet", path)
    _raise_all(found)
    return SearchResult(title=title, url=url, snippet=snippet)


def _evidence(obj: object, path: str, strict: bool) -> Evidence:
    _object(obj, path)
    assert isinstance(obj, Mapping)
    found = _Problems()
    if strict:
        found.extend(_unknown(obj, {"id", "url", "title", "quote"}, path))
    ident = found.take(lambda: _int_id(_required(obj, "id", path), f"{path}.id"))
    url = found.take(_url, obj, "url", path)
    quote = found.take(_text, obj, "quote", path)
    title = found.take(_text, obj, "title", path, required=False)
    _raise_all(found)
    return Evidence(id=ident, url=url, quote=quote, title=title)


def _object(obj: object, path: str) -> None:
    if not isinstance(obj, Mapping):
        raise TraceInvalid(path, f"must be an object, not {_kind(obj)}")


def _unknown(obj: Mapping, known: Iterable[str], path: str) -> list[TraceInvalid]:
    """One problem per unknown field of ``obj`` (alphabetically)."""
    expected = f"unknown field (expected one of {', '.join(sorted(known))})"
    return [TraceInvalid(f"{path}.{key}" if path else str(key), expected)
            for key in sorted(set(obj) - set(known), key=str)]


def _required(obj: Mapping, key: str, path: str) -> object:
    if key not in obj or obj[key] is None:
        raise TraceInvalid(_join(path, key), "missing")
    return obj[key]


def _list(obj: Mapping, key: str, path: str, limit: int, *, required: bool = True) -> list:
    where = _join(path, key)
    if key not in obj or obj[key] is None:
        if required:
            raise TraceInvalid(where, "missing")
        return []
    value = obj[key]
    if not isinstance(value, list):
        raise TraceInvalid(where, f"must be a list, not {_kind(value)}")
    if len(value) > limit:
        raise TraceInvalid(where, f"{len(value)} entries; at most {limit}")
    return value


def _text(obj: Mapping, key: str, path: str, *, required: bool = True) -> str:
    where = _join(path, key)
    if key not in obj or obj[key] is None:
        if required:
            raise TraceInvalid(where, "missing")
        return ""
    value = obj[key]
    if not isinstance(value, str):
        raise TraceInvalid(where, f"must be text, not {_kind(value)}")
    if len(value) > MAX_TEXT:
        raise TraceInvalid(where, f"{len(value)} characters; at most {MAX_TEXT}")
    if "\x00" in value:
        raise TraceInvalid(where, "contains a NUL character")
    if required and not value.strip():
        raise TraceInvalid(where, "empty")
    return value.strip()


def _url(obj: Mapping, key: str, path: str) -> str:
    where = _join(path, key)
    value = _text(obj, key, path)
    if len(value) > MAX_URL:
        raise TraceInvalid(where, f"{len(value)} characters; at most {MAX_URL}")
    # Shown to raters as a link: only web addresses (never javascript:, data:, file:).
    if not re.match(r"^https?://[^\s/?#]+", value, re.IGNORECASE) or any(
            ch.isspace() for ch in value):
        raise TraceInvalid(where, f"'{short(value)}' is not an http(s) URL")
    return value


def _int_id(value: object, path: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > 10**6:
        raise TraceInvalid(path, f"must be a whole number ≥ 1, not {short(repr(value))}")
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "text", bool: "true/false",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _scale() -> str:
    return ", ".join(VERDICT_LABELS.values())
