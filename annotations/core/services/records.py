"""Reading CSV and JSONL files as (line number, record) pairs, with errors that name the place."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO

from django.db import models

from annotations.core.errors import ImportFailed
from annotations.core.inputs import (
    FIELD_MAX,
    NUL_MESSAGE,
    InputRejected,
    json_kind,
    json_loads,
    nul_path,
    record_problem,
)
from annotations.core.services.progress import progress_advance, progress_phase

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


# Progress is reported every this many records (services.progress).
PROGRESS_EVERY = 500


def read_records(
    source: IO[bytes] | IO[str] | str | Path, *, name: str | None = None, fmt: str | None = None,
    columns: dict[str, models.Field] | None = None, problems: list[str] | None = None,
) -> Iterator[tuple[int, dict]]:
    """Yield (line, record). CSV lines count the header as line 1. Raises ImportFailed naming
    file and line for undecodable text or malformed JSON, and file, line and field for what
    cannot be stored (``annotations.core.inputs.record_problem``: NUL characters, JSON nested
    deeper than 64 levels; for ``columns`` — input name → model field — an object where
    text belongs or text longer than the column). With ``problems`` (the caller's list of a
    file's problems), a line's problem is appended there instead and the line skipped, so
    that one pass names every problem of the file (invalid JSON on line 2 hides neither line
    1's nor line 3's); what ends the reading of a CSV file (not UTF-8, no header, malformed
    CSV) is raised anyway, with the problems found before it. JSONL is streamed line by
    line (memory bounded by the longest line), and a line that is not UTF-8 is a problem of
    that line like any other. Reports the phase "reading" (total:
    the number of lines, an upper bound of the records) and the records read so far to the
    current progress reporter, if any."""

    def refuse(problem: str) -> None:
        """A line's problem: kept (the line is skipped) or, without ``problems``, raised."""
        if problems is None:
            raise ImportFailed([problem])
        problems.append(problem)

    def stop(problem: str) -> ImportFailed:
        """What ends the reading, with the problems found before it (to raise)."""
        return ImportFailed([*(problems or []), problem])

    if isinstance(source, str | Path):
        name = name or str(source)
        with open(source, "rb") as fh:
            yield from read_records(fh, name=name, fmt=fmt, columns=columns,
                                    problems=problems)
        return
    name = name or getattr(source, "name", "upload")
    fmt = detect_format(name, fmt)
    if fmt == "jsonl":
        yield from _jsonl_records(source, name=name, columns=columns, refuse=refuse)
        return
    raw = source.read()
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise stop(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    else:
        text = raw
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    progress_phase("reading", total=max(lines - 1, 0))
    has_nul = "\x00" in text
    has_long = len(text) > FIELD_MAX
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames:
        raise stop(f"{name}:1: the file is empty (a header row is needed)")
    count = 0
    try:
        for row in reader:
            if None in row:
                refuse(f"{name}:{reader.line_num}: more cells than header columns")
                continue
            record = {k.strip(): v for k, v in row.items() if k}
            longest = has_long and any(len(v or "") > FIELD_MAX for v in record.values())
            if _kept(record, columns, nul=has_nul, longest=longest,
                     where=f"{name}:{reader.line_num}", refuse=refuse):
                count = _counted(count)
                yield reader.line_num, record
    except csv.Error as exc:
        raise stop(f"{name}:{reader.line_num}: malformed CSV ({exc})") from exc


def _kept(record: dict, columns: dict[str, models.Field] | None, *, nul: bool, longest: bool,
          where: str, refuse: Callable[[str], None]) -> bool:
    """Whether a read ``record`` is passed on: its problem (:func:`record_problem`: a NUL,
    text longer than the field allows, a column's own check), if any, is refused at
    ``where`` ("file:line") instead. The check runs only where a problem can be."""
    if nul or columns or longest:
        problem = record_problem(record, columns, nul=nul, longest=longest)
        if problem:
            refuse(f"{where}: {problem}")
            return False
    return True


def _counted(count: int) -> int:
    """One more record read: the new count, reported to the progress reporter every
    ``PROGRESS_EVERY`` records."""
    count += 1
    if count % PROGRESS_EVERY == 0:
        progress_advance(PROGRESS_EVERY)
    return count


# Lines are counted (for the progress total) in blocks of this many bytes.
_COUNT_BLOCK = 1 << 20


def line_count(source: IO[bytes] | IO[str]) -> int:
    """How many lines ``source`` holds from where it stands (0 when it cannot go back):
    counted block by block, then rewound, so that a large file is never held whole."""
    try:
        if not source.seekable():
            return 0
        start = source.tell()
    except (AttributeError, OSError, ValueError):
        return 0
    lines, last = 0, None
    while block := source.read(_COUNT_BLOCK):
        lines += block.count(b"\n" if isinstance(block, bytes) else "\n")
        last = block[-1:]
    source.seek(start)
    return lines + (last not in (None, b"\n", "\n"))


def _jsonl_records(source: IO[bytes] | IO[str], *, name: str,
                   columns: dict[str, models.Field] | None, refuse: Callable[[str], None]
                   ) -> Iterator[tuple[int, dict]]:
    """``read_records`` of a JSONL file, streamed: one line in memory at a time (a 100 MB
    file is never held whole, nor split into a list of lines). Lines end at "\n" (a
    "\r\n" ending is fine); a line that is not UTF-8 is a problem of that line."""
    progress_phase("reading", total=line_count(source))
    count, offset = 0, 0
    for line_no, raw in enumerate(source, start=1):
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                refuse(f"{name}:{line_no}: not UTF-8 text ({exc.reason} at byte "
                       f"{offset + exc.start})")
                offset += len(raw)
                continue
            offset += len(raw)
        else:
            line = raw.removeprefix("\ufeff") if line_no == 1 else raw
        if not line.strip():
            continue
        line = line.rstrip("\r\n")
        has_nul = "\\u0000" in line or "\x00" in line
        try:
            # a raw NUL byte is a control character strict JSON refuses; read the line
            # anyway so that the error names the field that holds it
            record = json_loads(line, strict="\x00" not in line)
        except json.JSONDecodeError as exc:
            refuse(f"{name}:{line_no}: invalid JSON ({exc.msg}, column {exc.colno})")
            continue
        except InputRejected as exc:
            refuse(f"{name}:{line_no}: {exc}")
            continue
        except ValueError as exc:  # NaN / Infinity: not JSON, and not storable
            refuse(f"{name}:{line_no}: invalid JSON ({exc})")
            continue
        if not isinstance(record, dict):
            refuse(f"{name}:{line_no}: each line must be a JSON object")
            continue
        if _kept(record, columns, nul=has_nul, longest=len(line) > FIELD_MAX,
                 where=f"{name}:{line_no}", refuse=refuse):
            count = _counted(count)
            yield line_no, record


def unknown_fields(record: dict, known: Collection[str], expected: str | None = None
                   ) -> list[str]:
    """Every field of ``record`` outside ``known`` (alphabetically), one problem each:
    "<field>: unknown field (expected <expected, or one of the known fields>)"; empty when
    every field is known."""
    expected = expected or "one of " + ", ".join(sorted(known))
    return [f"{name}: unknown field (expected {expected})"
            for name in sorted(set(record) - set(known))]


def unknown_id(field: str, key, thing: str) -> str:
    """The problem of an id that names nothing in the study, in the same words for every
    study type: "<field>: '<key>' is not <thing> of this study" (``thing``: "an item",
    "a sentence", "a question" …)."""
    return f"{field}: '{key}' is not {thing} of this study"


def error_line(problem: str) -> int:
    """The line number of a "file:line: …" problem (0 for a problem of the whole file): the
    key that lists a file's problems in line order."""
    try:
        return int(problem.split(":")[1])
    except (IndexError, ValueError):
        return 0


UPDATE_HINT = " (import it with the update option to rewrite existing ids)"


def already_in_study(field: str, shown: str, *, updatable: bool = False) -> str:
    """The words of every import for a key the study already holds; ``updatable`` for an
    import that rewrites existing ids when asked to (says how: the page's "Rewrite existing
    ids" box, the command's ``--update``, the API's ``update``)."""
    return f"{field}: {shown} is already in the study" + (UPDATE_HINT if updatable else "")


class KeysSeen:
    """The keys (ids) of one import file, in the same words for every study type: a key is
    given (``"<field>: missing"``), once per file (``"… repeats line n"``) and, unless the
    import may update, not already in the study (``already_in_study``)."""

    def __init__(self, existing: Collection = ()):
        self.existing = existing
        self.lines: dict[object, int] = {}

    def problem(self, key, line: int, *, field: str = "id", shown: str | None = None
                ) -> str | None:
        """The problem with ``key`` on ``line`` (None: fine, and now seen). ``shown`` is how
        the message names the key (default ``'<key>'``)."""
        if key in (None, "", ()):
            return f"{field}: missing"
        shown = shown or f"'{key}'"
        if key in self.lines:
            return f"{field}: {shown} repeats line {self.lines[key]}"
        if key in self.existing:
            return already_in_study(field, shown)
        self.lines[key] = line
        return None


def parse_json_cell(value, *, expect: type):
    """A list or object field: CSV cells hold it as JSON text, JSONL already decoded. Empty
    → an empty one; anything else → ValueError naming what was given ("expected a JSON
    array, not a number")."""
    if isinstance(value, expect):
        return value
    if value in (None, ""):
        return expect()
    wanted = {list: "array", dict: "object"}[expect]
    if not isinstance(value, str):  # JSONL: decoded, but of another kind
        raise ValueError(f"expected a JSON {wanted}, not {json_kind(value)}")
    try:
        parsed = json_loads(value)  # InputRejected is a ValueError
    except json.JSONDecodeError as exc:  # the line's words, not the parser's own text
        raise ValueError(f"invalid JSON ({exc.msg}, column {exc.colno}); expected a JSON "
                         f"{wanted}") from None
    path = nul_path(parsed)
    if path is not None:
        raise ValueError(f"{path or 'a key'}: {NUL_MESSAGE}")
    if not isinstance(parsed, expect):
        raise ValueError(f"expected a JSON {wanted}, not {json_kind(parsed)}")
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


def option_text(value) -> str:
    """The text an option given by its text stands for (``prediction``, ``gold``): strings
    stripped; JSON numbers as they would be written (an integral float 3.0 is "3", so it
    matches an option "3"); None is empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def option_index(value, n_options: int) -> int | None:
    """An option given by its 0-based index (``prediction_index``, ``gold_index``):
    integers, integral floats such as 3.0 and their text. None when empty; ValueError when
    not an index of an item with ``n_options`` options."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError(f"'{value}' is not an option index")
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip()) if "." in value else int(value.strip())
        except ValueError:
            raise ValueError(f"'{value}' is not a whole number") from None
    if isinstance(number, float):
        if not number.is_integer():
            raise ValueError(f"'{value}' is not a whole number")
        number = int(number)
    if not isinstance(number, int):
        raise ValueError(f"'{value}' is not a whole number")
    if not 0 <= number < n_options:
        raise ValueError(f"{number} is outside 0..{n_options - 1}")
    return number
