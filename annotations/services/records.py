"""Reading CSV and JSONL files as (line number, record) pairs, with errors that name the place."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from annotations.errors import ImportFailed

FORMATS = ("csv", "jsonl")


def detect_format(name: str, fmt: str | None = None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise ImportFailed([f"{name}: unknown format '{fmt}' (use csv or jsonl)"])
        return fmt
    suffix = Path(name).suffix.lower().lstrip(".")
    if suffix in ("jsonl", "ndjson"):
        return "jsonl"
    if suffix == "csv":
        return "csv"
    raise ImportFailed([f"{name}: cannot tell the format from the name; say csv or jsonl"])


def read_records(
    source: IO[bytes] | IO[str] | str | Path, *, name: str | None = None, fmt: str | None = None
) -> Iterator[tuple[int, dict]]:
    """Yield (line, record). CSV lines count the header as line 1. Raises ImportFailed naming
    file and line for undecodable text or malformed JSON."""
    if isinstance(source, str | Path):
        name = name or str(source)
        with open(source, "rb") as fh:
            yield from read_records(fh, name=name, fmt=fmt)
        return
    name = name or getattr(source, "name", "upload")
    fmt = detect_format(name, fmt)
    raw = source.read()
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ImportFailed(
                [f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})"]
            ) from exc
    else:
        text = raw
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        if not reader.fieldnames:
            raise ImportFailed([f"{name}:1: the file is empty (a header row is needed)"])
        try:
            for row in reader:
                if None in row:
                    raise ImportFailed(
                        [f"{name}:{reader.line_num}: more cells than header columns"]
                    )
                yield reader.line_num, {k.strip(): v for k, v in row.items() if k}
        except csv.Error as exc:
            raise ImportFailed([f"{name}:{reader.line_num}: malformed CSV ({exc})"]) from exc
        return
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFailed(
                [f"{name}:{line_no}: invalid JSON ({exc.msg}, column {exc.colno})"]
            ) from exc
        if not isinstance(record, dict):
            raise ImportFailed([f"{name}:{line_no}: each line must be a JSON object"])
        yield line_no, record


def parse_json_cell(value, *, expect: type):
    """CSV cells hold JSON for lists and objects; JSONL already has them decoded."""
    if isinstance(value, expect):
        return value
    if value in (None, ""):
        return expect()
    parsed = json.loads(value)
    if not isinstance(parsed, expect):
        raise ValueError(f"expected a JSON {expect.__name__}")
    return parsed


def parse_bool(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value or "").strip().lower()
    if text in ("", "0", "false", "no", "n"):
        return False
    if text in ("1", "true", "yes", "y"):
        return True
    raise ValueError(f"'{value}' is not a yes/no value")
