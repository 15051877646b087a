"""Prompt templates: kinds and placeholders, validation, rendering, and the fields."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from assistants.traces import VERDICT_LABELS, FactualitySentence, Search

KINDS = ("factuality", "response", "critique", "audit_pick", "audit_generate")
MAX_TEMPLATE_CHARS = 50_000
MAX_OPTIONS = 26

PLACEHOLDERS: dict[str, dict[str, str]] = {
    "factuality": {
        "prompt": "the user's prompt the AI response answered",
        "response": "the full AI response",
        "sentence": "the target sentence to fact-check",
        "search_results": "search results given to the model (numbered queries, each "
                          "result's title, URL and snippet); only for sentences that have them",
        "verdicts": "the five verdicts, comma-separated",
    },
    "response": {
        "question": "the question's text",
        "options": "the options, one per line: 'A. …'",
        "letters": "the option letters, comma-separated: 'A, B, C, D'",
    },
    "critique": {
        "question": "the question's text",
        "options": "the options, one per line: 'A. …'",
        "letters": "the option letters, comma-separated",
        "level": "the critique's level n (1 = critique of two responses)",
        "first": "the input shown first (an output of level n − 1)",
        "second": "the input shown second",
        "chain": "the lower levels the two inputs share (empty for level 1)",
    },
    # an audited AI evaluator's commitment for one round (assistants/audit_evaluator.py)
    "audit_pick": {
        "datapoint": "the datapoint x to label (text, or its JSON)",
        "round": "the round k (1 … r)",
        "rubric": "the rubric's criteria, one per line (name: what it checks)",
        "candidates": "the numbered datapoints to pick x′ from, one per line: '1. …'",
    },
    "audit_generate": {
        "datapoint": "the datapoint x to label (text, or its JSON)",
        "round": "the round k (1 … r)",
        "rubric": "the rubric's criteria, one per line (name: what it checks)",
    },
}
REQUIRED: dict[str, frozenset[str]] = {
    "factuality": frozenset({"sentence"}),
    "response": frozenset({"question", "options"}),
    "critique": frozenset({"question", "options", "first", "second"}),
    "audit_pick": frozenset({"datapoint", "candidates"}),
    "audit_generate": frozenset({"datapoint"}),
}

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class PromptTemplate:
    """``user`` is the message sent as the user; ``system`` (optional) the system message."""

    kind: str
    user: str
    system: str = ""


class TemplateError(ValueError):
    """The template cannot be used; ``problems`` lists every reason."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def placeholders_in(text: str) -> list[str]:
    """Placeholder names in order of first use."""
    return list(dict.fromkeys(_PLACEHOLDER.findall(text)))


def validate_template(template: PromptTemplate) -> None:
    """Raise TemplateError naming every problem: an unknown kind, unknown placeholders,
    required placeholders missing from both messages, a ``{{`` that starts no placeholder,
    a message over MAX_TEMPLATE_CHARS characters."""
    if template.kind not in PLACEHOLDERS:
        raise TemplateError([f"kind: '{template.kind}' is not one of {', '.join(KINDS)}"])
    allowed = PLACEHOLDERS[template.kind]
    problems: list[str] = []
    used: set[str] = set()
    for part, text in (("system", template.system), ("user", template.user)):
        if len(text) > MAX_TEMPLATE_CHARS:
            problems.append(f"{part}: {len(text)} characters; at most {MAX_TEMPLATE_CHARS}")
            continue
        names = placeholders_in(text)
        used.update(names)
        unknown = [n for n in names if n not in allowed]
        if unknown:
            problems.append(
                f"{part}: unknown placeholder{'s' if len(unknown) > 1 else ''} "
                f"{', '.join('{{' + n + '}}' for n in unknown)} (a {template.kind} template "
                f"knows {', '.join('{{' + n + '}}' for n in allowed)})")
        stray = _PLACEHOLDER.sub("", text)
        if "{{" in stray:
            line = text[:_stray_at(text)].count("\n") + 1
            problems.append(f"{part}: line {line}: '{{{{' starts no placeholder (write "
                            f"{{{{name}}}} with one of the names above)")
    if not template.user.strip():
        problems.append("user: empty")
    missing = sorted(REQUIRED[template.kind] - used)
    if missing:
        problems.append(f"missing placeholder{'s' if len(missing) > 1 else ''} "
                        f"{', '.join('{{' + n + '}}' for n in missing)}")
    if problems:
        raise TemplateError(problems)


