"""Imports as jobs: every import from the admin page or the API is an ``ImportJob``.

``import_job_submit`` stores the uploaded bytes with the job and queues it; the Celery task
``annotations.tasks.import_job_task`` calls ``import_job_run``, which runs the import
service registered for the job's kind (``items_import``, ``predictions_import``, an audit's
files: ``audit.services.uploads.audit_upload_import``, which takes the job's ``options``) in
one transaction — all or nothing — and records the outcome: the summary on success
(``import_summary``: the one every import ends on), every error ('file:line: field:
message') on failure. The job's row is marked succeeded in the import's own transaction, so a job is
"succeeded" exactly when its rows are committed.

Who runs it (``OVERSIGHT_IMPORT_RUNNER``):
* "celery" (the default with a broker, ``CELERY_BROKER_URL``): a Celery worker. The task
  has its own time limit (``OVERSIGHT_IMPORT_TIME_LIMIT``); gunicorn's timeout no longer
  applies.
* "thread" (the embedded default, no broker): one background thread of the web process,
  one job at a time, so the request that submits a job returns at once.
* "request" (the test settings): the call that submits the job runs it before returning.

Progress: the services report "reading" (records of the file's lines) and "writing" (rows)
through ``services.progress``; the job adds "committing" (PostgreSQL's deferred foreign-key
checks, then the commit). On PostgreSQL the job's row is updated through a second
database connection, so the figures are visible while the import's transaction is open; on
SQLite the import holds the database's only write lock, so progress goes to the cache and
the row gets the final state (``selectors.import_job_progress`` reads either).

Duplicates: the same file (SHA-256) with the same kind and options while an identical job
of the study is queued or running returns that job (a database constraint decides). Two
jobs of one study never run at once (a PostgreSQL advisory lock; the embedded thread runs
one job at a time).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.utils import timezone

from annotations.core.errors import DomainError, ImportFailed
from annotations.core.inputs import file_too_large_message
from annotations.core.models import ImportJob, ImportJobFile, Study, User
from annotations.core.queue import IMPORT_JOB_TASK, task
from annotations.core.selectors import progress_key
from annotations.core.services.notices import study_notice
from annotations.core.services.progress import Progress, progress_phase, progress_reporting
from annotations.core.services.recompute import short_error
from annotations.core.services.records import detect_format
from annotations.core.sqlite_locks import while_sqlite_locked
from annotations.core.words import counted

log = logging.getLogger(__name__)

# At most this many errors are kept with a failed job (the first ones of the file).
ERRORS_KEPT = 1000
# pg_advisory_xact_lock(class, study id): imports of one study run one at a time.
ADVISORY_LOCK_CLASS = 8108


_SERVICES: dict[str, Callable] = {}
_TAKES_OPTIONS: set[str] = set()


_FORMATS: dict[str, Callable[[str, bytes, str | None], str]] = {}


def import_kind_register(kind: str, service: Callable, *, options: bool = False,
                         formats: Callable[[str, bytes, str | None], str] | None = None
                         ) -> None:
    """Make jobs of ``kind`` (an ``ImportJob.Kind``) run ``service(study=, source=, name=,
    fmt=, update=)`` — with ``options=`` the job's ``options`` too when ``options`` — (the
    package that owns the kind registers it from its ``hooks`` or app config).
    ``formats(name, data, fmt)`` tells a job's format (stored as ``ImportJob.fmt``) for a
    kind whose files are not CSV or JSONL (evaluation logs); it raises ImportFailed naming
    the file when it cannot."""
    _SERVICES[kind] = service
    if options:
        _TAKES_OPTIONS.add(kind)
    if formats is not None:
        _FORMATS[kind] = formats


def _service(kind: str) -> Callable:
    return _SERVICES[kind]


# --- submitting ------------------------------------------------------------------------------
def import_job_submit(*, study: Study, kind: str, data: bytes, name: str, update: bool = False,
                      user: User | None = None, fmt: str | None = None,
                      run_here: bool = False, options: dict | None = None,
                      max_bytes: int | None = None) -> tuple[ImportJob, bool]:
    """Store an upload as a queued job of ``study`` and start it; returns (job, created).

    ``run_here``: run the job in this call, whatever the deployment (the API's
    ``?wait=true``); the returned job has ended. Refused at once (ImportFailed naming the
    file): an unknown kind, a name that says neither CSV nor JSONL (unless ``fmt``), more
    than ``OVERSIGHT_IMPORT_MAX_BYTES``. The same bytes with the same kind and ``update``
    while such a job is queued or running return that job (created False) instead of a
    second one. ``options`` (JSON) go to the service of a kind registered to take them and
    count in the "same job" test; ``max_bytes`` replaces the per-file limit for a job
    whose data holds several files, each already checked by its caller."""
    if kind not in ImportJob.Kind.values:
        raise DomainError(f"Unknown import kind '{kind}' ("
                          f"{', '.join(ImportJob.Kind.values)}).", field="kind")
    if len(data) > (max_bytes or settings.OVERSIGHT_IMPORT_MAX_BYTES):
        raise ImportFailed([file_too_large_message(name, len(data))])
    fmt = _FORMATS[kind](name, data, fmt) if kind in _FORMATS else detect_format(name, fmt)
    sha = hashlib.sha256(data)
    if options:
        sha.update(json.dumps(options, sort_keys=True).encode())
    digest = sha.hexdigest()
    import_jobs_expire(study=study)
    try:
        with transaction.atomic():
            job = ImportJob.objects.create(study=study, kind=kind, name=name[:255], fmt=fmt,
                                           update=update, size=len(data), sha256=digest,
                                           created_by=user, options=options or {})
            ImportJobFile.objects.create(job=job, data=data)
    except IntegrityError:
        same = ImportJob.objects.filter(study=study, kind=kind, sha256=digest, update=update,
                                        status__in=ImportJob.ACTIVE).first()
        if same is None:
            raise
        return same, False
    if run_here or settings.OVERSIGHT_IMPORT_RUNNER == "request":
        import_job_run(job_id=job.pk)  # here and now, on this connection
        job.refresh_from_db()
    else:  # the worker or the thread reads the job: once it is committed
        transaction.on_commit(lambda: import_job_enqueue(job.pk))
    return job, True


def import_job_enqueue(job_id: int) -> None:
    """Start a queued job: on a worker ("celery"), in the web process's import thread
    ("thread"), or here and now ("request"). A broker that cannot be reached fails the job
    with that reason (nothing was written)."""

    runner = settings.OVERSIGHT_IMPORT_RUNNER
    if runner == "thread":
        _background.append(_executor().submit(_run_in_thread, job_id))
        return
    if runner == "request":
        import_job_run(job_id=job_id)
        return
    try:
        task(IMPORT_JOB_TASK).apply_async(args=(job_id,))
    except Exception as exc:  # noqa: BLE001 - Redis down: say so on the job, not as a 500
        log.warning("import job %s not queued: %s", job_id, short_error(exc))
        _finish_failed(job_id, [f"The import could not be queued ({short_error(exc)}); "
                                f"nothing was written. Try again."], status_from=(
                                    ImportJob.Status.QUEUED,))


# --- the embedded runner ---------------------------------------------------------------------
_executor_lock = threading.Lock()
_executor_instance: ThreadPoolExecutor | None = None
_background: list[Future] = []


def _executor() -> ThreadPoolExecutor:
    global _executor_instance
    with _executor_lock:
        if _executor_instance is None:
            _executor_instance = ThreadPoolExecutor(max_workers=1,
                                                    thread_name_prefix="import-job")
        _background[:] = [f for f in _background if not f.done()]
        return _executor_instance


def _run_in_thread(job_id: int) -> None:

    try:
        task(IMPORT_JOB_TASK).apply(args=(job_id,))
    except Exception:  # noqa: BLE001 - recorded on the job; a thread has no caller
        log.exception("import job %s", job_id)
    finally:
        connections.close_all()  # this thread's connections


def background_imports_join(timeout: float = 60.0) -> int:
    """Wait for the jobs started in this process's import thread (clean shutdowns, tests);
    returns how many were waited for."""
    waited = 0
    while _background:
        _background.pop().result(timeout)
        waited += 1
    return waited


# --- running ---------------------------------------------------------------------------------
def _progress_sink(job_id: int) -> tuple[Callable[[Progress], None], Callable[[], None]]:
    """Where a running job's progress goes: its row, through a connection of its own
    (PostgreSQL), or the cache (SQLite: the import's transaction holds the only write
    lock). Returns (sink, close)."""
    if connection.vendor == "postgresql":
        side = connections.create_connection(DEFAULT_DB_ALIAS)
        q = side.ops.quote_name
        sql = (f"UPDATE {q(ImportJob._meta.db_table)} SET {q('phase')} = %s, {q('done')} = %s, "
               f"{q('total')} = %s, {q('updated_at')} = %s WHERE {q('id')} = %s AND "
               f"{q('status')} = %s")

        def to_row(p: Progress) -> None:
            with side.cursor() as cur:
                cur.execute(sql, [p.phase, p.done, p.total, timezone.now(), job_id,
                                  ImportJob.Status.RUNNING])

        return to_row, side.close
    timeout = settings.OVERSIGHT_IMPORT_TIME_LIMIT + 60

    def to_cache(p: Progress) -> None:
        cache.set(progress_key(job_id), (p.phase, p.done, p.total), timeout=timeout)

    return to_cache, lambda: None


def _lock_study_imports(study_id: int, report: Callable[[Progress], None]) -> None:
    """Imports of one study wait for each other (PostgreSQL; the transaction's end frees).
    Only a job that really has to wait reports the phase "waiting" (the page then says it
    waits for another import of the study); the others go straight on ("Starting…")."""
    if connection.vendor == "postgresql":
        key = [ADVISORY_LOCK_CLASS, study_id]
        with connection.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", key)
            if cur.fetchone()[0]:
                return
            report(Progress(phase="waiting"))
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", key)


def _deferred_checks_now() -> None:
    """PostgreSQL checks foreign keys at the commit (Django makes them deferrable): run
    those checks now, so that the job is marked succeeded only once they passed (and its
    finish time includes them: seconds for 400 000 new rows)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SET CONSTRAINTS ALL IMMEDIATE")


def import_summary(result) -> dict:
    """The one summary every successful import ends on (``templates/imports/_summary.html``;
    issue 27), as stored with a job and shown by every import page: the result's own
    fields, ``text`` (its one line), ``created`` and ``updated`` (0 where an import never
    rewrites), ``details`` ([label, value, testid] rows of the import's own figures:
    ``result.details()``) and ``next`` (what to do next: ``result.next_step()``)."""
    from dataclasses import asdict

    details = result.details() if hasattr(result, "details") else []
    return {**asdict(result), "text": result.summary(), "created": result.created,
            "updated": getattr(result, "updated", 0),
            "details": [[row[0], row[1], row[2] if len(row) > 2 else ""] for row in details],
            "next": result.next_step() if hasattr(result, "next_step") else ""}


class _Expired(Exception):
    """The job was marked failed while it ran (it outlived the time limit)."""


def import_job_run(*, job_id: int) -> ImportJob | None:
    """Run a queued job (the task's body); safe to call twice: a job that is not queued is
    left as it is. Returns the job as it ended (None if it was deleted)."""
    from celery.exceptions import SoftTimeLimitExceeded

    now = timezone.now()
    # the job's own row is written (here, at its end) while its page may be polling it:
    # while_sqlite_locked (the test suite's shared-cache SQLite would fail the write)
    claimed = while_sqlite_locked(lambda: ImportJob.objects.filter(
        pk=job_id, status=ImportJob.Status.QUEUED).update(
        status=ImportJob.Status.RUNNING, started_at=now, updated_at=now, phase="",
        done=0, total=0))
    if not claimed:
        return ImportJob.objects.filter(pk=job_id).first()
    job = ImportJob.objects.select_related("study").get(pk=job_id)
    sink, close = _progress_sink(job.pk)
    try:
        with transaction.atomic():
            _lock_study_imports(job.study_id, sink)
            data = bytes(ImportJobFile.objects.get(job_id=job.pk).data)
            with progress_reporting(sink, interval=settings.OVERSIGHT_IMPORT_PROGRESS_SECONDS):
                extra = {"options": job.options} if job.kind in _TAKES_OPTIONS else {}
                result = _service(job.kind)(study=job.study, source=io.BytesIO(data),
                                            name=job.name, fmt=job.fmt, update=job.update,
                                            **extra)
                del data
                progress_phase("committing", total=0)
                _deferred_checks_now()
            rows = (result.created + getattr(result, "updated", 0)
                    + getattr(result, "unchanged", 0))
            ended = timezone.now()
            if not while_sqlite_locked(lambda: ImportJob.objects.filter(
                    pk=job.pk, status=ImportJob.Status.RUNNING).update(
                    status=ImportJob.Status.SUCCEEDED, summary=import_summary(result), phase="done",
                    done=rows, total=rows, updated_at=ended, finished_at=ended)):
                raise _Expired  # failed meanwhile (expired, or deleted): keep nothing
            ImportJobFile.objects.filter(job_id=job.pk).delete()
            study_notice(job.study_id, "import.finished", {
                "job": job.pk, "kind": job.kind, "name": job.name, "created": result.created,
                "updated": getattr(result, "updated", 0)})
    except _Expired:
        pass
    except DomainError as exc:  # ImportFailed, refusals: rolled back, nothing written
        _finish_failed(job.pk, list(getattr(exc, "errors", None) or [exc.message]))
    except SoftTimeLimitExceeded:
        _finish_failed(job.pk, [f"{job.name}: the import took longer than "
                                f"{settings.OVERSIGHT_IMPORT_TIME_LIMIT} s and was stopped; "
                                f"nothing was written. Split the file."])
    except Exception as exc:  # noqa: BLE001 - say it on the job; the log has the traceback
        log.exception("import job %s failed", job.pk)
        _finish_failed(job.pk, [f"{job.name}: the import stopped on an unexpected error "
                                f"({short_error(exc)}); nothing was written."])
    finally:
        close()
        if connection.vendor != "postgresql":
            cache.delete(progress_key(job.pk))
    return ImportJob.objects.filter(pk=job.pk).first()


def _finish_failed(job_id: int, errors: list[str], *,
                   status_from: tuple[str, ...] = (ImportJob.Status.RUNNING,)) -> None:
    """Mark a job failed with its errors (at most ERRORS_KEPT) and drop its bytes."""
    if len(errors) > ERRORS_KEPT:
        errors = [*errors[:ERRORS_KEPT], f"… and {len(errors) - ERRORS_KEPT} more"]
    ended = timezone.now()

    def mark() -> None:
        with transaction.atomic():
            if ImportJob.objects.filter(pk=job_id, status__in=status_from).update(
                    status=ImportJob.Status.FAILED, errors=errors, updated_at=ended,
                    finished_at=ended):
                job = ImportJob.objects.values("study_id", "kind", "name").get(pk=job_id)
                # how many problems, never their text (it may quote a hidden gold answer)
                study_notice(job["study_id"], "import.failed", {
                    "job": job_id, "kind": job["kind"], "name": job["name"],
                    "problems": len(errors)})
            ImportJobFile.objects.filter(job_id=job_id).delete()

    while_sqlite_locked(mark)


def import_jobs_expire(*, study: Study | None = None, now=None) -> int:
    """Fail jobs that cannot be running any more: running past the task's time limit (the
    worker or the web process ended during the import: its transaction was rolled back; a
    run that is still going — the embedded thread has no hard limit — then finds its job
    failed and rolls back too) and, without a worker, queued that long (the process that
    should run them ended; with a broker a queued job waits in the queue for a worker).
    Returns how many."""
    now = now or timezone.now()
    cutoff = now - dt.timedelta(seconds=settings.OVERSIGHT_IMPORT_TIME_LIMIT + 60)
    stale = ImportJob.objects.filter(status=ImportJob.Status.RUNNING, started_at__lt=cutoff)
    lost = ImportJob.objects.filter(status=ImportJob.Status.QUEUED, created_at__lt=cutoff)
    if study is not None:
        stale, lost = stale.filter(study=study), lost.filter(study=study)
    count = 0
    for job_id in stale.values_list("pk", flat=True):
        limit = counted(settings.OVERSIGHT_IMPORT_TIME_LIMIT // 60, "minute")
        _finish_failed(job_id, [f"The import did not finish within {limit} (its "
                                f"worker or the server stopped, or the file is too large); "
                                f"nothing was written. Upload the file again, or split it."])
        count += 1
    if settings.OVERSIGHT_IMPORT_RUNNER != "celery":
        for job_id in lost.values_list("pk", flat=True):
            _finish_failed(job_id, ["The import never started (the server restarted); "
                                    "nothing was written. Upload the file again."],
                           status_from=(ImportJob.Status.QUEUED,))
            count += 1
    return count
