"""An evaluation log into a partitioned study: its samples become items (the question,
its options, the hidden gold) and the model's answers become the predictions of one AI
system per model, task and epoch (``core.services.eval_logs``; the items' and
predictions' own importers check and write them, all or nothing).

An answer naming no option is stored as written and scored as wrong (the predictions'
rule). The options must be as many as the study's classes (K), as for any item file.
"""

from __future__ import annotations

from django.db import transaction

from annotations.core.errors import ImportFailed
from annotations.core.models import Item, Study
from annotations.core.services.bulk import IN_LIST_MAX
from annotations.core.services.eval_logs import (
    EvalLog,
    EvalLogImported,
    samples_import,
    samples_split,
)
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.predictions import predictions_import


def _stored(study: Study, keys: set[str]) -> dict[str, tuple[str, tuple[str, ...], int | None]]:
    qs = Item.objects.filter(study=study)
    if len(keys) <= IN_LIST_MAX:
        qs = qs.filter(external_id__in=keys)
    return {ext: (text, tuple(options), gold) for ext, text, options, gold in qs.values_list(
        "external_id", "text", "options", "gold_option") if ext in keys}


@transaction.atomic
def partitioned_eval_log_import(*, study: Study, log: EvalLog, label: str) -> EvalLogImported:
    """Store ``log``'s new items, then every sample's answer as a prediction of its system
    (replacing that system's earlier prediction of the item)."""
    split = samples_split(log, _stored(study, {s.key for s in log.samples}), "item")
    if split.problems:
        raise ImportFailed(split.problems)
    if split.new:
        samples_import(items_import, [(s.where, {
            "id": s.key, "text": s.text, "options": list(s.choices), "gold_index": s.target,
            "metadata": {"source": log.framework, "task": log.task}})
            for s in split.new], study=study, label=label)
    rows = [(s.where, {"item_id": s.key, "system": log.system(s.epoch),
                       **({"prediction_index": s.answer} if s.answer is not None
                          else {"prediction": s.output.strip()})})
            for s in log.samples]
    result = samples_import(predictions_import, rows, study=study, label=label, update=True)
    return EvalLogImported(
        framework=log.framework, systems=log.systems,
        samples=len(log.samples), created=len(split.new), unchanged=split.unchanged,
        answers=result.created + result.updated, updated=result.updated,
        unparsed=sum(result.unparseable.values()) + sum(result.missing.values()),
        next_text=("Open the study (or look at its dashboard if it is open): the AI "
                   "accuracy estimates score these answers against the specialists'."))
