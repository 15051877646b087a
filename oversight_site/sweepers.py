"""The embedded mode's beat: without a broker (SQLite, tasks in-process) no beat process
runs the periodic sweepers — expired leases back to their pool, recomputes of studies left
behind — so a daemon thread of the web process runs ``CELERY_BEAT_SCHEDULE``'s tasks
in-process at their intervals (``oversight_site/wsgi.py`` starts it: ``dev.py serve``,
gunicorn on the embedded defaults).

It does not die for good: a sweep that raises is logged and the others go on; a loop that
dies all the same is started again by its supervisor after ``RESTART_PAUSE_SECONDS``; and a
thread that ended (a sweep called ``sys.exit``) is started again by the next request.
With a broker, beat and the workers are supervised by docker-compose instead
(docs/operations.md, "Worker supervision")."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

log = logging.getLogger(__name__)

RESTART_PAUSE_SECONDS = 5.0


@dataclass
class Sweep:
    name: str
    run: Callable[[], object]
    every: float
    due: float = 0.0  # monotonic time of the next run (0: at once)


def beat_sweeps() -> list[Sweep]:
    """The beat schedule's tasks, each called in-process (errors propagate). An entry's
    ``task`` is the name the task is registered under, as beat sends it to the workers."""
    import annotations.tasks  # noqa: F401 - registers every task with the Celery app
    from oversight_site.celery import app

    sweeps = []
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        every = entry["schedule"]
        every = every.total_seconds() if isinstance(every, dt.timedelta) else (
            every.run_every.total_seconds() if hasattr(every, "run_every") else float(every))
        sweeps.append(Sweep(name, app.tasks[entry["task"]], every))
    return sweeps


class SweeperLoop:
    """Runs ``sweeps`` at their intervals in a daemon thread that restarts itself."""

    def __init__(self, sweeps: list[Sweep], *, restart_pause: float = RESTART_PAUSE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sweeps = sweeps
        self.restart_pause = restart_pause
        self.clock = clock
        self.restarts = 0  # loops restarted by the supervisor
        self.starts = 0  # threads started
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def run_due(self) -> float:
        """Run every sweep that is due (each on its own: one that raises is logged); return
        the seconds until the next one is due."""
        now = self.clock()
        for sweep in self.sweeps:
            if sweep.due > now:
                continue
            sweep.due = now + sweep.every
            try:
                sweep.run()
            except Exception:  # noqa: BLE001 - a sweep's failure must not stop the others
                log.exception("embedded sweeper %s failed (runs again in %.0f s)", sweep.name,
                              sweep.every)
        return max(0.0, min(s.due for s in self.sweeps) - self.clock()) if self.sweeps else 60.0

    def _loop(self) -> None:
        from django.db import connections

        while not self._stop.is_set():
            try:
                wait = self.run_due()
            finally:
                connections.close_all()  # this thread's connections
            self._stop.wait(wait)

    def _supervise(self) -> None:
        while not self._stop.is_set():
            try:
                self._loop()
            except Exception:  # noqa: BLE001 - the loop itself died: start it again
                self.restarts += 1
                log.exception("embedded sweeper loop died; starting it again in %.0f s",
                              self.restart_pause)
                self._stop.wait(self.restart_pause)

    def ensure_running(self) -> bool:
        """Start the thread unless it is alive (at start, and on each request: a thread
        that ended is started again). Returns whether it started one."""
        with self._lock:
            if self._stop.is_set() or (self._thread is not None and self._thread.is_alive()):
                return False
            self._thread = threading.Thread(target=self._supervise, name="embedded-sweepers",
                                            daemon=True)
            self.starts += 1
            self._thread.start()
            return True

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


_loop: SweeperLoop | None = None


def _on_request(**kwargs) -> None:
    if _loop is not None:
        _loop.ensure_running()


def embedded_sweepers_start() -> SweeperLoop | None:
    """Start the embedded sweepers in this process when the settings ask for them
    (``OVERSIGHT_EMBEDDED_SWEEPERS``: on by default without a broker), and check on each
    request that they still run. Idempotent; returns the loop (None: not wanted here)."""
    global _loop
    if not settings.OVERSIGHT_EMBEDDED_SWEEPERS:
        return None
    from django.core.signals import request_started

    if _loop is None:
        _loop = SweeperLoop(beat_sweeps())
        request_started.connect(_on_request, dispatch_uid="embedded-sweepers", weak=False)
    _loop.ensure_running()
    return _loop
