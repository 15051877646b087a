"""Starting, running and cancelling audits (issue 19; docs/audit.md).

``audit_start`` checks everything before it stores anything: the rubric (every criterion's
parameters), r, φ and the seed, the data set (uploaded JSONL or the study's items) and the
evaluator's commitments file (``estimators.nodata.commitments``: every problem named by
file, line and field, items checked against the data set and rounds against r). With any
problem it raises ``ImportFailed`` (or ``AuditRefused``) and nothing changes. Otherwise it
stores the audit, the rubric's snapshot and both files, and queues the run after commit.

``audit_run_chunk`` (the Celery task's body) runs ``estimators.nodata.no_data_algorithm``
with the programmatic verifier on the snapshot and the imported commitments — or a registered
evaluator (``services.evaluators``: an AI system through the provider) — **in chunks**: each
chunk plays the EV protocol on the next datapoints for at most
``OVERSIGHT_AUDIT_CHUNK_SECONDS`` (well within Celery's time limit), then stores their
outcomes and a checkpoint (the next position and the evaluator's Generator state) in one
transaction, and the task queues the next chunk (``services.enqueue``): a long audit never
holds a worker for long, and the result is the one ``no_data_algorithm`` gives in one go
(same seed, same Generators, same order). The last chunk flips the failures (φ, the flips'
Generator over every stored outcome in order) and stores the summary. Progress (``done`` of
``total``) and a heartbeat are written about every ``PROGRESS_SECONDS``, where a cancel
request is looked for; between chunks the audit is queued (a cancel then ends it at once).

A cancelled run keeps no outcome; a crashed run is recorded as failed with the error, never
as a success; so is a run whose evaluator cannot answer (``EvaluatorUnavailable``: the
provider gave up after its retries, the endpoint was refused), and a chunk that reaches
Celery's soft time limit (``SoftTimeLimitExceeded`` is never a criterion's failure). A chunk
whose worker was killed (the hard limit, a restart) leaves the audit running with an old
heartbeat: ``audits_sweep`` (beat, every minute) marks it failed.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import numpy as np
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotations.audit.models import MAX_ROUNDS, Audit, AuditFile, AuditOutcome, Rubric
from annotations.audit.services.datasets import (
    datapoints_jsonl,
    parse_datapoints,
    study_datapoints,
)
from annotations.audit.services.enqueue import run_enqueue
from annotations.audit.services.evaluators import EvaluatorUnavailable, evaluator_kind
from annotations.audit.services.files import jsonl_records
from annotations.audit.services.rubrics import core_rubric, rubric_problems, rubric_snapshot
from annotations.audit.services.verify import (
    PENDING,
    HumanVerifier,
    answers_of,
    questions_create,
    questions_progress,
)
from annotations.core.errors import DomainError, ImportFailed
from annotations.core.models import Study, User
from annotations.core.services.notices import study_notice
from annotations.core.sqlite_locks import while_sqlite_locked
from estimators.nodata.algorithm import NoDataResult, flip_failures, streams, theorem1_bound
from estimators.nodata.commitments import CommitmentsError, parse_commitments
from estimators.nodata.evaluators import CommitmentsEvaluator
from estimators.nodata.kappa import cohen_kappa
from estimators.nodata.protocol import (
    Challenge,
    EVOutcome,
    Round,
    challenge_schedule,
    ev_protocol,
)
from estimators.nodata.verifiers import ProgrammaticVerifier

ACTIVE = (Audit.Status.QUEUED, Audit.Status.RUNNING, Audit.Status.WAITING)
PROGRESS_SECONDS = 0.5  # at most this long between two progress reports (and cancel checks)
STALE_MARGIN_SECONDS = 60  # beyond Celery's hard time limit before a silent run is failed
ALPHAS = (0.5, 0.7, 0.9)  # Theorem 1's value is shown for these evaluator accuracies α
MAX_OUTCOMES = 200_000


class AuditRefused(DomainError):
    code = "audit_refused"
    http_status = 409


class _Cancelled(Exception):
    pass


def _parameters(rounds, phi, seed) -> tuple[int, float, int]:
    problems = []
    try:
        rounds = int(rounds)
        if not 1 <= rounds <= MAX_ROUNDS:
            raise ValueError
    except (TypeError, ValueError):
        problems.append(f"rounds: a whole number from 1 to {MAX_ROUNDS}, got {rounds!r}")
    try:
        phi = float(phi)
        if not 0.0 <= phi <= 1.0:
            raise ValueError
    except (TypeError, ValueError):
        problems.append(f"phi: a flip probability from 0 to 1, got {phi!r}")
    try:
        seed = int(seed)
        if not 0 <= seed < 2**63:
            raise ValueError
    except (TypeError, ValueError):
        problems.append(f"seed: a whole number ≥ 0, got {seed!r}")
    if problems:
        raise ImportFailed(problems)
    return rounds, phi, seed


def _ai_system(study: Study, ai_system_id):
    """The study's AI system ``ai_system_id`` (None for none); refused for another study's."""
    if ai_system_id in (None, ""):
        return None
    try:
        pk = int(ai_system_id)
    except (TypeError, ValueError):
        pk = None
    found = study.ai_systems.filter(pk=pk).first() if pk is not None else None
    if found is None:
        raise AuditRefused(f"ai_system: {ai_system_id!r} is not an AI system of this study.")
    return found


@transaction.atomic
def audit_start(*, study: Study, rubric: Rubric, commitments: bytes | None = None,
                commitments_name: str = "",
                datapoints: bytes | None = None, datapoints_name: str = "",
                rounds=3, phi=0.5, seed=0, by: User | None = None,
                ai_system_id: int | None = None, evaluator: str = Audit.Evaluator.COMMITMENTS,
                ai: dict | None = None, verifier: str = Audit.Verifier.PROGRAMMATIC,
                enqueue: bool = True) -> Audit:
    """Check everything, then store and queue an audit (module docstring). ``datapoints``
    None means the study's items; ``ai_system_id`` links the audit to an AI system of the
    study (whose commitments these are: its page and a trust gate read its latest audit);
    ``evaluator`` "commitments" reads the ``commitments`` file, a registered kind ("ai":
    ``assistants.audit_evaluator``) asks it at run time, with ``ai`` its fields
    (``ai_base_url``, ``ai_model``, ``ai_strategy``, ``prompt_system``, ``prompt_user``),
    checked by the kind first. ``verifier`` "human" puts each criterion check to the study's
    workers (``services.verify``; imported commitments only). ``enqueue=False`` leaves the
    run to the caller (``audit_run``: the demo's seeding runs it in its own process)."""
    if rubric.study_id != study.pk:
        raise AuditRefused("The rubric belongs to another study.")
    ai_system = _ai_system(study, ai_system_id)
    if verifier not in Audit.Verifier.values:
        raise AuditRefused(f"verifier: one of {', '.join(Audit.Verifier.values)}.")
    if verifier == Audit.Verifier.HUMAN and evaluator != Audit.Evaluator.COMMITMENTS:
        raise ImportFailed(["verifier: specialists verify imported commitments only (an AI "
                            "evaluator would be asked again at every wave of questions)."])
    if evaluator == Audit.Evaluator.COMMITMENTS:
        if commitments is None:
            raise ImportFailed(["Choose the evaluator's commitments file (JSONL)."])
        evaluator_fields: dict = {}
    else:
        kind = evaluator_kind(evaluator)
        if kind is None:
            raise AuditRefused(f"evaluator: {evaluator!r} is not an evaluator audits know.")
        evaluator_fields = kind.check(dict(ai or {}))
        if ai_system is None:
            raise ImportFailed(["ai_system: choose the AI system the provider's answers are "
                                "of (its page and a trust gate read this audit)."])
    rounds, phi, seed = _parameters(rounds, phi, seed)
    snapshot = rubric_snapshot(rubric)
    problems = rubric_problems(snapshot)
    if problems:
        raise ImportFailed([f"rubric {rubric.name}: {p}" for p in problems])
    if evaluator == Audit.Evaluator.COMMITMENTS:
        commitments_name = (commitments_name or "commitments.jsonl")[:255]
    else:
        commitments_name = (f"{ai_system.name} (AI provider, "
                            f"{evaluator_fields.get('ai_strategy', evaluator)})")[:255]
    if datapoints is None:
        rows = study_datapoints(study)
        if not rows:
            raise ImportFailed(["The study has no items: upload a file of datapoints."])
        dataset, dataset_name = Audit.Dataset.ITEMS, f"{len(rows)} items of {study.name}"
        datapoints = datapoints_jsonl(rows)
    else:
        datapoints_name = (datapoints_name or "datapoints.jsonl")[:255]
        rows = parse_datapoints(datapoints, source=datapoints_name)
        dataset, dataset_name = Audit.Dataset.UPLOAD, datapoints_name
    if len(rows) > MAX_OUTCOMES:
        raise ImportFailed([f"{dataset_name}: {len(rows):,} datapoints; at most "
                            f"{MAX_OUTCOMES:,} per audit"])
    if evaluator == Audit.Evaluator.COMMITMENTS:
        jsonl_records(commitments, name=commitments_name)  # what no import stores
        try:
            parse_commitments(commitments, source=commitments_name, rounds=rounds,
                              items=[r.item for r in rows])
        except CommitmentsError as exc:
            raise ImportFailed(exc.problems) from None
    else:
        commitments = b""
    audit = Audit.objects.create(
        study=study, rubric=rubric, evaluator=evaluator, verifier=verifier,
        **evaluator_fields,
        evaluator_name=commitments_name, dataset=dataset, dataset_name=dataset_name[:255],
        rounds=rounds, phi=phi, seed=seed, rubric_snapshot=snapshot, total=len(rows),
        ai_system=ai_system, created_by=by)
    AuditFile.objects.create(audit=audit, commitments=commitments, datapoints=datapoints)
    if enqueue:
        transaction.on_commit(lambda: run_enqueue(audit.pk))
    return audit


def audit_cancel(*, audit: Audit) -> Audit:
    """Cancel a queued audit at once; ask a running one to stop at its next progress report.
    Refused for an audit that has ended."""
    with transaction.atomic():
        audit = Audit.objects.select_for_update().get(pk=audit.pk)
        if audit.status not in ACTIVE:
            raise AuditRefused(f"Audit #{audit.pk} has ended ({audit.get_status_display()}).")
        audit.cancel_requested = True
        fields = ["cancel_requested"]
        if audit.status in (Audit.Status.QUEUED, Audit.Status.WAITING):
            audit.status, audit.finished_at = Audit.Status.CANCELLED, timezone.now()
            fields += ["status", "finished_at"]
            AuditOutcome.objects.filter(audit_id=audit.pk).delete()  # a chunk's, if any
        audit.save(update_fields=fields)
    return audit


def _finish(audit_id: int, status: str, errors: list[str] | None = None, **fields) -> None:
    """End the run; an audit that did not succeed keeps no outcome (a chunk's)."""
    def write() -> None:
        with transaction.atomic():
            AuditOutcome.objects.filter(audit_id=audit_id).delete()
            Audit.objects.filter(pk=audit_id).update(
                status=status, finished_at=timezone.now(), errors=errors or [],
                heartbeat_at=None, **fields)
            _finished_notice(audit_id)

    while_sqlite_locked(write)


def _progress(audit_id: int):
    last = [time.monotonic()]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < PROGRESS_SECONDS:
            return
        last[0] = now
        while_sqlite_locked(lambda: Audit.objects.filter(pk=audit_id).update(
            done=done, heartbeat_at=timezone.now()))
        if while_sqlite_locked(lambda: Audit.objects.filter(
                pk=audit_id, cancel_requested=True).exists()):
            raise _Cancelled

    return report


def _round_row(r) -> dict:
    return {"round": r.index, "label": r.label, "similar": r.similar,
            "challenge": None if r.challenge is None else int(r.challenge),
            "passed": r.passed, "criterion": r.criterion, "reason": r.reason}


def audit_summary(result, rounds: int, phi: float,
                  references: list[int | None] | None = None) -> dict:
    """What the result page shows, from a ``NoDataResult``; with people's labels of some
    datapoints (``references``), Cohen's κ of the evaluator's labels (before any flip) and
    of the algorithm's labels (after) against them."""
    lo, hi = result.success_interval(0.95)
    agreement = {}
    if references and any(r is not None for r in references):
        agreement = {
            "kappa": cohen_kappa([o.label for o in result.outcomes], references).as_dict(),
            "kappa_final": cohen_kappa(list(result.labels), references).as_dict()}
    return {**agreement, "n": result.n, "successes": result.successes,
            "success_rate": result.success_rate,
            "interval": [lo, hi], "flips": result.flips, "flip_rate": result.flip_rate,
            "lie_pass_bound": result.lie_pass_bound, "error_factor": result.error_factor,
            "theorem1": [[a, theorem1_bound(a, phi, rounds)] for a in ALPHAS],
            "failures_by_challenge": result.failures_by_challenge(),
            "failures_by_criterion": result.failures_by_criterion()}


class _Overtaken(Exception):
    """Another execution of the same chunk (a message delivered twice) stored it first."""


def _rng_state(rng: np.random.Generator) -> str:
    return json.dumps(rng.bit_generator.state)  # 128-bit integers: kept exact as text


def _round_of(r: dict) -> Round:
    return Round(r["round"], r["label"], r["similar"],
                 None if r["challenge"] is None else Challenge(r["challenge"]), r["passed"],
                 r["criterion"], r["reason"])


def _chunk_seconds() -> float:
    return float(settings.OVERSIGHT_AUDIT_CHUNK_SECONDS)


def _setup(audit: Audit, files: AuditFile):
    """(rows, items, verifier, evaluator) of a stored audit, as every chunk builds them."""
    rows = parse_datapoints(bytes(files.datapoints), source=audit.dataset_name)
    items = [r.item for r in rows]
    rubric = core_rubric(audit.rubric_snapshot)
    if audit.verifier == Audit.Verifier.HUMAN:
        verifier = HumanVerifier(rubric, answers_of(audit))
    else:  # a chunk reaching the soft time limit is never a criterion's failure
        verifier = ProgrammaticVerifier(rubric, reraise=(SoftTimeLimitExceeded,))
    if audit.evaluator == Audit.Evaluator.COMMITMENTS:
        commitments = parse_commitments(bytes(files.commitments), source=audit.evaluator_name,
                                        rounds=audit.rounds, items=items)
        evaluator = CommitmentsEvaluator(commitments, source=audit.evaluator_name)
    else:
        kind = evaluator_kind(audit.evaluator)
        if kind is None:
            raise EvaluatorUnavailable(f"no evaluator {audit.evaluator!r} is registered")
        evaluator = kind.build(audit, rows)
    return rows, items, verifier, evaluator


def audit_run_chunk(*, audit_id: int, seconds: float | None = None) -> bool:
    """One chunk of a queued or running audit (module docstring): True when more remains
    (the caller queues the next chunk). Safe to call twice (an ended audit is left; a chunk
    already stored by another execution is not stored again)."""
    audit = Audit.objects.filter(pk=audit_id).first()
    if audit is None or audit.status not in (Audit.Status.QUEUED, Audit.Status.RUNNING):
        return False
    if audit.cancel_requested:
        _finish(audit_id, Audit.Status.CANCELLED)
        return False
    checkpoint = dict(audit.checkpoint or {})
    if not checkpoint or checkpoint.get("position", 0) >= audit.total:  # a new pass
        checkpoint = {"position": 0, "pending": False}

        def begin() -> None:
            with transaction.atomic():
                AuditOutcome.objects.filter(audit_id=audit_id).delete()
                Audit.objects.filter(pk=audit_id).update(checkpoint=checkpoint, done=0)

        while_sqlite_locked(begin)
    start = checkpoint["position"]
    # only while still queued or running: a cancel of the queued audit may have come first
    if not while_sqlite_locked(lambda: Audit.objects.filter(
            pk=audit_id, status__in=(Audit.Status.QUEUED, Audit.Status.RUNNING)).update(
                status=Audit.Status.RUNNING, done=start, heartbeat_at=timezone.now())):
        return False
    deadline = time.monotonic() + (_chunk_seconds() if seconds is None else seconds)
    try:
        files = AuditFile.objects.get(audit_id=audit_id)
        rows, items, verifier, evaluator = _setup(audit, files)
        ev_rng, ver_rng, flip_rng = streams(audit.seed)
        if "evaluator_rng" in checkpoint:
            ev_rng.bit_generator.state = json.loads(checkpoint["evaluator_rng"])
        schedule = challenge_schedule(ver_rng, len(rows), audit.rounds).tolist()
        evaluator.prepare(list(zip(items, [r.x for r in rows], strict=True)))
        report = _progress(audit_id)
        outcomes: list[EVOutcome] = []
        position = start
        while position < len(rows) and (position == start or time.monotonic() < deadline):
            outcomes.append(ev_protocol(items[position], rows[position].x, evaluator,
                                        verifier, rounds=audit.rounds, evaluator_rng=ev_rng,
                                        challenges=schedule[position]))
            position += 1
            report(position, len(rows))
        human = audit.verifier == Audit.Verifier.HUMAN
        pending = bool(checkpoint.get("pending")) or bool(human and verifier.needed)
        _store_chunk(audit, start, rows, outcomes,
                     {"position": position, "evaluator_rng": _rng_state(ev_rng),
                      "pending": pending}, needed=verifier.needed if human else None)
        if position < len(rows):
            return True
        if pending:  # a wave of questions: wait for the answers
            def wait() -> None:  # nothing stored while waiting: the next pass plays again
                with transaction.atomic():
                    mine = AuditOutcome.objects.filter(audit_id=audit_id)
                    decided = mine.exclude(reason=PENDING).count()
                    mine.delete()
                    Audit.objects.filter(pk=audit_id, status=Audit.Status.RUNNING).update(
                        status=Audit.Status.WAITING, done=decided, heartbeat_at=None)

            while_sqlite_locked(wait)
            return False
        _finalize(audit, rows, flip_rng)
    except (_Cancelled, _Overtaken) as exc:
        if isinstance(exc, _Cancelled):
            _finish(audit_id, Audit.Status.CANCELLED)
        return False
    except ImportFailed as exc:
        _finish(audit_id, Audit.Status.FAILED, exc.errors[:200])
    except CommitmentsError as exc:
        _finish(audit_id, Audit.Status.FAILED, exc.problems[:200])
    except EvaluatorUnavailable as exc:  # e.g. the provider gave up after its retries
        _finish(audit_id, Audit.Status.FAILED, [f"evaluator: {exc}"])
    except SoftTimeLimitExceeded:
        _finish(audit_id, Audit.Status.FAILED, [
            f"The run reached the worker's time limit ({settings.CELERY_TASK_SOFT_TIME_LIMIT} s) "
            "within one chunk (one datapoint took that long): start the audit again."])
    except Exception as exc:  # a bug: recorded (an audit left 'running' would never end)
        _finish(audit_id, Audit.Status.FAILED, [f"{type(exc).__name__}: {exc}"])
        raise
    return False


def audit_run(*, audit_id: int) -> None:
    """Run a queued audit to its end in this process, chunk after chunk (the demo's seeding,
    tests); the worker runs one chunk per task instead."""
    while audit_run_chunk(audit_id=audit_id):
        pass


def _store_chunk(audit: Audit, start: int, rows, outcomes: list[EVOutcome], checkpoint: dict,
                 needed: dict | None) -> None:
    """The chunk's outcomes (labels unflipped until the last chunk), its questions, and the
    checkpoint, in one transaction; nothing when another execution stored it first. Until
    the next chunk starts the audit is queued (waiting for a worker is not running: the
    sweeper leaves it, a cancel ends it at once)."""
    audit_id = audit.pk

    def store() -> None:
        with transaction.atomic():
            moved = Audit.objects.filter(
                pk=audit_id, status=Audit.Status.RUNNING, checkpoint__position=start).update(
                    checkpoint=checkpoint, done=checkpoint["position"],
                    heartbeat_at=timezone.now(), status=Audit.Status.QUEUED
                    if checkpoint["position"] < len(rows) else Audit.Status.RUNNING)
            if not moved:
                raise _Overtaken
            AuditOutcome.objects.bulk_create(
                (AuditOutcome(
                    audit_id=audit_id, position=start + i, item=str(o.item), success=o.success,
                    label=o.label, final_label=o.label, flipped=False,
                    challenge=None if o.challenge is None else int(o.challenge),
                    criterion=o.failure.criterion if o.failure else "", reason=o.reason,
                    reference=rows[start + i].reference,
                    rounds=[_round_row(r) for r in o.rounds])
                 for i, o in enumerate(outcomes)), batch_size=1000)
            if needed:
                questions_create(audit=audit, needed=needed)

    while_sqlite_locked(store)


def _finalize(audit: Audit, rows, flip_rng: np.random.Generator) -> None:
    """The last chunk: φ's flips over every stored outcome in order, the summary, success —
    in one transaction."""
    audit_id = audit.pk
    stored = list(AuditOutcome.objects.filter(audit_id=audit_id).order_by("position")
                  .values_list("position", "item", "success", "label", "rounds"))
    if [p for p, *_ in stored] != list(range(len(rows))):
        raise RuntimeError(f"{len(stored)} outcomes stored for {len(rows)} datapoints")
    outcomes = tuple(EVOutcome(item, success, label, tuple(_round_of(r) for r in played))
                     for _, item, success, label, played in stored)
    labels, flipped = flip_failures(outcomes, audit.phi, flip_rng)
    success = np.fromiter((o.success for o in outcomes), dtype=bool, count=len(outcomes))
    result = NoDataResult(labels, success, flipped, outcomes, audit.rounds, audit.phi)
    summary = audit_summary(result, audit.rounds, audit.phi,
                            references=[r.reference for r in rows])
    positions = np.flatnonzero(flipped).tolist()

    def store() -> None:  # one transaction, retried whole while SQLite reports a lock
        with transaction.atomic():
            for i in range(0, len(positions), 1000):
                AuditOutcome.objects.filter(
                    audit_id=audit_id, position__in=positions[i:i + 1000]).update(
                        flipped=True, final_label=1 - F("label"))
            Audit.objects.filter(pk=audit_id).update(
                status=Audit.Status.SUCCEEDED, finished_at=timezone.now(), errors=[],
                done=result.n, successes=result.successes, flips=result.flips,
                summary=summary, heartbeat_at=None)
            _finished_notice(audit_id)

    while_sqlite_locked(store)


def _finished_notice(audit_id: int) -> None:
    """audit.finished, after the commit (``core.services.notices``): its status and counts."""
    audit = Audit.objects.filter(pk=audit_id).values(
        "study_id", "status", "total", "successes", "flips").first()
    if audit is not None:
        study_notice(audit.pop("study_id"), "audit.finished", {"audit": audit_id, **audit})


def audits_sweep(*, now: dt.datetime | None = None) -> int:
    """Mark failed every running audit whose chunk stopped without ending it: no heartbeat
    for longer than Celery's hard time limit and a minute (a live chunk writes one about
    every ``PROGRESS_SECONDS`` and is killed at that limit). Returns how many."""
    now = now or timezone.now()
    stale = now - dt.timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + STALE_MARGIN_SECONDS)
    ended = 0
    for audit in Audit.objects.filter(status=Audit.Status.RUNNING, heartbeat_at__lt=stale):
        with transaction.atomic():
            if Audit.objects.filter(pk=audit.pk, status=Audit.Status.RUNNING,
                                    heartbeat_at__lt=stale).update(
                    status=Audit.Status.FAILED, finished_at=now, heartbeat_at=None,
                    errors=[f"The run stopped at {audit.done}/{audit.total} datapoints: its "
                            "worker was stopped (a time limit, a restart) and nothing carried "
                            "it on. Start the audit again."]):
                AuditOutcome.objects.filter(audit_id=audit.pk).delete()
                ended += 1
    return ended


def audit_progress(audit: Audit) -> str:
    """One line for the page: where the audit is."""
    share = f"{audit.done}/{audit.total} datapoints"
    if audit.status == Audit.Status.SUCCEEDED:
        return f"Succeeded: {audit.total}/{audit.total} datapoints, {audit.successes} successes"
    if audit.status in ACTIVE and audit.cancel_requested:
        return f"Cancelling: {share}"
    if audit.status == Audit.Status.WAITING:
        answered, asked = questions_progress(audit)
        return (f"Waiting for the specialists: {answered} of {asked} questions answered; "
                f"{audit.done}/{audit.total} datapoints decided")
    return f"{audit.get_status_display()}: {share}"
