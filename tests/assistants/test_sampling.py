"""N samples per sentence and critique-study outputs, through the local stand-in endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assistants.aggregation import aggregate, confidence_band
from assistants.prompts import (
    CHOICE_SECOND,
    CRITIQUE,
    FACTUALITY_GIVEN_RESULTS,
    FACTUALITY_OWN_SEARCHES,
    RESPONSE,
    TemplateError,
)
from assistants.provider import ProviderConfig, ProviderError
from assistants.sampling import (
    generate_critique,
    generate_response,
    sample_seed,
    sample_traces,
)
from assistants.traces import FactualitySentence, parse_trace
from tests.assistants.conftest import good_trace
from tests.assistants.standin import echo, reply, status

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = FactualitySentence(prompt="Why eat strawberries?",
                              response="Strawberries are rich in vitamin C.",
                              sentence="Strawberries are rich in vitamin C.")


def config(server, **changes) -> ProviderConfig:
    values = {"base_url": server.base_url, "model": "standin", "api_key": "k", "timeout": 2.0,
              "max_retries": 1, "backoff": 0.01}
    values.update(changes)
    return ProviderConfig(**values)


def bad_quote() -> dict:
    trace = good_trace(verdict="Inaccurate")
    trace["evidence"][0]["quote"] = "strawberries contain no vitamin C"
    return trace


def by_seed(base: int):
    """A responder whose answer depends on the sample (seed − base): 0–3 good traces (three
    accurate, one inaccurate), 4 a quote that is in no snippet, 5 no JSON at all."""
    def respond(body: dict):
        i = body["seed"] - base
        if i in (0, 1, 3):
            return reply("```json\n" + json.dumps(good_trace()) + "\n```")
        if i == 2:
            return reply(json.dumps(good_trace(verdict="Inaccurate",
                                               claims=good_trace()["claims"][:1] + [
                                                   dict(good_trace()["claims"][1],
                                                        verdict="Inaccurate")])))
        if i == 4:
            return reply(json.dumps(bad_quote()))
        return reply("I could not decide.")
    return respond


@pytest.mark.parametrize("concurrency", [1, 4])
def test_samples_are_parsed_verified_and_recorded(standin, concurrency):
    # given
    server = standin(responder=by_seed(1000))
    # when
    samples = sample_traces(config(server), FACTUALITY_OWN_SEARCHES, SENTENCE, 6, seed=1000,
                            concurrency=concurrency)
    # then: every sample recorded in order, with its raw text and why it failed
    assert [s.index for s in samples] == list(range(6))
    assert sorted(r.body["seed"] for r in server.requests) == [1000 + i for i in range(6)]
    assert [s.verified for s in samples] == [True, True, True, True, False, False]
    assert samples[4].reasons == (
        "evidence[0].quote: not found verbatim in any search result snippet",)
    assert samples[5].trace is None
    assert samples[5].error.startswith("no valid trace: the reply holds no JSON object")
    assert samples[5].raw_text == "I could not decide."
    assert all(s.model == "standin" and s.latency is not None for s in samples)
    # and the rating comes from the verified ones only
    rating = aggregate(samples)
    assert (rating.verdict, rating.n_agree, rating.n_verified) == ("accurate", 3, 4)
    assert str(confidence_band(rating.n_agree, rating.n_verified)) == "medium (75%)"
    assert rating.debate.inaccurate.index == 2


def test_the_rendered_prompt_is_what_the_endpoint_receives(standin):
    server = standin([echo()])
    [result] = sample_traces(config(server), FACTUALITY_OWN_SEARCHES, SENTENCE, 1, seed=0)
    sent = server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert "<sentence>\nStrawberries are rich in vitamin C.\n</sentence>" in sent[1]["content"]
    # the echoed prompt is no trace: recorded, not guessed
    assert result.trace is None and result.error.startswith("no valid trace")


def test_given_search_results_become_the_trace_searches(standin):
    given_searches = parse_trace(good_trace()).searches
    sentence = FactualitySentence(SENTENCE.prompt, SENTENCE.response, SENTENCE.sentence,
                                  searches=given_searches)
    invented = good_trace()
    invented["searches"][0]["results"][0]["snippet"] = "Amount per 100g: 58.8 mg. Invented."
    invented["evidence"][2]["quote"] = "Invented."
    server = standin([reply(json.dumps(good_trace(searches=[]))), reply(json.dumps(invented))])
    samples = sample_traces(config(server), FACTUALITY_GIVEN_RESULTS, sentence, 2, seed=5)
    assert samples[0].verified and samples[0].trace.searches == given_searches
    assert samples[1].reasons == (
        "searches[0].results[0]: not among the search results given to the model",
        "evidence[2].quote: not found verbatim in any search result snippet")
    assert "Adults aged 19 to 64" in server.requests[0].body["messages"][1]["content"]


def test_a_template_that_does_not_fit_the_sentence_is_refused_before_asking(standin):
    server = standin([reply("x")])
    with pytest.raises(TemplateError, match="no search results"):
        sample_traces(config(server), FACTUALITY_GIVEN_RESULTS, SENTENCE, 2, seed=0)
    with pytest.raises(TemplateError, match="cannot rate factuality"):
        sample_traces(config(server), RESPONSE, SENTENCE, 2, seed=0)
    assert server.requests == []


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_failing_provider_raises_and_nothing_is_returned(standin, concurrency):
    server = standin([reply(json.dumps(good_trace())), status(500)])
    with pytest.raises(ProviderError, match="HTTP 500"):
        sample_traces(config(server), FACTUALITY_OWN_SEARCHES, SENTENCE, 4, seed=0,
                      concurrency=concurrency)


def test_provider_failures_can_be_recorded_per_sample(standin):
    server = standin([reply(json.dumps(good_trace())), status(500)])
    samples = sample_traces(config(server, max_retries=0), FACTUALITY_OWN_SEARCHES, SENTENCE,
                            3, seed=0, on_provider_error="record")
    assert [s.verified for s in samples] == [True, False, False]
    assert samples[1].error.startswith("provider: ") and "HTTP 500" in samples[1].error
    rating = aggregate(samples)
    assert (rating.verdict, rating.n_verified, rating.n_samples) == ("accurate", 1, 3)


def test_sample_seeds_wrap_around():
    assert sample_seed(2**31 - 1, 2) == 1
    assert sample_seed(7, 0) == 7


def test_a_response_is_parsed_to_an_option_and_the_raw_text_kept(standin):
    server = standin([reply("4 is 2 + 2.\nAnswer: B"), reply("It must be four.")])
    parsed = generate_response(config(server), RESPONSE, "2 + 2?", ["3", "4", "5"], seed=9)
    assert (parsed.final, parsed.rationale, parsed.parsed) == (1, "4 is 2 + 2.", True)
    assert server.requests[0].body["seed"] == 9
    unparsed = generate_response(config(server), RESPONSE, "2 + 2?", ["3", "4", "5"])
    assert (unparsed.final, unparsed.raw_text, unparsed.parsed) == (
        None, "It must be four.", False)


def test_a_critique_is_parsed_to_choice_final_and_rationale(standin):
    server = standin([reply("Output 1 adds wrongly.\nBetter: 2\nAnswer: B")])
    out = generate_critique(config(server), CRITIQUE, "2 + 2?", ["3", "4"], 1,
                            "It is 3.\nAnswer: A", "It is 4.\nAnswer: B")
    assert (out.choice, out.final, out.rationale) == (CHOICE_SECOND, 1,
                                                      "Output 1 adds wrongly.")
    prompt = server.requests[0].body["messages"][0]["content"]
    assert prompt.index("It is 3.") < prompt.index("It is 4.")


def test_a_critique_study_provider_failure_raises(standin):
    server = standin([status(502)])
    with pytest.raises(ProviderError) as caught:
        generate_critique(config(server), CRITIQUE, "q", ["a", "b"], 1, "x", "y")
    assert caught.value.attempts == 2


def test_the_ai_side_loads_without_django_apps_or_models():
    # The study helpers call these modules from tasks and admin code; they must not need
    # (or import) any model: importing them before django.setup() must work.
    code = (
        "import sys\n"
        "import assistants.sampling, assistants.aggregation, assistants.prompts\n"
        "from django.apps import apps\n"
        "assert not apps.ready\n"
        "print(sorted(m for m in sys.modules if m.endswith('.models')"
        " and m.split('.')[0] in ('annotations', 'assistants')))\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "oversight_site.settings.test"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
