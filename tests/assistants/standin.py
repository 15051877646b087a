"""A local stand-in for an OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp server,
hosted APIs all answer ``POST /v1/chat/completions`` the same way).

A real HTTP server on 127.0.0.1 (random free port) in a thread, answering from a script:
each request takes the next scripted step (the last step repeats once the script is used
up). Steps: ``reply(text)`` a well-formed completion, ``garbage()`` a 200 whose body is not
JSON, ``no_choices()`` JSON without ``choices``, ``status(500)`` an error status, ``slow(s)``
an answer after ``s`` seconds (the client's timeout fires first), ``hang_up()`` a closed
connection without an answer. Every request is recorded (path, headers, JSON body).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Step:
    kind: str  # reply | garbage | no_choices | status | slow | hang_up | echo
    text: str = ""
    status: int = 200
    delay: float = 0.0
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()


def reply(text: str) -> Step:
    return Step("reply", text=text)


def echo() -> Step:
    """Answers with the last user message's text (the rendered prompt)."""
    return Step("echo")


def garbage(body: bytes = b"<html><body>502 Bad Gateway</body></html>") -> Step:
    return Step("garbage", body=body)


def no_choices() -> Step:
    return Step("no_choices")


def status(code: int, body: bytes = b'{"error": {"message": "scripted failure"}}',
           headers: Sequence[tuple[str, str]] = ()) -> Step:
    return Step("status", status=code, body=body, headers=tuple(headers))


def slow(seconds: float, text: str = "too late") -> Step:
    return Step("slow", delay=seconds, text=text)


def hang_up() -> Step:
    return Step("hang_up")


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict


def completion_body(text: str, model: str) -> dict:
    return {
        "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": max(1, len(text) // 4),
                  "total_tokens": 10 + max(1, len(text) // 4)},
    }


@dataclass
class StandinServer:
    """``with StandinServer([reply("…"), status(500)]) as server: server.base_url``.
    ``responder`` (request body → Step) replaces the script when given."""

    script: list[Step] = field(default_factory=list)
    responder: Callable[[dict], Step] | None = None
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._position = 0
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                standin.requests.append(Request(self.path, dict(self.headers.items()), body))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                self._answer(standin._next_step(body), body)

            def _answer(self, step: Step, body: dict):
                model = str(body.get("model", ""))
                if step.kind == "hang_up":
                    self.close_connection = True
                    self.connection.close()
                    return
                if step.kind == "slow":
                    standin._closing.wait(step.delay)
                    self._send(200, json.dumps(completion_body(step.text, model)).encode())
                    return
                if step.kind == "garbage":
                    self._send(200, step.body, content_type="text/html")
                elif step.kind == "no_choices":
                    self._send(200, json.dumps({"id": "x", "object": "chat.completion",
                                                "model": model}).encode())
                elif step.kind == "status":
                    self._send(step.status, step.body, headers=step.headers)
                elif step.kind == "echo":
                    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
                    text = users[-1]["content"] if users else ""
                    self._send(200, json.dumps(completion_body(text, model)).encode())
                else:
                    self._send(200, json.dumps(completion_body(step.text, model)).encode())

            def _send(self, code, payload: bytes, content_type="application/json", headers=()):
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in headers:
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (timeout): nothing to answer
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _next_step(self, body: dict) -> Step:
        if self.responder is not None:
            return self.responder(body)
        with self._lock:
            if not self.script:
                return reply("")
            step = self.script[min(self._position, len(self.script) - 1)]
            self._position += 1
            return step

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> StandinServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> StandinServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
