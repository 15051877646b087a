"""Importing AI outputs of a critique study from JSONL (all or nothing).

One line per output (docs/critique-studies.md, "Import schema"):

    {"id": "r1", "question": "q17", "level": 0, "text": "… Answer: B", "model": "m-7b"}
    {"id": "c1", "question": "q17", "level": 1, "inputs": ["r2", "r1"], "text": "…",
     "choice": "first", "final": "B"}

* ``id`` — unique in the study (inputs of later lines and later files refer to it);
  ``question`` — a question's id; ``level`` — 0 (response) … L, a level the study's mode
  gives to AI; ``text`` — the output as written (stored as is).
* ``inputs`` (level ≥ 1) — the two outputs of level − 1 it compares, in the order it was
  shown them: ids from earlier lines or earlier imports. Every critique of a level of a
  question compares the same two outputs (the chain pair): they take slots 0 and 1 of
  their level; other outputs of the level follow in file order.
* ``final`` — the option it chose: a letter (A…), a 0-based index, or null when it gave
  none (recorded as unparseable). Absent: parsed from ``text`` by the platform's rule (last
  line ``Answer: X``; never guessed).
* ``choice`` (critiques) — "first", "second" (in ``inputs`` order) or "neither", or null
  (unparseable). Absent: parsed from ``text`` (``Better: 1|2|neither``).
* ``reasoning`` — optional: the reasoning or rationale shown to readers (default: ``text``
  without the parsed answer lines); ``model`` — optional name of the AI system;
  ``confidence`` — optional 1–5.

Every problem is reported as ``file:line: field: problem``; nothing is written unless the
whole file is good. Then the tasks the new outputs make possible are generated.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from django.db import transaction

from annotations.core.errors import ImportFailed
from annotations.core.models import Study
from annotations.core.services.bulk import gc_paused
from annotations.core.services.records import KeysSeen, read_records, unknown_fields, unknown_id
from annotations.critique.models import CritiqueOutput, CritiqueQuestion, CritiqueSettings
from annotations.critique.services.questions import option_index
from annotations.critique.services.studies import critique_settings

MAX_ERRORS = 200
COLUMNS = {"id": CritiqueOutput._meta.get_field("external_id"),
           "model": CritiqueOutput._meta.get_field("ai_model"),
           "text": CritiqueOutput._meta.get_field("raw_text"),
           "reasoning": CritiqueOutput._meta.get_field("reasoning")}
FIELDS = frozenset({"id", "question", "level", "text", "inputs", "final", "choice",
                    "reasoning", "model", "confidence"})
CHOICE_WORDS = {"first": "first", "second": "second", "neither": "neither", "1": "first",
                "2": "second", "0": "neither"}


@dataclass(frozen=True)
class OutputsImported:
    created: int
    unparseable: int
    by_level: dict[int, int]
    tasks: int

    def summary(self) -> str:
        levels = ", ".join(f"level {lv}: {n}" for lv, n in sorted(self.by_level.items()))
        return (f"{self.created} AI outputs added ({levels}); {self.unparseable} without a "
                f"parseable answer or choice; {self.tasks} annotator tasks made")

    def details(self) -> list[tuple[str, str, str]]:
        """The summary's own rows (``import_jobs.import_summary``); outputs are never
        rewritten (updated is 0)."""
        return [*((f"Level {lv}", f"{n:,}", f"level-{lv}") for lv, n in
                  sorted(self.by_level.items())),
                ("Without a parseable answer or choice", f"{self.unparseable:,}",
                 "unparseable"),
                ("Annotator tasks made", f"{self.tasks:,}", "tasks")]

    def next_step(self) -> str:
        if self.tasks:
            return "Annotators get the tasks of the new outputs now."
        return ("Open the study when every level it asks of the AI has its outputs (its "
                "page says what is still missing).")


@dataclass
class _Row:
    line: int
    ext: str
    question: CritiqueQuestion
    level: int
    text: str
    reasoning: str
    final: int | None
    choice: str
    model: str
    confidence: int | None
    inputs: tuple[str, str] | None
    slot: int = -1
    pk: int | None = field(default=None)


def _choice(value) -> str:
    if value is None:
        return "unparseable"
    word = CHOICE_WORDS.get(str(value).strip().lower())
    if word is None:
        raise ValueError(f"'{value}' is not first, second or neither")
    return word


def _parsed(record: dict, text: str, level: int, n_options: int):
    """(final, choice, reasoning) from the record, or parsed from ``text`` where absent."""
    from assistants.prompts import (
        CHOICE_FIRST,
        CHOICE_NEITHER,
        CHOICE_SECOND,
        parse_critique,
        parse_response,
    )

    if level == 0:
        parsed = parse_response(text, n_options)
        final, choice, reasoning = parsed.final, "", parsed.reasoning
    else:
        parsed = parse_critique(text, n_options)
        final, reasoning = parsed.final, parsed.rationale
        choice = {CHOICE_FIRST: "first", CHOICE_SECOND: "second",
                  CHOICE_NEITHER: "neither"}.get(parsed.choice, "unparseable")
    return final, choice, reasoning


def _row(record: dict, where: str, questions: dict[str, CritiqueQuestion],
         settings: CritiqueSettings, problems: list[str], line: int, seen: KeysSeen
         ) -> _Row | None:
    """One line as its output (None when its question, level or text is wrong), every
    problem of the line appended to ``problems``."""
    problems += [f"{where}: {p}" for p in unknown_fields(record, FIELDS)]
    ext = str(record.get("id") or "").strip()
    if problem := seen.problem(ext, line):
        problems.append(f"{where}: {problem}")
        ext = ""  # missing or taken: the line's output is not one inputs may name
    asked = str(record.get("question") or "").strip()
    question = questions.get(asked)
    if not asked:
        problems.append(f"{where}: question: missing (a question's id)")
    elif question is None:
        problems.append(f"{where}: {unknown_id('question', asked, 'a question')}")
    level = record.get("level")
    if isinstance(level, bool) or not isinstance(level, int):
        problems.append(f"{where}: level: a whole number from 0 to {settings.top_level}")
        level = None
    elif not 0 <= level <= settings.top_level:
        problems.append(f"{where}: level: {level} is outside 0…{settings.top_level} (L)")
        level = None
    elif settings.human_level(level):
        problems.append(f"{where}: level: annotators write level {level} in this study's "
                        f"mode ({settings.get_mode_display()}); AI outputs go to levels "
                        f"{', '.join(map(str, settings.ai_levels)) or '(none)'}")
        level = None
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where}: text: missing (the output as written)")
        text = None
    inputs = record.get("inputs")
    if level is not None and level > 0:
        if (not isinstance(inputs, list) or len(inputs) != 2
                or not all(isinstance(i, str) and i.strip() for i in inputs)):
            problems.append(f"{where}: inputs: a level-{level} critique names the two "
                            f"level-{level - 1} outputs it compares, in the order shown")
            inputs = None
        elif inputs[0].strip() == inputs[1].strip():
            problems.append(f"{where}: inputs: the two inputs must differ")
            inputs = None
        else:
            inputs = (inputs[0].strip(), inputs[1].strip())
    elif inputs not in (None, []):
        problems.append(f"{where}: inputs: a response (level 0) has no inputs")
    confidence = record.get("confidence")
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(
            confidence, int) or not 1 <= confidence <= 5):
        problems.append(f"{where}: confidence: a whole number from 1 to 5, or leave it out")
        confidence = None
    model = record.get("model") or ""
    if not isinstance(model, str):
        problems.append(f"{where}: model: a text")
        model = ""
    if question is None or level is None or text is None:
        return None
    n_options = len(question.options)
    final, choice, reasoning = _parsed(record, text, level, n_options)
    if "final" in record:
        final = None
        if record["final"] is not None:
            try:
                final = option_index(record["final"], question.options)
            except ValueError as exc:
                problems.append(f"{where}: final: {exc}")
    if "choice" in record and level > 0:
        try:
            choice = _choice(record["choice"])
        except ValueError as exc:
            problems.append(f"{where}: choice: {exc}")
    elif "choice" in record and record["choice"] is not None:
        problems.append(f"{where}: choice: a response (level 0) has no inputs to choose from")
    if "reasoning" in record:
        if not isinstance(record["reasoning"], str):
            problems.append(f"{where}: reasoning: a text")
        else:
            reasoning = record["reasoning"]
    return _Row(line=line, ext=ext, question=question, level=level, text=text,
                reasoning=reasoning.strip(), final=final, choice=choice, model=model.strip(),
                confidence=confidence, inputs=inputs)


def _slots(rows: list[_Row], existing: dict[tuple[int, int], dict[int, str]],
           name: str, problems: list[str]) -> None:
    """Assign each new output its slot (the chain pair first) and check that every critique
    compares its level's chain pair."""
    groups: dict[tuple[int, int], list[_Row]] = defaultdict(list)
    named: dict[tuple[int, int], tuple[str, str]] = {}
    for row in rows:
        groups[(row.question.pk, row.level)].append(row)
        if row.inputs is not None:
            named.setdefault((row.question.pk, row.level - 1), row.inputs)
    for key, members in sorted(groups.items(), key=lambda kv: kv[0][1]):
        taken = existing.get(key, {})
        pair = named.get(key, ())
        ordered = ([r for r in members if r.ext in pair]
                   + [r for r in members if r.ext not in pair])
        free = (s for s in range(10_000) if s not in taken)
        for row in ordered:
            row.slot = next(free)
    by_ext = {r.ext: r for r in rows if r.ext}
    for row in rows:
        if row.inputs is None:
            continue
        key = (row.question.pk, row.level - 1)
        chain = {s: ext for s, ext in existing.get(key, {}).items() if s < 2}
        chain.update({r.slot: r.ext for r in groups.get(key, []) if r.slot < 2})
        if set(row.inputs) != set(chain.values()) or len(chain) != 2:
            where = f"{name}:{row.line}: inputs"
            have = " and ".join(f"'{chain[s]}'" for s in sorted(chain)) or "none yet"
            problems.append(f"{where}: every level-{row.level} critique of question "
                            f"'{row.question.external_id}' compares the same two level-"
                            f"{row.level - 1} outputs (its chain pair: {have}); got "
                            f"'{row.inputs[0]}' and '{row.inputs[1]}'")
        for ext in row.inputs:
            source = by_ext.get(ext)
            if source is not None and source.line > row.line:
                problems.append(f"{name}:{row.line}: inputs: '{ext}' is defined on line "
                                f"{source.line}, after this line; list inputs first")


