"""Progress of a long import: the services report it, whoever runs them may listen.

The import services (and the bulk writers they call) report a phase when it starts —
``progress_phase("reading", total=lines)``, ``progress_phase("writing", total=rows)`` —
and rows as they go by (``progress_advance(n)``). Both do nothing unless a reporter is
installed in the current context (``progress_reporting``): commands, forms and tests that
call the services directly pay nothing. The import job (``services/import_jobs.py``)
installs one whose sink stores the progress where the job's page can read it.

A reporter keeps the latest state and hands a copy to its sink at each phase change and
otherwise at most every ``interval`` seconds; a sink that fails is logged and ignored
(progress is a display, never a reason for an import to fail).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Progress:
    """Where an import is: ``phase`` ("reading" the file, "writing" rows), and ``done`` of
    ``total`` units of that phase (records read of the file's lines; rows written)."""

    phase: str = ""
    done: int = 0
    total: int = 0


Sink = Callable[[Progress], None]


class ProgressReporter:
    """Collects the reports of one import and forwards them to ``sink`` (throttled)."""

    def __init__(self, sink: Sink, *, interval: float) -> None:
        self.sink = sink
        self.interval = interval
        self.state = Progress()
        self._flushed_at = float("-inf")

    def phase(self, name: str, total: int) -> None:
        self.state = Progress(phase=name, done=0, total=max(int(total), 0))
        self.flush()

    def advance(self, n: int) -> None:
        self.state = replace(self.state, done=self.state.done + n)
        if time.monotonic() - self._flushed_at >= self.interval:
            self.flush()

    def flush(self) -> None:
        self._flushed_at = time.monotonic()
        try:
            self.sink(self.state)
        except Exception as exc:  # noqa: BLE001 - a display must not fail the import
            log.warning("import progress not stored: %s", exc)


_current: ContextVar[ProgressReporter | None] = ContextVar("import_progress", default=None)


@contextmanager
def progress_reporting(sink: Sink, *, interval: float = 0.5) -> Iterator[ProgressReporter]:
    """Install a reporter for the code run inside the block (this thread/context only)."""
    reporter = ProgressReporter(sink, interval=interval)
    token = _current.set(reporter)
    try:
        yield reporter
    finally:
        _current.reset(token)


def progress_phase(name: str, *, total: int) -> None:
    """A phase of the current import starts with ``total`` units to do."""
    reporter = _current.get()
    if reporter is not None:
        reporter.phase(name, total)


def progress_advance(n: int = 1) -> None:
    """``n`` more units of the current phase are done."""
    reporter = _current.get()
    if reporter is not None:
        reporter.advance(n)


@contextmanager
def progress_part(*, before: int, total: int) -> Iterator[None]:
    """Run a part of a larger phase (several files read as one): what the code inside
    reports reaches the current reporter as ``before + done`` of ``total``, in the inner
    phase's name, so that the figures a page shows never go back. Nothing without a
    reporter."""
    outer = _current.get()
    if outer is None:
        yield
        return

    def sink(p: Progress) -> None:
        outer.state = Progress(phase=p.phase, done=before + p.done, total=total)
        outer.flush()

    with progress_reporting(sink, interval=outer.interval):
        yield
