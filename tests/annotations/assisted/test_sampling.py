"""Sampling the AI rater from an OpenAI-compatible endpoint (the local stand-in server):
one task per sentence, samples and AI rating stored together; a provider that times out or
returns garbage is retried and then reported — never stored as a sample or a rating."""

from __future__ import annotations

import json

import pytest

from annotations.assisted.services.ai import sampling_progress, sampling_seed, sampling_start
from annotations.assisted.services.design import assisted_study_create
from annotations.assisted.services.imports import sentences_import
from annotations.core.errors import InvalidStudy
from annotations.core.services.studies import study_open
from annotations.models import Rating, Sentence
from assistants.models import SentenceSampling, TraceSample
from tests.annotations.assisted.helpers import jsonl, marked_trace, sentence_records
from tests.assistants.standin import StandinServer, garbage, reply, slow

pytestmark = pytest.mark.django_db


@pytest.fixture
def fast_provider(settings):
    settings.OVERSIGHT_AI_MAX_RETRIES = 1
    settings.OVERSIGHT_AI_TIMEOUT = 1.0
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the task runs in-process, even with a broker


def study_at(server: StandinServer, n_samples: int = 4, **settings):
    study = assisted_study_create(name=f"sampling-{id(server)}-{n_samples}",
                                  n_samples=n_samples, ai_base_url=server.base_url,
                                  ai_model="standin", ai_api_key="sk-secret-standin",
                                  routing="threshold", threshold=0.7, **settings)
    sentences_import(study=study, source=jsonl(sentence_records(1)), name="s.jsonl")
    return study


def test_samples_are_stored_with_the_ai_rating(fast_provider, django_capture_on_commit_callbacks):
    holder = {}

    def respond(body):
        i = body["seed"] - holder["base"]
        if i in (0, 1):
            return reply("Here it is:\n```json\n" + json.dumps(marked_trace(f"a{i}",
                                                                          "inaccurate"))
                         + "\n```")
        if i == 2:
            return reply(json.dumps(marked_trace("a2", "accurate")))
        return reply("I cannot help with that.")

    with StandinServer(responder=respond) as server:
        study = study_at(server)
        sentence = Sentence.objects.get(study=study)
        holder["base"] = sampling_seed(study, sentence)
        with django_capture_on_commit_callbacks(execute=True):
            run = sampling_start(study=study)
        seeds = sorted(r.body["seed"] for r in server.requests)
        headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
        assert headers["authorization"] == "Bearer sk-secret-standin"
    assert seeds == [holder["base"] + i for i in range(4)]
    samples = {s.index: s for s in TraceSample.objects.filter(sentence=sentence)}
    assert sorted(samples) == [0, 1, 2, 3]
    assert [samples[i].verified for i in range(4)] == [True, True, True, False]
    assert samples[3].trace is None and samples[3].reasons[0].startswith("no valid trace")
    assert samples[0].raw_text.startswith("Here it is") and samples[0].model == "standin"
    assert samples[0].is_displayed and samples[2].debate_side == "accurate"
    sentence.refresh_from_db()
    assert (sentence.ai_verdict, sentence.ai_n_agree, sentence.ai_n_verified,
            sentence.ai_n_samples, sentence.ai_source) == ("inaccurate", 2, 3, 4, "traces")
    progress = sampling_progress(run)
    assert (progress["done"], progress["failed"], progress["percent"]) == (1, 0, 100)
    assert run.config["endpoint"] == server.base_url + "/chat/completions"
    assert "sk-secret" not in json.dumps(run.config)
    run.refresh_from_db()
    assert run.finished_at is not None
    study_open(study=study)
    sentence.refresh_from_db()
    assert sentence.route == "human"  # 2/3 ≤ T = 0.7


@pytest.mark.parametrize(("step", "why"), [(garbage(), "JSON"), (slow(3.0), "(timeout)")])
def test_a_failing_provider_is_retried_then_reported_and_nothing_is_stored(
        fast_provider, django_capture_on_commit_callbacks, step, why):
    with StandinServer([step]) as server:
        study = study_at(server, n_samples=2)
        with django_capture_on_commit_callbacks(execute=True):
            run = sampling_start(study=study)
        attempts = len(server.requests)
    item = SentenceSampling.objects.get(run=run)
    assert item.status == "failed" and attempts >= 2  # the first try and the retry
    assert server.base_url in item.error and "gave up after" in item.error
    assert why in item.error
    assert "sk-secret" not in item.error
    sentence = Sentence.objects.get(study=study)
    assert (sentence.ai_source, sentence.ai_verdict, sentence.ai_confidence,
            sentence.route) == ("", "", None, "waiting")
    assert not TraceSample.objects.filter(sentence__study=study).exists()
    assert not Rating.objects.filter(study=study).exists()
    progress = sampling_progress(run)
    assert (progress["failed"], progress["percent"]) == (1, 100)
    assert progress["errors"][0][0] == "s0"


def test_sampling_needs_an_endpoint(settings):
    settings.OVERSIGHT_AI_BASE_URL = ""
    study = assisted_study_create(name="no-endpoint")
    sentences_import(study=study, source=jsonl(sentence_records(1)), name="s.jsonl")
    with pytest.raises(InvalidStudy) as exc:
        sampling_start(study=study)
    assert exc.value.field == "ai_base_url"
    assert not SentenceSampling.objects.exists()
