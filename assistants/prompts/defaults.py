"""The platform's own prompts (researchers may edit copies per study)."""

from __future__ import annotations

from assistants.prompts.templates import PromptTemplate

_FACTUALITY_SYSTEM = (
    "You are a careful fact-checker. You verify the factual accuracy of one sentence "
    "written by an AI assistant and answer with a single JSON object, nothing else.")

_FACTUALITY_STEPS = """\
Work in five steps.
1. Decompose the target sentence into its factual claims, reading it in the context of the \
prompt and the whole answer.
2. Select evidence: short quotes copied word for word, character for character, from the \
snippets of the search results, each with the URL of the result it comes from. Number the \
evidence 1, 2, 3, …
3. For each claim, explain whether the evidence supports it, citing evidence numbers in \
square brackets, like [1] or [1, 3]. Every claim must cite at least one evidence item, and \
every evidence item must be cited by some claim.
4. Give each claim a verdict, one of: {{verdicts}}.
   - Accurate: reputable evidence supports it and no reputable evidence contradicts it (an \
opinion or recommendation is accurate if it is reasonable and widely held).
   - Inaccurate: reputable evidence contradicts it.
   - Unsupported: you found no evidence either way.
   - Disputed: reputable sources disagree.
   - Doesn't require attribution: it is not a factual claim.
5. Give the sentence an overall verdict: "Accurate" only if every claim is accurate.
"""

_FACTUALITY_FORMAT = """\
Answer with this JSON object only (no text before or after it):
{
  "claims": [
    {"text": "<the claim>", "reasoning": "<your explanation, citing [1]>",
     "evidence_ids": [1], "verdict": "<the claim's verdict>"}
  ],
  "evidence": [
    {"id": 1, "url": "<URL of the result the quote is from>", "title": "<its title>",
     "quote": "<the exact words from its snippet>"}
  ],
  "verdict": "<the overall verdict>",
  "reasoning": "<one or two sentences on the overall verdict>"
}"""

_FACTUALITY_CONTEXT = """\
The user asked:
<prompt>
{{prompt}}
</prompt>

The AI assistant answered:
<response>
{{response}}
</response>

Fact-check this sentence of the answer (the target sentence):
<sentence>
{{sentence}}
</sentence>
"""

FACTUALITY_GIVEN_RESULTS = PromptTemplate(
    kind="factuality", system=_FACTUALITY_SYSTEM,
    user=(_FACTUALITY_CONTEXT + """
Search results (quote only from these snippets, and use each result's own URL):
<search_results>
{{search_results}}
</search_results>

""" + _FACTUALITY_STEPS + "\n" + _FACTUALITY_FORMAT))

FACTUALITY_OWN_SEARCHES = PromptTemplate(
    kind="factuality", system=_FACTUALITY_SYSTEM,
    user=(_FACTUALITY_CONTEXT + """
First list the searches you would run and, for each, the results you know of: each \
result's title, URL and a snippet of its text. Quote evidence only from those snippets.

""" + _FACTUALITY_STEPS + "\n" + _FACTUALITY_FORMAT.replace(
        '  "claims": [',
        '  "searches": [\n    {"query": "<search query>", "results": [\n'
        '      {"title": "<page title>", "url": "<https://…>", "snippet": "<text of the '
        'page>"}]}\n  ],\n  "claims": [', 1)))

RESPONSE = PromptTemplate(kind="response", user="""\
Answer this multiple-choice question. Think step by step and explain your reasoning: say \
why the option you choose is correct and why the others are not.

Question:
{{question}}

Options:
{{options}}

End your reply with a last line of exactly this form, where X is one of {{letters}}:
Answer: X""")

CRITIQUE = PromptTemplate(kind="critique", user="""\
You are reviewing answers to a multiple-choice question (a level-{{level}} critique).

Question:
{{question}}

Options:
{{options}}

What the two outputs below build on:
{{chain}}

[The start of output 1]
{{first}}
[The end of output 1]

[The start of output 2]
{{second}}
[The end of output 2]

Think step by step and decide which output is better: check each one's reasoning and final \
answer, point out the errors that change the conclusion, and say which output you agree \
with, or neither. Avoid any bias from the order or the length of the outputs; judge only \
their correctness. Then give your own final answer to the question.

End your reply with exactly these two lines, where N names the better output (1, 2 or \
neither) and X is one of {{letters}}:
Better: N
Answer: X""")

DEFAULT_TEMPLATES: dict[str, PromptTemplate] = {
    "factuality": FACTUALITY_GIVEN_RESULTS,
    "response": RESPONSE,
    "critique": CRITIQUE,
}
