"""One client for any OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp server, hosted
APIs), through the ``openai`` package.

Contract of ``complete``: it returns a ``Completion`` whose ``text`` is the non-empty message
the endpoint produced, or raises ``ProviderError``; it never returns garbage as output.
An attempt fails on a timeout, a connection error, an HTTP status worth retrying (408, 409,
429, 5xx) or a body that is not a chat completion (not JSON, no ``choices``, no message
text, or a text that cannot be stored: a NUL character, over ``AI_TEXT_MAX`` characters);
failed attempts are retried ``max_retries`` times with exponential backoff (``backoff`` ·
2^(k−1) seconds before retry k, times a jitter in [0.5, 1], at most 30 s; a 429's
``Retry-After`` is honoured up to 60 s). Other 4xx answers (bad request, wrong key,
unknown model) fail at once: repeating them cannot help.

The API key goes to the endpoint in the ``Authorization`` header only: it is not in the
config's repr, in log records, or in error messages (a server echoing it is redacted).
The openai package's own retries are off (``max_retries=0``) so the attempt count is ours.

Egress (``assistants.egress``): the site's key goes only to the site's endpoint; the base URL
must be allowed by the operator before each request; every connection is made to a checked,
non-internal address; redirects are not followed (a 3xx fails at once) and a refused
endpoint is never retried. A failed call's body is never put in the error or the log: the
error says the HTTP status, the error class and the time (UTC), so an endpoint cannot be used
to read another service's answers through the study page.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit, urlunsplit

import openai

from annotations.core.inputs import AI_TEXT_MAX, NUL_MESSAGE, InputRejected, json_loads
from assistants.egress import EgressPolicy, EndpointRefused, endpoint_check, http_client

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx
MAX_BACKOFF_SECONDS = 30.0
MAX_RETRY_AFTER_SECONDS = 60.0
PLACEHOLDER_KEY = "not-needed"  # local servers ignore the key; the client wants one
MODEL_NAME_MAX = 200  # the model name an answer reports, as stored with its outputs


@dataclass(frozen=True)
class ProviderConfig:
    """Where and how to ask. ``max_retries`` counts retries after the first attempt;
    ``backoff`` is the wait before the first retry (seconds). ``send_seed`` passes each
    request's seed to the endpoint (vLLM, llama.cpp, Ollama and OpenAI honour it; turn it
    off for an API that refuses the field)."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    timeout: float = 60.0
    max_retries: int = 3
    temperature: float = 1.0
    max_tokens: int = 2048
    backoff: float = 1.0
    send_seed: bool = True

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError(f"timeout: {self.timeout} must be positive")
        if self.max_retries < 0:
            raise ValueError(f"max_retries: {self.max_retries} must be 0 or more")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens: {self.max_tokens} must be at least 1")
        if self.backoff < 0:
            raise ValueError(f"backoff: {self.backoff} must be 0 or more")

    @property
    def endpoint(self) -> str:
        """The chat URL for messages and logs: no user, password or query string."""
        return redact_url(self.base_url).rstrip("/") + "/chat/completions"


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def config_from_settings(**overrides: object) -> ProviderConfig:
    """The site's defaults (settings ``OVERSIGHT_AI_BASE_URL``, ``OVERSIGHT_AI_MODEL``,
    ``OVERSIGHT_AI_API_KEY``, ``OVERSIGHT_AI_TIMEOUT``, ``OVERSIGHT_AI_MAX_RETRIES``) with a
    study's own values on top. Overrides that are None or "" are ignored, so a study that
    leaves a field empty uses the site's value — except the key: the site's key is used only
    when the endpoint is the site's (``egress.site_key_for``); a study naming another
    endpoint without a key of its own sends none."""
    from django.conf import settings

    from assistants.egress import site_key_for

    site_url = getattr(settings, "OVERSIGHT_AI_BASE_URL", "")
    values: dict[str, object] = {
        "base_url": site_url,
        "model": getattr(settings, "OVERSIGHT_AI_MODEL", ""),
        "timeout": float(getattr(settings, "OVERSIGHT_AI_TIMEOUT", 60.0)),
        "max_retries": int(getattr(settings, "OVERSIGHT_AI_MAX_RETRIES", 3)),
    }
    known = set(ProviderConfig.__dataclass_fields__)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(f"unknown provider settings: {', '.join(unknown)}")
    values.update({k: v for k, v in overrides.items()
                   if v is not None and v != "" and k != "api_key"})
    values["api_key"] = site_key_for(str(values["base_url"]), str(overrides.get("api_key") or ""),
                                     getattr(settings, "OVERSIGHT_AI_API_KEY", ""), site_url)
    return ProviderConfig(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Completion:
    """One answer. ``raw`` is the response's JSON; ``usage`` its token counts (None when the
    endpoint sends none); ``latency`` the seconds the successful attempt took."""

    text: str
    raw: dict = field(repr=False)
    model: str
    usage: dict | None
    latency: float
    finish_reason: str | None
    attempts: int


class ProviderError(Exception):
    """The endpoint gave no usable answer after ``attempts`` attempts. ``what`` is the last
    failure; ``endpoint`` the chat URL without credentials; ``at`` the time of the last
    failure (UTC). ``retryable``: False when asking again later cannot help (no endpoint
    configured, an endpoint refused by the egress rules, a redirect, a client error)."""

    def __init__(self, what: str, *, endpoint: str, model: str, attempts: int,
                 retryable: bool = True) -> None:
        self.what = what
        self.retryable = retryable
        self.endpoint = endpoint
        self.model = model
        self.attempts = attempts
        self.at = time.gmtime()
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", self.at)
        super().__init__(f"{endpoint} (model '{model}'): {what} — gave up after {tries}, "
                         f"last at {when}")


class ProviderNotConfigured(ProviderError):
    """No endpoint or no model: set OVERSIGHT_AI_BASE_URL / OVERSIGHT_AI_MODEL or the study's."""


class _Garbage(Exception):
    """A 200 answer that is not a usable chat completion."""


@functools.lru_cache(maxsize=8)
def _client(base_url: str, api_key: str, timeout: float, policy: EgressPolicy) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=api_key or PLACEHOLDER_KEY,
                         timeout=timeout, max_retries=0,
                         http_client=http_client(policy, base_url=base_url, timeout=timeout))


