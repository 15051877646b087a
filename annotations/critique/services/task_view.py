"""What a critique task shows its annotator (and the AI prompts): the only way task content
leaves the server.

Names, not authors. Within a level the two outputs of the chain are "A" (slot 0) and "B"
(slot 1) — "Response A", "Critique B" — whatever order a task shows them in, so a critique
that says "Response A is wrong" means the same output to everyone who reads it later. A
critique's own choice is shown by those names ("judged Response B better"), with the order
its writer saw its inputs in, since a written rationale may say "the first". Nothing says
who wrote an output, whether a person or an AI system did, or which answer is gold.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.utils.translation import gettext, gettext_noop

from annotations.critique.models import CritiqueOutput, CritiqueSettings, CritiqueTask

LEVEL_NAMES = {0: "Response", 1: "Critique", 2: "Critique of critiques"}
PLURAL = {0: "Responses", 1: "Critiques", 2: "Critiques of critiques"}


# the level words as the task page says them (``TaskView.input_noun(s)``), for the catalog
LEVEL_WORDS = (gettext_noop("response"), gettext_noop("critique"),
               gettext_noop("critique of critiques"), gettext_noop("responses"),
               gettext_noop("critiques"), gettext_noop("critiques of critiques"),
               gettext_noop("neither"), gettext_noop("no parseable choice"))


def level_name(level: int, *, plural: bool = False) -> str:
    if plural:
        return PLURAL.get(level, f"Level-{level} critiques")
    return LEVEL_NAMES.get(level, f"Level-{level} critique")


def output_name(level: int, slot: int) -> str:
    """"Response A", "Critique B"… (slot 0 = A, slot 1 = B; later slots by number)."""
    letter = chr(ord("A") + slot) if slot < 26 else str(slot + 1)
    return f"{level_name(level)} {letter}"


def letter(index: int | None) -> str:
    return "?" if index is None else chr(ord("A") + index)


@dataclass(frozen=True)
class ShownOutput:
    """One output as readers see it: its name, text, final answer and (critiques) the
    inputs it compared in the order it saw them and the one it judged better."""

    name: str
    level: int
    text: str
    final: str  # option letter, or "?" when unparseable
    final_text: str
    saw: tuple[str, str] | None  # names of its inputs, in the order its writer saw them
    judged: str  # "Response A", "neither", "no parseable choice", "" for responses

    def as_text(self) -> str:
        """The output as plain text (AI prompts): no author, as on the page."""
        lines = [self.text.strip() or "(no reasoning given)"]
        if self.saw is not None:
            lines.append(f"(It was shown {self.saw[0]} first and {self.saw[1]} second.)")
            lines.append(f"Judged better: {self.judged}")
        lines.append(f"Final answer: {self.final}"
                     + (f" ({self.final_text})" if self.final_text else ""))
        return "\n".join(lines)


@dataclass(frozen=True)
class TaskView:
    id: str
    level: int
    level_name: str
    question: str
    options: list[tuple[str, str]]
    first: ShownOutput | None
    second: ShownOutput | None
    chain: list[tuple[str, list[ShownOutput]]]  # (level name, [A, B]) for levels below
    issued_at: dt.datetime | None
    lease_expires_at: dt.datetime | None
    time_limit_minutes: int

    @property
    def input_noun(self) -> str:
        """The inputs' level in words, in the page's language (the outputs' names — "Response
        A" — stay as they are: annotators' texts refer to them)."""
        return gettext(level_name(self.level - 1).lower()) if self.level else ""

    @property
    def input_nouns(self) -> str:
        """The inputs' level in the plural ("critiques of critiques", never "critique of
        critiquess")."""
        return gettext(level_name(self.level - 1, plural=True).lower()) if self.level else ""


def _shown(output: CritiqueOutput, names: dict[int, str], options: list[str]) -> ShownOutput:
    saw, judged = None, ""
    if output.level:
        saw = (names.get(output.first_id, "?"), names.get(output.second_id, "?"))
        judged = {"first": saw[0], "second": saw[1], "neither": "neither",
                  "unparseable": "no parseable choice"}.get(output.choice, "")
    final_text = options[output.final] if output.final is not None else ""
    return ShownOutput(name=names[output.pk], level=output.level, text=output.reasoning,
                       final=letter(output.final), final_text=final_text, saw=saw,
                       judged=judged)


def chain_outputs(question_id: int, below: int) -> dict[int, CritiqueOutput]:
    """The chain of a question below level ``below``: slots 0 and 1 of each level."""
    return {o.pk: o for o in CritiqueOutput.objects.filter(
        question_id=question_id, level__lt=below, slot__lt=2).order_by("level", "slot")}


def shown_chain(question_id: int, level: int, options: list[str]
                ) -> tuple[dict[int, ShownOutput], list[tuple[str, list[ShownOutput]]]]:
    """Every chain output below ``level`` as shown (by id), and the levels below the
    inputs' level as (name, [A, B]) in level order."""
    outputs = chain_outputs(question_id, level) if level else {}
    names = {pk: output_name(o.level, o.slot) for pk, o in outputs.items()}
    shown = {pk: _shown(o, names, options) for pk, o in outputs.items()}
    chain = []
    for lv in range(max(0, level - 1)):
        pair = sorted((o for o in outputs.values() if o.level == lv), key=lambda o: o.slot)
        chain.append((level_name(lv, plural=True), [shown[o.pk] for o in pair]))
    return shown, chain


def task_view(task: CritiqueTask, *, time_limit_minutes: int | None = None) -> TaskView:
    """The page of one task (the question, options, the two inputs in the task's order and
    the chain below them)."""
    question = task.question
    options = list(question.options)
    shown, chain = shown_chain(question.pk, task.level, options)
    minutes = time_limit_minutes or CritiqueSettings.objects.values_list(
        "time_limit_minutes", flat=True).get(study_id=task.study_id)
    return TaskView(
        id=task.public_id, level=task.level, level_name=level_name(task.level),
        question=question.text,
        options=[(letter(i), text) for i, text in enumerate(options)],
        first=shown.get(task.first_id), second=shown.get(task.second_id), chain=chain,
        issued_at=task.issued_at, lease_expires_at=task.lease_expires_at,
        time_limit_minutes=minutes)


def chain_text(chain: list[tuple[str, list[ShownOutput]]]) -> str:
    """The chain below a critique's inputs as plain text (the ``{{chain}}`` of prompts)."""
    blocks = []
    for _name, outputs in chain:
        for o in outputs:
            blocks.append(f"[{o.name}]\n{o.as_text()}\n[End of {o.name}]")
    return "\n\n".join(blocks)
