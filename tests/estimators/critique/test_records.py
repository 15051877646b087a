"""The critique study's records: every kind of bad record is refused naming the record, its
id and the field; good records round-trip in every accepted shape."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.critique import CritiqueStudy, OutputRecord, QuestionRecord
from estimators.critique.simulation import CritiqueDesign, simulate_critique

QUESTIONS = [QuestionRecord(1, 2, "math"), QuestionRecord(2, None, None)]
GOOD = [
    OutputRecord(10, 1, 0, None, None, 2, None, 3, 1000.0, "human"),
    OutputRecord(11, 1, 0, None, None, 1, None, None, None, "ai"),
    OutputRecord(12, 1, 0, None, None, None, None, 5, 0, "human"),
    OutputRecord(20, 1, 1, 10, 11, 2, 0, 4, 2000, "human"),
    OutputRecord(21, 1, 1, 11, 10, 1, None, 1.5, 2500, "ai"),
    OutputRecord(22, 1, 1, 10, 12, 2, 1, 2, 2500, "human"),
    OutputRecord(30, 1, 2, 20, 21, 2, 1, 4, 100, "human"),
    OutputRecord(40, 2, 0, None, None, 0, None, 3, 10, "human"),
]


def _with(index, **changes):
    rows = list(GOOD)
    rows[index] = rows[index]._replace(**changes)
    return rows


@pytest.mark.parametrize(("outputs", "message"), [
    (GOOD + [GOOD[0]], r"outputs\[8\] \(id 10\): field 'id': duplicate id"),
    (_with(0, question=9), r"outputs\[0\] \(id 10\): field 'question': no question with id 9"),
    (_with(3, parent_b=99), r"outputs\[3\] \(id 20\): field 'parent_b': no output with id 99"),
    (_with(6, parent_a=10), r"outputs\[6\] \(id 30\): field 'parent_a': output 10 is of level 0"),
    (_with(3, parent_b=40), r"outputs\[3\] \(id 20\): field 'parent_b': output 40 belongs to "
                            r"another question"),
    (_with(6, parent_b=22), r"outputs\[6\] \(id 30\): field 'parent_b': outputs 20 and 22 do "
                            r"not share their inputs"),
    (_with(0, parent_a=11), r"outputs\[0\] \(id 10\): field 'parent_a'/'parent_b': a response"),
    (_with(0, choice=0), r"outputs\[0\] \(id 10\): field 'choice': a response"),
    (_with(3, parent_b=None), r"outputs\[3\] \(id 20\): .*a critique needs two parents"),
    (_with(3, parent_b=10), r"outputs\[3\] \(id 20\): field 'parent_b': the two parents are "
                            r"the same"),
    (_with(3, choice=2), r"outputs\[3\] \(id 20\): field 'choice' must be one of \(0, 1\)"),
    (_with(3, choice=True), r"outputs\[3\] \(id 20\): field 'choice' must be an integer"),
    (_with(1, final="B"), r"outputs\[1\] \(id 11\): field 'final' must be an integer"),
    (_with(1, final=-1), r"outputs\[1\] \(id 11\): field 'final' must be ≥ 0"),
    (_with(1, final=1.5), r"outputs\[1\] \(id 11\): field 'final' must be an integer"),
    (_with(2, confidence=6), r"outputs\[2\] \(id 12\): field 'confidence' must be a finite number in \[1.0, 5.0\]"),
    (_with(2, confidence="high"), r"outputs\[2\] \(id 12\): field 'confidence' must be a number"),
    (_with(2, time_ms=-1), r"outputs\[2\] \(id 12\): field 'time_ms' must be a finite number in \[0.0, inf\]"),
    (_with(2, time_ms=float("inf")), r"outputs\[2\] \(id 12\): field 'time_ms'"),
    (_with(2, author="robot"), r"outputs\[2\] \(id 12\): field 'author' must be 'human' or 'ai'"),
    (_with(2, level=None), r"outputs\[2\] \(id 12\): field 'level' is required"),
    (_with(2, id=None), r"outputs\[2\]: field 'id' is required"),
    (GOOD[:2] + [GOOD[2][:9]], r"outputs\[2\]: expected 10 or 11 or 12 fields"),
    ([GOOD[0]._asdict(), {k: v for k, v in GOOD[1]._asdict().items() if k != "author"}],
     r"outputs\[1\]: missing field 'author'"),
    (GOOD[:1] + ["not a record"], r"outputs\[1\]: a record is a mapping or a tuple"),
])
def test_bad_output_records_are_refused_naming_record_id_and_field(outputs, message):
    with pytest.raises(ValueError, match=message):
        CritiqueStudy.from_records(QUESTIONS, outputs)


@pytest.mark.parametrize(("questions", "message"), [
    (QUESTIONS + [QuestionRecord(1, 0, "x")], r"questions\[2\] \(id 1\): field 'id': duplicate"),
    ([QuestionRecord(1, -2, "m")], r"questions\[0\] \(id 1\): field 'gold' must be ≥ 0"),
    ([QuestionRecord(1, 0, 7)], r"questions\[0\] \(id 1\): field 'domain' must be a string"),
    ([QuestionRecord(-1, 0, "m")], r"questions\[0\]: field 'id' must be ≥ 0"),
])
def test_bad_question_records_are_refused(questions, message):
    with pytest.raises(ValueError, match=message):
        CritiqueStudy.from_records(questions, [])


def test_tuples_mappings_and_lists_give_the_same_study():
    as_tuples = CritiqueStudy.from_records(QUESTIONS, GOOD)
    as_dicts = CritiqueStudy.from_records([q._asdict() for q in QUESTIONS],
                                          [o._asdict() for o in GOOD])
    as_lists = CritiqueStudy.from_records([list(q) for q in QUESTIONS], [list(o) for o in GOOD])
    as_numpy = CritiqueStudy.from_records(
        QUESTIONS, [o._replace(id=np.int64(o.id), time_ms=None if o.time_ms is None
                               else np.float32(o.time_ms)) for o in GOOD])
    for other in (as_dicts, as_lists, as_numpy):
        assert other.output_records() == as_tuples.output_records()
        assert other.question_records() == as_tuples.question_records()


def test_missing_values_are_coded_and_arrays_are_read_only():
    study = CritiqueStudy.from_records(QUESTIONS, GOOD)
    assert study.gold.tolist() == [2, -1]
    assert study.domains == ("", "math")
    assert study.final[2] == -1 and study.choice[4] == -1 and np.isnan(study.confidence[1])
    assert study.is_ai.tolist() == [False, True, False, False, True, False, False, False]
    assert study.top_level == 2
    with pytest.raises(ValueError):
        study.final[0] = 1


def test_nan_confidence_and_time_mean_missing():
    rows = _with(2, confidence=float("nan"), time_ms=float("nan"))
    study = CritiqueStudy.from_records(QUESTIONS, rows)
    assert np.isnan(study.confidence[2]) and np.isnan(study.time_ms[2])
    assert study.output_records()[2].confidence is None


def test_simulated_records_round_trip():
    sim = simulate_critique(CritiqueDesign(n_questions=5, gold_share=0.6), seed=1)
    again = CritiqueStudy.from_records(sim.study.question_records(),
                                       sim.study.output_records())
    for name in ("output_id", "level", "parent_a", "parent_b", "final", "choice", "is_ai",
                 "gold", "domain_index"):
        assert np.array_equal(getattr(again, name), getattr(sim.study, name)), name
    assert np.allclose(again.time_ms, sim.study.time_ms)


def test_annotators_are_optional_ids_kept_through_a_round_trip():
    sim = simulate_critique(CritiqueDesign(n_questions=6, n_annotators=8), seed=3)
    study = sim.study
    assert (study.annotator >= 0).all() and len(set(study.annotator.tolist())) == 8
    again = CritiqueStudy.from_records(study.question_records(), study.output_records())
    assert np.array_equal(again.annotator, study.annotator)
    # the same outputs with and without annotators (a separate random stream)
    plain = simulate_critique(CritiqueDesign(n_questions=6), seed=3).study
    assert (plain.annotator == -1).all() and np.array_equal(plain.final, study.final)
    # nobody writes twice at a level of a question, nor critiques a chain holding their output
    for row in np.flatnonzero(study.level > 0):
        chain = study.chains.ancestors[row][study.chains.ancestors[row] >= 0]
        assert study.annotator[row] not in set(study.annotator[chain].tolist())
    q_lv = study.output_question * 10 + study.level
    for key in np.unique(q_lv):
        who = study.annotator[q_lv == key]
        assert len(set(who.tolist())) == len(who)
    with pytest.raises(ValueError, match=r"outputs\[0\] \(id 10\): field 'annotator' must be"):
        CritiqueStudy.from_records(QUESTIONS, [GOOD[0]._replace(annotator=-3)] + GOOD[1:])
