"""Inspect (``inspect_ai``) evaluation logs: ``.eval`` (zip) and ``.json``, read with
Inspect's own ``read_eval_log`` — never unzipped by hand, the format changes between
versions. Needs the optional extra: ``pip install '.[inspect]'``.

Per sample: ``id`` (the key), ``epoch``, ``input`` (text, or the user messages' text),
``choices``, ``target`` (a letter, the hidden gold), the model's output (``output.completion``)
and its option: the ``answer`` its scorer extracted (Inspect's ``choice()`` scorer gives the
letter), else the output's last line "ANSWER: X" (Inspect's multiple-choice template).
The model (``eval.model``) and task (``eval.task``) name the AI system.

Guards before Inspect reads anything: a zip whose members would inflate past
``OVERSIGHT_EVAL_LOG_MAX_INFLATED`` bytes, and a log declaring more than
``OVERSIGHT_EVAL_LOG_MAX_SAMPLES`` samples × epochs (read from its header), are refused.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
import zipfile
from pathlib import Path

from django.conf import settings

from annotations.core.errors import ImportFailed
from annotations.core.services.eval_logs.samples import (
    EvalLog,
    EvalSample,
    answer_line_option,
    free_text_problem,
    option_named,
)
from annotations.core.services.recompute import short_error

INSTALL_HINT = "pip install '.[inspect]' (the platform's optional Inspect extra)"


def _inflated_problem(data: bytes, name: str) -> str | None:
    """Why a zip log must not be handed to Inspect (broken, or inflating too far)."""
    limit = settings.OVERSIGHT_EVAL_LOG_MAX_INFLATED
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            inflated = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return (f"{name}: not a readable Inspect log: a damaged or truncated zip "
                f"({short_error(exc)})")
    if inflated > limit:
        return (f"{name}: the log would inflate to {inflated:,} bytes; at most {limit:,} are "
                f"read (OVERSIGHT_EVAL_LOG_MAX_INFLATED)")
    return None


def read_inspect_log(data: bytes, *, name: str) -> EvalLog:
    """The samples of an Inspect log (module docstring); ImportFailed lists every problem."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ImportFailed([f"{name}: reading Inspect logs needs Inspect: {INSTALL_HINT}"]
                           ) from None
    is_zip = data[:4] == b"PK\x03\x04"
    if is_zip and (problem := _inflated_problem(data, name)):
        raise ImportFailed([problem])
    with tempfile.TemporaryDirectory(prefix="eval-log-") as folder:
        path = Path(folder) / ("log.eval" if is_zip else "log.json")
        path.write_bytes(data)
        try:
            header = read_eval_log(str(path), header_only=True)
            declared = (header.eval.dataset.samples or 0) * (header.eval.config.epochs or 1)
            limit = settings.OVERSIGHT_EVAL_LOG_MAX_SAMPLES
            if declared > limit:
                raise ImportFailed([f"{name}: {declared:,} samples × epochs; at most "
                                    f"{limit:,} per import (OVERSIGHT_EVAL_LOG_MAX_SAMPLES)"])
            log = read_eval_log(str(path))
        except ImportFailed:
            raise
        except RecursionError:
            raise ImportFailed([f"{name}: not a readable Inspect log: JSON nested too deeply"]
                               ) from None
        except Exception as exc:  # noqa: BLE001 - any reader failure names the file
            raise ImportFailed([f"{name}: not a readable Inspect log ({short_error(exc)})"]
                               ) from None
    if log.status != "success":
        raise ImportFailed([f"{name}: the evaluation's status is '{log.status}', not "
                            f"'success': import a log of a finished run"])
    problems: list[str] = []
    samples = [s for s in (_sample(name, raw, problems) for raw in log.samples or [])
               if s is not None]
    if not samples and not problems:
        problems.append(f"{name}: the log holds no samples")
    if problems:
        raise ImportFailed(problems)
    return EvalLog(framework="inspect", model=str(log.eval.model), task=str(log.eval.task),
                   samples=samples)


def _text(value) -> str:
    """A sample's input as the labeller reads it: the text, or its user messages' text."""
    if isinstance(value, str):
        return value.strip()
    parts = [getattr(m, "text", "") for m in value or [] if getattr(m, "role", "") == "user"]
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def _sample(name: str, raw, problems: list[str]) -> EvalSample | None:
    epoch = int(getattr(raw, "epoch", 1) or 1)
    text = _text(raw.input)
    key = str(raw.id) if raw.id is not None else hashlib.sha256(text.encode()).hexdigest()[:16]
    where = f"{name}: sample {key}, epoch {epoch}"
    choices = tuple(str(c).strip() for c in (raw.choices or []))
    if not choices:
        problems.append(free_text_problem(where))
        return None
    target_value = raw.target
    if isinstance(target_value, list):
        if len(target_value) != 1:
            problems.append(f"{where}: target: {len(target_value)} right options; one "
                            f"right option per question is imported")
            return None
        target_value = target_value[0]
    target = option_named(target_value, choices)
    if target is None:
        problems.append(f"{where}: target: '{str(target_value)[:80]}' names none of its "
                        f"{len(choices)} options")
        return None
    output = raw.output.completion if raw.output is not None else ""
    answer = None
    for score in (raw.scores or {}).values():
        answer = option_named(getattr(score, "answer", None), choices)
        if answer is not None:
            break
    if answer is None:
        answer = answer_line_option(output, choices)
    return EvalSample(where=where, key=key, text=text, choices=choices, target=target,
                      answer=answer, output=output, epoch=epoch)
