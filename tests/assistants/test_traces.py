"""Trace schema, parser, JSONL reader, format verifier, and the aggregation to an AI rating."""

from __future__ import annotations

import io
import json
import random
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotations.core.errors import ImportFailed
from assistants.aggregation import (
    TIE_ORDER,
    SampleResult,
    aggregate,
    confidence_band,
    imported_score,
    most_evidence,
    samples_from_records,
)
from assistants.traces import (
    MAX_CLAIMS,
    VERDICTS,
    TraceInvalid,
    cited_ids,
    parse_trace,
    parse_verdict,
    read_trace_file,
    trace_from_text,
    verify,
)
from tests.assistants.conftest import good_trace

# ---------------------------------------------------------------------------- parsing


def test_a_good_trace_parses_and_round_trips():
    trace = parse_trace(good_trace())
    assert trace.verdict == "accurate"
    assert [c.evidence_ids for c in trace.claims] == [(1, 3), (2, 3)]
    assert [e.id for e in trace.evidence] == [1, 2, 3]
    assert len(trace.searches[0].results) == 2
    assert parse_trace(trace.to_dict()) == trace


@pytest.mark.parametrize(("spelling", "code"), [
    ("Accurate", "accurate"), ("INACCURATE", "inaccurate"), ("  disputed ", "disputed"),
    ("Doesn't require attribution", "no_attribution"),
    ("Doesn\u2019t  require attribution", "no_attribution"),
    ("does not require attribution", "no_attribution"), ("no_attribution", "no_attribution"),
    ("Unsupported", "unsupported")])
def test_verdicts_by_label_or_code(spelling, code):
    assert parse_verdict(spelling) == code


@pytest.mark.parametrize(("change", "path", "message"), [
    (lambda t: t["evidence"][2].pop("url"), "evidence[2].url", "missing"),
    (lambda t: t["evidence"][1].update(url="javascript:alert(1)"), "evidence[1].url",
     "is not an http(s) URL"),
    (lambda t: t["evidence"][0].update(id=0), "evidence[0].id", "whole number"),
    (lambda t: t["claims"][1].update(verdict="Mostly true"), "claims[1].verdict",
     "'Mostly true' is not one of Inaccurate, Unsupported, Disputed, Accurate"),
    (lambda t: t["claims"][0].update(evidence_ids=[1, "x"]), "claims[0].evidence_ids[1]",
     "whole number"),
    (lambda t: t["searches"][1]["results"][0].update(snippet=7),
     "searches[1].results[0].snippet", "must be text, not a number"),
    (lambda t: t["searches"][0].update(results={}), "searches[0].results",
     "must be a list, not an object"),
    (lambda t: t.update(claims=[{"text": "c", "reasoning": "r", "verdict": "Accurate"}]
                        * (MAX_CLAIMS + 1)), "claims", f"{MAX_CLAIMS + 1} entries"),
    (lambda t: t.pop("verdict"), "verdict", "missing"),
    (lambda t: t["claims"][0].update(text="   "), "claims[0].text", "empty"),
    (lambda t: t["claims"][0].update(confidence=0.9), "claims[0].confidence", "unknown field"),
])
def test_parse_errors_name_the_field_path(change, path, message):
    data = good_trace()
    change(data)
    with pytest.raises(TraceInvalid) as caught:
        parse_trace(data)
    assert caught.value.path == path
    assert message in caught.value.message


def test_model_output_ignores_extra_keys_files_do_not():
    data = good_trace(confidence=0.8)
    assert parse_trace(data, strict=False).verdict == "accurate"
    with pytest.raises(TraceInvalid, match="confidence: unknown field"):
        parse_trace(data)


@pytest.mark.parametrize("wrap", [
    "TRACE",
    "Here is my analysis.\n```json\nTRACE\n```\nDone.",
    "```\nTRACE\n```",
    'Draft:\n```json\n{"x": 1}\n```\nFinal:\n```json\nTRACE\n```',
    "Sure! TRACE Hope this helps.",
])
def test_the_trace_is_found_in_a_chatty_reply(wrap):
    text = wrap.replace("TRACE", json.dumps(good_trace()))
    assert trace_from_text(text) == parse_trace(good_trace())


