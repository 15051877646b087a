"""The one way an audit reads an uploaded JSONL file (a rubric, datapoints, commitments):
through ``core.services.records.read_records``, so a file too large, not UTF-8, with invalid
JSON, a NUL character, JSON nested too deep or a text too long is refused in the words of
every other import of the platform ("file:line: field: message"), every problem of the file
at once, before anything is stored. Files are read line by line (``jsonl_stream``): memory
stays bounded by the longest line, whatever the file's size."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import IO

from django.conf import settings

from annotations.core.errors import ImportFailed
from annotations.core.inputs import file_too_large_message
from annotations.core.services.records import read_records


def jsonl_stream(source: IO[bytes], *, name: str, problems: list[str]
                 ) -> Iterator[tuple[int, dict]]:
    """(line, record) of every readable line of a JSONL file, one line in memory at a time;
    a line that cannot be read is skipped and its problem appended to ``problems`` (the
    caller's list, so that the reader's problems and the caller's own come out together, in
    line order, when the caller checks each record as it comes)."""
    yield from read_records(source, name=name, fmt="jsonl", problems=problems)


def jsonl_records(data: bytes, *, name: str, problems: list[str] | None = None
                  ) -> list[tuple[int, dict]]:
    """(line, record) of every readable line of a JSONL upload. A line that cannot be read
    is skipped and its problem appended to ``problems``; without ``problems`` any problem
    raises ImportFailed (all of them). A file too large raises at once."""
    if len(data) > settings.OVERSIGHT_IMPORT_MAX_BYTES:
        raise ImportFailed([file_too_large_message(name, len(data))])
    found: list[str] = [] if problems is None else problems
    rows = list(jsonl_stream(io.BytesIO(data), name=name, problems=found))
    if problems is None and found:
        raise ImportFailed(found)
    return rows
