"""The one way an audit reads an uploaded JSONL file (a rubric, datapoints, commitments):
through ``core.services.records.read_records``, so a file too large, not UTF-8, with invalid
JSON, a NUL character, JSON nested too deep or a text too long is refused in the words of
every other import of the platform ("file:line: field: message"), every problem of the file
at once, before anything is stored."""

from __future__ import annotations

import io

from django.conf import settings

from annotations.core.errors import ImportFailed
from annotations.core.inputs import file_too_large_message
from annotations.core.services.records import read_records


def jsonl_records(data: bytes, *, name: str, problems: list[str] | None = None
                  ) -> list[tuple[int, dict]]:
    """(line, record) of every readable line of a JSONL upload. A line that cannot be read
    is skipped and its problem appended to ``problems`` (the caller's list, so that the
    reader's problems and the caller's own come out together); without ``problems`` any
    problem raises ImportFailed. A file too large, or not UTF-8, raises at once."""
    if len(data) > settings.OVERSIGHT_IMPORT_MAX_BYTES:
        raise ImportFailed([file_too_large_message(name, len(data))])
    found: list[str] = [] if problems is None else problems
    rows = list(read_records(io.BytesIO(data), name=name, fmt="jsonl", problems=found))
    if problems is None and found:
        raise ImportFailed(found)
    return rows