@pytest.mark.parametrize(("text", "message"), [
    ("I think it is accurate.", "no JSON object"),
    ('{"claims": [}', "malformed"),
    ("[" * 100 + "]" * 100, "no JSON object"),
    ('{"claims": ' + "[" * 70 + "]" * 70 + "}", "nested deeper"),
])
def test_a_reply_without_a_trace_is_refused(text, message):
    with pytest.raises(TraceInvalid, match=message):
        trace_from_text(text)


# ---------------------------------------------------------------------------- the verifier


def test_a_good_trace_passes_the_verifier():
    assert verify(parse_trace(good_trace())) == ()


def test_a_quote_not_in_any_snippet_is_dropped_with_its_reason():
    # given: evidence 2's quote changed by one word
    data = good_trace()
    data["evidence"][1]["quote"] = "Adults aged 19 to 64 need 90mg of vitamin C a day."
    # when
    reasons = verify(parse_trace(data))
    # then: exactly that reason
    assert reasons == ("evidence[1].quote: not found verbatim in any search result snippet",)
    sample = SampleResult(index=0, trace=parse_trace(data), reasons=reasons)
    rating = aggregate([sample])
    assert rating.verdict is None and rating.displayed is None
    assert rating.dropped == ((0, reasons),)


def test_verbatim_means_same_words_and_case_whitespace_aside():
    data = good_trace()
    data["evidence"][1]["quote"] = "Adults  aged 19 to 64\nneed 40mg of vitamin C a day."
    assert verify(parse_trace(data)) == ()
    data["evidence"][1]["quote"] = "adults aged 19 to 64 need 40mg of vitamin C a day."
    assert verify(parse_trace(data)) == (
        "evidence[1].quote: not found verbatim in any search result snippet",)


def test_a_quote_from_another_page_than_its_url_fails_unless_allowed():
    data = good_trace()
    data["evidence"][1]["url"] = "https://fdc.nal.usda.gov/strawberries"
    trace = parse_trace(data)
    assert verify(trace) == ("evidence[1].url: the quote is in a snippet of "
                             "https://www.nhs.uk/vitamin-c, not of "
                             "https://fdc.nal.usda.gov/strawberries",)
    assert verify(trace, quote_url_must_match=False) == ()


def test_citation_rules():
    data = good_trace()
    data["claims"][0]["evidence_ids"] = []
    data["claims"][0]["reasoning"] = "No source."  # claim 0 cites nothing; evidence 1 uncited
    data["claims"][1]["evidence_ids"] = [2, 3, 9]  # 9 does not exist
    data["reasoning"] = "See [7]."  # no evidence 7: text, not a citation (nor of 1)
    assert verify(parse_trace(data)) == (
        "claims[0]: cites no evidence",
        "claims[1]: cites evidence 9, which does not exist",
        "evidence[0]: evidence 1 is never cited",
    )


def test_markers_in_the_reasoning_count_as_citations():
    data = good_trace()
    for claim in data["claims"]:
        claim.pop("evidence_ids")
    assert verify(parse_trace(data)) == ()


def test_repeated_evidence_ids_fail():
    data = good_trace()
    data["evidence"][2]["id"] = 2
    reasons = verify(parse_trace(data))
    assert "evidence[2].id: 2 repeats evidence[1]" in reasons
    assert "claims[0]: cites evidence 3, which does not exist" in reasons


def test_given_search_results_are_what_quotes_must_come_from():
    trace = parse_trace(good_trace())
    given_results = trace.searches[:1]  # the NHS result was not given
    reasons = verify(trace, given=given_results)
    assert reasons == (
        "searches[1].results[0]: not among the search results given to the model",
        "evidence[1].quote: not found verbatim in any search result snippet",
    )
    assert verify(replace(trace, searches=()), given=trace.searches) == ()


# ---------------------------------------------------------------------------- JSONL files


def jsonl(*records) -> io.BytesIO:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    return io.BytesIO(("\n".join(lines) + "\n").encode())


def test_a_trace_file_reads_every_sample():
    source = jsonl({"sentence": "s1", "trace": good_trace()},
                   {"sentence": "s1", "trace": good_trace(verdict="Inaccurate"), "score": 0.5},
                   "",
                   {"sentence": 7, "sample": 4, "trace": good_trace()})
    records = read_trace_file(source, name="traces.jsonl")
    assert [(r.line, r.sentence, r.sample, r.score) for r in records] == [
        (1, "s1", 0, None), (2, "s1", 1, 0.5), (4, "7", 4, None)]
    assert records[1].trace.verdict == "inaccurate"


