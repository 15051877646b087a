"""Sampled traces from JSONL files: one sample per line, all or nothing."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from annotations.core.errors import ImportFailed
from annotations.core.services.records import (
    KeysSeen,
    read_records,
    unknown_fields,
    unknown_id,
)
from assistants.traces.schema import Trace, TraceInvalid, parse_trace

RECORD_KEYS = frozenset({"sentence", "sample", "score", "trace"})


@dataclass(frozen=True)
class TraceRecord:
    """One sampled trace from a file: ``sentence`` is the sentence's id (text), ``sample``
    its index among that sentence's samples (given, or the order of appearance), ``score``
    an optional number (e.g. a reward model's) for the ``imported_score`` scorer."""

    line: int
    sentence: str
    sample: int
    trace: Trace
    score: float | None = field(default=None)


def read_trace_file(source: IO[bytes] | IO[str] | str | Path, *,
                    name: str | None = None, sentences: Collection[str] | None = None,
                    problems: list[str] | None = None) -> list[TraceRecord]:
    """Every trace of a JSONL file, one sample per line::

        {"sentence": "s-17", "sample": 0, "score": 0.8, "trace": {…}}

    ``sample`` and ``score`` are optional. All or nothing: any problem raises
    ``ImportFailed`` listing every bad line as ``file:line: field.path: problem`` (the
    shared reader's own errors — not UTF-8, malformed JSON, nesting deeper than 64, NUL —
    stop at the first). Verifier failures are not errors here: the sample is kept and
    dropped later with its reasons (``aggregation.samples_from_records``).

    ``sentences`` (the ids of a study's sentences): a line naming another sentence is a
    problem of that line. With ``problems`` (the caller's list), every problem is appended
    there and the good lines' records are returned, for the caller to add its own checks
    to the same report."""
    if isinstance(source, str | Path):
        name = name or str(source)
    else:
        name = name or getattr(source, "name", None) or "upload.jsonl"
    errors: list[str] = [] if problems is None else problems
    records: list[TraceRecord] = []
    seen = KeysSeen()
    counts: dict[str, int] = {}
    for line, rec in read_records(source, name=name, fmt="jsonl", problems=errors):
        record, found = _trace_line(rec, line, seen, counts, sentences)
        if found:
            errors += [f"{name}:{line}: {problem}" for problem in found]
            continue
        counts[record.sentence] = max(counts.get(record.sentence, 0), record.sample + 1)
        records.append(record)
    if errors and problems is None:
        raise ImportFailed(errors)
    if not records and not errors:
        raise ImportFailed([f"{name}: no traces in the file"])
    return records


def _trace_line(rec: dict, line: int, seen: KeysSeen, counts: dict[str, int],
                sentences: Collection[str] | None = None
                ) -> tuple[TraceRecord | None, list[str]]:
    """One line of a trace file as its record, or every problem of the line (a repeated
    sentence and sample only on a line that is otherwise right)."""
    problems = unknown_fields(rec, RECORD_KEYS, "sentence, sample, score, trace")
    sentence = rec.get("sentence")
    if isinstance(sentence, int) and not isinstance(sentence, bool):
        sentence = str(sentence)
    if not isinstance(sentence, str) or not sentence.strip():
        problems.append("sentence: missing (the sentence's id)")
        sentence = None
    elif len(sentence.strip()) > 200:
        problems.append(f"sentence: {len(sentence.strip())} characters; at most 200")
        sentence = None
    else:
        sentence = sentence.strip()
        if sentences is not None and sentence not in sentences:
            problems.append(unknown_id("sentence", sentence, "a sentence"))
    sample = rec.get("sample")
    if sample is None and sentence is not None:
        sample = counts.get(sentence, 0)
    elif sample is not None and (isinstance(sample, bool) or not isinstance(sample, int)
                                 or sample < 0):
        problems.append("sample: must be a whole number ≥ 0")
        sample = None
    score = rec.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)
                              or not math.isfinite(score)):
        problems.append("score: must be a number")
    trace = None
    if "trace" not in rec:
        problems.append("trace: missing")
    else:
        try:
            trace = parse_trace(rec["trace"], strict=True)
        except TraceInvalid as exc:
            problems += [f"trace{'.' + p.path if p.path else ''}: {p.message}"
                         for p in exc.problems]
    if problems:  # a refused line takes no sample number: a later one may repeat it
        return None, problems
    if repeated := seen.problem((sentence, sample), line, field="sample",
                                shown=f"sentence '{sentence}' sample {sample}"):
        return None, [repeated]
    return TraceRecord(line=line, sentence=sentence, sample=sample, trace=trace,
                       score=None if score is None else float(score)), []
