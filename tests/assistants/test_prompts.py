"""Prompt templates (validation, rendering) and the parsers of model answers."""

from __future__ import annotations

import pytest

from assistants.prompts import (
    CHOICE_FIRST,
    CHOICE_NEITHER,
    CHOICE_SECOND,
    CRITIQUE,
    DEFAULT_TEMPLATES,
    FACTUALITY_GIVEN_RESULTS,
    FACTUALITY_OWN_SEARCHES,
    NO_CHAIN,
    PLACEHOLDERS,
    RESPONSE,
    PromptTemplate,
    TemplateError,
    critique_fields,
    factuality_fields,
    format_chain,
    option_letters,
    parse_critique,
    parse_option_letter,
    parse_response,
    placeholders_in,
    render,
    response_fields,
    validate_template,
)
from assistants.traces import FactualitySentence, parse_trace
from tests.assistants.conftest import good_trace

# ---------------------------------------------------------------------------- templates


@pytest.mark.parametrize("template", [*DEFAULT_TEMPLATES.values(), FACTUALITY_OWN_SEARCHES],
                         ids=["factuality", "response", "critique", "own-searches"])
def test_the_platform_templates_are_valid_and_use_only_known_placeholders(template):
    validate_template(template)
    used = set(placeholders_in(template.system + template.user))
    assert used <= set(PLACEHOLDERS[template.kind])


def test_unknown_placeholders_are_named():
    template = PromptTemplate("response", user="{{question}}\n{{options}}\n{{ answer }} {{gold}}")
    with pytest.raises(TemplateError) as caught:
        validate_template(template)
    assert caught.value.problems == [
        "user: unknown placeholders {{answer}}, {{gold}} (a response template knows "
        "{{question}}, {{options}}, {{letters}})"]


def test_missing_required_placeholders_and_stray_braces_are_named():
    template = PromptTemplate("critique", system="Judge {{ level }}.",
                              user="{{question}}\n{{options}}\n{{first}}\nsecond: {{ 2nd }}")
    with pytest.raises(TemplateError) as caught:
        validate_template(template)
    assert caught.value.problems == [
        "user: line 4: '{{' starts no placeholder (write {{name}} with one of the names above)",
        "missing placeholder {{second}}"]


def test_unknown_kind_and_empty_user_message():
    with pytest.raises(TemplateError, match="kind: 'essay' is not one of"):
        validate_template(PromptTemplate("essay", user="x"))
    with pytest.raises(TemplateError) as caught:
        validate_template(PromptTemplate("factuality", user="  ", system="{{sentence}}"))
    assert caught.value.problems == ["user: empty"]


def test_rendering_is_one_pass_and_keeps_json_braces():
    # given: a template with a JSON example; a value that looks like a placeholder
    template = PromptTemplate("factuality", system="Rate {{verdicts}}.",
                              user='Sentence: {{ sentence }}\nFormat: {"a": {"b": [1]}}')
    sentence = FactualitySentence(prompt="p", response="r", sentence="x {{prompt}} {y}")
    # when
    messages = render(template, factuality_fields(sentence))
    # then
    assert messages == [
        {"role": "system", "content": "Rate Inaccurate, Unsupported, Disputed, Accurate, "
                                      "Doesn't require attribution."},
        {"role": "user", "content": 'Sentence: x {{prompt}} {y}\nFormat: {"a": {"b": [1]}}'}]


def test_a_placeholder_without_a_value_is_an_error_not_empty_text():
    with pytest.raises(TemplateError, match=r"no value for \{\{search_results\}\}"):
        render(FACTUALITY_GIVEN_RESULTS, factuality_fields(
            FactualitySentence(prompt="p", response="r", sentence="s")))


def test_the_factuality_template_shows_the_given_results():
    trace = parse_trace(good_trace())
    sentence = FactualitySentence("Why eat strawberries?", "They are rich in vitamin C.",
                                  "They are rich in vitamin C.", searches=trace.searches)
    [system, user] = render(FACTUALITY_GIVEN_RESULTS, factuality_fields(sentence))
    assert system["role"] == "system"
    assert "Why eat strawberries?" in user["content"]
    assert ('Search 2: "recommended daily vitamin C"\n  Result 2.1: Vitamin C - NHS\n'
            '  URL: https://www.nhs.uk/vitamin-c\n'
            '  Snippet: Adults aged 19 to 64 need 40mg of vitamin C a day.') in user["content"]