def test_a_bad_trace_file_names_file_line_and_field_and_returns_nothing():
    bad = good_trace()
    bad["evidence"][2].pop("url")
    source = jsonl({"sentence": "s1", "trace": good_trace()},
                   {"sentence": "s1", "trace": bad},
                   {"trace": good_trace()},
                   {"sentence": "s2", "sample": -1, "trace": good_trace()},
                   {"sentence": "s1", "sample": 0, "trace": good_trace()},
                   {"sentence": "s3", "trace": good_trace(), "notes": "x"},
                   {"sentence": "s3", "score": "high", "trace": good_trace()},
                   {"sentence": "s4"})
    with pytest.raises(ImportFailed) as caught:
        read_trace_file(source, name="traces.jsonl")
    assert caught.value.errors == [
        "traces.jsonl:2: trace.evidence[2].url: missing",
        "traces.jsonl:3: sentence: missing (the sentence's id)",
        "traces.jsonl:4: sample: must be a whole number ≥ 0",
        "traces.jsonl:5: sample: sentence 's1' sample 0 repeats line 1",
        "traces.jsonl:6: notes: unknown field (expected sentence, sample, score, trace)",
        "traces.jsonl:7: score: must be a number",
        "traces.jsonl:8: trace: missing",
    ]


@pytest.mark.parametrize(("content", "error"), [
    (b'{"sentence": "s1", "trace": {}}\n{"sentence": "s2", "trace": ', "traces.jsonl:2: invalid JSON"),
    (b'{"sentence": "s1", "trace": ' + b"[" * 80 + b"]" * 80 + b"}",
     "traces.jsonl:1: JSON nested deeper than 64 levels"),
    (b'{"sentence": "s\\u0000", "trace": {}}', "traces.jsonl:1: sentence: contains a NUL"),
    (b"\xff\xfe not utf-8", "traces.jsonl:1: not UTF-8 text"),
    (b"\n\n", "traces.jsonl: no traces in the file"),
    (b"[1, 2]", "traces.jsonl:1: each line must be a JSON object"),
])
def test_unreadable_trace_files_are_refused_whole(content, error):
    with pytest.raises(ImportFailed) as caught:
        read_trace_file(io.BytesIO(content), name="traces.jsonl")
    assert any(e.startswith(error) for e in caught.value.errors)  # line 1 is named too


def test_a_file_on_disk_is_named_by_its_path(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"sentence": "a", "trace": {"claims": []}}\n')
    with pytest.raises(ImportFailed) as caught:
        read_trace_file(path)
    assert caught.value.errors == [f"{path}:1: trace.verdict: missing"]


def test_imported_records_become_verified_samples():
    failing = good_trace()
    failing["evidence"][0]["quote"] = "invented words"
    records = read_trace_file(jsonl(
        {"sentence": "s1", "sample": 1, "trace": failing},
        {"sentence": "s1", "sample": 0, "trace": good_trace(), "score": 2.0},
        {"sentence": "s2", "trace": good_trace(searches=[])}))
    given_results = {"s2": parse_trace(good_trace()).searches}
    grouped = samples_from_records(records, given=given_results)
    assert [s.index for s in grouped["s1"]] == [0, 1]
    assert [s.verified for s in grouped["s1"]] == [True, False]
    assert grouped["s1"][1].reasons == (
        "evidence[0].quote: not found verbatim in any search result snippet",)
    assert grouped["s1"][0].score == 2.0
    # s2's model quoted the results it was given; they become the trace's searches
    assert grouped["s2"][0].verified
    assert grouped["s2"][0].trace.searches == given_results["s2"]


# ---------------------------------------------------------------------------- aggregation


