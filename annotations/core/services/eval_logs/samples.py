"""What every evaluation log becomes: one ``EvalLog`` of ``EvalSample``s.

A sample is a multiple-choice question as the framework asked it — its text, its options,
the hidden right option (``target``, never shown to a labeller) — and the option the
evaluated model chose (``answer``: None when its output names none: stored as written and
scored as wrong, the platform's rule for unparseable predictions). A sample without
options (free text) cannot be scored by option and is a problem of the file, named by
``where``; it is never guessed into one.

``option_named(value, choices)`` is the one rule every reader uses to turn a framework's
answer or target into an option index: a single letter A… within the options ("B", "b",
"B)" or "B."), a whole number index the reader says is 0-based, or the exact text of one
option after trimming spaces. Anything else is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

FRAMEWORKS = {"inspect": "Inspect", "lm-eval": "lm-evaluation-harness",
              "every-eval-ever": "Every Eval Ever"}
_LETTER = re.compile(r"^\(?([A-Za-z])[).:]?$")
# Inspect's multiple_choice template and the platform's own rule: the last "ANSWER: X".
_ANSWER_LINE = re.compile(r"^\s*answer\s*:\s*\(?([A-Za-z])\)?\s*\.?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class EvalSample:
    """One sample of one model: ``key`` identifies the item across models and re-imports
    (the framework's sample id, or a hash of the question where the log has none)."""

    where: str  # "file:line (doc_id 3)" or "file: sample q3, epoch 1": for error messages
    key: str
    text: str
    choices: tuple[str, ...]
    target: int | None
    answer: int | None
    output: str  # the model's output as written (its last message)
    epoch: int = 1


@dataclass(frozen=True)
class EvalLog:
    """One model's run of one task. ``system`` names the AI system the samples' answers
    are imported as: "model · task" (with " · epoch N" for repeated epochs, one system
    each, so that two runs of one model are two systems, never two answers of one)."""

    framework: str  # a key of FRAMEWORKS
    model: str
    task: str
    samples: list[EvalSample] = field(default_factory=list)

    @cached_property
    def _several_epochs(self) -> bool:
        return len({s.epoch for s in self.samples}) > 1

    def system(self, epoch: int = 1) -> str:
        name = f"{self.model} · {self.task}" if self.task else self.model
        return f"{name} · epoch {epoch}" if self._several_epochs else name

    @property
    def systems(self) -> list[str]:
        """Every AI system the log's answers go to, sorted."""
        return sorted({self.system(s.epoch) for s in self.samples})


def option_named(value, choices: tuple[str, ...] | list[str], *,
                 index_base: int | None = None) -> int | None:
    """The option ``value`` names (module docstring), or None. ``index_base`` (0 or 1)
    admits a whole number as an index; without it numbers are read as option texts."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float) and index_base is not None:
        if float(value).is_integer() and 0 <= int(value) - index_base < len(choices):
            return int(value) - index_base
        return None
    text = str(value).strip()
    if not text:
        return None
    trimmed = [c.strip() for c in choices]
    if text in trimmed:
        return trimmed.index(text)
    if (m := _LETTER.match(text)) is not None:
        position = ord(m.group(1).upper()) - ord("A")
        return position if position < len(choices) else None
    if index_base is not None and text.isdigit():
        position = int(text) - index_base
        return position if 0 <= position < len(choices) else None
    return None


def answer_line_option(output: str, choices: tuple[str, ...]) -> int | None:
    """The option of an output's last non-empty line when it reads "ANSWER: X" (Inspect's
    multiple-choice template); None otherwise."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines or (m := _ANSWER_LINE.match(lines[-1])) is None:
        return None
    return option_named(m.group(1), choices)


def free_text_problem(where: str) -> str:
    return (f"{where}: choices: a free-text sample (no options); only multiple-choice "
            f"samples can be imported, its answer is never guessed into an option")