def test_response_and_critique_fields():
    messages = render(RESPONSE, response_fields("2 + 2?", ["3", "4", "5"]))
    assert "Options:\nA. 3\nB. 4\nC. 5\n" in messages[0]["content"]
    assert "where X is one of A, B, C:\nAnswer: X" in messages[0]["content"]
    fields = critique_fields("2 + 2?", ["3", "4"], 1, "R one", "R two")
    assert fields["chain"] == NO_CHAIN
    text = render(CRITIQUE, fields)[0]["content"]
    assert text.index("R one") < text.index("R two")
    assert "a level-1 critique" in text
    with pytest.raises(ValueError, match="level"):
        critique_fields("q", ["a", "b"], 0, "x", "y")


def test_the_chain_names_levels_not_authors():
    assert format_chain([["r1", "r2"], ["c1"]]) == (
        "[Response 1]\nr1\n[End of response 1]\n\n[Response 2]\nr2\n[End of response 2]\n\n"
        "[Critique 1]\nc1\n[End of critique 1]")


@pytest.mark.parametrize("n", [1, 27])
def test_option_counts_outside_2_to_26_are_refused(n):
    with pytest.raises(ValueError, match="2 to 26"):
        option_letters(n)


# ---------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(("text", "index"), [
    ("Reasoning.\nAnswer: B", 1),
    ("Reasoning.\nanswer: c\n\n  ", 2),
    ("Final answer: (D).", 3),
    ("**Answer:** A", 0),
    ("**Answer: B**", 1),
    ("x\n> Answer: `C`", 2),
    ("Answer：B", 1),
    ("Answer: J", 9),
])
def test_option_letters_that_parse(text, index):
    assert parse_option_letter(text, 10) == index


@pytest.mark.parametrize("text", [
    "",
    "The answer is B.",
    "Answer: B\nI hope that helps.",  # text after the answer line
    "Answer: B because of the evidence",
    "Answer: B or C",
    "Answer: BC",
    "Answer: E",  # beyond the 4 options
    "\\boxed{B}",
    "Answer:",
])
def test_option_letters_that_do_not_parse_are_none(text):
    assert parse_option_letter(text, 4) is None


def test_parse_response_splits_reasoning_from_the_answer():
    parsed = parse_response("Step 1.\nStep 2.\nAnswer: B", 4)
    assert (parsed.final, parsed.reasoning) == (1, "Step 1.\nStep 2.")
    unparsed = parse_response("Step 1. So B.", 4)
    assert (unparsed.final, unparsed.reasoning) == (None, "Step 1. So B.")


@pytest.mark.parametrize(("text", "choice", "final", "rationale"), [
    ("Output 1 errs.\nBetter: 2\nAnswer: C", CHOICE_SECOND, 2, "Output 1 errs."),
    ("Both wrong.\n\nBetter: neither\nAnswer: A", CHOICE_NEITHER, 0, "Both wrong."),
    ("Fine.\n**Better:** 1\n**Answer:** D", CHOICE_FIRST, 3, "Fine."),
    ("Better: 1\nAnswer: B", CHOICE_FIRST, 1, ""),
    ("No format at all", None, None, "No format at all"),
    ("Reason.\nBetter: 2", CHOICE_SECOND, None, "Reason."),  # answer line missing
    ("Reason.\nAnswer: B", None, 1, "Reason."),  # choice line missing
    ("Reason.\nBetter: 3\nAnswer: B", None, 1, "Reason.\nBetter: 3"),
    ("Better: 1\nReason.\nAnswer: B", None, 1, "Better: 1\nReason."),  # not just before
    ("Reason.\nBetter: both\nAnswer: Z", None, None, "Reason.\nBetter: both\nAnswer: Z"),
])
def test_parse_critique(text, choice, final, rationale):
    parsed = parse_critique(text, 4)
    assert (parsed.choice, parsed.final, parsed.rationale) == (choice, final, rationale)
    assert parsed.complete == (choice is not None and final is not None)
