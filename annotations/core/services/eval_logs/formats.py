"""Evaluation logs as the platform reads them: Inspect (``inspect_logs``),
lm-evaluation-harness ``--log_samples`` (``lm_eval_logs``) and Every Eval Ever's
instance-level JSONL (``eee_logs``), each turned into one ``samples.EvalLog``.

``log_format(name, data, given)`` says which reader a file needs ("inspect", "lm-eval" or
"eee"): the one the researcher gave, else from the file itself (a zip or an Inspect JSON
log; a JSONL line's keys). ``read_log`` runs that reader. Every reader refuses the whole
file with every problem it found (``ImportFailed``: file, sample, field) — a sample
without options, a target naming no option, more samples than
``OVERSIGHT_EVAL_LOG_MAX_SAMPLES`` — and stores nothing; the study types' writers
(``services.eval_logs``) then hand the samples to their own importers.
"""

from __future__ import annotations

import json

from annotations.core.errors import ImportFailed
from annotations.core.services.eval_logs.samples import FRAMEWORKS, EvalLog, EvalSample

__all__ = ["FORMATS", "FORMAT_NAMES", "EvalLog", "EvalSample", "log_format", "read_log"]

# format code (ImportJob.fmt) → the framework it comes from
FORMATS = {"inspect": "inspect", "lm-eval": "lm-eval", "eee": "every-eval-ever"}
FORMAT_NAMES = {code: FRAMEWORKS[framework] for code, framework in FORMATS.items()}
_SNIFF_BYTES = 1 << 20


def _first_line_keys(data: bytes) -> set[str]:
    head = data[:_SNIFF_BYTES].split(b"\n", 1)[0].strip()
    try:
        record = json.loads(head.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return set()
    return set(record) if isinstance(record, dict) else set()


def log_format(name: str, data: bytes, given: str | None = None) -> str:
    """The format code of a log file (module docstring); ImportFailed naming the file when
    it is none of them."""
    if given:
        if given not in FORMATS:
            known = ", ".join(f"{code} ({label})" for code, label in FORMAT_NAMES.items())
            raise ImportFailed([f"{name}: unknown log format '{given}' (use {known})"])
        return given
    if data[:4] == b"PK\x03\x04" or name.lower().endswith(".eval"):
        return "inspect"
    if data.lstrip()[:1] == b"{" and not name.lower().endswith((".jsonl", ".ndjson")):
        head = data[:_SNIFF_BYTES]
        if b'"eval"' in head and (b'"samples"' in head or b'"status"' in head):
            return "inspect"
    keys = _first_line_keys(data)
    if {"doc_id", "doc"} <= keys or {"doc_id", "resps"} <= keys:
        return "lm-eval"
    if {"sample_id", "evaluation_id"} <= keys or "schema_version" in keys and "input" in keys:
        return "eee"
    raise ImportFailed([
        f"{name}: not an evaluation log the platform reads: an Inspect log (.eval or .json), "
        f"an lm-evaluation-harness samples file (--log_samples JSONL: doc_id, doc, "
        f"resps …) or Every Eval Ever instance-level JSONL; say which with the format"])


def read_log(data: bytes, *, name: str, fmt: str, model: str = "", task: str = "") -> EvalLog:
    """The samples of ``data`` read by the reader of ``fmt`` (``log_format``); ``model`` and
    ``task`` name the AI system where the file itself does not (lm-eval's samples files)
    or replace what it says."""
    if fmt == "inspect":
        from annotations.core.services.eval_logs.inspect_logs import read_inspect_log

        log = read_inspect_log(data, name=name)
    elif fmt == "lm-eval":
        from annotations.core.services.eval_logs.lm_eval_logs import read_lm_eval_log

        log = read_lm_eval_log(data, name=name, model=model, task=task)
    elif fmt == "eee":
        from annotations.core.services.eval_logs.eee_logs import read_eee_log

        log = read_eee_log(data, name=name, model=model, task=task)
    else:
        log_format(name, data, fmt)  # raises: unknown format
        raise AssertionError(fmt)
    if model or task:
        log = EvalLog(framework=log.framework, model=model or log.model,
                      task=task or log.task, samples=log.samples)
    return log
