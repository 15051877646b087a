"""lm-evaluation-harness ``--log_samples`` files: ``samples_<task>_<timestamp>.jsonl``
(0.4.3 and later; one JSON object per line) and the JSON array of 0.4.0–0.4.2.

Per sample: ``doc_id`` (the key); ``arguments`` — one request per option, each a context
and a continuation (``{"gen_args_N": {"arg_0": context, "arg_1": continuation}}``, or
``[context, continuation]`` pairs before 0.4.3): the question is the first context, the
options are the continuations without their leading delimiter; ``target`` — the right
option as lm-eval's scorer reads it (digits: a 0-based index, else an option's text); the
model's answer — the option of the highest log-likelihood in ``filtered_resps`` (the
``acc`` metric's choice). A ``generate_until`` sample (its request's second argument is the
generation settings) is free text and refused; so is a "multiple-input" task (the options
are in the contexts, one continuation) and a target of several options. A task with
several filters writes one line per (doc_id, filter): the first filter's lines are read.

The samples file does not name the model: the researcher gives it (its ``model_name`` in
the run's ``results_<timestamp>.json``); the task is the file's ``<task>`` unless given.
"""

from __future__ import annotations

import io
import json
import math
import re

from django.conf import settings

from annotations.core.errors import ImportFailed
from annotations.core.inputs import InputRejected, json_loads
from annotations.core.services.eval_logs.samples import EvalLog, EvalSample, free_text_problem
from annotations.core.services.records import read_records

_FILE = re.compile(r"samples_(?P<task>.+?)_\d{4}-\d{2}-\d{2}T[\d\-.]+\.jsonl?$")


def task_of_file(name: str) -> str:
    """The task a samples file's name gives ("" when it is not lm-eval's name)."""
    m = _FILE.search(name.replace("\\", "/").rsplit("/", 1)[-1])
    return m["task"] if m else ""


def _records(data: bytes, name: str, problems: list[str]):
    """(where, record) of each sample: JSONL lines, or the old single JSON array."""
    if data.lstrip()[:1] != b"[":
        for line, rec in read_records(io.BytesIO(data), name=name, fmt="jsonl",
                                      problems=problems):
            yield f"{name}:{line}", rec
        return
    try:
        records = json_loads(data.decode("utf-8-sig"))
    except (InputRejected, ValueError, UnicodeDecodeError) as exc:
        problems.append(f"{name}: not a readable lm-evaluation-harness samples file ({exc})")
        return
    for n, rec in enumerate(records, start=1):
        if not isinstance(rec, dict):
            problems.append(f"{name}: sample {n}: must be a JSON object")
            continue
        yield f"{name}: sample {n}", rec


def read_lm_eval_log(data: bytes, *, name: str, model: str = "", task: str = "") -> EvalLog:
    """The samples of an lm-eval samples file (module docstring); ImportFailed lists every
    problem by file and line."""
    problems: list[str] = []
    if not model.strip():
        problems.append(f"{name}: model: an lm-evaluation-harness samples file does not name "
                        f"the model; give it (the model_name of the run's results_….json)")
    task = task.strip() or task_of_file(name)
    if not task:
        problems.append(f"{name}: task: the file's name is not samples_<task>_<time>.jsonl; "
                        f"give the task's name")
    samples: list[EvalSample] = []
    first_filter: str | None = None
    keys: dict[str, str] = {}
    limit = settings.OVERSIGHT_EVAL_LOG_MAX_SAMPLES
    for where, rec in _records(data, name, problems):
        if len(keys) >= limit:
            problems.append(f"{where}: more than {limit:,} samples; at most {limit:,} per "
                            f"import (OVERSIGHT_EVAL_LOG_MAX_SAMPLES)")
            break
        current = str(rec.get("filter", ""))
        if first_filter is None:
            first_filter = current
        if current != first_filter:
            continue
        sample = _sample(rec, where, problems)
        if sample is None:
            continue
        if sample.key in keys:
            problems.append(f"{where}: doc_id: {sample.key} again (first at "
                            f"{keys[sample.key]})")
            continue
        keys[sample.key] = where
        samples.append(sample)
    if not samples and not problems:
        problems.append(f"{name}: the file holds no samples")
    if problems:
        raise ImportFailed(problems)
    return EvalLog(framework="lm-eval", model=model.strip(), task=task, samples=samples)


