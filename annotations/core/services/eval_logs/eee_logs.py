"""Every Eval Ever instance-level JSONL (schema 0.3: ``instance_level_eval.schema.json``;
its converters cover Inspect, HELM and lm-evaluation-harness).

Per line: ``sample_id`` (the key), ``model_id`` and ``evaluation_name`` (the AI system;
one of each per file), ``input.raw`` (the question), ``input.choices`` (the options; a line
without them is free text and refused), ``input.reference`` (the right option, hidden
gold: a letter, an option's text or a 0-based index — a digit that is both an option's
text and another option's index is ambiguous and refused, never guessed), and the model's
answer: the terminal ``answer_attribution``'s ``extracted_value``, else ``output.raw``
(single turn) or the last assistant message (multi-turn and agentic transcripts), read as a
letter or an option's text, else by its last line "ANSWER: X". A sample scored by several
metrics has one line per ``evaluation_result_id``: the first line of a (sample, epoch) is
read, the others must agree on its question.
"""

from __future__ import annotations

import io

from django.conf import settings

from annotations.core.errors import ImportFailed
from annotations.core.services.eval_logs.samples import (
    EvalLog,
    EvalSample,
    answer_line_option,
    free_text_problem,
    option_named,
)
from annotations.core.services.records import read_records


def read_eee_log(data: bytes, *, name: str, model: str = "", task: str = "") -> EvalLog:
    """The samples of an instance-level file (module docstring); ImportFailed lists every
    problem by file and line."""
    problems: list[str] = []
    systems: dict[tuple[str, str], int] = {}
    seen: dict[tuple[str, int], tuple[int, EvalSample]] = {}  # (id, epoch) → its first line
    limit = settings.OVERSIGHT_EVAL_LOG_MAX_SAMPLES
    for line, rec in read_records(io.BytesIO(data), name=name, fmt="jsonl",
                                  problems=problems):
        where = f"{name}:{line}"
        if len(seen) >= limit:
            problems.append(f"{where}: more than {limit:,} samples; at most {limit:,} per "
                            f"import (OVERSIGHT_EVAL_LOG_MAX_SAMPLES)")
            break
        sample = _sample(rec, where, problems)
        if sample is None:
            continue
        systems.setdefault((str(rec.get("model_id") or ""), str(rec.get("evaluation_name")
                                                               or "")), line)
        first, kept = seen.setdefault((sample.key, sample.epoch), (line, sample))
        if first != line and (kept.text, kept.choices, kept.target) != (
                sample.text, sample.choices, sample.target):
            problems.append(f"{where}: sample_id: '{sample.key}' again (line {first}) "
                            f"with another question, options or reference")
    samples = [sample for _, sample in seen.values()]
    if len(systems) > 1:
        listed = "; ".join(f"{m or '?'} on {t or '?'} (line {n})"
                           for (m, t), n in list(systems.items())[:5])
        problems.append(f"{name}: {len(systems)} models or evaluations in one file ({listed}); "
                        f"import one model's run of one evaluation per file")
    if not samples and not problems:
        problems.append(f"{name}: the file holds no samples")
    if problems:
        raise ImportFailed(problems)
    (model_id, evaluation), = systems
    return EvalLog(framework="every-eval-ever", model=model or model_id,
                   task=task or evaluation, samples=samples)


def _required_text(rec: dict, field: str, where: str, problems: list[str]) -> str:
    value = rec.get(field)
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {field}: missing (the schema requires it)")
        return ""
    return value.strip()


def _reference(value, choices: tuple[str, ...]) -> tuple[int | None, str | None]:
    """The right option of ``input.reference`` (a list of one), or (None, the problem)."""
    if not isinstance(value, list) or len(value) != 1:
        count = len(value) if isinstance(value, list) else 0
        return None, (f"input.reference: {count} references; one right option per question "
                      f"is imported")
    raw = str(value[0]).strip()
    by_text = option_named(raw, choices)
    if raw.isdigit() and by_text is not None and int(raw) < len(choices) \
            and int(raw) != by_text and choices[by_text].strip() == raw:
        return None, (f"input.reference: '{raw}' is both the text of option {by_text} and "
                      f"the index of option {int(raw)}; ambiguous, not guessed")
    found = by_text if by_text is not None else option_named(raw, choices, index_base=0)
    if found is None:
        return None, f"input.reference: '{raw[:80]}' names none of its {len(choices)} options"
    return found, None


def _answer_text(rec: dict) -> tuple[str, str | None]:
    """(the model's output as written, the value its extraction gave, if any)."""
    extracted = next((a.get("extracted_value") for a in reversed(rec.get("answer_attribution")
                                                                  or [])
                      if isinstance(a, dict) and a.get("is_terminal")), None)
    output = rec.get("output")
    if isinstance(output, dict) and isinstance(output.get("raw"), list) and output["raw"]:
        return str(output["raw"][-1]), extracted
    for message in reversed(rec.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "assistant" \
                and message.get("content"):
            return str(message["content"]), extracted
    return "", extracted


def _sample(rec: dict, where: str, problems: list[str]) -> EvalSample | None:
    found: list[str] = []
    key = _required_text(rec, "sample_id", where, found)
    _required_text(rec, "model_id", where, found)
    _required_text(rec, "evaluation_name", where, found)
    given = rec.get("input")
    if not isinstance(given, dict):
        found.append(f"{where}: input: missing (an object with raw, reference and choices)")
        problems += found
        return None
    text = str(given.get("raw") or "").strip()
    if not text:
        found.append(f"{where}: input.raw: missing")
    choices = given.get("choices")
    if not choices:
        found.append(free_text_problem(where))
        problems += found
        return None
    if not isinstance(choices, list) or any(isinstance(c, dict | list) for c in choices):
        found.append(f"{where}: input.choices: must be a list of texts")
        problems += found
        return None
    options = tuple(str(c).strip() for c in choices)
    target, problem = _reference(given.get("reference"), options)
    if problem:
        found.append(f"{where}: {problem}")
    metadata = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    epoch = str(metadata.get("epoch") or "1")
    if not epoch.isdigit() or int(epoch) < 1:
        found.append(f"{where}: metadata.epoch: '{epoch[:20]}' is not an epoch number")
        epoch = "1"
    if found:
        problems += found
        return None
    output, extracted = _answer_text(rec)
    answer = option_named(extracted, options)
    if answer is None:
        answer = option_named(output, options)
    if answer is None:
        answer = answer_line_option(output, options)
    return EvalSample(where=where, key=key, text=text, choices=options, target=target,
                      answer=answer, output=output, epoch=int(epoch))
