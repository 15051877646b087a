"""Exporting answered queries with all routing metadata (CSV or JSONL): the draws, and the
routing design each query was drawn under with the probability of its class (``draw_p``:
π_j(k | the item's classes asked before); ``draw_targets``: [[class, m], …], how many AI
systems picked each class when the item was routed)."""

from __future__ import annotations

from typing import IO

from annotations.core.exports import rows_write
from annotations.core.models import Study
from annotations.partitioned.models import Query

EXPORT_FIELDS = [
    "query_id", "item_id", "stratum", "k", "class_name", "sequence", "answer", "specialist",
    "is_quality_check", "qc_correct", "issued_at", "rendered_at", "answered_at",
    "time_on_task_ms", "times_issued", "rank", "option_order", "class_order",
    "design", "design_kind", "design_epsilon", "draw_uniform", "draw_p", "draw_targets",
]


_COLUMNS = ("pk", "item__external_id", "stratum", "k", "sequence", "answer",
            "answered_by__username", "is_quality_check", "qc_correct", "issued_at",
            "rendered_at", "answered_at", "time_on_task_ms", "times_issued", "rank",
            "item__option_order", "item__class_order", "design__number", "design__kind",
            "design__epsilon", "draw_uniform", "draw_p", "draw_targets")


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def label_rows(study: Study):
    """Every answered query of the study, oldest answer first, as the export's rows (read
    as tuples of the joined columns, 5 000 at a time: no model instance per row)."""
    names = dict(study.classes.values_list("index", "name"))
    qs = (Query.objects.filter(study=study, status=Query.Status.ANSWERED)
          .order_by("answered_at", "pk").values_list(*_COLUMNS))
    for (pk, item, stratum, k, sequence, answer, specialist, qc, qc_correct, issued,
         rendered, answered, time_on_task, times_issued, rank, option_order, class_order,
         design, design_kind, epsilon, draw_uniform, draw_p, draw_targets
         ) in qs.iterator(chunk_size=5000):
        yield {
            "query_id": pk, "item_id": item, "stratum": stratum, "k": k,
            "class_name": names.get(k, ""), "sequence": sequence, "answer": answer,
            "specialist": specialist or "", "is_quality_check": qc, "qc_correct": qc_correct,
            "issued_at": _iso(issued), "rendered_at": _iso(rendered),
            "answered_at": _iso(answered), "time_on_task_ms": time_on_task,
            "times_issued": times_issued, "rank": rank, "option_order": option_order,
            "class_order": class_order,
            # the routing design the query was drawn under (0: the uniform default) and
            # what recomputes its probability: a design-weighted analysis needs no more
            "design": design or 0, "design_kind": design_kind or "uniform",
            "design_epsilon": epsilon,
            "draw_uniform": True if draw_uniform is None else draw_uniform,
            "draw_p": (draw_p if draw_p is not None else
                       None if qc else 1.0 / (len(names) - sequence)),
            "draw_targets": draw_targets or [],
        }


def labels_export(*, study: Study, out: IO[str], fmt: str = "csv") -> int:
    """Write every answered query of the study to ``out`` (``core.exports.rows_write``);
    returns the number of rows."""
    return rows_write(label_rows(study), out=out, fmt=fmt, fields=EXPORT_FIELDS)
