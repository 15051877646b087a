"""Exporting a critique study (CSV or JSONL): every output, every task with its timing, and
every metric of the latest analysis.

* ``outputs`` — one row per response or critique: its question, level, slot, inputs in the
  order shown, reasoning, final answer (letter and index; empty when unparseable), whether
  it is correct (empty without gold), choice, confidence (1–5) and ``confidence_label`` (its
  words on the work page: "a guess" … "certain"), time on task, who or which AI
  system wrote it, where it came from, the raw AI text;
* ``tasks`` — one row per annotator task: level, slot, inputs in shown order, status,
  holder, who answered, issued/rendered/answered times, time on task, times issued, its
  output;
* ``metrics`` — the snapshot's tables, one row per table row (``table`` names it: levels,
  human_ai, input_pairs, choices, progress), columns as in the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from annotations.core.exports import rows_write
from annotations.core.models import Study
from annotations.core.selectors import study_latest_snapshot
from annotations.critique.models import CritiqueOutput, CritiqueTask

WHATS = ("outputs", "tasks", "metrics")
OUTPUT_FIELDS = [
    "output_id", "question", "domain", "level", "slot", "first_id", "second_id", "reasoning",
    "final", "final_index", "gold", "correct", "choice", "confidence", "confidence_label",
    "time_ms",
    "author_kind", "author", "ai_model", "source", "external_id", "task", "created_at",
    "raw_text",
]
TASK_FIELDS = [
    "task", "task_id", "question", "domain", "level", "slot", "first_id", "second_id",
    "status", "holder", "answered_by", "issued_at", "rendered_at", "answered_at",
    "lease_expires_at", "time_on_task_ms", "times_issued", "rank", "output_id",
]
METRIC_TABLES = ("levels", "human_ai", "input_pairs", "choices", "progress")


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def _letter(index: int | None) -> str:
    return "" if index is None else chr(ord("A") + index)


def output_rows(study: Study) -> Iterator[dict]:
    qs = (CritiqueOutput.objects.filter(study=study)
          .select_related("question", "author", "task").order_by("level", "question_id", "slot"))
    for o in qs.iterator(chunk_size=2000):
        gold = o.question.gold
        yield {
            "output_id": o.pk, "question": o.question.external_id, "domain": o.question.domain,
            "level": o.level, "slot": o.slot, "first_id": o.first_id, "second_id": o.second_id,
            "reasoning": o.reasoning, "final": _letter(o.final), "final_index": o.final,
            "gold": _letter(gold),
            "correct": None if gold is None else int(o.final is not None and o.final == gold),
            "choice": o.choice, "confidence": o.confidence,
            "confidence_label": CritiqueOutput.CONFIDENCE_WORDS.get(o.confidence, ""),
            "time_ms": o.time_ms,
            "author_kind": o.author_kind, "author": o.author.username if o.author else "",
            "ai_model": o.ai_model, "source": o.source, "external_id": o.external_id,
            "task": o.task.public_id if o.task else "", "created_at": _iso(o.created_at),
            "raw_text": o.raw_text,
        }


def task_rows(study: Study) -> Iterator[dict]:
    qs = (CritiqueTask.objects.filter(study=study)
          .select_related("question", "holder", "answered_by", "output")
          .order_by("level", "question_id", "slot"))
    for t in qs.iterator(chunk_size=2000):
        output = getattr(t, "output", None)
        yield {
            "task": t.public_id, "task_id": t.pk, "question": t.question.external_id,
            "domain": t.question.domain, "level": t.level, "slot": t.slot,
            "first_id": t.first_id, "second_id": t.second_id, "status": t.status,
            "holder": t.holder.username if t.holder else "",
            "answered_by": t.answered_by.username if t.answered_by else "",
            "issued_at": _iso(t.issued_at), "rendered_at": _iso(t.rendered_at),
            "answered_at": _iso(t.answered_at), "lease_expires_at": _iso(t.lease_expires_at),
            "time_on_task_ms": t.time_on_task_ms, "times_issued": t.times_issued,
            "rank": t.rank, "output_id": output.pk if output else None,
        }


def metric_rows(study: Study) -> list[dict]:
    """The latest snapshot's tables (computed now, not stored, when there is none yet)."""
    from annotations.critique.services.analysis import critique_payload

    snapshot = study_latest_snapshot(study=study)
    payload = (snapshot.payload if snapshot is not None
               and snapshot.payload.get("kind") == "critique" else critique_payload(study))
    return [{"table": table, **row} for table in METRIC_TABLES
            for row in payload.get(table) or []]


# what → (its rows, its CSV columns; None: every key of the rows)
EXPORTS = {"outputs": (output_rows, OUTPUT_FIELDS), "tasks": (task_rows, TASK_FIELDS),
           "metrics": (metric_rows, None)}


def critique_export(*, study: Study, what: str, out: IO[str], fmt: str = "csv") -> int:
    """Write one of ``WHATS`` to ``out`` as CSV or JSONL; returns the number of rows."""
    if what not in WHATS:
        raise ValueError(f"what: one of {', '.join(WHATS)}, got '{what}'")
    rows, fields = EXPORTS[what]
    return rows_write(rows(study), out=out, fmt=fmt, fields=fields)
