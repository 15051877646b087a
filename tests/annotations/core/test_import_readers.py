"""Every import reader names every problem of a file in one pass (issue 17): a line's
problem, invalid JSON on the next line, and the line after it, each with file, line and
field; nothing is imported."""

from __future__ import annotations

import io
import json

import pytest

from annotations.assisted.services.imports import sentences_import, traces_import
from annotations.core.errors import ImportFailed
from annotations.critique.services.ai_outputs import critique_ai_outputs_import
from annotations.critique.services.questions import critique_questions_import
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.predictions import predictions_import
from tests.annotations.assisted.helpers import make_assisted_study
from tests.annotations.critique.helpers import make_critique_study
from tests.factories import make_study

pytestmark = pytest.mark.django_db

BAD_JSON = '{"id": "x", "text": '


def _partitioned():
    return make_study(k=3, n_items=2, open_=False)


def _assisted():
    return make_assisted_study(n_sentences=1, traces=False, open_=False)


def _critique():
    return make_critique_study(n_questions=1, open_=False, mode="ai_below")[0]


CASES = {
    "items": (_partitioned, items_import,
              ['{"id": "a"}', BAD_JSON, '{"id": "b", "text": "t", "colour": 1}'],
              ["text: missing", "invalid JSON", "colour: unknown field"]),
    "predictions": (_partitioned, predictions_import,
                    ['{"item_id": "", "system": "s", "prediction": "x"}', BAD_JSON,
                     '{"item_id": "i0", "system": "s", "oops": 1}'],
                    ["item_id: missing", "invalid JSON", "oops: unknown field"]),
    "sentences": (_assisted, sentences_import,
                  ['{"id": "s9"}', BAD_JSON, '{"id": "s8", "colour": 1}'],
                  ["prompt: missing", "invalid JSON", "colour: unknown field"]),
    "traces": (_assisted, traces_import,
               ['{"sentence": ""}', BAD_JSON, '{"sentence": "x", "zzz": 1}'],
               ["sentence: missing", "invalid JSON", "zzz: unknown field"]),
    "critique questions": (_critique, critique_questions_import,
                           ['{"id": "q9"}', BAD_JSON, '{"id": "q8"}'],
                           ["text: missing", "invalid JSON", "text: missing"]),
    "critique outputs": (_critique, critique_ai_outputs_import,
                         ['{"id": "o1", "level": 0, "text": "t"}', BAD_JSON,
                          '{"id": "o2", "level": 0, "text": "t"}'],
                         ["question: missing", "invalid JSON", "question: missing"]),
}


@pytest.mark.parametrize("case", CASES)
def test_invalid_json_hides_no_other_line(case):
    make, service, lines, problems = CASES[case]
    study = make()
    with pytest.raises(ImportFailed) as failed:
        service(study=study, source=io.StringIO("\n".join(lines)), name="bad.jsonl")
    errors = failed.value.errors
    for line, problem in enumerate(problems, start=1):
        assert any(e.startswith(f"bad.jsonl:{line}: {problem}") for e in errors), (line, errors)


# A file with many errors per import kind (issue 17): a good line, a line with several bad
# fields (two unknown ones among them) and an id that names nothing, invalid JSON, a line
# repeating the first line's id, and one more problem after it. ``MANY_ERRORS[kind]`` is
# (the study maker, the service, the file's lines, every problem the report must list, in
# line order). The browser test of the import pages (tests/browser/test_import_errors.py)
# uploads the same files.
def _trace(verdict: str = "Accurate") -> dict:
    from tests.annotations.assisted.helpers import marked_trace

    return marked_trace("t", verdict)


INVALID = '{"id": "x", "text": oops'
INVALID_PROBLEM = "bad.jsonl:3: invalid JSON (Expecting value, column 21)"


def _unknown(fields: str) -> list[str]:
    return [f"bad.jsonl:2: {f}: unknown field (expected {fields})" for f in ("colour", "size")]


