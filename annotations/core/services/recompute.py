"""The live recompute pipeline: schedule a recompute after answers (debounced), record how
each one ends, and catch up on studies whose snapshot is behind their answers.

Recomputes are a convenience layered on top of committed answers: nothing here may make an
answer fail. When Redis (cache or broker) is down, answering goes on, the study stays
marked as behind in the database (``RecomputeState``), and the beat sweeper
``recomputes_catch_up`` schedules the recompute once Redis is back — also when a worker was
killed holding a delayed task that Redis would only redeliver after its visibility timeout.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotations.core.models import EstimateSnapshot, RecomputeState, Study
from annotations.core.queue import RECOMPUTE_TASK, task
from annotations.core.services.notices import study_notice

log = logging.getLogger(__name__)

# The debounce key's lifetime: a key left by a dead worker blocks scheduling at most this long
# — once the recompute's delay is known, that delay and PENDING_GRACE_SECONDS (time to
# reach a busy worker): after that an answer queues the recompute again, on a live worker.
PENDING_KEY_SECONDS = 60
PENDING_GRACE_SECONDS = 10
# A failed study is retried by the sweeper at most this often (each attempt retries itself
# with backoff first), so a recompute that fails on its data does not run in a loop.
FAILED_RETRY_SECONDS = 300
ERROR_CHARS = 300


def pending_key(study_id: int) -> str:
    return f"recompute-pending:{study_id}"


def cost_key(study_id: int) -> str:
    return f"recompute-cost:{study_id}"


def _pace_write(study_id: int, pace: dict) -> None:
    from django.core.cache import cache

    try:
        cache.set(cost_key(study_id), pace, timeout=3600)
    except Exception as exc:  # noqa: BLE001 - Redis down: the plain debounce applies
        log.warning("recompute of study %s: its pace not recorded (%s)", study_id,
                    short_error(exc))


def _pace(study_id: int) -> dict | None:
    from django.core.cache import cache

    try:
        pace = cache.get(cost_key(study_id))
    except Exception:  # noqa: BLE001 - Redis down: the plain debounce
        return None
    return pace if isinstance(pace, dict) else None


def recompute_start_record(study_id: int) -> None:
    """A recompute of the study starts now (wall clock: the next one may be scheduled on
    another host); the last one's duration is kept as the expected one (cache; never
    raises)."""
    last = _pace(study_id)
    _pace_write(study_id, {"seconds": last["seconds"] if last else 0.0,
                           "started": time.time(), "ended": None})


def recompute_cost_record(study_id: int, seconds: float) -> None:
    """The study's recompute took ``seconds`` and ended now (cache; never raises)."""
    now = time.time()
    _pace_write(study_id, {"seconds": float(seconds), "started": now - float(seconds),
                           "ended": now})


def recompute_delay(study_id: int) -> float:
    """Seconds to wait before the next recompute of a study: the debounce, or longer while
    its last recompute (of c seconds) ended less than c · (1/s − 1) ago, with
    s = OVERSIGHT_RECOMPUTE_MAX_SHARE — the next starts no sooner than that gap after the
    last one's end (a running one's expected end: its start + the last c). So while answers
    stream in, one study's recomputes take at most that share of a worker and the answers'
    requests keep the rest of the machine (a 1 s analysis at s = 0.25 runs at most every
    4 s), and an answer to a study that has been quiet waits the debounce only. Never
    raises."""
    delay = settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS
    share = settings.OVERSIGHT_RECOMPUTE_MAX_SHARE
    pace = _pace(study_id)
    if pace is None or not 0 < share < 1:
        return delay
    cost = float(pace["seconds"])
    ended = pace["ended"] if pace["ended"] is not None else pace["started"] + cost
    return max(delay, ended + cost * (1 / share - 1) - time.time())


def catch_up_grace_seconds() -> float:
    """How long a study may be behind before the sweeper steps in: long enough for the
    debounced task the answer scheduled to have run."""
    return max(5.0, 2 * settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS)


def short_error(exc: BaseException) -> str:
    """The exception's type and the first line of its message (no traceback)."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text[:ERROR_CHARS]


# --- study kinds --------------------------------------------------------------------------
@dataclass(frozen=True)
class RecomputeKind:
    """How the studies of one ``Study.kind`` recompute: ``recompute(study_id=…)`` writes
    the snapshot; ``answered(study_ids)`` → {study id: the ``n_answered`` a fresh snapshot
    would have} (:func:`answered_counts_of`); ``behind(study_ids)`` → the studies holding
    changes their snapshot has not seen. The sweeper's check for answers whose on-commit
    hook never ran uses ``behind`` where a type has it (a type that logs its changes: one
    probe per study, not a count of its answers), else ``answered`` against the latest
    snapshot's count; neither: no such check. Every study type registers its own from its
    ``hooks``."""

    recompute: Callable[..., EstimateSnapshot]
    answered: Callable[[list[int]], dict[int, int]] | None = None
    behind: Callable[[list[int]], list[int]] | None = None


_KINDS: dict[str, RecomputeKind] = {}


def recompute_kind_register(kind: str, recompute: Callable[..., EstimateSnapshot], *,
                            answered: Callable[[list[int]], dict[int, int]] | None = None,
                            behind: Callable[[list[int]], list[int]] | None = None
                            ) -> None:
    """Make ``study_recompute_any`` and the sweeper handle studies of ``kind`` (idempotent;
    each study type's module registers itself when imported; ``answered`` and ``behind``:
    :class:`RecomputeKind`)."""
    _KINDS[kind] = RecomputeKind(recompute, answered, behind)


def answered_counts_of(study_ids: list[int]) -> dict[int, int]:
    """{study id: the ``n_answered`` a fresh snapshot of it would have}, each study counted by
    its type's ``RecomputeKind.answered`` (studies of a type without one are left out)."""
    kinds: dict[str, list[int]] = {}
    for pk, kind in Study.objects.filter(pk__in=study_ids).values_list("pk", "kind"):
        kinds.setdefault(kind, []).append(pk)
    out: dict[int, int] = {}
    for kind, pks in kinds.items():
        entry = _KINDS.get(kind)
        if entry is not None and entry.answered is not None:
            out.update(dict.fromkeys(pks, 0) | entry.answered(pks))
    return out


