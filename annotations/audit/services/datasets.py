"""The data set an audit runs over: a JSONL file of datapoints, or the study's items.

Datapoints file (JSONL, one datapoint per line, blank lines skipped):

    {"item": "17", "datapoint": "the text, or any JSON value the criteria read"}

``item`` — the datapoint's id, a non-empty string or an integer (read as its decimal
string), distinct; ``datapoint`` — any JSON value but null. No other fields. Reading is
atomic: every problem is reported together as "file, line n, field f: message".

The study's items are read as (external id, text) — the core's ``Item`` rows (partitioned
studies' items); the audit stores them as the same JSONL when it starts, so a later edit of
an item never changes a result.
"""

from __future__ import annotations

import json

from annotations.core.errors import ImportFailed
from annotations.core.models import Item, Study

FIELDS = ("item", "datapoint")


def parse_datapoints(data: bytes, *, source: str) -> list[tuple[str, object]]:
    """[(item, datapoint)] in file order, or ImportFailed naming file, line and field."""
    problems: list[str] = []
    out: list[tuple[str, object]] = []
    first: dict[str, int] = {}
    for n, raw in enumerate(data.splitlines(), start=1):
        def bad(field: str, msg: str, n: int = n) -> None:
            problems.append(f"{source}, line {n}, field {field}: {msg}")

        try:
            text = raw.decode("utf-8-sig" if n == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            bad("(line)", f"not UTF-8 ({exc.reason} at byte {exc.start})")
            continue
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            bad("(line)", f"not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            bad("(line)", f"expected a JSON object, got {type(obj).__name__}")
            continue
        for extra in sorted(set(obj) - set(FIELDS)):
            bad(extra, f"unknown field (allowed: {', '.join(FIELDS)})")
        ok = True
        for f in FIELDS:
            if f not in obj:
                bad(f, "missing")
                ok = False
        item = obj.get("item")
        if isinstance(item, int) and not isinstance(item, bool):
            item = str(item)
        if "item" in obj and (not isinstance(item, str) or not item.strip()):
            bad("item", f"expected a non-empty string or an integer, got {item!r}")
            ok = False
        elif "item" in obj and len(item) > 200:
            bad("item", "at most 200 characters")
            ok = False
        if "datapoint" in obj and obj["datapoint"] is None:
            bad("datapoint", "expected a datapoint, got null")
            ok = False
        if not ok:
            continue
        if item in first:
            bad("item", f"{item!r} already on line {first[item]}")
            continue
        first[item] = n
        out.append((item, obj["datapoint"]))
    if not out and not problems:
        problems.append(f"{source}: no datapoints (one JSON object per line)")
    if problems:
        raise ImportFailed(problems)
    return out


def study_datapoints(study: Study) -> list[tuple[str, object]]:
    """The study's items as (external id, text), in id order."""
    return list(Item.objects.filter(study=study).order_by("pk")
                .values_list("external_id", "text"))


def datapoints_jsonl(rows: list[tuple[str, object]]) -> bytes:
    """The datapoints file of ``rows`` (what ``parse_datapoints`` reads back)."""
    return "".join(json.dumps({"item": item, "datapoint": x}, ensure_ascii=False) + "\n"
                   for item, x in rows).encode("utf-8")
