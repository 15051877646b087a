"""Sentence and trace imports: atomic, every error names file, line and field; the format
verifier drops failing samples with their reasons; the AI rating is the aggregation."""

from __future__ import annotations

import csv
import io
import json

import pytest

from annotations.assisted.services.design import assisted_study_create
from annotations.assisted.services.exposure import task_show
from annotations.assisted.services.imports import sentences_import, traces_import
from annotations.assisted.services.rating import rating_lease_next
from annotations.core.errors import ImportFailed
from annotations.models import Exposure, Sentence
from assistants.models import TraceSample
from tests.annotations.assisted.helpers import (
    jsonl,
    make_assisted_study,
    marked_trace,
    rater_in_arm,
    sentence_records,
    trace_records,
)

pytestmark = pytest.mark.django_db


def test_sentences_from_csv_with_searches_and_ai_rating():
    study = assisted_study_create(name="csv")
    searches = [{"query": "q", "results": [{"title": "T", "url": "https://x.org/a",
                                            "snippet": "S"}]}]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "prompt", "response", "sentence", "gold", "stratum", "searches",
                     "ai_verdict", "ai_confidence"])
    writer.writerow(["a", "P?", "R one. R two.", "R one.", "Accurate", "g1",
                     json.dumps(searches), "inaccurate", "0.4"])
    writer.writerow(["b", "P2?", "Resp.", "Resp.", "", "", "", "", ""])
    out.seek(0)
    result = sentences_import(study=study, source=out, name="s.csv")
    assert result.created == 2
    a = Sentence.objects.get(study=study, external_id="a")
    assert (a.prompt, a.response, a.target, a.gold, a.stratum) == (
        "P?", "R one. R two.", "R one.", "accurate", "g1")
    assert a.searches == searches
    assert (a.ai_verdict, a.ai_confidence, a.ai_source) == ("inaccurate", 0.4, "imported")
    b = Sentence.objects.get(study=study, external_id="b")
    assert (b.gold, b.searches, b.ai_source, b.route) == ("", None, "", "waiting")


def test_bad_sentence_file_names_every_line_and_field_and_writes_nothing():
    study = assisted_study_create(name="bad")
    rows = sentence_records(7)
    rows[1].pop("prompt")
    rows[2]["colour"] = "red"
    rows[3]["gold"] = "mostly true"
    # two problems in one line's search results: both are named (issue 27)
    rows[4]["searches"] = [{"query": "q", "results": [{"url": "ftp://x", "snippet": ""}]}]
    rows[5]["ai_verdict"] = "accurate"
    rows[6]["id"] = rows[0]["id"]
    with pytest.raises(ImportFailed) as exc:
        sentences_import(study=study, source=jsonl(rows), name="s.jsonl")
    errors = exc.value.errors
    assert errors[0] == "s.jsonl:2: prompt: missing"
    assert errors[1].startswith("s.jsonl:3: colour: unknown field")
    assert errors[2].startswith("s.jsonl:4: gold: 'mostly true' is not one of")
    assert errors[3].startswith("s.jsonl:5: searches: searches[0].results[0].url:")
    assert errors[4] == "s.jsonl:5: searches: searches[0].results[0].snippet: empty"
    assert errors[5] == "s.jsonl:6: ai_confidence: give ai_verdict and ai_confidence together"
    assert errors[6] == "s.jsonl:7: id: 's0' repeats line 1"
    assert len(errors) == 7
    assert not Sentence.objects.filter(study=study).exists()


def test_existing_id_is_refused():
    study = assisted_study_create(name="again")
    sentences_import(study=study, source=jsonl(sentence_records(2)), name="a.jsonl")
    with pytest.raises(ImportFailed, match="b.jsonl:1: id: 's1' is already in the study"):
        sentences_import(study=study, source=jsonl(sentence_records(3)[1:]), name="b.jsonl")
    assert Sentence.objects.filter(study=study).count() == 2


def test_traces_aggregate_into_the_ai_rating():
    study = make_assisted_study(n_sentences=2, open_=False)
    s0 = Sentence.objects.get(study=study, external_id="s0")
    assert (s0.ai_verdict, s0.ai_n_agree, s0.ai_n_verified, s0.ai_n_samples) == (
        "inaccurate", 2, 3, 3)
    assert s0.ai_confidence == pytest.approx(2 / 3)
    samples = {t.index: t for t in TraceSample.objects.filter(sentence=s0)}
    assert samples[0].is_displayed and not samples[1].is_displayed  # ties → lowest index
    assert (samples[0].debate_side, samples[2].debate_side) == ("inaccurate", "accurate")
    assert samples[1].debate_side == ""


