"""The platform's client for every study type (standard library only), for researchers'
scripts and pipelines::

    from oversight_client import Platform
    platform = Platform("https://oversight.example.org", token="…")  # an API token
    study = platform.create_study("partitioned", "MMLU check", classes=["A", "B", "C", "D"])
    platform.import_eval_log(study.id, "logs/2026-11-29T10-00-00_mmlu_abc.eval")
    platform.add_members(study.id, [("ana", "specialist", 0), ("ben", "manager")])
    platform.open_study(study.id)
    for row in platform.export(study.id):  # every answer, streamed (constant memory)
        ...

Every call is retried with backoff on 429 and 5xx answers and on connection errors
(:mod:`oversight_client.http`); a refusal raises :class:`ApiError` with the platform's
``code``, ``detail`` and every problem it named (``errors``). Lists are read page by page
(``next`` links); imports are jobs, which :meth:`Platform.wait` follows to their end (a
failed import raises ``ApiError`` with code ``import_failed`` and its errors)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oversight_client.client import Evaluator
from oversight_client.http import ApiError, Transport, lines

IMPORT_KINDS = ("items", "predictions", "sentences", "traces", "questions", "ai_outputs",
                "eval_log")


@dataclass(frozen=True)
class Study:
    id: int
    name: str
    kind: str
    status: str
    roles: list[str]
    raw: dict = field(repr=False)

    @classmethod
    def from_json(cls, data: dict) -> Study:
        return cls(id=data["id"], name=data["name"], kind=data["kind"], status=data["status"],
                   roles=list(data.get("roles") or []), raw=data)


@dataclass(frozen=True)
class ImportJob:
    """An import as the platform runs it: ``status`` queued, running, succeeded or failed;
    ``summary`` (what was added) or ``errors`` (every problem; nothing was written)."""

    id: int
    kind: str
    name: str
    status: str
    summary: dict
    errors: list[str]
    url: str
    raw: dict = field(repr=False)

    @property
    def finished(self) -> bool:
        return self.status in ("succeeded", "failed")

    @classmethod
    def from_json(cls, data: dict) -> ImportJob:
        return cls(id=data["id"], kind=data["kind"], name=data["name"], status=data["status"],
                   summary=data.get("summary") or {}, errors=list(data.get("errors") or []),
                   url=data["url"], raw=data)


@dataclass(frozen=True)
class Member:
    """A member of a study; ``password`` and ``invitation`` only when the account was made
    by this call (shown once, never again)."""

    username: str
    role: str
    class_index: int | None = None
    password: str | None = None
    invitation: str | None = None

    @classmethod
    def from_json(cls, data: dict) -> Member:
        return cls(username=data["username"], role=data["role"],
                   class_index=data.get("class_index"), password=data.get("password"),
                   invitation=data.get("invitation"))


class Platform:
    """The API of the platform at ``base_url`` as a user with an API ``token`` (a
    researcher's, for most of it). ``poll`` is the seconds between two reads of a running
    import job; the other arguments are :class:`oversight_client.http.Transport`'s."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0, retries: int = 5,
                 backoff: float = 0.5, max_backoff: float = 30.0, poll: float = 1.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = Transport(self.base_url, {"Authorization": f"Token {token}"},
                              timeout=timeout, retries=retries, backoff=backoff,
                              max_backoff=max_backoff, sleep=sleep)
        self.poll, self.sleep = poll, sleep
        self._retry = {"timeout": timeout, "retries": retries, "backoff": backoff,
                       "max_backoff": max_backoff, "sleep": sleep}

    # --- studies ------------------------------------------------------------------------------
    def studies(self) -> list[Study]:
        """The studies you belong to (any role)."""
        return [Study.from_json(s) for s in self.http.json("GET", "api/studies/")]

    def study(self, study_id: int) -> Study:
        return Study.from_json(self.http.json("GET", f"api/studies/{study_id}/"))

    def create_study(self, kind: str, name: str, **settings: Any) -> Study:
        """A draft study of ``kind`` (partitioned, assisted or critique) that you research:
        partitioned takes ``classes`` (names), assisted ``arms`` ([{name, components}]),
        critique ``top_level``, ``mode``; every type ``description`` and ``seed``
        (``/api/docs/``: each type's settings)."""
        body = {"kind": kind, "name": name, "settings": settings}
        return Study.from_json(self.http.json("POST", "api/studies/", body))

    def open_study(self, study_id: int) -> Study:
        """Open the study to its workers (its tasks are made)."""
        return Study.from_json(self.http.json("POST", f"api/studies/{study_id}/open/"))

    def close_study(self, study_id: int) -> Study:
        return Study.from_json(self.http.json("POST", f"api/studies/{study_id}/close/"))

    # --- members --------------------------------------------------------------------------------
    def members(self, study_id: int) -> list[Member]:
        return [Member.from_json(m) for m in
                self.http.json("GET", f"api/studies/{study_id}/members/")]

    def add_members(self, study_id: int, members: Iterable[Mapping | tuple]) -> list[Member]:
        """Add people (all or none): mappings {username, role, class_index} or tuples
        (username, role[, class_index]). New accounts come back with their one-time
        password and invitation link."""
        rows = [dict(m) if isinstance(m, Mapping) else
                dict(zip(("username", "role", "class_index"), m, strict=False))
                for m in members]
        return [Member.from_json(m) for m in
                self.http.json("POST", f"api/studies/{study_id}/members/", rows)]

    # --- imports --------------------------------------------------------------------------------
    def import_file(self, study_id: int, kind: str, path: str | os.PathLike, *,
                    update: bool = False, wait: bool = True,
                    timeout: float | None = None) -> ImportJob:
        """Upload a file of ``kind`` (``IMPORT_KINDS``: items and predictions of a
        partitioned study, sentences and traces of an assisted one, questions and
        ai_outputs of a critique one) as an import job; with ``wait``, follow it to its end
        (:meth:`wait`)."""
        if kind not in IMPORT_KINDS:
            raise ValueError(f"kind: one of {', '.join(IMPORT_KINDS)}, not {kind!r}")
        job = ImportJob.from_json(self.http.upload(
            f"api/studies/{study_id}/import-jobs/", path,
            {"kind": kind, "update": "true" if update else None}))
        return self.wait(job, timeout=timeout) if wait else job

    def import_eval_log(self, study_id: int, path: str | os.PathLike, *,
                        log_format: str | None = None, model: str | None = None,
                        task: str | None = None, wait: bool = True,
                        timeout: float | None = None) -> ImportJob:
        """Import an evaluation log as its framework wrote it (Inspect, lm-evaluation-
        harness ``--log_samples``, Every Eval Ever): ``log_format`` inspect, lm-eval or eee
        (default: told from the file); ``model`` is needed for lm-evaluation-harness files."""
        job = ImportJob.from_json(self.http.upload(
            f"api/studies/{study_id}/import-jobs/", path,
            {"kind": "eval_log", "log_format": log_format, "model": model, "task": task}))
        return self.wait(job, timeout=timeout) if wait else job

    def import_job(self, job_id: int) -> ImportJob:
        return ImportJob.from_json(self.http.json("GET", f"api/import-jobs/{job_id}/"))

    def wait(self, job: ImportJob, *, timeout: float | None = None) -> ImportJob:
        """Read ``job`` until it ends; its summary when it succeeded, ``ApiError``
        (import_failed, with every error) when it failed; TimeoutError after ``timeout``
        seconds (the job goes on on the server)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not job.finished:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"import job {job.id} still {job.status} after {timeout} s")
            self.sleep(self.poll)
            job = self.import_job(job.id)
        if job.status == "failed":
            raise ApiError(400, "import_failed", f"{job.name}: nothing was imported",
                           job.errors)
        return job

    # --- reads ----------------------------------------------------------------------------------
    def pages(self, path: str, params: dict | None = None) -> Iterator[dict]:
        """Every row of a paginated list, page after page (``next`` links)."""
        url: str | None = self.http.url(path, params)
        while url:
            page = self.http.json("GET", url)
            yield from page["results"]
            url = page.get("next")

    def items(self, study_id: int, *, page_size: int = 1000) -> Iterator[dict]:
        """A partitioned study's items (with their hidden gold: researchers)."""
        return self.pages(f"api/studies/{study_id}/items/", {"limit": page_size})

    def predictions(self, study_id: int, *, page_size: int = 1000) -> Iterator[dict]:
        return self.pages(f"api/studies/{study_id}/predictions/", {"limit": page_size})

    def import_jobs(self, study_id: int) -> Iterator[ImportJob]:
        return (ImportJob.from_json(j) for j in self.pages(
            f"api/studies/{study_id}/import-jobs/"))

    def export(self, study_id: int, what: str | None = None) -> Iterator[dict]:
        """Every row of a raw export (the study type's first by default: partitioned
        labels, assisted ratings, critique outputs; critique also tasks and metrics),
        streamed as JSONL and decoded row by row."""
        chunks = self.http.stream(f"api/studies/{study_id}/export/",
                                  {"format": "jsonl", "what": what})
        return (json.loads(line) for line in lines(chunks))

    def export_to(self, study_id: int, path: str | os.PathLike, *, what: str | None = None,
                  fmt: str = "jsonl") -> int:
        """Write a raw export to ``path`` (csv or jsonl) as it arrives; the bytes written.
        A download cut short raises and leaves no file."""
        target, part = Path(path), Path(f"{path}.part")
        written = 0
        try:
            with part.open("wb") as out:
                for chunk in self.http.stream(f"api/studies/{study_id}/export/",
                                              {"format": fmt, "what": what}):
                    out.write(chunk)
                    written += len(chunk)
            part.replace(target)
        finally:
            part.unlink(missing_ok=True)
        return written

    def estimates(self, study_id: int) -> dict | None:
        """The latest figures of the study's dashboard (its snapshot: ``payload`` holds
        every figure; None before the first)."""
        return self.http.json("GET", f"api/studies/{study_id}/estimates/")

    def flags(self, study_id: int) -> list[dict]:
        """The items flagged by the study's workers, with their reasons."""
        return list(self.pages(f"api/studies/{study_id}/flags/"))

    def audits(self, study_id: int) -> list[dict]:
        return list(self.pages(f"api/studies/{study_id}/audits/"))

    def audit(self, study_id: int, audit_id: int) -> dict:
        return self.http.json("GET", f"api/studies/{study_id}/audits/{audit_id}/")

    def evaluator(self, study_id: int, token: str) -> Evaluator:
        """The evaluation service of ``study_id`` with an evaluation token (its own kind of
        token, made on the study's evaluations page)."""
        return Evaluator(self.base_url, study_id, token, **self._retry)