def study_recompute_any(*, study_id: int) -> EstimateSnapshot:
    """Recompute a study of any kind into a new snapshot (the kind's registered recompute:
    each study type registers its own from the app's ``ready``)."""
    kind = Study.objects.filter(pk=study_id).values_list("kind", flat=True).first()
    if kind is None:
        raise Study.DoesNotExist(f"No study {study_id}.")
    return _KINDS[kind].recompute(study_id=study_id)


@transaction.atomic
def snapshot_store(*, study: Study, payload: dict, duration_ms: float) -> EstimateSnapshot:
    """Store a recompute's snapshot (every study type's, from its ``recompute``); when it
    counts more answers than the study's latest one, say so (``answers.recorded``,
    ``core.services.notices``: one notice per snapshot, so answers are told in batches)."""
    before = (EstimateSnapshot.objects.filter(study=study).order_by("-computed_at", "-id")
              .values_list("n_answered", flat=True).first()) or 0
    snapshot = EstimateSnapshot.objects.create(study=study, n_answered=payload["n_answered"],
                                               duration_ms=duration_ms, payload=payload)
    if snapshot.n_answered > before:
        study_notice(study.pk, "answers.recorded", {
            "answers": snapshot.n_answered, "new": snapshot.n_answered - before,
            "snapshot": snapshot.pk})
    return snapshot


# --- state ---------------------------------------------------------------------------------
def _state_locked(study_id: int) -> RecomputeState:
    RecomputeState.objects.get_or_create(study_id=study_id)
    return RecomputeState.objects.select_for_update().get(study_id=study_id)


@transaction.atomic
def recompute_requested(*, study_id: int) -> None:
    """Mark the study as having answers that no snapshot includes yet. Called after the
    answers committed, so a recompute that reads the sequence later counts them."""
    bump = {"requested_seq": F("requested_seq") + 1,
            "dirty_since": Coalesce(F("dirty_since"), Value(timezone.now()))}
    if not RecomputeState.objects.filter(study_id=study_id).update(**bump):
        _state_locked(study_id)  # first answer of the study: create the row, then bump
        RecomputeState.objects.filter(study_id=study_id).update(**bump)


def recompute_started(*, study_id: int) -> int:
    """The answer sequence a recompute starting now will include (read before counting)."""
    state, _ = RecomputeState.objects.get_or_create(study_id=study_id)
    return state.requested_seq


@transaction.atomic
def recompute_succeeded(*, study_id: int, seq: int, started_at: dt.datetime) -> None:
    """A snapshot including answers up to ``seq`` was just written: it is now the latest,
    so ``computed_seq`` is what it read (even below an earlier value, when a slower
    duplicate finished last). Clears the failure."""
    state = _state_locked(study_id)
    state.computed_seq = seq
    if state.requested_seq <= seq:
        state.dirty_since = None
    else:  # answers arrived after this recompute read the sequence
        state.dirty_since = max(state.dirty_since or started_at, started_at)
    state.succeeded_at = timezone.now()
    state.failed_at = None
    state.error = ""
    state.save()


@transaction.atomic
def recompute_failed(*, study_id: int, exc: BaseException) -> None:
    """Record a failed attempt (time, short error) for the dashboard and /healthz."""
    if not Study.objects.filter(pk=study_id).exists():
        return
    state = _state_locked(study_id)
    state.failed_at = timezone.now()
    state.error = short_error(exc)
    state.save(update_fields=["failed_at", "error"])


# --- scheduling ----------------------------------------------------------------------------
def study_recompute_schedule(study_id: int) -> None:
    """After answers committed: mark the study as behind, then start a debounced recompute.

    Never raises (it runs in the answer's on-commit hook: the answer is stored whatever
    happens here). At most one recompute is queued per study at a time; the task clears
    the flag when it starts, so answers arriving during a run schedule another."""
    try:
        recompute_requested(study_id=study_id)
    except Exception as exc:  # noqa: BLE001 - the answer is committed; the sweeper's count check catches up
        log.warning("recompute of study %s: could not mark it as behind (%s)", study_id,
                    short_error(exc))
    recompute_enqueue(study_id)


