"""Importing questions and AI outputs: what is stored, unparseable answers recorded (never
guessed), errors naming file, line and field, and bad files changing nothing."""

from __future__ import annotations

import pytest

from annotations.core.errors import ImportFailed
from annotations.critique.services.ai_outputs import critique_ai_outputs_import
from annotations.critique.services.questions import critique_questions_import
from annotations.critique.services.studies import critique_study_create
from annotations.models import CritiqueOutput, CritiqueQuestion, CritiqueTask
from tests.annotations.critique.helpers import jsonl, make_critique_study

pytestmark = pytest.mark.django_db


def _snapshot(study) -> tuple:
    return (list(CritiqueQuestion.objects.filter(study=study).values_list("pk", "external_id")),
            list(CritiqueOutput.objects.filter(study=study).values_list("pk", "slot")),
            list(CritiqueTask.objects.filter(study=study).values_list("pk", "status")))


def test_questions_import_reads_letters_indices_and_texts_as_gold():
    study = critique_study_create(name="qs", top_level=1)
    result = critique_questions_import(study=study, name="q.jsonl", source=jsonl([
        {"id": "a", "text": "t", "options": ["x", "y", "z"], "gold": "C", "domain": "math"},
        {"id": "b", "text": "t", "options": ["x", "y"], "gold": 1},
        {"id": "c", "text": "t", "options": ["red", "blue"], "gold": "blue"},
        {"id": "d", "text": "t", "options": ["x", "y"]}]))
    assert result.created == 4
    assert dict(CritiqueQuestion.objects.filter(study=study).values_list("external_id", "gold")
                ) == {"a": 2, "b": 1, "c": 1, "d": None}


def test_questions_import_from_csv_with_options_as_json():
    import io

    study = critique_study_create(name="qs csv", top_level=1)
    text = 'id,text,options,gold,domain\nq1,"Which?","[""x"", ""y"", ""z""]",B,law\n'
    critique_questions_import(study=study, source=io.StringIO(text), name="q.csv")
    q = CritiqueQuestion.objects.get(study=study)
    assert (q.options, q.gold, q.domain) == (["x", "y", "z"], 1, "law")


def test_a_bad_questions_file_names_every_problem_and_changes_nothing():
    study, _ = make_critique_study(n_questions=2, top_level=1, counts=[2, 1])
    before = _snapshot(study)
    with pytest.raises(ImportFailed) as caught:
        critique_questions_import(study=study, name="bad.jsonl", source=jsonl([
            {"id": "new1", "text": "fine", "options": ["x", "y"]},
            {"id": "q0", "text": "t", "options": ["x", "y"]},
            {"id": "new2", "text": "", "options": ["x"]},
            {"id": "new3", "text": "t", "options": ["x", "y"], "gold": "E"},
            {"text": "t", "options": ["x", "y"]}]))
    errors = caught.value.errors
    assert errors == [
        "bad.jsonl:2: id: 'q0' is already in the study",
        "bad.jsonl:3: text: missing",
        "bad.jsonl:3: options: 1 option; a question needs 2 to 26",
        "bad.jsonl:4: gold: 'E' is out of range: the question has 2 options (A–B, or 0–1)",
        "bad.jsonl:5: id: missing",
    ]
    assert _snapshot(study) == before


def _ai_study(**kw):
    study, users = make_critique_study(n_questions=2, top_level=2, counts=[3, 2, 2],
                                       mode="ai_below", **kw)
    return study


GOOD = [
    {"id": "r1", "question": "q0", "level": 0, "text": "Reasoning one.\nAnswer: B",
     "model": "m-7b"},
    {"id": "r2", "question": "q0", "level": 0, "text": "No answer line at all."},
    {"id": "r3", "question": "q0", "level": 0, "text": "x", "final": "C"},
    {"id": "c1", "question": "q0", "level": 1, "inputs": ["r3", "r1"],
     "text": "R1 is right.\nBetter: 2\nAnswer: B"},
    {"id": "c2", "question": "q0", "level": 1, "inputs": ["r1", "r3"], "text": "hm",
     "choice": None, "final": None},
]


def test_ai_outputs_are_stored_with_raw_text_parsed_or_unparseable_and_tasks_follow():
    study = _ai_study()
    result = critique_ai_outputs_import(study=study, source=jsonl(GOOD), name="ai.jsonl")
    assert (result.created, result.unparseable, result.by_level) == (5, 2, {0: 3, 1: 2})
    out = {o.external_id: o for o in CritiqueOutput.objects.filter(study=study)}
    assert (out["r1"].final, out["r1"].reasoning, out["r1"].ai_model) == (1, "Reasoning one.",
                                                                          "m-7b")
    assert out["r1"].raw_text == GOOD[0]["text"]
    assert out["r2"].final is None  # not guessed
    assert out["r3"].final == 2
    # the pair named by the critiques takes slots 0 and 1, in file order
    assert (out["r1"].slot, out["r3"].slot, out["r2"].slot) == (0, 1, 2)
    assert (out["c1"].first_id, out["c1"].second_id) == (out["r3"].pk, out["r1"].pk)
    assert (out["c1"].choice, out["c1"].final) == ("second", 1)
    assert (out["c2"].choice, out["c2"].final) == ("unparseable", None)
    assert all(o.author_kind == "ai" and o.author_id is None for o in out.values())
    top = CritiqueTask.objects.filter(study=study)
    assert list(top.values_list("level", flat=True)) == [2, 2]  # annotators at L = 2


