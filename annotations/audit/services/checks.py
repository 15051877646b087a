"""The registered checks a programmatic criterion may use, their parameters, and how one
becomes an ``estimators.nodata.criteria.Criterion``. Researchers pick a check and fill its
parameters; nothing from the browser is ever run as code.

Checks (``Criterion.Kind``), each reading the datapoint — or, when ``field`` is set, that key
of a JSON-object datapoint (a missing key, or a datapoint that is not an object, gives 0):

* ``contains`` — 1 when the text contains ``text`` (non-empty);
* ``regex`` — 1 when ``re.search(text, value)`` finds a match (below);
* ``count_above`` — 1 when ``text`` occurs more than ``number`` times (non-overlapping);
* ``length_above`` — 1 when the text is longer than ``number`` characters;
* ``field_equals`` — 1 when the object's ``field`` equals ``value`` (JSON equality; 1 and
  1.0 are equal, 1 and "1" are not).

A non-string value read by a string check is read as its JSON text (numbers, lists).

**Regular expressions: a safe subset and a time limit.** Python's ``re`` backtracks and has
no timeout, so a pattern like ``(a+)+$`` can take exponential time on a crafted input. A
pattern is therefore refused when it is saved (``regex_problem``) if it uses what makes
backtracking blow up: a back-reference, a look-ahead or look-behind, a conditional, a
repeat inside a repeat (``(a+)+``, ``(a*)*``), an alternation inside a repeat (``(a|ab)*``),
or more than ``REGEX_MAX_REPEATS`` unbounded repeats; it must be at most ``REGEX_MAX_LENGTH``
characters. At run time a text longer than ``REGEX_MAX_TEXT`` characters is not searched
(the check raises, so the verifier fails the challenge naming the criterion), and on the
main thread of a worker process (Celery's prefork workers run tasks there) each search is
also stopped after ``REGEX_SECONDS`` by a SIGALRM timer (CPython's regex engine checks for
signals while it matches); elsewhere (the embedded mode's thread) the subset and the text
limit are the guard.
"""

from __future__ import annotations

import json
import re
import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from estimators.nodata.criteria import Criterion as CoreCriterion

try:  # Python ≥ 3.11
    from re import _constants as sre_constants
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

CHECKS = ("contains", "regex", "count_above", "length_above", "field_equals")
REGEX_MAX_LENGTH = 200
REGEX_MAX_REPEATS = 3
REGEX_MAX_TEXT = 20_000
REGEX_SECONDS = 0.5
NAME_MAX = 60


class RegexTimeout(Exception):
    """A regular expression took longer than ``REGEX_SECONDS`` on one datapoint."""


_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT}
_POSSESSIVE = getattr(sre_constants, "POSSESSIVE_REPEAT", None)
if _POSSESSIVE is not None:
    _REPEATS.add(_POSSESSIVE)
_REFUSED = {sre_constants.GROUPREF: "a back-reference",
            sre_constants.ASSERT: "a look-ahead or look-behind",
            sre_constants.ASSERT_NOT: "a look-ahead or look-behind",
            sre_constants.GROUPREF_EXISTS: "a conditional"}


def _walk(items, inside_repeat: bool, counts: dict) -> str:
    """The first refused construct in a parsed pattern ("" when none)."""
    for op, av in items:
        if op in _REFUSED:
            return _REFUSED[op]
        if op in _REPEATS:
            lo, hi, sub = av
            if inside_repeat and hi != 1:
                return "a repeat inside a repeat (like (a+)+)"
            if hi == sre_constants.MAXREPEAT:
                counts["unbounded"] += 1
            why = _walk(sub, inside_repeat or hi != 1, counts)
            if why:
                return why
        elif op is sre_constants.SUBPATTERN:
            why = _walk(av[-1], inside_repeat, counts)
            if why:
                return why
        elif op is sre_constants.BRANCH:
            if inside_repeat:
                return "an alternation inside a repeat (like (a|ab)*)"
            for branch in av[1]:
                why = _walk(branch, inside_repeat, counts)
                if why:
                    return why
        elif op is getattr(sre_constants, "ATOMIC_GROUP", object()):
            why = _walk(av, inside_repeat, counts)
            if why:
                return why
    return ""


