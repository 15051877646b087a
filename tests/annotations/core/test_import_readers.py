"""Every import reader names every problem of a file in one pass (issue 17): a line's
problem, invalid JSON on the next line, and the line after it, each with file, line and
field; nothing is imported."""

from __future__ import annotations

import io

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
