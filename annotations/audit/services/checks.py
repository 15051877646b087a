r"""The registered checks a programmatic criterion may use, their parameters, and how one
becomes an ``estimators.nodata.criteria.Criterion``. Researchers pick a check and fill its
parameters; nothing from the browser is ever run as code.

Checks (``Criterion.Kind``), each reading the datapoint — or, when ``field`` is set, that key
of a JSON-object datapoint (a missing key, or a datapoint that is not an object, gives 0):

* ``contains`` — 1 when the text contains ``text`` (non-empty);
* ``regex`` — 1 when the pattern ``text`` finds a match (RE2, below);
* ``count_above`` — 1 when ``text`` occurs more than ``number`` times (non-overlapping);
* ``length_above`` — 1 when the text is longer than ``number`` characters;
* ``field_equals`` — 1 when the object's ``field`` equals ``value`` (JSON equality; 1 and
  1.0 are equal, 1 and "1" are not).

A non-string value read by a string check is read as its JSON text (numbers, lists).

**Regular expressions: a linear-time matcher.** Python's ``re`` backtracks: ``a*a*b`` or
``.*.*.*x`` take polynomial time, ``(a+)+$`` exponential, and the search holds the GIL (in
the embedded mode one such datapoint stalled the whole site). Patterns therefore run on RE2
(the ``google-re2`` binding, imported as ``re2``), whose matching time is linear in the text
for every pattern it accepts, in every mode — no timer, no text limit. RE2 has no
back-references, look-aheads or look-behinds, conditionals, atomic groups or possessive
repeats (``a++``), and no repeat count above 1000: a pattern using one is refused when the
rubric is saved (``regex_problem``), naming the criterion and the construct. It must be at
most ``REGEX_MAX_LENGTH`` characters. Where RE2 reads differently from ``re``: ``\d``,
``\w``, ``\s`` and ``\b`` are ASCII only; ``$`` is the end of the text (``re``'s also
matches before a final newline; ``\Z`` is written ``\z``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import re2

from estimators.nodata.criteria import Criterion as CoreCriterion

try:  # Python ≥ 3.11
    from re import _constants as sre_constants
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

CHECKS = ("contains", "regex", "count_above", "length_above", "field_equals")
REGEX_MAX_LENGTH = 200
NAME_MAX = 60

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported to the researcher, not to stderr

# what RE2 does not have, named as Python's parser sees it (a clearer message than RE2's)
_UNSUPPORTED = {sre_constants.GROUPREF: r"a back-reference (\1, (?P=name))",
                sre_constants.ASSERT: "a look-ahead or look-behind ((?=…), (?<=…))",
                sre_constants.ASSERT_NOT: "a negative look-ahead or look-behind ((?!…), (?<!…))",
                sre_constants.GROUPREF_EXISTS: "a conditional ((?(1)…|…))"}
for _name, _why in (("ATOMIC_GROUP", "an atomic group ((?>…))"),
                    ("POSSESSIVE_REPEAT", "a possessive repeat (a++, a*+)")):
    if hasattr(sre_constants, _name):
        _UNSUPPORTED[getattr(sre_constants, _name)] = _why


def _unsupported(items) -> str:
    """The first construct RE2 lacks in a pattern parsed by ``re`` ("" when none)."""
    for op, av in items:
        if op in _UNSUPPORTED:
            return _UNSUPPORTED[op]
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
            why = _unsupported(av[2])
        elif op is sre_constants.SUBPATTERN:
            why = _unsupported(av[-1])
        elif op is sre_constants.BRANCH:
            why = next((w for w in map(_unsupported, av[1]) if w), "")
        else:
            why = ""
        if why:
            return why
    return ""


def regex_compile(pattern: str):
    """The pattern compiled by RE2 (``re2.error`` when RE2 refuses it)."""
    return re2.compile(pattern, _OPTIONS)


def regex_problem(pattern: str) -> str:
    """Why ``pattern`` is refused ("" when RE2 runs it; module docstring)."""
    if not pattern:
        return "a pattern is required"
    if len(pattern) > REGEX_MAX_LENGTH:
        return f"at most {REGEX_MAX_LENGTH} characters, got {len(pattern)}"
    try:
        parsed = sre_parse.parse(pattern)
    except Exception as exc:  # noqa: BLE001 - re.error, RecursionError, OverflowError
        parsed, python_error = None, exc
    else:
        python_error = None
    why = _unsupported(parsed) if parsed is not None else ""
    if why:
        return (f"uses {why}, which the linear-time matcher (RE2) does not support: "
                "rewrite the pattern without it")
    try:
        regex_compile(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        if python_error is not None:
            return f"not a regular expression ({python_error})"
        return f"not supported by the linear-time matcher (RE2: {detail})"
    return ""


def regex_search(compiled, text: str) -> bool:
    """Whether the RE2 pattern finds a match in ``text`` (time linear in the text)."""
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
            who = f"criterion {name}: " if isinstance(name, str) and name.strip() else ""
            problems.append(("text", who + why))
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
        compiled = regex_compile(text)

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