def test_quote_not_in_any_snippet_is_dropped_with_its_reason():
    study = make_assisted_study(n_sentences=1, traces=False, open_=False)
    bad = marked_trace("s0X1", "accurate")
    bad["evidence"][0]["quote"] = "words no page contains"
    records = [{"sentence": "s0", "sample": 0, "trace": marked_trace("s0X0", "inaccurate")},
               {"sentence": "s0", "sample": 1, "trace": bad},
               {"sentence": "s0", "sample": 2, "trace": marked_trace("s0X2", "inaccurate")}]
    result = traces_import(study=study, source=jsonl(records), name="t.jsonl")
    assert (result.samples, result.verified) == (3, 2)
    dropped = TraceSample.objects.get(sentence__study=study, index=1)
    assert not dropped.verified
    assert any("evidence[0].quote" in r and "not found verbatim" in r for r in dropped.reasons)
    s0 = Sentence.objects.get(study=study)
    assert (s0.ai_verdict, s0.ai_confidence, s0.ai_n_verified) == ("inaccurate", 1.0, 2)
    assert not TraceSample.objects.filter(sentence=s0).exclude(debate_side="").exists()


def test_bad_trace_file_changes_nothing_and_names_file_line_field():
    study = make_assisted_study(n_sentences=2, open_=False)
    before = list(TraceSample.objects.filter(sentence__study=study)
                  .values_list("pk", "trace"))
    broken = marked_trace("s0X9", "accurate")
    broken["evidence"][0]["url"] = "not a url"
    records = [{"sentence": "s0", "sample": 0, "trace": marked_trace("new", "accurate")},
               {"sentence": "s0", "sample": 1, "trace": broken},
               {"sentence": "nope", "sample": 0, "trace": marked_trace("n", "accurate")}]
    with pytest.raises(ImportFailed) as exc:
        traces_import(study=study, source=jsonl(records), name="t.jsonl")
    # one pass: a line's problem hides no other line's unknown sentence (issue 17)
    assert exc.value.errors[0].startswith("t.jsonl:2: trace.evidence[0].url:")
    assert exc.value.errors[1:] == ["t.jsonl:3: sentence: 'nope' is not a sentence of this "
                                    "study"]
    with pytest.raises(ImportFailed) as exc:
        traces_import(study=study, source=jsonl([records[0], records[2]]), name="t.jsonl")
    assert exc.value.errors == ["t.jsonl:2: sentence: 'nope' is not a sentence of this study"]
    after = list(TraceSample.objects.filter(sentence__study=study).values_list("pk", "trace"))
    assert after == before
    assert Sentence.objects.get(study=study, external_id="s0").ai_confidence == \
        pytest.approx(2 / 3)


def test_traces_shown_to_a_rater_are_never_replaced():
    study = make_assisted_study(n_sentences=1, arms={"E": ["search", "evidence"]})
    user = rater_in_arm(study, "E")
    task = rating_lease_next(study=study, user=user)
    task_show(task=task, user=user, via=Exposure.Via.PAGE)
    with pytest.raises(ImportFailed, match="already shown its AI output"):
        traces_import(study=study, source=jsonl(trace_records(["s0"], ("accurate",))),
                      name="t.jsonl")
    assert TraceSample.objects.filter(sentence__study=study).count() == 3


def test_every_problem_of_a_line_is_named():
    # issue 17: a line's first problem hid the others
    study = make_assisted_study(n_sentences=1, traces=False, open_=False)
    with pytest.raises(ImportFailed) as failed:
        sentences_import(study=study, name="s.jsonl", source=jsonl([
            {"id": "s9", "prompt": "p", "gold": "maybe", "metadata": "[1]",
             "ai_verdict": "accurate"}]))
    assert [e.split(": ")[1] for e in failed.value.errors] == [
        "response", "sentence", "gold", "metadata", "ai_confidence"]
    with pytest.raises(ImportFailed) as failed:
        traces_import(study=study, name="t.jsonl", source=jsonl([
            {"sentence": "s0", "sample": -1, "score": "high"}]))
    assert [e.split(": ")[1] for e in failed.value.errors] == ["sample", "score", "trace"]