def _requests(arguments) -> list[tuple[object, object]] | None:
    """(context, continuation) of each request, in order; None when not readable."""
    if isinstance(arguments, dict):
        ordered = sorted(arguments.items(), key=lambda kv: int(re.sub(r"\D", "", kv[0]) or 0))
        pairs = [(v.get("arg_0"), v.get("arg_1")) if isinstance(v, dict) else None
                 for _, v in ordered]
    elif isinstance(arguments, list):
        pairs = [tuple(v[:2]) if isinstance(v, list) and len(v) >= 2 else None
                 for v in arguments]
    else:
        return None
    return None if any(p is None for p in pairs) else pairs


def _loglikelihood(value) -> float | None:
    """The log-likelihood of one option's response ([ll, is_greedy], as text or numbers)."""
    while isinstance(value, list) and value:
        value = value[0]
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) or number == -math.inf else None


def _target(value, choices: tuple[str, ...]) -> tuple[int | None, str | None]:
    """lm-eval's reading of ``target`` (an index, digits, or an option's text)."""
    if isinstance(value, bool) or value is None:
        return None, "target: missing"
    if isinstance(value, list) or (isinstance(value, str) and value.strip().startswith("[")):
        try:
            several = value if isinstance(value, list) else json.loads(value)
        except ValueError:
            several = None
        if isinstance(several, list) and len(several) == 1:
            value = several[0]
        else:
            return None, (f"target: '{str(value)[:60]}' names several right options; one "
                          f"right option per question is imported")
    text = str(value).strip()
    if isinstance(value, int) or text.isdigit():
        index = int(text)
        if 0 <= index < len(choices):
            return index, None
        return None, f"target: index {index} is outside its {len(choices)} options"
    if text in choices:
        return choices.index(text), None
    return None, f"target: '{text[:80]}' names none of its {len(choices)} options"


def _sample(rec: dict, where: str, problems: list[str]) -> EvalSample | None:
    doc_id = rec.get("doc_id")
    if isinstance(doc_id, bool) or not isinstance(doc_id, int | str) or str(doc_id) == "":
        problems.append(f"{where}: doc_id: missing")
        return None
    where = f"{where} (doc_id {doc_id})"
    pairs = _requests(rec.get("arguments"))
    if not pairs:
        problems.append(f"{where}: arguments: missing or not the requests lm-eval writes")
        return None
    if any(not isinstance(cont, str) for _, cont in pairs):
        problems.append(free_text_problem(where))
        return None
    half = len(pairs) // 2  # acc_mutual_info: the second half repeats without context
    if len(pairs) % 2 == 0 and half and all(not ctx for ctx, _ in pairs[half:]):
        pairs = pairs[:half]
    contexts = {str(ctx) for ctx, _ in pairs}
    choices = tuple(str(cont).strip() for _, cont in pairs)
    if len(contexts) > 1:
        problems.append(f"{where}: arguments: a multiple-input task (the options are in the "
                        f"contexts); only one question with several answers is imported")
        return None
    if len(choices) < 2:
        problems.append(f"{where}: arguments: {len(choices)} option; a question needs two "
                        f"or more")
        return None
    target, problem = _target(rec.get("target"), choices)
    if problem:
        problems.append(f"{where}: {problem}")
        return None
    responses = rec.get("filtered_resps", rec.get("resps"))
    scores = ([_loglikelihood(r) for r in responses[:len(choices)]]
              if isinstance(responses, list) and len(responses) >= len(choices) else None)
    if not scores or any(s is None for s in scores):
        problems.append(f"{where}: filtered_resps: not one log-likelihood per option")
        return None
    answer = max(range(len(choices)), key=lambda i: scores[i])
    return EvalSample(where=where, key=str(doc_id), text=str(next(iter(contexts))).strip(),
                      choices=choices, target=target, answer=answer, output=choices[answer])
