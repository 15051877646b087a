"""An evaluation log into an assisted study: each sample's answer becomes a sentence to
rate — the prompt is the question with its options, the response the model's output as
written, the sentence to rate the answer it gave ("The answer is B) 7."; its last line
where it named no option), the hidden gold "accurate" when that option is the right one,
else "inaccurate" — with the AI system (model, task, epoch) as its stratum, so that the
dashboard's figures come per system (``core.services.eval_logs``; the sentences' own
importer checks and writes them, all or nothing).

A sentence's text is what its ratings answer, so sentences are never rewritten:
re-importing a log skips the sentences already stored with the same texts and refuses
one stored with others.
"""

from __future__ import annotations

from django.db import transaction

from annotations.assisted.models import Sentence
from annotations.assisted.services.imports import sentences_import
from annotations.core.errors import ImportFailed
from annotations.core.inputs import SENTENCE_MAX
from annotations.core.models import Study
from annotations.core.services.eval_logs import (
    EvalLog,
    EvalLogImported,
    EvalSample,
    samples_import,
)

EMPTY_OUTPUT = "(the model's output was empty)"


def _letter(index: int) -> str:
    return chr(ord("A") + index)


def sentence_of(log: EvalLog, sample: EvalSample) -> dict:
    """The sentence record (``sentences_import``'s fields) of one sample's answer."""
    system = log.system(sample.epoch)
    options = "\n".join(f"{_letter(i)}) {c}" for i, c in enumerate(sample.choices))
    if sample.answer is not None:
        said = f"The answer is {_letter(sample.answer)}) {sample.choices[sample.answer]}."
    else:
        lines = [line.strip() for line in sample.output.splitlines() if line.strip()]
        said = lines[-1] if lines else EMPTY_OUTPUT
    return {"id": f"{system}/{sample.key}", "prompt": f"{sample.text}\n\n{options}",
            "response": sample.output.strip() or EMPTY_OUTPUT, "sentence": said[:SENTENCE_MAX],
            "gold": "accurate" if sample.answer == sample.target else "inaccurate",
            "stratum": system[:120],
            "metadata": {"source": log.framework, "task": log.task, "sample": sample.key}}


@transaction.atomic
def assisted_eval_log_import(*, study: Study, log: EvalLog, label: str) -> EvalLogImported:
    """Store each new sample's answer of ``log`` as a sentence (module docstring)."""
    records = [(s.where, sentence_of(log, s)) for s in log.samples]
    stored = {ext: (prompt, response, target) for ext, prompt, response, target in
              Sentence.objects.filter(study=study, external_id__in=[r["id"] for _, r in
                                                                    records])
              .values_list("external_id", "prompt", "response", "target")}
    problems = [f"{where}: the sentence '{r['id']}' is already stored with other texts; "
                f"sentences are never rewritten" for where, r in records
                if r["id"] in stored and stored[r["id"]] != (r["prompt"], r["response"],
                                                             r["sentence"])]
    if problems:
        raise ImportFailed(problems)
    new = [(where, r) for where, r in records if r["id"] not in stored]
    result = samples_import(sentences_import, new, study=study, label=label) if new else None
    return EvalLogImported(
        framework=log.framework, systems=log.systems,
        samples=len(log.samples), created=len(new), unchanged=len(records) - len(new),
        answers=len(new), unparsed=sum(1 for s in log.samples if s.answer is None),
        things="sentence",
        next_text=(result.next_step() if result is not None else
                   "Nothing new: every sentence of this log is already in the study."))
