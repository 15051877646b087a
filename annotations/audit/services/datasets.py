"""The data set an audit runs over: a JSONL file of datapoints, or the study's items.

Datapoints file (JSONL, one datapoint per line, blank lines skipped):

    {"item": "17", "datapoint": "the text, or any JSON value the criteria read", "reference": 1}

``item`` — the datapoint's id, a non-empty string or an integer (read as its decimal
string), distinct; ``datapoint`` — any JSON value but null; ``reference`` (optional) — a
person's label of the datapoint, 0 or 1: where there are any, the audit reports Cohen's κ
between the evaluator's labels and them beside the success rate. No other fields. Reading is
atomic: every problem is reported together as "file:line: field: message".

The study's items are read as (external id, text) — the core's ``Item`` rows (partitioned
studies' items); the audit stores them as the same JSONL when it starts, so a later edit of
an item never changes a result.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from annotations.audit.services.files import jsonl_records
from annotations.core.errors import ImportFailed
from annotations.core.models import Item, Study
from annotations.core.services.records import KeysSeen, unknown_fields

FIELDS = ("item", "datapoint", "reference")


class Datapoint(NamedTuple):
    item: str
    x: object
    reference: int | None = None  # a person's label of the datapoint, when there is one


def parse_datapoints(data: bytes, *, source: str) -> list[Datapoint]:
    """[Datapoint(item, x, reference)] in file order, or ImportFailed naming file, line and field
    ("file:line: field: message", ``services.files.jsonl_records`` first)."""
    problems: list[str] = []
    out: list[Datapoint] = []
    seen = KeysSeen()
    for line, record in jsonl_records(data, name=source, problems=problems):
        where = f"{source}:{line}"
        problems += [f"{where}: {p}" for p in unknown_fields(record, FIELDS)]
        item = record.get("item")
        if isinstance(item, int) and not isinstance(item, bool):
            item = str(item)
        if item is not None and (not isinstance(item, str) or not item.strip()
                                 or len(item) > 200):
            problems.append(f"{where}: item: a non-empty text of at most 200 characters or "
                            f"an integer, got {item!r}")
            continue
        repeated = seen.problem(item, line, field="item")
        if repeated:
            problems.append(f"{where}: {repeated}")
            continue
        if record.get("datapoint") is None:
            problems.append(f"{where}: datapoint: missing (any JSON value but null)")
            continue
        reference = record.get("reference")
        if reference is not None and (isinstance(reference, bool) or reference not in (0, 1)):
            problems.append(f"{where}: reference: the integer 0 or 1 (a person's label), or "
                            f"leave it out; got {reference!r}")
            continue
        out.append(Datapoint(item, record["datapoint"], reference))
    if not out and not problems:
        problems.append(f"{source}: no datapoints (one JSON object per line)")
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