MANY_ERRORS = {
    "items": (_partitioned, items_import, [
        {"id": "n1", "text": "fine", "gold": "C0"},
        {"id": "", "text": "", "gold": "Z", "quality_check": "maybe", "colour": "red",
         "size": 1},
        INVALID,
        {"id": "n1", "text": "again", "gold_index": 7, "metadata": "{oops"},
        {"id": "n5", "text": "fine", "stratum": {"an": "object"}}],
        [*_unknown("one of gold, gold_index, id, metadata, options, quality_check, stratum, "
                   "text"),
         "bad.jsonl:2: id: missing",
         "bad.jsonl:2: text: missing",
         "bad.jsonl:2: gold: 'Z' is not one of the options",
         "bad.jsonl:2: quality_check: 'maybe' is not a yes/no value",
         INVALID_PROBLEM,
         "bad.jsonl:4: id: 'n1' repeats line 1",
         "bad.jsonl:4: gold_index: 7 is outside 0..2",
         "bad.jsonl:4: metadata: invalid JSON (Expecting property name enclosed in double "
         "quotes, column 2); expected a JSON object",
         "bad.jsonl:5: stratum: must be text or a number, not an object"]),
    "predictions": (_partitioned, predictions_import, [
        {"item_id": "i0", "system": "m", "prediction": "C0"},
        {"item_id": "nope", "system": "", "prediction_index": "x", "colour": 1, "size": 2},
        INVALID,
        {"item_id": "i0", "system": "m", "prediction": "C1"},
        {"item_id": "i1", "system": "m", "prediction_index": 9},
        {"system": "m", "confidence": "high"}],
        [*_unknown("item_id, system, prediction or prediction_index, and optionally "
                   "confidence"),
         "bad.jsonl:2: system: missing",
         "bad.jsonl:2: item_id: 'nope' is not an item of this study",
         INVALID_PROBLEM,
         "bad.jsonl:4: item_id: 'i0' for system 'm' repeats line 1",
         "bad.jsonl:5: prediction_index: 9 is outside 0..2",
         "bad.jsonl:6: item_id: missing",
         "bad.jsonl:6: confidence: 'high' is not a number"]),
    "sentences": (_assisted, sentences_import, [
        {"id": "n1", "prompt": "P", "response": "R. S.", "sentence": "S."},
        {"id": "", "prompt": "", "response": "R", "sentence": "", "gold": "maybe",
         "metadata": "{oops", "colour": 1, "size": 2},
        INVALID,
        {"id": "n1", "prompt": "P", "response": "R", "sentence": "S", "ai_verdict": "accurate"},
        {"id": "s0", "prompt": "P", "response": "R", "sentence": "S"}],
        [*_unknown("one of ai_confidence, ai_verdict, gold, id, metadata, prompt, response, "
                   "searches, sentence, stratum"),
         "bad.jsonl:2: id: missing",
         "bad.jsonl:2: prompt: missing",
         "bad.jsonl:2: sentence: missing",
         "bad.jsonl:2: gold: 'maybe' is not one of Inaccurate, Unsupported, Disputed, "
         "Accurate, Doesn't require attribution",
         "bad.jsonl:2: metadata: invalid JSON (Expecting property name enclosed in double "
         "quotes, column 2); expected a JSON object",
         INVALID_PROBLEM,
         "bad.jsonl:4: id: 'n1' repeats line 1",
         "bad.jsonl:4: ai_confidence: give ai_verdict and ai_confidence together",
         "bad.jsonl:5: id: 's0' is already in the study"]),
    "traces": (_assisted, traces_import, [
        {"sentence": "s0", "sample": 0, "trace": _trace()},
        {"sentence": "nope", "sample": "x", "score": "high", "trace": "no", "colour": 1,
         "size": 2},
        INVALID,
        {"sentence": "s0", "sample": 0, "trace": _trace("Inaccurate")},
        {"sample": 1},
        # two problems inside one trace (issue 27: the second was hidden)
        {"sentence": "s0", "sample": 1, "trace": {
            "claims": [], "verdict": "maybe", "evidence": [{"id": 1, "url": "x", "quote": "q"}]}}],
        [*_unknown("sentence, sample, score, trace"),
         "bad.jsonl:2: sentence: 'nope' is not a sentence of this study",
         "bad.jsonl:2: sample: must be a whole number ≥ 0",
         "bad.jsonl:2: score: must be a number",
         "bad.jsonl:2: trace: a trace must be a JSON object, not text",
         INVALID_PROBLEM,
         "bad.jsonl:4: sample: sentence 's0' sample 0 repeats line 1",
         "bad.jsonl:5: sentence: missing (the sentence's id)",
         "bad.jsonl:5: trace: missing",
         "bad.jsonl:6: trace.evidence[0].url: 'x' is not an http(s) URL",
         "bad.jsonl:6: trace.verdict: 'maybe' is not one of Inaccurate, Unsupported, Disputed, "
         "Accurate, Doesn't require attribution"]),
    "critique questions": (_critique, critique_questions_import, [
        {"id": "n1", "text": "fine", "options": ["x", "y"]},
        {"id": "", "text": "", "options": ["x"], "gold": "E", "colour": 1, "size": 2},
        INVALID,
        {"id": "n1", "text": "t", "options": "[oops"},
        {"id": "q0", "text": "t", "options": ["x", "y"]}],
        [*_unknown("one of domain, gold, id, options, text"),
         "bad.jsonl:2: id: missing",
         "bad.jsonl:2: text: missing",
         "bad.jsonl:2: options: 1 option; a question needs 2 to 26",
         INVALID_PROBLEM,
         "bad.jsonl:4: id: 'n1' repeats line 1",
         "bad.jsonl:4: options: invalid JSON (Expecting value, column 2); expected a JSON "
         "array",
         "bad.jsonl:5: id: 'q0' is already in the study"]),
    "critique outputs": (_critique, critique_ai_outputs_import, [
        {"id": "r1", "question": "q0", "level": 0, "text": "Answer: B"},
        {"id": "", "question": "nope", "level": "x", "text": "", "confidence": 9,
         "colour": 1, "size": 2},
        INVALID,
        {"id": "r1", "question": "q0", "level": 0, "text": "x", "final": "Z"},
        {"id": "c1", "question": "q0", "level": 1, "inputs": ["r1", "zz"], "text": "x"}],
        [*_unknown("one of choice, confidence, final, id, inputs, level, model, question, "
                   "reasoning, text"),
         "bad.jsonl:2: id: missing",
         "bad.jsonl:2: question: 'nope' is not a question of this study",
         "bad.jsonl:2: level: a whole number from 0 to 2",
         "bad.jsonl:2: text: missing (the output as written)",
         "bad.jsonl:2: confidence: a whole number from 1 to 5, or leave it out",
         INVALID_PROBLEM,
         "bad.jsonl:4: id: 'r1' repeats line 1",
         "bad.jsonl:4: final: 'Z' is out of range: the question has 4 options (A–D, or 0–3)",
         "bad.jsonl:5: inputs: 'zz' is neither an id of this file nor an output of the "
         "study"]),
}


