"""Evaluation logs into any study type: an import job of kind "eval_log".

``eval_log_submit`` tells the log's format (``eval_logs.formats.log_format``) and queues the
job (the file's bytes, the optional ``model`` and ``task`` names in its options); the job
runs ``eval_log_import``: the log is read whole (``eval_logs.formats.read_log``: every problem
named by file and sample, nothing stored), then the writer the study's type registered
(``eval_log_writer_register``, from its ``hooks``) turns the samples into its own records
and hands them to its own importers through ``samples_import`` — so an evaluation log
obeys exactly the checks and the all-or-nothing rule of that type's files, and each
error names the log's sample, not a line of the records made from it.

Re-importing the same log is idempotent: a sample's key (the framework's sample id) is
the item's id; items already in the study with the same question, options and gold are
left as they are (a different one is an error naming both), and the model's answers
replace its earlier answers to the same items. A second model's log over the same items
adds an AI system.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from annotations.core.errors import ImportFailed
from annotations.core.models import ImportJob, Study, User
from annotations.core.services.eval_logs.formats import EvalLog, EvalSample, log_format, read_log
from annotations.core.services.eval_logs.samples import FRAMEWORKS
from annotations.core.services.import_jobs import import_job_submit, import_kind_register
from annotations.core.words import counted

_WRITERS: dict[str, Callable[..., EvalLogImported]] = {}


@dataclass(frozen=True)
class EvalLogImported:
    """What an evaluation log added: ``created`` new items (questions, sentences),
    ``unchanged`` items already there, ``updated`` earlier answers of the system replaced,
    ``answers`` its answers stored (``unparsed``: outputs naming no option, scored wrong)."""

    framework: str
    systems: list[str]
    samples: int
    created: int
    unchanged: int
    answers: int
    updated: int = 0
    unparsed: int = 0
    things: str = "item"
    next_text: str = ""
    extra: list[tuple[str, str, str]] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{FRAMEWORKS.get(self.framework, self.framework)} log: "
                f"{counted(self.samples, 'sample')} of {', '.join(self.systems)}; "
                f"{counted(self.created, self.things)} added, {self.unchanged} unchanged; "
                f"{counted(self.answers, 'answer')} of the AI stored ({self.updated} "
                f"replaced).")

    def details(self) -> list[tuple[str, str, str]]:
        return [("AI systems", ", ".join(self.systems), "systems"),
                ("Unchanged (already in the study)", f"{self.unchanged:,}", "unchanged"),
                ("AI answers naming no option, scored as wrong", f"{self.unparsed:,}",
                 "unparsed"), *self.extra]

    def next_step(self) -> str:
        return self.next_text


def eval_log_writer_register(study_kind: str, writer: Callable[..., EvalLogImported]) -> None:
    """Make evaluation logs importable into studies of ``study_kind``: ``writer(study=,
    log=, label=)`` stores the samples of ``log`` (a ``eval_logs.samples.EvalLog``) in one
    transaction and returns ``EvalLogImported``."""
    _WRITERS[study_kind] = writer


def eval_log_import(*, study: Study, source: IO[bytes], name: str, fmt: str,
                    update: bool = False, options: dict) -> EvalLogImported:
    """The job's service (module docstring); ``update`` is accepted for the job runner and
    ignored (a log's answers always replace the same system's earlier ones)."""
    writer = _WRITERS.get(study.kind)
    if writer is None:
        raise ImportFailed([f"{name}: evaluation logs cannot be imported into a "
                            f"{study.get_kind_display()} study"])
    log = read_log(source.read(), name=name, fmt=fmt, model=options.get("model", ""),
                   task=options.get("task", ""))
    return writer(study=study, log=log, label=name)


def eval_log_submit(*, study: Study, data: bytes, name: str, user: User | None = None,
                    log_format_given: str | None = None, model: str = "", task: str = "",
                    run_here: bool = False) -> tuple[ImportJob, bool]:
    """Queue (or, with ``run_here``, run) the import of one evaluation log; the same file
    with the same names while its job is queued or running returns that job."""
    options = {k: v.strip() for k, v in (("model", model), ("task", task)) if v and v.strip()}
    return import_job_submit(study=study, kind=ImportJob.Kind.EVAL_LOG, data=data,
                             name=name, user=user, fmt=log_format_given or None,
                             options=options, run_here=run_here)


@dataclass(frozen=True)
class SamplesSplit:
    """A log's questions against the study's: ``new`` (one sample per key, the first
    epoch's), how many are ``unchanged`` (stored with the same question, options and
    gold), and the ``problems`` of keys stored with another one."""

    new: list[EvalSample]
    unchanged: int
    problems: list[str]


def samples_split(log: EvalLog, stored: dict[str, tuple[str, tuple[str, ...], int | None]],
                  noun: str) -> SamplesSplit:
    """Split ``log``'s samples by their keys against ``stored`` (key → (text, options,
    gold index)) of the study's ``noun``s."""
    new: list[EvalSample] = []
    unchanged, problems, seen = 0, [], set()
    for sample in log.samples:
        if sample.key in seen:
            continue
        seen.add(sample.key)
        if sample.key not in stored:
            new.append(sample)
            continue
        text, options, gold = stored[sample.key]
        differs = [name for name, mine, theirs in (
            ("text", sample.text, text), ("options", sample.choices, tuple(options)),
            ("gold", sample.target, gold)) if mine != theirs]
        if differs:
            problems.append(f"{sample.where}: the study's {noun} '{sample.key}' has another "
                            f"{' and '.join(differs)}; a log over the same {noun}s must ask "
                            f"the same questions")
        else:
            unchanged += 1
    return SamplesSplit(new=new, unchanged=unchanged, problems=problems)


_LINE = re.compile(r"^(?P<label>.*?):(?P<line>\d+): (?P<rest>.*)$", re.DOTALL)


def samples_import(importer: Callable, rows: list[tuple[str, dict]], *, study: Study,
                   label: str, **kwargs):
    """Run a study type's file importer (``importer(study=, source=, name=, …)``) on JSONL
    records made from a log's samples: ``rows`` of (the sample's ``where``, the record).
    Its errors ("name:N: field: problem") come back naming the N-th row's sample, and the
    log's own name where they name the whole file."""
    records = f"{label}.jsonl"  # the name tells the importer its format
    source = io.BytesIO("\n".join(json.dumps(record) for _, record in rows).encode())
    try:
        return importer(study=study, source=source, name=records, **kwargs)
    except ImportFailed as exc:
        raise ImportFailed([_at_sample(error, records, label, rows) for error in exc.errors]
                           ) from None


def _at_sample(error: str, records: str, label: str, rows: list[tuple[str, dict]]) -> str:
    m = _LINE.match(error)
    if m is not None and m["label"] == records and 1 <= int(m["line"]) <= len(rows):
        return f"{rows[int(m['line']) - 1][0]}: {m['rest']}"
    return error.replace(records, label)


def register() -> None:
    """The import kind (called from the app's ``ready``)."""
    import_kind_register(ImportJob.Kind.EVAL_LOG, eval_log_import, options=True,
                         formats=log_format)


__all__ = ["EvalLog", "EvalLogImported", "EvalSample", "SamplesSplit", "eval_log_import",
           "eval_log_submit", "eval_log_writer_register", "register", "samples_import",
           "samples_split"]
