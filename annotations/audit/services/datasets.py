"""The data set an audit runs over: a JSONL file of datapoints, or the study's items.

Datapoints file (JSONL, one datapoint per line, blank lines skipped):

    {"item": "17", "datapoint": "the text, or any JSON value the criteria read", "reference": 1}

``item`` — the datapoint's id, a non-empty string or an integer (read as its decimal
string), distinct; ``datapoint`` — any JSON value but null; ``reference`` (optional) — a
person's label of the datapoint, 0 or 1: where there are any, the audit reports Cohen's κ
between the evaluator's labels and them beside the success rate. No other fields. Reading is
atomic and streamed (line by line): every problem of every line — each field of a line,
unknown fields included — is reported together, in line order, as
"file:line: field: message".

The study's items are read as (external id, text) — the core's ``Item`` rows (partitioned
studies' items); the audit stores them as the same JSONL when it starts, so a later edit of
an item never changes a result.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import IO, NamedTuple

from django.conf import settings

from annotations.audit.services.files import jsonl_stream
from annotations.core.errors import ImportFailed
from annotations.core.inputs import file_too_large_message
from annotations.core.models import Item, Study
from annotations.core.services.records import KeysSeen, unknown_fields

FIELDS = ("item", "datapoint", "reference")
ITEM_MAX = 200


class Datapoint(NamedTuple):
    item: str
    x: object
    reference: int | None = None  # a person's label of the datapoint, when there is one


def _datapoint(record: dict, line: int, seen: KeysSeen) -> tuple[Datapoint | None, list[str]]:
    """One line's datapoint, or every problem of the line ("field: message"); a repeated
    item only on a line whose item is otherwise right."""
    problems = unknown_fields(record, FIELDS)
    item = record.get("item")
    if isinstance(item, int) and not isinstance(item, bool):
        item = str(item)
    if item is not None and (not isinstance(item, str) or not item.strip()
                             or len(item) > ITEM_MAX):
        problems.append(f"item: a non-empty text of at most {ITEM_MAX} characters or an "
                        f"integer, got {item!r}")
    elif repeated := seen.problem(item, line, field="item"):
        problems.append(repeated)
    if record.get("datapoint") is None:
        problems.append("datapoint: missing (any JSON value but null)")
    reference = record.get("reference")
    if reference is not None and (isinstance(reference, bool) or reference not in (0, 1)):
        problems.append(f"reference: the integer 0 or 1 (a person's label), or leave it "
                        f"out; got {reference!r}")
    if problems:
        return None, problems
    return Datapoint(item, record["datapoint"], reference), []


def read_datapoints(source: IO[bytes], *, name: str, problems: list[str]
                    ) -> Iterator[Datapoint]:
    """The datapoints of a file, streamed, in file order; every problem of every line is
    appended to ``problems`` as its line is read (the reader's and the schema's, in line
    order), its line skipped. The caller raises when ``problems`` is not empty."""
    seen = KeysSeen()
    count = 0
    for line, record in jsonl_stream(source, name=name, problems=problems):
        datapoint, found = _datapoint(record, line, seen)
        problems += [f"{name}:{line}: {p}" for p in found]
        if datapoint is not None:
            count += 1
            yield datapoint
    if not count and not problems:
        problems.append(f"{name}: no datapoints (one JSON object per line)")


def parse_datapoints(data: bytes, *, source: str) -> list[Datapoint]:
    """[Datapoint(item, x, reference)] in file order, or ImportFailed with every problem of
    the file ("file:line: field: message", in line order); a file over the upload limit
    is refused at once."""
    if len(data) > settings.OVERSIGHT_IMPORT_MAX_BYTES:
        raise ImportFailed([file_too_large_message(source, len(data))])
    problems: list[str] = []
    out = list(read_datapoints(io.BytesIO(data), name=source, problems=problems))
    if problems:
        raise ImportFailed(problems)
    return out


def study_datapoints(study: Study) -> list[Datapoint]:
    """The study's items as (external id, text), in id order."""
    return [Datapoint(item, text) for item, text in Item.objects.filter(study=study)
            .order_by("pk").values_list("external_id", "text")]


def datapoints_jsonl(rows: list[Datapoint]) -> bytes:
    """The datapoints file of ``rows`` (what ``parse_datapoints`` reads back)."""
    return "".join(json.dumps({"item": r.item, "datapoint": r.x,
                               **({} if r.reference is None else {"reference": r.reference})},
                              ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
