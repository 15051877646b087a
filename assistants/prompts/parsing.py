"""Reading what the models answer: fixed, documented rules; otherwise None, never a guess."""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistants.prompts.templates import option_letters

CHOICE_NEITHER = 0
CHOICE_FIRST = 1
CHOICE_SECOND = 2

_DECOR = r"[\s*_>#`-]*"
_ANSWER = re.compile(
    rf"^{_DECOR}(?:final\s+)?answer\s*[:：]\s*[*_`]*\s*\(?\s*([A-Za-z])\s*\)?\s*[.*_`]*\s*$",
    re.IGNORECASE)
_BETTER = re.compile(rf"^{_DECOR}better\s*[:：]\s*[*_`]*\s*(1|2|neither)\s*[.*_`]*\s*$",
                     re.IGNORECASE)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _letter_index(line: str, n_options: int) -> int | None:
    match = _ANSWER.match(line)
    if match is None:
        return None
    index = ord(match.group(1).upper()) - ord("A")
    return index if 0 <= index < n_options else None


def parse_option_letter(text: str, n_options: int) -> int | None:
    """The chosen option's 0-based index, or None.

    Rule: the last non-empty line must be ``Answer: X`` — "Answer" in any case, optionally
    "Final answer"; X one letter among the first ``n_options`` (A = 0), in either case,
    optionally in parentheses or followed by a period; markdown emphasis (``**``, ``_``,
    backticks) around the line or the letter is ignored. Anything else — no such line, text
    after it, a letter beyond the options, two letters — is unparseable (None)."""
    option_letters(n_options)  # validates n_options
    lines = _lines(text)
    return _letter_index(lines[-1], n_options) if lines else None


@dataclass(frozen=True)
class ParsedResponse:
    final: int | None  # 0-based option index; None = unparseable
    reasoning: str


def parse_response(text: str, n_options: int) -> ParsedResponse:
    """``final`` by ``parse_option_letter``; ``reasoning`` = the text before the answer
    line (the whole text when there is none)."""
    final = parse_option_letter(text, n_options)
    reasoning = text.strip()
    if final is not None:
        reasoning = "\n".join(_lines(text)[:-1]).strip()
    return ParsedResponse(final, reasoning)


@dataclass(frozen=True)
class ParsedCritique:
    choice: int | None  # CHOICE_FIRST, CHOICE_SECOND, CHOICE_NEITHER; None = unparseable
    final: int | None  # 0-based option index; None = unparseable
    rationale: str

    @property
    def complete(self) -> bool:
        return self.choice is not None and self.final is not None


def parse_critique(text: str, n_options: int) -> ParsedCritique:
    """A critique's choice, final answer and rationale.

    Rules: ``final`` — the last non-empty line must be ``Answer: X`` (as in
    ``parse_option_letter``). ``choice`` — the non-empty line just before that answer line
    (or the last line when there is no answer line) must be ``Better: 1``, ``Better: 2`` or
    ``Better: neither`` (any case, same decorations allowed); 1 and 2 are the inputs in the
    order the prompt showed them. ``rationale`` — the text before the recognised lines.
    A field not following its rule is None (recorded as unparseable, never guessed)."""
    option_letters(n_options)
    lines = _lines(text)
    final = _letter_index(lines[-1], n_options) if lines else None
    rest = lines[:-1] if final is not None else lines
    choice = None
    if rest:
        match = _BETTER.match(rest[-1])
        if match is not None:
            value = match.group(1).lower()
            choice = {"1": CHOICE_FIRST, "2": CHOICE_SECOND, "neither": CHOICE_NEITHER}[value]
            rest = rest[:-1]
    return ParsedCritique(choice, final, "\n".join(rest).strip())
