"""Sampled traces from JSONL files: one sample per line, all or nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from annotations.core.errors import ImportFailed
from annotations.core.services.records import KeysSeen, read_records, unknown_field
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
                    name: str | None = None) -> list[TraceRecord]:
    """Every trace of a JSONL file, one sample per line::

        {"sentence": "s-17", "sample": 0, "score": 0.8, "trace": {…}}

    ``sample`` and ``score`` are optional. All or nothing: any problem raises
    ``ImportFailed`` listing every bad line as ``file:line: field.path: problem`` (the
    shared reader's own errors — not UTF-8, malformed JSON, nesting deeper than 64, NUL —
    stop at the first). Verifier failures are not errors here: the sample is kept and
    dropped later with its reasons (``aggregation.samples_from_records``)."""
    if isinstance(source, str | Path):
        name = name or str(source)
    else:
        name = name or getattr(source, "name", None) or "upload.jsonl"
    errors: list[str] = []
    records: list[TraceRecord] = []
    seen = KeysSeen()
    counts: dict[str, int] = {}
    for line, rec in read_records(source, name=name, fmt="jsonl", problems=errors):
        where = f"{name}:{line}"
        unknown = unknown_field(rec, RECORD_KEYS, "sentence, sample, score, trace")
        if unknown:
            errors.append(f"{where}: {unknown}")
            continue
        sentence = rec.get("sentence")
        if isinstance(sentence, int) and not isinstance(sentence, bool):
            sentence = str(sentence)
        if not isinstance(sentence, str) or not sentence.strip():
            errors.append(f"{where}: sentence: missing (the sentence's id)")
            continue
        sentence = sentence.strip()
        if len(sentence) > 200:
            errors.append(f"{where}: sentence: {len(sentence)} characters; at most 200")
            continue
        sample = rec.get("sample")
        if sample is None:
            sample = counts.get(sentence, 0)
        elif isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
            errors.append(f"{where}: sample: must be a whole number ≥ 0")
            continue
        score = rec.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)
                                  or not math.isfinite(score)):
            errors.append(f"{where}: score: must be a number")
            continue
        repeated = seen.problem((sentence, sample), line, field="sample",
                                shown=f"sentence '{sentence}' sample {sample}")
        if repeated:
            errors.append(f"{where}: {repeated}")
            continue
        if "trace" not in rec:
            errors.append(f"{where}: trace: missing")
            continue
        try:
            trace = parse_trace(rec["trace"], strict=True)
        except TraceInvalid as exc:
            errors.append(f"{where}: trace{'.' + exc.path if exc.path else ''}: {exc.message}")
            continue
        counts[sentence] = max(counts.get(sentence, 0), sample + 1)
        records.append(TraceRecord(line=line, sentence=sentence, sample=sample, trace=trace,
                                   score=None if score is None else float(score)))
    if errors:
        raise ImportFailed(errors)
    if not records:
        raise ImportFailed([f"{name}: no traces in the file"])
    return records