def regex_problem(pattern: str) -> str:
    """Why ``pattern`` is refused ("" when it is in the safe subset; module docstring)."""
    if not pattern:
        return "a pattern is required"
    if len(pattern) > REGEX_MAX_LENGTH:
        return f"at most {REGEX_MAX_LENGTH} characters, got {len(pattern)}"
    try:
        parsed = sre_parse.parse(pattern)
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"not a regular expression ({exc})"
    counts = {"unbounded": 0}
    why = _walk(parsed, False, counts)
    if why:
        return f"refused: {why} can make matching take exponential time"
    if counts["unbounded"] > REGEX_MAX_REPEATS:
        return (f"refused: at most {REGEX_MAX_REPEATS} unbounded repeats (*, +, {{n,}}), "
                f"got {counts['unbounded']}")
    return ""


@contextmanager
def _time_limit(seconds: float):
    """SIGALRM after ``seconds`` on the main thread (module docstring); no limit elsewhere."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
            signal, "setitimer"):
        yield
        return

    def expired(signum, frame):
        raise RegexTimeout(f"the regular expression took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def regex_search(compiled: re.Pattern, text: str) -> bool:
    if len(text) > REGEX_MAX_TEXT:
        raise ValueError(f"text of {len(text)} characters is longer than the "
                         f"{REGEX_MAX_TEXT} a regular expression reads")
    with _time_limit(REGEX_SECONDS):
        return compiled.search(text) is not None


def criterion_problems(*, name: str, kind: str, text: str = "", number: int | None = None,
                       field: str = "", value: Any = None) -> list[tuple[str, str]]:
    """Every problem of one criterion's parameters as (field, message); [] when usable."""
    problems: list[tuple[str, str]] = []
    if not isinstance(name, str) or not name.strip():
        problems.append(("name", "a name is required"))
    elif len(name) > NAME_MAX:
        problems.append(("name", f"at most {NAME_MAX} characters"))
    if kind not in CHECKS:
        problems.append(("check", f"unknown check {kind!r} (one of: {', '.join(CHECKS)})"))
        return problems
    if not isinstance(text, str):
        problems.append(("text", f"expected a string, got {text!r}"))
        text = ""
    if not isinstance(field, str):
        problems.append(("field", f"expected a string, got {field!r}"))
        field = ""
    if kind in ("contains", "count_above") and not text:
        problems.append(("text", "the text to look for is required"))
    if kind == "regex":
        why = regex_problem(text)
        if why:
            problems.append(("text", why))
    if kind in ("count_above", "length_above") and (
            isinstance(number, bool) or not isinstance(number, int) or number < 0):
        problems.append(("number", f"expected a whole number ≥ 0, got {number!r}"))
    if kind == "field_equals":
        if not field:
            problems.append(("field", "the field to compare is required"))
        if value is None:
            problems.append(("value", "the value to compare with is required (JSON)"))
    return problems


def _reader(field: str) -> Callable[[Any], tuple[bool, Any]]:
    """(found, value) of a datapoint: itself, or its ``field``."""
    if not field:
        return lambda x: (True, x)

    def read(x: Any) -> tuple[bool, Any]:
        if isinstance(x, dict) and field in x:
            return True, x[field]
        return False, None

    return read


def _as_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def build_criterion(*, name: str, kind: str, text: str = "", number: int | None = None,
                    field: str = "", value: Any = None) -> CoreCriterion:
    """The library's criterion for checked parameters (``criterion_problems`` is empty)."""
    problems = criterion_problems(name=name, kind=kind, text=text, number=number, field=field,
                                  value=value)
    if problems:
        raise ValueError("; ".join(f"{f}: {m}" for f, m in problems))
    read = _reader(field)
    on = f"{field} " if field else ""
    if kind == "contains":
        def fn(x, _t=text):
            found, v = read(x)
            return found and _t in _as_text(v)
        desc = f"{on}contains {text!r}"
    elif kind == "regex":
        compiled = re.compile(text)

        def fn(x, _c=compiled):
            found, v = read(x)
            return found and regex_search(_c, _as_text(v))
        desc = f"{on}matches /{text}/"
    elif kind == "count_above":
        def fn(x, _t=text, _n=number):
            found, v = read(x)
            return found and _as_text(v).count(_t) > _n
        desc = f"{on}has more than {number} {text!r}"
    elif kind == "length_above":
        def fn(x, _n=number):
            found, v = read(x)
            return found and len(_as_text(v)) > _n
        desc = f"{on}is longer than {number} characters"
    else:  # field_equals
        def fn(x, _f=field, _v=value):
            return isinstance(x, dict) and _f in x and x[_f] == _v and (
                isinstance(x[_f], bool) == isinstance(_v, bool))
        desc = f"{field} = {json.dumps(value, ensure_ascii=False)}"
    return CoreCriterion(name, fn, desc)
