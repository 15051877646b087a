"""Importing a critique study's multiple-choice questions (CSV or JSONL; all or nothing).

One record per question (docs/critique-studies.md):

    {"id": "q17", "text": "…", "options": ["…", "…", "…", "…"], "gold": "B", "domain": "math"}

``id`` (unique in the study) and ``text`` are required; ``options`` is a list of 2 to 26
texts (a JSON list in a CSV cell); ``gold`` is optional — an option letter (A = the first
option), a 0-based index, or the exact text of one option; ``domain`` is optional. Every
problem is reported as ``file:line: field: problem``; nothing is written unless the whole
file is good.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.db import transaction

from annotations.core.errors import ImportFailed
from annotations.core.inputs import OPTION_MAX
from annotations.core.models import Study
from annotations.core.services.bulk import gc_paused, rows_insert
from annotations.core.services.records import (
    KeysSeen,
    parse_json_cell,
    read_records,
    unknown_fields,
)
from annotations.core.words import counted
from annotations.critique.models import CritiqueQuestion
from annotations.critique.services.studies import critique_settings

MAX_OPTIONS = 26
MAX_ERRORS = 200
FIELDS = frozenset({"id", "text", "options", "gold", "domain"})
COLUMNS = {"id": CritiqueQuestion._meta.get_field("external_id"),
           "text": CritiqueQuestion._meta.get_field("text"),
           "domain": CritiqueQuestion._meta.get_field("domain")}
FIELDS = ("id", "text", "options", "gold", "domain")


@dataclass(frozen=True)
class QuestionsImported:
    created: int
    tasks: int

    def summary(self) -> str:
        return (f"{counted(self.created, 'question')} added, "
                f"{counted(self.tasks, 'task')} made")

    def details(self) -> list[tuple[str, str, str]]:
        """The summary's own rows (``import_jobs.import_summary``); questions are never
        rewritten (updated is 0)."""
        return [("Annotator tasks made", f"{self.tasks:,}", "tasks")]

    def next_step(self) -> str:
        if self.tasks:
            return "Annotators get the new questions' tasks now."
        return ("Import the AI outputs of these questions (or write them through the AI "
                "endpoint from the study's page), then open the study.")


def option_index(value, options: list[str]) -> int:
    """A letter (A…), a 0-based index or an option's exact text → 0-based index; ValueError
    otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"'{value}' is not an option")
    if isinstance(value, int):
        index = value
    else:
        text = str(value).strip()
        if text in options and len(text) != 1:
            index = options.index(text)
        elif len(text) == 1 and text.isalpha():
            index = ord(text.upper()) - ord("A")
        elif text.lstrip("-").isdigit():
            index = int(text)
        elif text in options:
            index = options.index(text)
        else:
            raise ValueError(f"'{text[:60]}' is neither an option letter, a 0-based index nor "
                             "the text of an option")
    if not 0 <= index < len(options):
        raise ValueError(f"'{value}' is out of range: the question has "
                         f"{counted(len(options), 'option')} "
                         f"(A–{chr(ord('A') + len(options) - 1)}, or 0–{len(options) - 1})")
    return index


def _options(value) -> list[str]:
    options = parse_json_cell(value, expect=list)
    if not 2 <= len(options) <= MAX_OPTIONS:
        raise ValueError(f"{counted(len(options), 'option')}; a question needs 2 to "
                         f"{MAX_OPTIONS}")
    for i, option in enumerate(options):
        if not isinstance(option, str) or not option.strip():
            raise ValueError(f"option {i}: a non-empty text")
        if len(option.strip()) > OPTION_MAX:
            raise ValueError(f"option {i}: {len(option.strip())} characters; at most "
                             f"{OPTION_MAX}")
    return [o.strip() for o in options]


@transaction.atomic
def critique_questions_import(*, study: Study, source: IO | str, name: str | None = None,
                              fmt: str | None = None, update: bool = False
                              ) -> QuestionsImported:
    """Add questions to a critique study (draft or open; an open study gets their tasks at
    once). Raises ImportFailed listing every bad line; nothing is written then. Questions
    are never rewritten: ``update`` (the import jobs' flag) is refused."""
    from annotations.critique.services.generation import critique_generate

    critique_settings(study)
    name = name or (str(source) if isinstance(source, str | Path)
                    else getattr(source, "name", "upload"))
    if update:
        raise ImportFailed([f"{name}: questions cannot be updated; import new ids"])
    existing = set(CritiqueQuestion.objects.filter(study=study)
                   .values_list("external_id", flat=True))
    rows: list[dict] = []
    errors: list[str] = []
    seen = KeysSeen(existing)
    with gc_paused():
        for line, record in read_records(source, name=name, fmt=fmt, columns=COLUMNS,
                                         problems=errors):
            where = f"{name}:{line}"
            problems = [f"{where}: {p}" for p in unknown_fields(record, FIELDS)]
            ext = str(record.get("id") or "").strip()
            if problem := seen.problem(ext, line):
                problems.append(f"{where}: {problem}")
            text = str(record.get("text") or "").strip()
            if not text:
                problems.append(f"{where}: text: missing")
            options: list[str] = []
            try:
                options = _options(record.get("options"))
            except ValueError as exc:
                problems.append(f"{where}: options: {exc}")
            gold = None
            raw_gold = record.get("gold")
            if raw_gold not in (None, "") and options:
                try:
                    gold = option_index(raw_gold, options)
                except ValueError as exc:
                    problems.append(f"{where}: gold: {exc}")
            if problems:
                errors.extend(problems)
                if len(errors) >= MAX_ERRORS:
                    break
                continue
            rows.append({"study_id": study.pk, "external_id": ext, "text": text,
                         "options": options, "gold": gold,
                         "domain": str(record.get("domain") or "").strip()})
    if errors:
        raise ImportFailed(errors)
    if not rows:
        raise ImportFailed([f"{name}: no questions in the file"])
    rows_insert(CritiqueQuestion, rows)
    tasks = 0
    if Study.objects.get(pk=study.pk).status == Study.Status.OPEN:
        tasks = critique_generate(study=study).total
    return QuestionsImported(created=len(rows), tasks=tasks)
