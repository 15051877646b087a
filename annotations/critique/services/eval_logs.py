"""An evaluation log into a critique study: its samples become questions (text, options,
the hidden gold; the task's name as their domain) and the model's outputs their level-0 AI
responses, one per model, task and epoch (``core.services.eval_logs``; the questions' and
AI outputs' own importers check and write them, all or nothing).

A response's ``final`` is the option the sample's answer names (None: recorded as
unparseable, the outputs' rule). Outputs are never rewritten: re-importing a log skips the
responses already stored with the same text and refuses one stored with another.
"""

from __future__ import annotations

from django.db import transaction

from annotations.core.errors import ImportFailed
from annotations.core.models import Study
from annotations.core.services.eval_logs import (
    EvalLog,
    EvalLogImported,
    samples_import,
    samples_split,
)
from annotations.critique.models import CritiqueOutput, CritiqueQuestion
from annotations.critique.services.ai_outputs import critique_ai_outputs_import
from annotations.critique.services.questions import critique_questions_import

EMPTY_OUTPUT = "(the model's output was empty)"


def output_id(system: str, key: str) -> str:
    """The AI response's id: the system's name and the sample's key."""
    return f"{system}/{key}"


@transaction.atomic
def critique_eval_log_import(*, study: Study, log: EvalLog, label: str) -> EvalLogImported:
    """Store ``log``'s new questions, then each sample's output as a level-0 AI response."""
    stored = {ext: (text, tuple(options), gold) for ext, text, options, gold in
              CritiqueQuestion.objects.filter(study=study).values_list(
                  "external_id", "text", "options", "gold")}
    split = samples_split(log, stored, "question")
    ids = {output_id(log.system(s.epoch), s.key): s for s in log.samples}
    written = dict(CritiqueOutput.objects.filter(study=study, external_id__in=list(ids))
                   .values_list("external_id", "raw_text"))
    problems = [*split.problems, *(
        f"{s.where}: the response '{ext}' is already stored with another text; AI outputs "
        f"are never rewritten" for ext, s in ids.items()
        if ext in written and written[ext] != (s.output or EMPTY_OUTPUT))]
    if problems:
        raise ImportFailed(problems)
    if split.new:
        samples_import(critique_questions_import, [(s.where, {
            "id": s.key, "text": s.text, "options": list(s.choices), "gold": s.target,
            "domain": log.task[:120]}) for s in split.new], study=study, label=label)
    rows = [(s.where, {"id": ext, "question": s.key, "level": 0,
                       "text": s.output or EMPTY_OUTPUT, "final": s.answer,
                       "model": log.system(s.epoch)})
            for ext, s in ids.items() if ext not in written]
    result = (samples_import(critique_ai_outputs_import, rows, study=study, label=label)
              if rows else None)
    return EvalLogImported(
        framework=log.framework, systems=log.systems,
        samples=len(log.samples), created=len(split.new), unchanged=split.unchanged,
        answers=len(rows), unparsed=sum(1 for _, r in rows if r["final"] is None),
        things="question",
        extra=[("Annotator tasks made", f"{result.tasks if result else 0:,}", "tasks")],
        next_text=(result.next_step() if result else
                   "Nothing new: every response of this log is already in the study."))
