"""The provider client against a real local HTTP stand-in (never the network)."""

from __future__ import annotations

import logging
import re
import time

import pytest
from django.test import override_settings

from assistants import provider
from assistants.provider import (
    ProviderConfig,
    ProviderError,
    ProviderNotConfigured,
    complete,
    config_from_settings,
)
from tests.assistants.standin import garbage, hang_up, no_choices, reply, slow, status

KEY = "sk-test-SECRET-0123456789"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]

FAILURES = {
    "not JSON": (garbage(), "the answer is not JSON"),
    "nested too deep": (garbage(b"[" * 5000 + b"]" * 5000), "the answer is not usable JSON"),
    "no choices": (no_choices(), "the answer has no choices"),
    "empty message": (reply(""), "the answer has no message text"),
    "NUL in the text": (reply("Answer: B\x00"), "the answer's text contains a NUL character"),
    "text too long": (reply("x" * 100_001), "the answer's text is 100,001 characters long"),
    "HTTP 500": (status(500), "HTTP 500"),
    "HTTP 503": (status(503), "HTTP 503"),
    "HTTP 429": (status(429), "HTTP 429"),
    "timeout": (slow(5.0), "no answer within 0.5 s (timeout)"),
    "hang-up": (hang_up(), "connection failed"),
}


def config(server, **changes) -> ProviderConfig:
    values = {"base_url": server.base_url, "model": "standin-7b", "api_key": KEY,
              "timeout": 0.5, "max_retries": 2, "backoff": 0.01, "temperature": 0.7,
              "max_tokens": 512}
    values.update(changes)
    return ProviderConfig(**values)


def test_complete_returns_the_message_and_sends_the_request(standin):
    # given
    server = standin([reply("Answer: B")])
    # when
    answer = complete(config(server), MESSAGES, seed=42)
    # then
    assert answer.text == "Answer: B"
    assert answer.model == "standin-7b"
    assert answer.attempts == 1
    assert answer.finish_reason == "stop"
    assert answer.usage == {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    assert answer.raw["choices"][0]["message"]["content"] == "Answer: B"
    assert 0 < answer.latency < 5
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "standin-7b"
    assert request.body["messages"] == MESSAGES
    assert request.body["temperature"] == 0.7
    assert request.body["max_tokens"] == 512
    assert request.body["seed"] == 42


def test_seed_is_left_out_when_the_endpoint_refuses_it(standin):
    server = standin([reply("ok")])
    complete(config(server, send_seed=False), MESSAGES, seed=42)
    assert "seed" not in server.requests[0].body


@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
def test_a_failed_attempt_is_retried_then_the_answer_returned(standin, failure):
    # given: one failure, then a good answer
    step, _ = failure
    server = standin([step, reply("fine")])
    # when
    answer = complete(config(server), MESSAGES)
    # then
    assert answer.text == "fine"
    assert answer.attempts == 2
    assert len(server.requests) == 2


def test_every_kind_of_failure_in_a_row_then_success(standin):
    steps = [step for step, _ in FAILURES.values()]
    server = standin([*steps, reply("at last")])
    answer = complete(config(server, max_retries=len(steps)), MESSAGES)
    assert (answer.text, answer.attempts) == ("at last", len(steps) + 1)
    assert len(server.requests) == len(steps) + 1


@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
def test_a_provider_that_keeps_failing_raises_a_clear_error(standin, failure):
    # given: the endpoint fails every time
    step, what = failure
    server = standin([step])
    # when
    with pytest.raises(ProviderError) as caught:
        complete(config(server, max_retries=2), MESSAGES)
    # then: what, which endpoint, how many attempts; exactly that many requests
    error = caught.value
    assert error.attempts == 3 and error.retryable
    assert len(server.requests) == 3
    assert error.endpoint == f"{server.base_url}/chat/completions"
    assert error.model == "standin-7b"
    assert what in error.what
    assert str(error).startswith(f"{server.base_url}/chat/completions (model 'standin-7b'): ")
    assert re.search(r"gave up after 3 attempts, last at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$",
                     str(error))


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_a_client_error_is_not_retried(standin, code):
    server = standin([status(code, b'{"error": {"message": "model not found"}}')])
    with pytest.raises(ProviderError) as caught:
        complete(config(server, max_retries=3), MESSAGES)
    assert caught.value.attempts == 1 and not caught.value.retryable
    assert len(server.requests) == 1
    assert re.fullmatch(rf"HTTP {code} \(\w+Error\)", caught.value.what)
    assert "model not found" not in str(caught.value)  # the body is never shown (issue 15)


def test_retry_after_of_a_429_is_honoured(standin):
    server = standin([status(429, headers=[("Retry-After", "0.4")]), reply("ok")])
    started = time.monotonic()
    answer = complete(config(server, backoff=0.0), MESSAGES)
    assert answer.text == "ok"
    assert time.monotonic() - started >= 0.4


def test_backoff_doubles_within_its_jitter():
    for attempt in range(1, 6):
        nominal = 0.5 * 2 ** (attempt - 1)
        waits = [provider._backoff(0.5, attempt, None) for _ in range(200)]
        assert all(nominal * 0.5 <= w <= nominal for w in waits)
    assert provider._backoff(10.0, 10, None) <= provider.MAX_BACKOFF_SECONDS


def test_the_key_is_never_logged_nor_shown(standin, caplog):
    # given: failures of every kind (logged), a server that echoes the key, then success
    caplog.set_level(logging.DEBUG)
    echo_key = status(500, f'{{"error": "bad token {KEY}"}}'.encode())
    server = standin([garbage(), echo_key, hang_up(), reply("ok")])
    cfg = config(server, max_retries=3)
    # when
    complete(cfg, MESSAGES)
    with pytest.raises(ProviderError) as caught:
        complete(config(standin([echo_key]), max_retries=1), MESSAGES)
    # then
    logged = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records)
    assert "retrying" in logged  # the failures were logged …
    assert KEY not in logged  # … without the key
    assert KEY not in str(caught.value) and "bad token" not in str(caught.value)
    assert KEY not in repr(cfg)