def sample(index: int, verdict: str, *, evidence: int = 1, claims: int = 1, score=None,
           verified: bool = True) -> SampleResult:
    """A verified sample with the given overall verdict and sizes (built to pass verify)."""
    results = [{"title": f"r{k}", "url": f"https://e.org/{k}", "snippet": f"fact number {k}."}
               for k in range(1, evidence + 1)]
    data = {
        "searches": [{"query": "q", "results": results}],
        "evidence": [{"id": k, "url": f"https://e.org/{k}", "quote": f"fact number {k}"}
                     for k in range(1, evidence + 1)],
        "claims": [{"text": f"c{j}", "reasoning": "see " + ", ".join(
            f"[{k}]" for k in range(1, evidence + 1)), "verdict": verdict}
            for j in range(claims)],
        "verdict": verdict,
    }
    trace = parse_trace(data)
    assert verify(trace) == ()
    reasons = () if verified else ("evidence[0].quote: not found verbatim",)
    return SampleResult(index=index, trace=trace, reasons=reasons, score=score)


def test_rating_confidence_displayed_and_debate():
    samples = [sample(0, "Inaccurate", evidence=3), sample(1, "Accurate", evidence=1),
               sample(2, "Accurate", evidence=2), sample(3, "Accurate", evidence=2),
               sample(4, "Disputed", evidence=5),
               sample(5, "Accurate", evidence=9, verified=False),
               SampleResult(index=6, trace=None, raw_text="oops", error="no valid trace: x")]
    rating = aggregate(samples)
    assert rating.verdict == "accurate"
    assert (rating.n_agree, rating.n_verified, rating.n_samples) == (3, 5, 7)
    assert rating.confidence == 3 / 5
    assert rating.displayed.index == 2  # most evidence among agreeing; tie 2/3 → lower index
    assert rating.debate.accurate.index == 2
    assert rating.debate.inaccurate.index == 4  # disputed binarises to Inaccurate; 5 items
    assert rating.dropped == ((5, ("evidence[0].quote: not found verbatim",)),
                              (6, ("no valid trace: x",)))
    assert dict(rating.counts) == {"inaccurate": 1, "unsupported": 0, "disputed": 1,
                                   "accurate": 3, "no_attribution": 0}


def test_ties_follow_the_tie_order_and_never_favour_accurate():
    assert aggregate([sample(0, "Accurate"), sample(1, "Unsupported")]).verdict == "unsupported"
    assert aggregate([sample(0, "Doesn't require attribution"),
                      sample(1, "Accurate")]).verdict == "no_attribution"
    custom = ("accurate", *[v for v in TIE_ORDER if v != "accurate"])
    assert aggregate([sample(0, "Accurate"), sample(1, "Unsupported")],
                     tie_order=custom).verdict == "accurate"


def test_no_debate_without_both_sides():
    rating = aggregate([sample(0, "Inaccurate"), sample(1, "Unsupported")])
    assert rating.debate is None and rating.verdict == "inaccurate"


def test_imported_score_and_custom_scorers():
    samples = [sample(0, "Accurate", evidence=5, score=0.1), sample(1, "Accurate", score=0.9),
               sample(2, "Accurate", evidence=3)]
    assert aggregate(samples).displayed.index == 0
    assert aggregate(samples, scorer=imported_score).displayed.index == 1
    assert aggregate(samples, scorer=lambda s: -s.index).displayed.index == 0
    assert aggregate(samples, scorer=lambda s: s.index).displayed.index == 2


def test_nothing_verified_means_no_rating():
    rating = aggregate([SampleResult(index=0, trace=None, error="provider: down")])
    assert (rating.verdict, rating.confidence, rating.displayed, rating.debate) == (
        None, None, None, None)


@given(st.lists(st.tuples(st.sampled_from(VERDICTS), st.integers(1, 4), st.booleans()),
                min_size=1, max_size=25), st.permutations(VERDICTS))
def test_aggregate_matches_a_brute_force_count(draws, tie_order):
    samples = [sample(i, v, evidence=e, verified=ok) for i, (v, e, ok) in enumerate(draws)]
    rating = aggregate(samples, tie_order=tie_order)
    kept = [(i, v, e) for i, (v, e, ok) in enumerate(draws) if ok]
    if not kept:
        assert rating.verdict is None
        return
    # brute force: for each verdict count it; the winner has the top count, first in order
    counts = {v: sum(1 for _, w, _ in kept if w == v) for v in VERDICTS}
    winners = [v for v in tie_order if counts[v] == max(counts.values())]
    assert rating.verdict == winners[0]
    assert Fraction(rating.n_agree, rating.n_verified) == Fraction(counts[winners[0]], len(kept))
    # displayed: among agreeing, max evidence, then lowest index
    agreeing = [(e, -i) for i, v, e in kept if v == winners[0]]
    assert rating.displayed.index == -max(agreeing)[1]
    sides = {side: [(e, -i) for i, v, e in kept if (v == "accurate") == side]
             for side in (True, False)}
    if sides[True] and sides[False]:
        assert rating.debate.accurate.index == -max(sides[True])[1]
        assert rating.debate.inaccurate.index == -max(sides[False])[1]
    else:
        assert rating.debate is None