def complete(config: ProviderConfig, messages: Sequence[Mapping[str, str]], *,
             seed: int | None = None, policy: EgressPolicy | None = None) -> Completion:
    """Ask the endpoint once (retrying failed attempts, see the module's docstring) and
    return its message, or raise ProviderError. ``policy``: the egress rules (default: the
    settings', ``egress.policy_from_settings``)."""
    from assistants.egress import policy_from_settings

    endpoint = config.endpoint
    if not config.base_url.strip() or not config.model.strip():
        missing = "base URL" if not config.base_url.strip() else "model"
        raise ProviderNotConfigured(
            f"no {missing} configured (OVERSIGHT_AI_BASE_URL / OVERSIGHT_AI_MODEL or the "
            f"study's provider settings)",
            endpoint=endpoint if config.base_url.strip() else "(none)", model=config.model,
            attempts=0, retryable=False)
    policy = policy or policy_from_settings()
    try:
        endpoint_check(config.base_url, policy=policy, resolve_names=False)
    except EndpointRefused as exc:
        raise _refused(exc, config, attempts=0) from None
    client = _client(config.base_url, config.api_key, config.timeout, policy)
    extra: dict[str, object] = {}
    if seed is not None and config.send_seed:
        extra["seed"] = int(seed)
    what = "no attempt made"
    attempt = 0
    for attempt in range(1, config.max_retries + 2):
        started = time.monotonic()
        retry_after = None
        try:
            response = client.chat.completions.with_raw_response.create(
                model=config.model, messages=[dict(m) for m in messages],  # type: ignore[misc]
                temperature=config.temperature, max_tokens=config.max_tokens, **extra)
            body = response.http_response.text
        except openai.APITimeoutError:
            what = f"no answer within {config.timeout:g} s (timeout)"
        except EndpointRefused as exc:  # the guarded connection's check (egress rule 3)
            raise _refused(exc, config, attempts=attempt) from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            what = f"connection failed ({type(cause).__name__}: {cause})"
        except openai.APIStatusError as exc:
            code = exc.status_code
            what = f"HTTP {code} ({type(exc).__name__})"
            if 300 <= code < 400:
                what = f"HTTP {code} (a redirect; redirects are not followed)"
            if not (code in RETRY_STATUSES or code >= 500):
                what = _redact(what, config)
                logger.error("AI provider %s (model %s): %s; not retried", endpoint,
                             config.model, what)
                raise ProviderError(what, endpoint=endpoint, model=config.model,
                                    attempts=attempt, retryable=False) from None
            retry_after = _retry_after(exc.response.headers.get("retry-after"))
        except openai.OpenAIError as exc:  # anything else the client refuses
            what = f"{type(exc).__name__}: {exc}"
        else:
            latency = time.monotonic() - started
            try:
                return _completion(body, latency, attempt)
            except _Garbage as exc:
                what = str(exc)
        what = _redact(what, config)
        if attempt <= config.max_retries:
            wait = _backoff(config.backoff, attempt, retry_after)
            logger.warning("AI provider %s (model %s), attempt %d: %s; retrying in %.2f s",
                           endpoint, config.model, attempt, what, wait)
            time.sleep(wait)
    logger.error("AI provider %s (model %s): %s; gave up after %d attempts",
                 endpoint, config.model, what, attempt)
    raise ProviderError(what, endpoint=endpoint, model=config.model, attempts=attempt)