@transaction.atomic
def critique_ai_outputs_import(*, study: Study, source: IO | str, name: str | None = None,
                               fmt: str | None = None, update: bool = False
                               ) -> OutputsImported:
    """Add AI outputs from a JSONL file (module docstring). Raises ImportFailed listing
    every problem (``file:line: field: problem``); nothing is written then. ``fmt`` (the
    import jobs' argument) must say JSONL if given; outputs are never rewritten
    (``update`` is refused)."""
    from annotations.critique.services.generation import critique_generate

    settings = critique_settings(study)
    name = name or (str(source) if isinstance(source, str | Path)
                    else getattr(source, "name", "upload"))
    if update or fmt not in (None, "jsonl"):
        raise ImportFailed([f"{name}: AI outputs are JSONL and never rewritten"
                            + ("" if fmt in (None, "jsonl") else f" (not {fmt})")])
    questions = {q.external_id: q for q in CritiqueQuestion.objects.filter(study=study)}
    stored = {ext: (pk, q, lv) for ext, pk, q, lv in CritiqueOutput.objects.filter(
        study=study).exclude(external_id="").values_list("external_id", "pk", "question_id",
                                                           "level")}
    problems: list[str] = []
    rows: list[_Row] = []
    seen = KeysSeen(stored)
    with gc_paused():
        for line, record in read_records(source, name=name, fmt="jsonl", columns=COLUMNS,
                                         problems=problems):
            where = f"{name}:{line}"
            row = _row(record, where, questions, settings, problems, line, seen)
            if row is not None:  # its inputs are checked even when the line has problems
                rows.append(row)
            if len(problems) >= MAX_ERRORS:
                raise ImportFailed(problems)
    by_ext = {r.ext: r for r in rows if r.ext}
    for row in rows:
        for ext in row.inputs or ():
            known = by_ext.get(ext)
            if known is not None:
                q, lv = known.question.pk, known.level
            elif ext in stored:
                q, lv = stored[ext][1], stored[ext][2]
            else:
                problems.append(f"{name}:{row.line}: inputs: '{ext}' is neither an id of this "
                                "file nor an output of the study")
                continue
            if q != row.question.pk or lv != row.level - 1:
                problems.append(f"{name}:{row.line}: inputs: '{ext}' is not a level-"
                                f"{row.level - 1} output of question "
                                f"'{row.question.external_id}'")
    if problems:
        raise ImportFailed(problems)
    if not rows:
        raise ImportFailed([f"{name}: no outputs in the file"])
    keys = {(r.question.pk, r.level) for r in rows} | {
        (r.question.pk, r.level - 1) for r in rows if r.level}
    existing: dict[tuple[int, int], dict[int, str]] = defaultdict(dict)
    for q, lv, slot, ext in CritiqueOutput.objects.filter(
            study=study, question_id__in={k[0] for k in keys}).values_list(
                "question_id", "level", "slot", "external_id"):
        existing[(q, lv)][slot] = ext or f"(output in slot {slot})"
    _slots(rows, existing, name, problems)
    if problems:
        raise ImportFailed(problems)
    pks = {ext: pk for ext, (pk, _, _) in stored.items()}
    for level in sorted({r.level for r in rows}):
        batch = [r for r in rows if r.level == level]
        made = CritiqueOutput.objects.bulk_create([CritiqueOutput(
            study=study, question=r.question, level=r.level, slot=r.slot,
            first_id=pks[r.inputs[0]] if r.inputs else None,
            second_id=pks[r.inputs[1]] if r.inputs else None,
            reasoning=r.reasoning, final=r.final, choice=r.choice if r.level else "",
            confidence=r.confidence, author_kind=CritiqueOutput.Author.AI, ai_model=r.model,
            raw_text=r.text, external_id=r.ext, source=CritiqueOutput.Source.IMPORT)
            for r in batch])
        if any(o.pk is None for o in made):  # a database that returns no ids
            made = list(CritiqueOutput.objects.filter(
                study=study, external_id__in=[r.ext for r in batch]))
        pks.update({o.external_id: o.pk for o in made})
    by_level: dict[int, int] = defaultdict(int)
    for r in rows:
        by_level[r.level] += 1
    unparseable = sum(1 for r in rows if r.final is None or r.choice == "unparseable")
    tasks = critique_generate(study=study).total
    transaction.on_commit(lambda: _schedule(study.pk))
    return OutputsImported(created=len(rows), unparseable=unparseable, by_level=dict(by_level),
                           tasks=tasks)


def _schedule(study_id: int) -> None:
    from annotations.core.services.recompute import study_recompute_schedule

    study_recompute_schedule(study_id)