def test_the_default_scorer_ranks_evidence_then_claims():
    assert most_evidence(sample(0, "Accurate", evidence=2, claims=1)) == (2, 1)
    samples = [sample(0, "Accurate", evidence=2, claims=1),
               sample(1, "Accurate", evidence=2, claims=3)]
    assert aggregate(samples).displayed.index == 1


def test_samples_must_have_distinct_indices():
    with pytest.raises(ValueError, match="share an index"):
        aggregate([sample(0, "Accurate"), sample(0, "Accurate")])


# ---------------------------------------------------------------------------- confidence band


@pytest.mark.parametrize(("agree", "verified", "label", "percent"), [
    (13, 20, "low", 65), (69, 100, "low", 69), (7, 10, "medium", 70), (5, 8, "low", 63),
    (89, 100, "medium", 89), (9, 10, "high", 90), (19, 20, "high", 95), (1, 1, "high", 100),
    (1, 8, "low", 13), (0, 3, "low", 0)])
def test_confidence_bands_at_their_edges(agree, verified, label, percent):
    band = confidence_band(agree, verified)
    assert (band.label, band.percent) == (label, percent)


def test_band_percent_is_half_up_and_labels_follow_cutoffs_for_every_fraction():
    rng = random.Random(3)
    for _ in range(20):
        low = Fraction(rng.randint(1, 9), 10)
        high = low + Fraction(rng.randint(0, 10 - int(low * 10)), 10)
        for verified in range(1, 61):
            for agree in range(verified + 1):
                band = confidence_band(agree, verified, (float(low), float(high)))
                exact = Decimal(100 * agree) / Decimal(verified)
                assert band.percent == int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP))
                share = Fraction(agree, verified)
                expected = "low" if share < low else "medium" if share < high else "high"
                assert band.label == expected
    assert str(confidence_band(13, 20)) == "low (65%)"


@pytest.mark.parametrize(("args", "message"), [((0, 0), "n_verified > 0"), ((5, 4), "n_agree"),
                                               ((1, 2, (0.9, 0.7)), "cutoffs")])
def test_band_refuses_impossible_input(args, message):
    with pytest.raises(ValueError, match=message):
        confidence_band(*args)


def test_a_bracketed_number_that_is_no_evidence_id_is_text_not_a_citation():
    # given a valid trace whose reasoning also mentions a year in brackets
    data = good_trace()
    data["claims"][0]["reasoning"] += " USDA [1] data from [2019]."
    data["reasoning"] += " (figures as of [2024])"
    # then it still passes: [2019] and [2024] are not citations of evidence
    assert verify(parse_trace(data)) == ()
    # and a claim whose only bracket is a year cites nothing
    data["claims"][0]["evidence_ids"] = []
    data["claims"][0]["reasoning"] = "USDA data from [2019]."
    assert "claims[0]: cites no evidence" in verify(parse_trace(data))


@pytest.mark.parametrize("marker", ["[1-3]", "[1–3]", "[1 - 3]", "[3, 1-2]"])
def test_range_citations_cite_every_evidence_item_they_span(marker):
    # given a trace whose claims cite nothing but one range in the overall reasoning
    data = good_trace()
    for claim in data["claims"]:
        claim.pop("evidence_ids")
        claim["reasoning"] = f"See {marker}."
    data["reasoning"] = "Overall."
    # then every evidence item 1..3 is cited and the trace passes
    assert verify(parse_trace(data)) == ()


def test_cited_ids_reads_lists_ranges_and_leaves_other_brackets():
    text = "USDA [1] data from [2019], see [2-3], [4, 6–7] and [a] or [1.5]"
    assert cited_ids(text) == {1, 2, 3, 4, 6, 7, 2019}
    assert cited_ids(text, {1, 2, 3, 5, 7}) == {1, 2, 3, 7}
    assert cited_ids("[9-2]") == set()  # a backwards range cites nothing
