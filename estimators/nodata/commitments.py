"""Imported commitments: a JSONL file of an evaluator's per-round ⟨ỹ′, x′⟩ (docs/nodata.md).

One JSON object per line (blank lines are skipped):

    {"item": "17", "round": 1, "label": 1, "similar": "011010011011"}

* ``item`` — the datapoint's id in the audited data set: a non-empty string or an integer
  (integers are read as their decimal string);
* ``round`` — 1 … r, an integer;
* ``label`` — the committed label ỹ′: the integer 0 or 1;
* ``similar`` — the committed similar datapoint x′: any JSON value but null (a string, an
  object, …), evaluated by the rubric's criteria.

No other fields. An (item, round) pair appears at most once. Reading is atomic: every problem
of the whole file is collected in one pass — every field of every line, in line order — and
raised together as ``CommitmentsError``, each in the platform's one format
"file:line: field: message"; on any problem nothing is returned. The file is read line by
line (never split into a list of lines).
"""

from __future__ import annotations

import io
import json
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from .protocol import Commitment

FIELDS = ("item", "round", "label", "similar")


class CommitmentsError(ValueError):
    """Every problem of a commitments file, each "file:line: field: message"."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} problem(s) in the commitments:\n" + "\n".join(problems))
        self.problems = problems


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _json_lines(lines: bytes | str, source: str, problems: list[str]
                ) -> Iterator[tuple[int, dict]]:
    """(line, object) of every readable line; a line that is not UTF-8, not JSON or not an
    object is a problem of that line, in the words of the platform's file reader."""
    stream = io.BytesIO(lines) if isinstance(lines, bytes) else io.StringIO(lines)
    offset = 0
    for n, raw in enumerate(stream, start=1):
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                problems.append(f"{source}:{n}: not UTF-8 text ({exc.reason} at byte "
                                f"{offset + exc.start})")
                offset += len(raw)
                continue
            offset += len(raw)
        else:
            text = raw
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(f"{source}:{n}: invalid JSON ({exc.msg}, column {exc.colno})")
            continue
        except RecursionError:
            problems.append(f"{source}:{n}: JSON nested too deep")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{source}:{n}: each line must be a JSON object")
            continue
        yield n, obj


def commitments_from_records(records: Iterable[tuple[int, dict]], *, source: str,
                             problems: list[str], rounds: int | None = None,
                             items: Collection[str] | None = None, keep: bool = True
                             ) -> dict[tuple[str, int], Commitment]:
    """The commitments of decoded lines (``(line, object)``, in line order), every problem of
    every line appended to ``problems`` as it is met (so that a caller's reader, feeding
    this from the same list, keeps one report in line order). ``keep=False`` only checks
    (the returned dict stays empty; the keys seen are kept for the repeat check)."""
    out: dict[tuple[str, int], Commitment] = {}
    first_line: dict[tuple[str, int], int] = {}
    known = None if items is None else {str(i) for i in items}
    expected = ", ".join(FIELDS)
    for n, obj in records:
        def bad(field: str, msg: str, n: int = n) -> None:
            problems.append(f"{source}:{n}: {field}: {msg}")

        for extra in sorted(set(obj) - set(FIELDS), key=str):
            bad(extra, f"unknown field (expected {expected})")
        ok = True
        for f in FIELDS:
            if f not in obj:
                bad(f, "missing")
                ok = False
        item, rnd, label = obj.get("item"), obj.get("round"), obj.get("label")
        if "item" in obj:
            if _is_int(item):
                item = str(item)
            if not isinstance(item, str) or not item.strip():
                bad("item", f"expected a non-empty string or an integer, got {item!r}")
                ok = False
            elif known is not None and item not in known:
                bad("item", f"{item!r} is not an item of the audited data set")
                ok = False
        if "round" in obj:
            if not _is_int(rnd) or rnd < 1:
                bad("round", f"expected an integer ≥ 1, got {rnd!r}")
                ok = False
            elif rounds is not None and rnd > rounds:
                bad("round", f"{rnd} exceeds the audit's {rounds} rounds")
                ok = False
        if "label" in obj and (not _is_int(label) or label not in (0, 1)):
            bad("label", f"expected the integer 0 or 1, got {label!r}")
            ok = False
        if "similar" in obj and obj["similar"] is None:
            bad("similar", "expected a datapoint, got null")
            ok = False
        if not ok:
            continue
        key = (item, rnd)
        if key in first_line:
            bad("round", f"item {item!r} round {rnd} already committed on line {first_line[key]}")
            continue
        first_line[key] = n
        if keep:
            out[key] = Commitment(label, obj["similar"])
    return out


def parse_commitments(lines: bytes | str, *, source: str, rounds: int | None = None,
                      items: Collection[str] | None = None) -> dict[tuple[str, int], Commitment]:
    """Parse JSONL text into ``{(item, round): Commitment}``, or raise ``CommitmentsError``
    with every problem of the file.

    ``rounds`` (r) bounds the round numbers; ``items`` (the data set's ids) refuses unknown
    items. ``source`` names the file in every message.
    """
    problems: list[str] = []
    out = commitments_from_records(_json_lines(lines, source, problems), source=source,
                                   problems=problems, rounds=rounds, items=items)
    if problems:
        raise CommitmentsError(problems)
    return out


def read_commitments(path: str | Path, *, rounds: int | None = None,
                     items: Collection[str] | None = None) -> dict[tuple[str, int], Commitment]:
    """``parse_commitments`` on a file; the message names it by its path."""
    p = Path(path)
    return parse_commitments(p.read_bytes(), source=str(p), rounds=rounds, items=items)