def test_credentials_in_the_base_url_stay_out_of_messages(standin):
    server = standin([status(500)])
    base = server.base_url.replace("http://", "http://user:pa55word@") + "?token=abc"
    with pytest.raises(ProviderError) as caught:
        complete(config(server, base_url=base, max_retries=0), MESSAGES)
    assert "pa55word" not in str(caught.value) and "abc" not in str(caught.value)
    assert caught.value.endpoint == f"{server.base_url}/chat/completions"


@pytest.mark.parametrize("missing", ["base_url", "model"])
def test_an_unconfigured_provider_sends_nothing(standin, missing):
    server = standin([reply("ok")])
    with pytest.raises(ProviderNotConfigured) as caught:
        complete(config(server, **{missing: ""}), MESSAGES)
    assert caught.value.attempts == 0
    assert server.requests == []


@override_settings(OVERSIGHT_AI_BASE_URL="http://site.example/v1", OVERSIGHT_AI_MODEL="site-m",
                   OVERSIGHT_AI_API_KEY="site-key", OVERSIGHT_AI_TIMEOUT=12.5,
                   OVERSIGHT_AI_MAX_RETRIES=5)
def test_config_from_settings_with_study_overrides():
    site = config_from_settings()
    assert (site.base_url, site.model, site.api_key, site.timeout, site.max_retries) == (
        "http://site.example/v1", "site-m", "site-key", 12.5, 5)
    study = config_from_settings(model="study-m", base_url="", api_key=None, temperature=0.0)
    assert (study.base_url, study.model, study.api_key, study.temperature) == (
        "http://site.example/v1", "study-m", "site-key", 0.0)
    with pytest.raises(TypeError, match="unknown provider settings: modle"):
        config_from_settings(modle="x")


@pytest.mark.parametrize(("field", "value"), [("timeout", 0), ("max_retries", -1),
                                              ("max_tokens", 0), ("backoff", -1.0)])
def test_config_refuses_impossible_values(field, value):
    with pytest.raises(ValueError, match=field):
        ProviderConfig(base_url="http://x/v1", model="m", **{field: value})


def test_a_long_or_nul_model_name_is_cut_to_what_is_stored(standin):
    server = standin([reply("ok")])
    answer = complete(config(server, model="m\x00" + "x" * 400), MESSAGES)
    assert answer.model == "m" + "x" * 199 and len(answer.model) == provider.MODEL_NAME_MAX
