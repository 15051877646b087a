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


def label_rows(study: Study):
    """Every answered query of the study, oldest answer first, as the export's rows."""
    names = dict(study.classes.values_list("index", "name"))
    qs = (
        Query.objects.filter(study=study, status=Query.Status.ANSWERED)
        .select_related("item", "answered_by", "design")
        .order_by("answered_at", "pk")
    )
    for q in qs.iterator(chunk_size=5000):
        yield {
            "query_id": q.pk, "item_id": q.item.external_id, "stratum": q.stratum, "k": q.k,
            "class_name": names.get(q.k, ""), "sequence": q.sequence, "answer": q.answer,
            "specialist": q.answered_by.username if q.answered_by else "",
            "is_quality_check": q.is_quality_check, "qc_correct": q.qc_correct,
            "issued_at": q.issued_at.isoformat() if q.issued_at else None,
            "rendered_at": q.rendered_at.isoformat() if q.rendered_at else None,
            "answered_at": q.answered_at.isoformat() if q.answered_at else None,
            "time_on_task_ms": q.time_on_task_ms, "times_issued": q.times_issued,
            "rank": q.rank, "option_order": q.item.option_order,
            "class_order": q.item.class_order,
            # the routing design the query was drawn under (0: the uniform default) and
            # what recomputes its probability: a design-weighted analysis needs no more
            "design": q.design.number if q.design else 0,
            "design_kind": q.design.kind if q.design else "uniform",
            "design_epsilon": q.design.epsilon if q.design else None,
            "draw_uniform": True if q.draw_uniform is None else q.draw_uniform,
            "draw_p": (q.draw_p if q.draw_p is not None else
                       None if q.is_quality_check else 1.0 / (len(names) - q.sequence)),
            "draw_targets": q.draw_targets or [],
        }


def labels_export(*, study: Study, out: IO[str], fmt: str = "csv") -> int:
    """Write every answered query of the study to ``out`` (``core.exports.rows_write``);
    returns the number of rows."""
    return rows_write(label_rows(study), out=out, fmt=fmt, fields=EXPORT_FIELDS)
