"""The client's one way to call the platform (standard library only): JSON requests,
multipart uploads streamed from a file, streamed downloads, each retried with exponential
backoff on 429 (throttled), 5xx and connection errors.

A retry waits ``backoff`` · 2^attempt seconds, at most ``max_backoff``; a ``Retry-After``
header longer than that wait (and within the cap) wins. Codes in ``FINAL_REFUSALS`` are 429s
no retry will fix (a spent budget) and are raised at once. A request that sends a body is
retried only if it is safe to repeat: every write of the API is idempotent or refuses a
repeat with the job it made (imports: the same file while its job runs is that job)."""

from __future__ import annotations

import json
import mimetypes
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# 429 codes that no retry will fix today
FINAL_REFUSALS = {"budget_spent", "final_spent"}
CHUNK = 1 << 16


class ApiError(Exception):
    """A refused call: ``status`` (HTTP), ``code`` (machine-readable), ``detail`` and
    ``errors`` (every problem the platform named: an import's 'file:line: field: problem',
    an evaluation's offending entries)."""

    def __init__(self, status: int, code: str, detail: str, errors: list | None = None):
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail, self.errors = status, code, detail, errors or []


def error_of(exc: urllib.error.HTTPError, kind: type[ApiError] = ApiError) -> ApiError:
    """The platform's error body (``code``, ``detail``, ``errors``) of a refused call as a
    ``kind`` error; the reason phrase where the body is not JSON (read at most 1 MB of
    it)."""
    try:
        data: Any = json.loads(exc.read(1 << 20) or b"{}")
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    detail = data.get("detail", exc.reason)
    if not isinstance(detail, str):  # DRF's field errors: {"field": ["message"]}
        detail = json.dumps(detail)
    errors = data.get("errors")
    if errors is None and "code" not in data and data:
        errors = [f"{field}: {message}" for field, messages in data.items()
                  for message in (messages if isinstance(messages, list) else [messages])]
    return kind(exc.code, str(data.get("code", "error")), str(detail), errors)


class Transport:
    """Requests to ``base_url`` with ``headers`` (the authorization), retried as the module
    says. ``sleep`` is injectable for tests."""

    def __init__(self, base_url: str, headers: dict[str, str], *, timeout: float = 60.0,
                 retries: int = 5, backoff: float = 0.5, max_backoff: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep,
                 error: type[ApiError] = ApiError) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers, self.timeout = headers, timeout
        self.retries, self.backoff, self.max_backoff, self.sleep = (retries, backoff,
                                                                    max_backoff, sleep)
        self.error = error

    def url(self, path: str, params: dict | None = None) -> str:
        """An absolute URL: ``path`` under the base (or a full URL the platform gave, such
        as a page's ``next``, which must be on the same site)."""
        if path.startswith(("http://", "https://")):
            if urllib.parse.urlsplit(path)[:2] != urllib.parse.urlsplit(self.base_url)[:2]:
                raise ValueError(f"{path}: not on {self.base_url}")
            url = path
        else:
            url = f"{self.base_url}/{path.lstrip('/')}"
        if params:
            query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
            url += ("&" if "?" in url else "?") + query
        return url

    def json(self, method: str, path: str, body: Any = None, *,
             params: dict | None = None) -> Any:
        """The decoded JSON answer (None for 204) of one call."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        with self.open(method, self.url(path, params), lambda: data, headers) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def upload(self, path: str, file: str | os.PathLike, fields: dict[str, Any]) -> Any:
        """POST ``file`` with form ``fields`` as multipart/form-data, streamed from disk
        (memory does not grow with the file); the decoded JSON answer."""
        boundary = f"oversight-{uuid.uuid4().hex}"
        file = Path(file)
        head = b"".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
            f"{value}\r\n".encode() for name, value in fields.items() if value is not None)
        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        head += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                 f'filename="{_quoted(file.name)}"\r\nContent-Type: {kind}\r\n\r\n').encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        size = len(head) + file.stat().st_size + len(tail)

        def body() -> Iterator[bytes]:
            yield head
            with file.open("rb") as fh:
                while chunk := fh.read(CHUNK):
                    yield chunk
            yield tail

        headers = {"Accept": "application/json", "Content-Length": str(size),
                   "Content-Type": f"multipart/form-data; boundary={boundary}"}
        with self.open("POST", self.url(path), body, headers) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def stream(self, path: str, params: dict | None = None) -> Iterator[bytes]:
        """The answer's body in chunks, as it arrives (a download of any size in constant
        memory). A failure before the first byte is retried; one after it is raised (a
        partial download is never passed off as whole)."""
        with self.open("GET", self.url(path, params), lambda: None, {}) as response:
            while chunk := response.read(CHUNK):
                yield chunk

    def open(self, method: str, url: str, body: Callable[[], Any],
             headers: dict[str, str]):
        """The open response of one call, after the retries; ``body()`` gives a fresh body
        for each attempt."""
        attempt = 0
        while True:
            request = urllib.request.Request(url, data=body(), method=method,
                                             headers={**self.headers, **headers})
            try:
                return urllib.request.urlopen(request, timeout=self.timeout)  # noqa: S310
            except urllib.error.HTTPError as exc:
                error = error_of(exc, self.error)
                retry = exc.code >= 500 or (exc.code == 429 and error.code not in
                                            FINAL_REFUSALS)
                if not retry or attempt >= self.retries:
                    raise error from None
                wait = self._wait(attempt, exc.headers.get("Retry-After"))
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if attempt >= self.retries:
                    raise
                wait = self._wait(attempt, None)
            self.sleep(wait)
            attempt += 1

    def _wait(self, attempt: int, retry_after: str | None) -> float:
        wait = min(self.max_backoff, self.backoff * 2 ** attempt)
        try:
            if retry_after is not None:
                wait = min(self.max_backoff, max(wait, float(retry_after)))
        except ValueError:
            pass
        return wait


def _quoted(name: str) -> str:
    return name.replace("\\", "_").replace('"', "_").replace("\r", "_").replace("\n", "_")


def lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Whole lines (without their ending) of a stream of chunks, in constant memory per
    line."""
    rest = b""
    for chunk in chunks:
        rest += chunk
        *complete, rest = rest.split(b"\n")
        yield from (line for line in complete if line)
    if rest.strip():
        yield rest