@pytest.mark.parametrize(("line", "error"), [
    ({"id": "r9", "question": "nope", "level": 0, "text": "x"},
     "ai.jsonl:6: question: 'nope' is not a question of this study"),
    ({"id": "r9", "question": "q0", "level": 2, "text": "x", "inputs": ["c1", "c2"]},
     "ai.jsonl:6: level: annotators write level 2 in this study's mode (AI below the top "
     "level, humans at the top level); AI outputs go to levels 0, 1"),
    ({"id": "r1", "question": "q0", "level": 0, "text": "x"},
     "ai.jsonl:6: id: 'r1' repeats line 1"),
    ({"id": "c9", "question": "q0", "level": 1, "inputs": ["r1", "r2"], "text": "x"},
     "ai.jsonl:6: inputs: every level-1 critique of question 'q0' compares the same two "
     "level-0 outputs (its chain pair: 'r1' and 'r3'); got 'r1' and 'r2'"),
    ({"id": "c9", "question": "q0", "level": 1, "inputs": ["r1", "zz"], "text": "x"},
     "ai.jsonl:6: inputs: 'zz' is neither an id of this file nor an output of the study"),
    ({"id": "c9", "question": "q1", "level": 1, "inputs": ["r1", "r3"], "text": "x"},
     "ai.jsonl:6: inputs: 'r1' is not a level-0 output of question 'q1'"),
    ({"id": "c9", "question": "q0", "level": 1, "inputs": ["r1"], "text": "x"},
     "ai.jsonl:6: inputs: a level-1 critique names the two level-0 outputs it compares, in "
     "the order shown"),
    ({"id": "r9", "question": "q0", "level": 0, "text": "x", "final": "Z"},
     "ai.jsonl:6: final: 'Z' is out of range: the question has 4 options (A–D, or 0–3)"),
    ({"id": "c9", "question": "q0", "level": 1, "inputs": ["r1", "r3"], "text": "x",
      "choice": "left"}, "ai.jsonl:6: choice: 'left' is not first, second or neither"),
    ({"id": "r9", "question": "q0", "level": 0, "text": "", "confidence": 9},
     "ai.jsonl:6: text: missing (the output as written)"),
])
def test_a_bad_ai_outputs_file_is_refused_whole_naming_file_line_and_field(line, error):
    study = _ai_study()
    before = _snapshot(study)
    with pytest.raises(ImportFailed) as caught:
        critique_ai_outputs_import(study=study, source=jsonl([*GOOD, line]), name="ai.jsonl")
    assert error in caught.value.errors
    assert _snapshot(study) == before


def test_malformed_json_is_refused_with_its_line():
    import io

    study = _ai_study()
    with pytest.raises(ImportFailed) as caught:
        critique_ai_outputs_import(study=study, name="ai.jsonl", source=io.StringIO(
            '{"id": "r1", "question": "q0", "level": 0, "text": "x"}\n{"id": '))
    assert caught.value.errors[0].startswith("ai.jsonl:2: invalid JSON")
    assert not CritiqueOutput.objects.filter(study=study).exists()


def test_a_second_file_continues_the_chain_of_the_first():
    study = _ai_study()
    critique_ai_outputs_import(study=study, source=jsonl(GOOD[:3]), name="responses.jsonl")
    out = {o.external_id: o for o in CritiqueOutput.objects.filter(study=study)}
    assert (out["r1"].slot, out["r2"].slot, out["r3"].slot) == (0, 1, 2)  # file order
    # the first file fixed the chain pair as r1, r2: critiques of r1 and r3 are refused
    with pytest.raises(ImportFailed, match="chain pair: 'r1' and 'r2'"):
        critique_ai_outputs_import(study=study, source=jsonl(GOOD[3:]), name="critiques.jsonl")
    critique_ai_outputs_import(study=study, name="more.jsonl", source=jsonl([
        {"id": "c3", "question": "q0", "level": 1, "inputs": ["r2", "r1"], "text": "x",
         "final": "A", "choice": "first"}]))
    c3 = CritiqueOutput.objects.get(study=study, external_id="c3")
    assert (c3.first_id, c3.second_id, c3.slot) == (out["r2"].pk, out["r1"].pk, 0)


def test_humans_mode_refuses_ai_outputs():
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    with pytest.raises(ImportFailed, match="annotators write level 0"):
        critique_ai_outputs_import(study=study, name="ai.jsonl", source=jsonl(GOOD[:1]))
