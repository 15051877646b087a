"""What the Workers page (``core.reviews.workers``) reads of a partitioned study: every
answered query with its specialist and time; a quality check is correct or not
(``Query.qc_correct``; a "not sure" is neither). Specialists answer different classes'
questions, so no two answers are compared for agreement (unit −1)."""

from __future__ import annotations

from annotations.core.models import Study
from annotations.core.reviews.registry import WorkerAnswers
from annotations.partitioned.models import Query


def worker_answers(study: Study) -> WorkerAnswers:
    rows = (Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                 answered_by__isnull=False)
            .values_list("pk", "answered_by_id", "time_on_task_ms", "is_quality_check",
                         "qc_correct").order_by())
    return WorkerAnswers.of([(pk, w, ms, -1, 0, correct if check else None)
                             for pk, w, ms, check, correct in rows.iterator(chunk_size=50_000)])
