"""Low-level input guards shared by the REST API and the file imports.

What the database or Python cannot hold must be refused with a message naming the place,
never reach a query as a 500: JSON nested deeper than ``MAX_JSON_DEPTH`` (Python's decoder
recurses; PostgreSQL's jsonb has a depth limit too), NUL characters (PostgreSQL text and
jsonb refuse ``\\u0000``), strings longer than their column, and objects where a column
expects a scalar. Semantic checks (what a field means) stay in the services.
"""

from __future__ import annotations

import codecs
import json

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from rest_framework import parsers, status
from rest_framework.exceptions import APIException, ParseError

MAX_JSON_DEPTH = 64
NUL_MESSAGE = "contains a NUL character (\\u0000), which cannot be stored"


class InputRejected(ValueError):
    """Input that cannot be stored; the message names the problem (the caller adds where)."""


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def json_loads(text: str) -> object:
    """``json.loads`` that refuses nesting deeper than ``MAX_JSON_DEPTH`` levels with
    ``InputRejected``, and NaN/Infinity (ValueError, as malformed text)."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise InputRejected(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    # A text with fewer brackets than the limit cannot nest deeper: skip the walk.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth(value) > MAX_JSON_DEPTH:
        raise InputRejected(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _depth(value: object) -> int:
    """Nesting depth of lists and dicts (a scalar is 0), without recursion."""
    if not isinstance(value, dict | list):
        return 0
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, level + 1) for c in children if isinstance(c, dict | list))
    return deepest


def nul_path(value: object, prefix: str = "") -> str | None:
    """Path (``metadata.tags[2]``) of the first string, or the object holding the first key,
    that contains a NUL character; None when there is none. '' is the value itself."""
    stack: list[tuple[object, str]] = [(value, prefix)]
    while stack:  # depth first, in document order
        node, path = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return path
        elif isinstance(node, dict):
            if any("\x00" in str(k) for k in node):
                return path
            sep = "." if path else ""
            stack.extend((v, f"{path}{sep}{k}") for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((node[i], f"{path}[{i}]") for i in range(len(node) - 1, -1, -1))
    return None


JSON_KINDS = {list: "an array", dict: "an object", str: "text", bool: "true or false",
              int: "a number", float: "a number", type(None): "null"}


def json_kind(value) -> str:
    """How a decoded JSON value is called in messages ("an array", "a number" …)."""
    return JSON_KINDS.get(type(value), type(value).__name__)


def record_problem(
    record: dict, columns: dict[str, models.Field] | None = None, *, nul: bool = True
) -> str | None:
    """'field: problem' for the first field of an imported record that cannot be stored:
    a NUL character anywhere; for ``columns`` (input name → model field) an object or array
    where the column holds text, or text longer than the column's ``max_length`` (measured
    after stripping, as the services store it). None when the record is storable.
    ``nul=False`` skips the NUL walk (the caller saw no NUL in the raw text)."""
    path = nul_path(record) if nul else None
    if path is not None:
        return f"{path or 'a field name'}: {NUL_MESSAGE}"
    for name, field in (columns or {}).items():
        value = record.get(name)
        if isinstance(value, dict | list):
            return f"{name}: must be text or a number, not {json_kind(value)}"
        if value is None or not getattr(field, "max_length", None):
            continue
        size = len(str(value).strip())
        if size > field.max_length:
            return f"{name}: {size} characters; at most {field.max_length} fit"
    return None


class StorableJSONFormField(forms.JSONField):
    """The admin's JSON field with the same guards (depth, NUL, NaN) as the API and imports:
    a form error instead of a RecursionError or a database error."""

    def to_python(self, value):
        if self.disabled or value in self.empty_values or isinstance(
                value, list | dict | int | float | forms.fields.JSONString):
            return super().to_python(value)
        try:
            parsed = json_loads(value)
        except ValueError as exc:  # InputRejected, JSONDecodeError, NaN
            raise ValidationError(f"Not storable JSON: {exc}", code="invalid") from None
        path = nul_path(parsed)
        if path is not None:
            raise ValidationError(f"{path or 'a key'}: {NUL_MESSAGE}", code="invalid")
        return super().to_python(value)

    def bound_data(self, data, initial):
        try:
            return super().bound_data(data, initial)
        except RecursionError:  # re-show what was typed, as Django does for invalid JSON
            return forms.fields.InvalidJSONInput(data)


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"


def int_or_none(value: str | None) -> int | None:
    """A form field's optional whole number: None when it is missing, empty or not a whole
    number (a stray "²" or 5 000 digits included), never an exception."""
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def too_large_message() -> str:
    return (f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
            f"(DATA_UPLOAD_MAX_MEMORY_SIZE): send fewer records per request or upload a file "
            f"on the study's import page.")


class GuardedJSONParser(parsers.JSONParser):
    """DRF's JSON parser with the guards above: at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes
    (DRF reads the WSGI stream directly, past Django's own check), no deep nesting, no NUL
    characters (the error names the JSON path, e.g. ``[3].metadata.note``)."""

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise RequestTooLarge(too_large_message())
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.decode(raw, encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"The body is not {encoding} text ({exc})") from None
        try:
            data = json_loads(text)
        except InputRejected as exc:
            raise ParseError(str(exc)) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if "\\u0000" in text:
            path = nul_path(data)
            if path is not None:
                raise ParseError(f"{path or 'a field name'}: {NUL_MESSAGE}")
        return data