def recompute_enqueue(study_id: int, *, force: bool = False) -> bool:
    """Queue (or, on the embedded defaults, start) a recompute; ``force`` skips the
    debounce key (the sweeper: a key may be left by a worker that died). Returns whether
    one was queued; never raises — a failure is logged and left to the sweeper."""
    from django.core.cache import cache

    if settings.CELERY_TASK_ALWAYS_EAGER and settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS <= 0:
        try:  # tests: the snapshot exists on return
            task(RECOMPUTE_TASK).apply(args=(study_id,))
        except Exception as exc:  # noqa: BLE001 - recorded by the task
            log.warning("recompute of study %s failed: %s", study_id, short_error(exc))
        return True
    try:
        if force:
            cache.set(pending_key(study_id), 1, timeout=PENDING_KEY_SECONDS)
        elif not cache.add(pending_key(study_id), 1, timeout=PENDING_KEY_SECONDS):
            return False
        # the sweeper's (forced) recompute goes to a worker at once; in process, every one
        # waits its delay
        delay = (recompute_delay(study_id)
                 if settings.CELERY_TASK_ALWAYS_EAGER or not force else 0.0)
        cache.touch(pending_key(study_id), math.ceil(delay) + PENDING_GRACE_SECONDS)
        if settings.CELERY_TASK_ALWAYS_EAGER:
            # Embedded defaults (no broker): the in-process "worker" is a timer thread, so
            # the answer request does not wait for the recompute.
            timer = threading.Timer(delay, _recompute_in_process, args=(study_id,))
            timer.daemon = True
            _background[:] = [t for t in _background if t.is_alive()]  # forget finished ones
            _background.append(timer)
            timer.start()
        else:
            task(RECOMPUTE_TASK).apply_async(args=(study_id,), countdown=delay)
    except Exception as exc:  # noqa: BLE001 - Redis (cache or broker) down
        log.warning("recompute of study %s not started: %s (the sweeper retries)", study_id,
                    short_error(exc))
        return False
    return True


_background: list[threading.Timer] = []


def background_recomputes_join(timeout: float = 30.0) -> int:
    """Wait for the in-process (embedded mode) recomputes scheduled so far; returns how
    many were waited for. For clean shutdowns and tests."""
    waited = 0
    while _background:
        _background.pop().join(timeout)
        waited += 1
    return waited


def _recompute_in_process(study_id: int) -> None:
    from django.db import connections


    try:
        task(RECOMPUTE_TASK).apply(args=(study_id,))
    except Exception as exc:  # noqa: BLE001 - recorded by the task; a thread has no caller
        log.warning("recompute of study %s failed: %s", study_id, short_error(exc))
    finally:
        connections.close_all()  # this thread's connections


# --- catching up ---------------------------------------------------------------------------
def _mark_studies_behind() -> list[int]:
    """Open studies with changes their latest snapshot has not seen (an answer whose
    on-commit hook never ran: the web process died right after the commit) are marked as
    behind — by their study type's log (``RecomputeKind.behind``), or where it keeps none
    by their answered count (queries; ratings for assisted studies) against the
    snapshot's."""
    latest = EstimateSnapshot.objects.filter(study=OuterRef("pk")).order_by(
        "-computed_at", "-id").values("n_answered")[:1]
    behind: list[int] = []
    for kind, entry in _KINDS.items():  # each study type checks its own answers
        open_studies = Study.objects.filter(status=Study.Status.OPEN, kind=kind)
        if entry.behind is not None:
            behind += entry.behind(list(open_studies.values_list("pk", flat=True)))
            continue
        if entry.answered is None:
            continue
        snaps = dict(open_studies.annotate(n_snapshot=Subquery(latest))
                     .values_list("pk", "n_snapshot"))
        counts = entry.answered(list(snaps))
        behind += [pk for pk, n_snap in snaps.items() if counts.get(pk, 0) != (n_snap or 0)]
    already = set(RecomputeState.objects.filter(study_id__in=behind, dirty_since__isnull=False)
                  .values_list("study_id", flat=True))
    for study_id in behind:
        if study_id not in already:
            recompute_requested(study_id=study_id)
    return behind


def recomputes_catch_up(*, now: dt.datetime | None = None) -> list[int]:
    """Beat sweeper: queue a recompute (past the debounce key) for every study that has been
    behind its answers for longer than the grace period, and retry failed ones every
    ``FAILED_RETRY_SECONDS``. Returns the studies queued."""
    now = now or timezone.now()
    _mark_studies_behind()
    behind_before = now - dt.timedelta(seconds=catch_up_grace_seconds())
    failed_before = now - dt.timedelta(seconds=FAILED_RETRY_SECONDS)
    due = (
        RecomputeState.objects.filter(
            Q(failed_at__isnull=True, dirty_since__lte=behind_before)
            | Q(failed_at__lte=failed_before))
        .order_by("study_id").values_list("study_id", flat=True)
    )
    return [study_id for study_id in due if recompute_enqueue(study_id, force=True)]