def _refused(exc: EndpointRefused, config: ProviderConfig, *, attempts: int) -> ProviderError:
    what = f"endpoint refused: {exc}"
    logger.error("AI provider %s (model %s): %s; not attempted", config.endpoint, config.model,
                 what)
    return ProviderError(what, endpoint=config.endpoint, model=config.model, attempts=attempts,
                         retryable=False)


def _completion(body: str, latency: float, attempt: int) -> Completion:
    """The completion in ``body``, or _Garbage saying what is wrong with it — its kind and
    size, never its text (module docstring)."""
    size = f"{len(body.encode('utf-8', 'replace'))} bytes"
    try:
        raw = json_loads(body)
    except InputRejected as exc:
        raise _Garbage(f"the answer is not usable JSON ({exc})") from None
    except ValueError:
        raise _Garbage(f"the answer is not JSON ({size})") from None
    if not isinstance(raw, dict):
        raise _Garbage(f"the answer is not a JSON object ({size})")
    choices = raw.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _Garbage(f"the answer has no choices ({size})")
    first = choices[0] if isinstance(choices[0], dict) else {}
    message = first.get("message") if isinstance(first.get("message"), dict) else {}
    text = message.get("content")
    if not isinstance(text, str) or not text.strip():
        finish = first.get("finish_reason")
        finish = finish if isinstance(finish, str) and len(finish) <= 40 else None
        raise _Garbage(f"the answer has no message text (finish_reason {finish!r}, {size})")
    if "\x00" in text:
        raise _Garbage(f"the answer's text {NUL_MESSAGE} ({size})")
    if len(text) > AI_TEXT_MAX:
        raise _Garbage(f"the answer's text is {len(text):,} characters long; at most "
                       f"{AI_TEXT_MAX:,} are stored ({size})")
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else None
    finish = first.get("finish_reason")
    model = str(raw.get("model") or "").replace("\x00", "")[:MODEL_NAME_MAX]
    return Completion(text=text, raw=raw, model=model, usage=usage,
                      latency=latency, finish_reason=finish if isinstance(finish, str) else None,
                      attempts=attempt)


def _backoff(base: float, attempt: int, retry_after: float | None) -> float:
    wait = min(MAX_BACKOFF_SECONDS, base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
    if retry_after is not None:
        wait = max(wait, min(retry_after, MAX_RETRY_AFTER_SECONDS))
    return wait


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _redact(text: str, config: ProviderConfig) -> str:
    if config.api_key and config.api_key in text:
        text = text.replace(config.api_key, "[key]")
    return text