def _stray_at(text: str) -> int:
    position = 0
    while True:
        found = text.find("{{", position)
        match = _PLACEHOLDER.match(text, found)
        if match is None:
            return found
        position = match.end()


def render(template: PromptTemplate, fields: Mapping[str, str]) -> list[dict[str, str]]:
    """The chat messages: the system message (if any) and the user message, with each
    placeholder replaced by its field. Validates the template; a placeholder without a
    field raises TemplateError (never renders as nothing)."""
    validate_template(template)
    missing = sorted({n for text in (template.system, template.user)
                      for n in placeholders_in(text)} - set(fields))
    if missing:
        raise TemplateError([f"no value for {', '.join('{{' + n + '}}' for n in missing)}"])

    def substitute(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: str(fields[m.group(1)]), text)

    messages = []
    if template.system.strip():
        messages.append({"role": "system", "content": substitute(template.system)})
    messages.append({"role": "user", "content": substitute(template.user)})
    return messages


# ---------------------------------------------------------------------------- fields


def option_letters(n: int) -> list[str]:
    if not 2 <= n <= MAX_OPTIONS:
        raise ValueError(f"options: {n}; a question needs 2 to {MAX_OPTIONS} options")
    return [chr(ord("A") + i) for i in range(n)]


def format_options(options: Sequence[str]) -> str:
    return "\n".join(f"{letter}. {text}"
                     for letter, text in zip(option_letters(len(options)), options, strict=True))


def format_searches(searches: Sequence[Search]) -> str:
    """Search results as given to the model: numbered queries, then each result's title,
    URL and snippet."""
    blocks = []
    for i, search in enumerate(searches, start=1):
        lines = [f'Search {i}: "{search.query}"']
        for j, result in enumerate(search.results, start=1):
            lines.append(f"  Result {i}.{j}: {result.title}\n  URL: {result.url}\n"
                         f"  Snippet: {result.snippet}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def factuality_fields(sentence: FactualitySentence) -> dict[str, str]:
    fields = {"prompt": sentence.prompt, "response": sentence.response,
              "sentence": sentence.sentence,
              "verdicts": ", ".join(VERDICT_LABELS.values())}
    if sentence.searches is not None:
        fields["search_results"] = format_searches(sentence.searches)
    return fields


def response_fields(question: str, options: Sequence[str]) -> dict[str, str]:
    return {"question": question, "options": format_options(options),
            "letters": ", ".join(option_letters(len(options)))}


NO_CHAIN = "(nothing: the two outputs are answers to the question itself)"


def critique_fields(question: str, options: Sequence[str], level: int, first: str,
                    second: str, chain: str = "") -> dict[str, str]:
    if level < 1:
        raise ValueError(f"level: {level}; a critique has level 1 or more")
    return {**response_fields(question, options), "level": str(level), "first": first,
            "second": second, "chain": chain.strip() or NO_CHAIN}


LEVEL_NAMES = {0: "Response", 1: "Critique", 2: "Critique of critiques"}


def format_chain(levels: Sequence[Sequence[str]]) -> str:
    """The lower levels two critique inputs share, for ``{{chain}}``: ``levels[0]`` the
    responses, ``levels[1]`` the level-1 critiques, …; numbered as shown, no authors."""
    blocks = []
    for level, outputs in enumerate(levels):
        name = LEVEL_NAMES.get(level, f"Level-{level} critique")
        for i, text in enumerate(outputs, start=1):
            blocks.append(f"[{name} {i}]\n{text}\n[End of {name.lower()} {i}]")
    return "\n\n".join(blocks)
