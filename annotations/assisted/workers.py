"""What the Workers page (``core.reviews.workers``) reads of an assisted study: every rating
with its rater and time; a rating of a sentence with a gold label is correct when its
verdict is the gold's (``estimators.assisted.factuality.ratings_correct``: Accurate against
Inaccurate, "can't assess" never correct); ratings are compared for agreement within one
sentence and one arm, by verdict (Accurate, Inaccurate, can't assess)."""

from __future__ import annotations

import numpy as np

from annotations.assisted.models import Rating
from annotations.core.models import Study
from annotations.core.reviews.registry import WorkerAnswers
from estimators.assisted.factuality import ACCURATE, ratings_correct, verdicts


def worker_answers(study: Study) -> WorkerAnswers:
    rows = list(Rating.objects.filter(study=study)
                .values_list("pk", "rater_id", "time_on_task_ms", "sentence_id", "arm_id",
                             "label", "sentence__gold").order_by().iterator(chunk_size=50_000))
    if not rows:
        return WorkerAnswers.of([])
    ids, rater, ms, sentence, arm, label, gold = zip(*rows, strict=True)
    verdict = verdicts(list(label), field="label").astype(np.int64)
    gold = np.array(gold, dtype=object)
    known = gold != ""
    correct = np.full(len(rows), np.nan)
    if known.any():
        gold_accurate = verdicts(gold[known], field="gold") == ACCURATE
        correct[known] = ratings_correct(verdict[known], gold_accurate)
    arms = np.array(arm, dtype=np.int64)
    unit = np.array(sentence, dtype=np.int64) * (int(arms.max()) + 1) + arms
    return WorkerAnswers(np.array(ids, dtype=np.int64), np.array(rater, dtype=np.int64),
                         np.array([np.nan if x is None else x for x in ms], dtype=float),
                         unit, verdict, correct)
