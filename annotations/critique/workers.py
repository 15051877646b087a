"""What the Workers page (``core.reviews.workers``) reads of a critique study: every
annotator's output (responses and critiques) with its time; an output of a question with a
gold option is correct when its final answer is the gold; outputs are compared for
agreement within one question and one level, by final answer."""

from __future__ import annotations

from annotations.core.models import Study
from annotations.core.reviews.registry import WorkerAnswers
from annotations.critique.models import CritiqueOutput

LEVELS_MAX = 1 << 8  # a unit code is question × 256 + level (levels are few)


def worker_answers(study: Study) -> WorkerAnswers:
    rows = (CritiqueOutput.objects.filter(study=study, author_kind=CritiqueOutput.Author.HUMAN,
                                          author__isnull=False)
            .values_list("pk", "author_id", "time_ms", "question_id", "level", "final",
                         "question__gold").order_by())
    return WorkerAnswers.of([
        (pk, author, ms, question * LEVELS_MAX + level, -1 if final is None else final,
         None if gold is None or final is None else float(final == gold))
        for pk, author, ms, question, level, final, gold in rows.iterator(chunk_size=50_000)])
