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
# Upper lengths of free texts, in characters (docs/operations.md, "Limits and bad input").
# They are the model fields' max_length, so the imports (record_problem), the admin forms
# and the API serializers read them from one place.
LONG_TEXT_MAX = 50_000  # an item's or question's text, a sentence's prompt and response
SENTENCE_MAX = 5_000  # the sentence to rate
OPTION_MAX = 5_000  # one answer option of an item or a question
AI_TEXT_MAX = 100_000  # an AI output's text as written and its reasoning
# Any single text in a request body (a form field, a JSON string or key): the backstop for
# fields without a smaller bound of their own.
FIELD_MAX = 100_000


class InputRejected(ValueError):
    """Input that cannot be stored; the message names the problem (the caller adds where)."""


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def json_loads(text: str, *, strict: bool = True) -> object:
    """``json.loads`` that refuses nesting deeper than ``MAX_JSON_DEPTH`` levels with
    ``InputRejected``, and NaN/Infinity (ValueError, as malformed text). ``strict=False``
    lets control characters through inside strings (so that a NUL is found by field)."""
    try:
        value = json.loads(text, parse_constant=_no_constant, strict=strict)
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


def long_path(value: object, limit: int = FIELD_MAX, prefix: str = "") -> tuple[str, int] | None:
    """(path, length) of the first string or key longer than ``limit`` characters (a key's
    path is the object holding it); None when there is none."""
    stack: list[tuple[object, str]] = [(value, prefix)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if len(node) > limit:
                return path, len(node)
        elif isinstance(node, dict):
            key = next((k for k in node if len(str(k)) > limit), None)
            if key is not None:
                return path, len(str(key))
            sep = "." if path else ""
            stack.extend((v, f"{path}{sep}{k}") for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((node[i], f"{path}[{i}]") for i in range(len(node) - 1, -1, -1))
    return None


def too_long_message(size: int, limit: int) -> str:
    return f"{size} characters; at most {limit} fit"


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
    record: dict, columns: dict[str, models.Field] | None = None, *, nul: bool = True,
    longest: bool = True,
) -> str | None:
    """'field: problem' for the first field of an imported record that cannot be stored:
    a NUL character anywhere; any text longer than ``FIELD_MAX``; for ``columns`` (input
    name → model field) an object or array where the column holds text, or text longer than
    the column's ``max_length`` (measured after stripping, as the services store it). None
    when the record is storable. ``nul=False`` and ``longest=False`` skip the walks (the
    caller saw no NUL in the raw text, or a line too short to hold such a text)."""
    path = nul_path(record) if nul else None
    if path is not None:
        return f"{path or 'a field name'}: {NUL_MESSAGE}"
    if longest:
        found = long_path(record)
        if found is not None:
            return f"{found[0] or 'a field name'}: {too_long_message(found[1], FIELD_MAX)}"
    for name, field in (columns or {}).items():
        value = record.get(name)
        if isinstance(value, dict | list):
            return f"{name}: must be text or a number, not {json_kind(value)}"
        if value is None or not getattr(field, "max_length", None):
            continue
        size = len(str(value).strip())
        if size > field.max_length:
            return f"{name}: {too_long_message(size, field.max_length)}"
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
    """DRF's JSON parser with the body guard's checks (``json_body_parse``): at most
    DATA_UPLOAD_MAX_MEMORY_SIZE bytes (DRF reads the WSGI stream directly, past Django's own
    check), no deep nesting, no NUL characters, no text over FIELD_MAX (the error names the
    JSON path, e.g. ``[3].metadata.note``). A body the guard already read is not parsed
    again."""

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        request = getattr(parser_context.get("request"), "_request", None)
        if hasattr(request, "guarded_json"):  # read and checked by RequestBodyGuard
            return request.guarded_json
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise RequestTooLarge(too_large_message())
        try:
            return json_body_parse(raw, parser_context.get("encoding"))
        except BodyRejected as exc:
            raise ParseError(exc.detail) from None


# --- every request body ----------------------------------------------------------------------
# One guard in front of every view (``RequestBodyGuard``, in settings.MIDDLEWARE): a body that
# is too large, holds a NUL character, JSON nested too deep or a text longer than FIELD_MAX
# never reaches a view, whatever the view does with it. Uploads reach only views marked
# ``accepts_upload``; their contents (CSV, JSONL) are checked line by line by the importers'
# one reader (``services.records.read_records``), with the same limits.

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class BodyRejected(Exception):
    """A request body the guard refuses: the status, a machine-readable code, the reason."""

    def __init__(self, status: int, code: str, detail: str):
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


def accepts_upload(view):
    """Mark a view (function, method or class) as one that takes uploaded files: the guard
    refuses files sent to any other address. Its uploads go to an importer, which reads
    them with ``read_records`` (NUL, depth and lengths named by file, line and field)."""
    view.accepts_upload = True
    return view


def takes_uploads(view) -> bool:
    return bool(getattr(view, "accepts_upload", False)
                or getattr(getattr(view, "cls", None), "accepts_upload", False)
                or getattr(getattr(view, "view_class", None), "accepts_upload", False))


def file_too_large_message(name: str, size: int) -> str:
    limit = settings.OVERSIGHT_IMPORT_MAX_BYTES
    return (f"{name}: {size:,} bytes; at most {limit:,} per file (OVERSIGHT_IMPORT_MAX_BYTES): "
            f"split the file")


def is_json(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def json_body_parse(raw: bytes, encoding: str | None = None) -> object:
    """A JSON request body, guarded: ``BodyRejected`` (400, naming the JSON path where there
    is one) for text that is not ``encoding``, malformed JSON, NaN, nesting deeper than
    MAX_JSON_DEPTH, a NUL character or a string or key longer than FIELD_MAX."""
    encoding = encoding or settings.DEFAULT_CHARSET
    try:
        text = codecs.decode(raw, encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise BodyRejected(400, "parse_error", f"The body is not {encoding} text ({exc})"
                           ) from None
    try:
        data = json_loads(text)
    except InputRejected as exc:
        raise BodyRejected(400, "parse_error", str(exc)) from None
    except ValueError as exc:
        raise BodyRejected(400, "parse_error", f"JSON parse error - {exc}") from None
    if "\\u0000" in text:
        path = nul_path(data)
        if path is not None:
            raise BodyRejected(400, "parse_error", f"{path or 'a field name'}: {NUL_MESSAGE}")
    if len(text) > FIELD_MAX:
        found = long_path(data)
        if found is not None:
            raise BodyRejected(400, "parse_error", f"{found[0] or 'a field name'}: "
                                                   f"{too_long_message(found[1], FIELD_MAX)}")
    return data


def _content_length(request) -> int:
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


def _form_check(request, view) -> None:
    for name, values in request.POST.lists():
        for value in values:
            if "\x00" in value or "\x00" in name:
                raise BodyRejected(400, "parse_error", f"{name}: {NUL_MESSAGE}")
            if len(value) > FIELD_MAX:
                raise BodyRejected(400, "parse_error",
                                   f"{name}: {too_long_message(len(value), FIELD_MAX)}")
    if not request.FILES:
        return
    if not takes_uploads(view):
        raise BodyRejected(400, "no_uploads", "This address takes no file uploads.")
    for upload in request.FILES.values():
        if upload.size > settings.OVERSIGHT_IMPORT_MAX_BYTES:
            raise BodyRejected(413, "request_too_large",
                               file_too_large_message(upload.name, upload.size))


def body_check(request, view) -> None:
    """Apply the guards to the body of ``request`` (about to reach ``view``; its declared
    length was checked by ``length_check`` on the way in); raises ``BodyRejected``. A JSON
    body, once checked, is kept as ``request.guarded_json``."""
    from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
    from django.http.multipartparser import MultiPartParserError

    content_type = request.content_type or ""
    try:
        if content_type in FORM_TYPES:
            _form_check(request, view)
        elif is_json(content_type):
            if request.body:
                request.guarded_json = json_body_parse(request.body, request.encoding)
        elif request.body:
            raise BodyRejected(415, "unsupported_media_type", (
                f"Content type '{content_type or '(none)'}' is not taken here: send JSON "
                f"(application/json) or a form (application/x-www-form-urlencoded or "
                f"multipart/form-data)."))
    except RequestDataTooBig:
        raise BodyRejected(413, "request_too_large", too_large_message()) from None
    except (MultiPartParserError, TooManyFieldsSent, TooManyFilesSent) as exc:
        raise BodyRejected(400, "parse_error", f"The form could not be read ({exc})") from None


def length_check(request) -> None:
    """Refuse a multipart body whose declared length exceeds one file's limit plus the form
    fields' (``BodyRejected`` 413) — before anything reads it: Django bounds the other
    bodies itself (DATA_UPLOAD_MAX_MEMORY_SIZE) but parses every multipart upload it is
    asked for, as the CSRF check does for its token."""
    if (request.content_type or "").startswith("multipart/"):
        limit = settings.OVERSIGHT_IMPORT_MAX_BYTES + settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if _content_length(request) > limit:
            raise BodyRejected(413, "request_too_large", (
                f"The upload is larger than {limit:,} bytes: at most "
                f"{settings.OVERSIGHT_IMPORT_MAX_BYTES:,} per file (OVERSIGHT_IMPORT_MAX_BYTES)"
                f"; split the file."))


class RequestBodyGuard:
    """Middleware: every POST, PUT, PATCH and DELETE body passes ``body_check`` before its
    view runs (after URL resolution and the CSRF check); an oversized upload is refused on
    its declared length before anything reads it. Refusals are JSON under /api/ and
    for JSON bodies (``{"code", "detail"}``), the site's error page otherwise."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        # the declared length first: before any middleware's view hook (the CSRF check's
        # included) parses the body
        if request.method in BODY_METHODS:
            try:
                length_check(request)
            except BodyRejected as exc:
                return _rejected(request, exc)
        return self.get_response(request)

    def process_view(self, request, view, args, kwargs):
        if request.method not in BODY_METHODS:
            return None
        try:
            body_check(request, view)
        except BodyRejected as exc:
            return _rejected(request, exc)
        return None


def _rejected(request, exc: BodyRejected):
    from django.http import HttpResponse, JsonResponse
    from django.template import loader

    if request.path_info.startswith("/api/") or is_json(request.content_type or "") or (
            "application/json" in request.headers.get("Accept", "")):
        return JsonResponse({"code": exc.code, "detail": exc.detail}, status=exc.status)
    title = "Too much data" if exc.status == 413 else "Bad request"
    return HttpResponse(loader.render_to_string("400.html", {"title": title,
                                                             "reason": exc.detail}),
                        status=exc.status)


def request_json(request) -> object:
    """The JSON body of a page's request, parsed once by the guard (or here, with the same
    checks, where the guard did not run); None for an empty body. ``BodyRejected``."""
    if hasattr(request, "guarded_json"):
        return request.guarded_json
    return json_body_parse(request.body, request.encoding) if request.body else None