def many_errors_file(kind: str) -> str:
    """The many-error file of ``kind`` as JSONL text."""
    return "\n".join(line if isinstance(line, str) else json.dumps(line)
                     for line in MANY_ERRORS[kind][2]) + "\n"


def _counts(study) -> tuple:
    from annotations.models import CritiqueOutput, CritiqueQuestion, Item, Sentence
    from assistants.models import AISystem, Prediction, TraceSample

    return (Item.objects.filter(study=study).count(),
            AISystem.objects.filter(study=study).count(),
            Prediction.objects.filter(system__study=study).count(),
            Sentence.objects.filter(study=study).count(),
            TraceSample.objects.filter(sentence__study=study).count(),
            CritiqueQuestion.objects.filter(study=study).count(),
            CritiqueOutput.objects.filter(study=study).count())


@pytest.mark.parametrize("kind", MANY_ERRORS)
def test_a_many_error_file_is_reported_whole_in_one_pass(kind):
    """Every line, every field of a line (each unknown field too), ids naming nothing, and
    the lines around invalid JSON — in line order, with file, line and field, in the words
    every study type uses; nothing is imported. Before: one unknown field per line, a
    parser's raw text for a bad JSON cell, nothing said about unknown fields of critique
    files, and an unknown item or sentence (or a bad option index) left for the next upload
    once any line had a problem."""
    make, service, _, problems = MANY_ERRORS[kind]
    study = make()
    before = _counts(study)
    with pytest.raises(ImportFailed) as failed:
        service(study=study, source=io.StringIO(many_errors_file(kind)), name="bad.jsonl")
    assert failed.value.errors == problems
    assert _counts(study) == before


def test_the_same_problem_reads_the_same_in_every_import():
    """Same words for the same problem across the six imports."""
    for kind, (*_, problems) in MANY_ERRORS.items():
        assert INVALID_PROBLEM in problems, kind
        assert [p.split(" (expected")[0] for p in problems[:2]] == [
            "bad.jsonl:2: colour: unknown field", "bad.jsonl:2: size: unknown field"], kind
        assert any(p.startswith("bad.jsonl:4: ") and p.endswith(" repeats line 1")
                   for p in problems), kind
    ids_naming_nothing = [p for _, (*_, problems) in MANY_ERRORS.items() for p in problems
                          if " of this study" in p]
    assert [p.split(": ", 2)[2].split("'")[2] for p in ids_naming_nothing] == [
        " is not an item of this study", " is not a sentence of this study",
        " is not a question of this study"]
