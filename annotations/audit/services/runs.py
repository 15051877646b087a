"""Starting, running and cancelling audits (issue 19; docs/audit.md).

``audit_start`` checks everything before it stores anything: the rubric (every criterion's
parameters), r, φ and the seed, the data set (uploaded JSONL or the study's items) and the
evaluator's commitments file (``estimators.nodata.commitments``: every problem named by
file, line and field, items checked against the data set and rounds against r). With any
problem it raises ``ImportFailed`` (or ``AuditRefused``) and nothing changes. Otherwise it
stores the audit, the rubric's snapshot and both files, and queues the run after commit.

``audit_run`` (the Celery task's body) runs ``estimators.nodata.no_data_algorithm`` with the
programmatic verifier on the snapshot and the imported commitments — or a registered
evaluator (``services.evaluators``: an AI system through the provider), reporting progress on
the audit row (``done`` of ``total``) and looking for a cancel request at each report; on
success it stores one ``AuditOutcome`` per datapoint and the summary, all in one
transaction. A cancelled run stores no outcome; a crashed run is recorded as failed with
the error, never as a success; so is a run whose evaluator cannot answer
(``EvaluatorUnavailable``: the provider gave up after its retries, the endpoint was refused).
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotations.audit.models import MAX_ROUNDS, Audit, AuditFile, AuditOutcome, Rubric
from annotations.audit.services.datasets import (
    datapoints_jsonl,
    parse_datapoints,
    study_datapoints,
)
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
from annotations.core.queue import task
from annotations.core.sqlite_locks import while_sqlite_locked
from estimators.nodata.algorithm import no_data_algorithm, theorem1_bound
from estimators.nodata.commitments import CommitmentsError, parse_commitments
from estimators.nodata.evaluators import CommitmentsEvaluator
from estimators.nodata.kappa import cohen_kappa
from estimators.nodata.verifiers import ProgrammaticVerifier

# the run task's registered name (annotations/audit/tasks.py; core.queue)
RUN_TASK = "annotations.audit_tasks.audit_run_task"
ACTIVE = (Audit.Status.QUEUED, Audit.Status.RUNNING, Audit.Status.WAITING)
PROGRESS_SECONDS = 0.5  # at most this long between two progress reports (and cancel checks)
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
        audit.save(update_fields=fields)
    return audit


def run_enqueue(audit_id: int) -> None:
    """Start the run's Celery task. On the embedded defaults (no broker) a web request does
    not wait for it: it runs in a thread (tests, with no debounce, run it inline) — as the
    critique AI runs do."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        if settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS > 0:
            threading.Thread(target=_run_in_thread, args=(audit_id,), daemon=True).start()
        else:
            task(RUN_TASK).apply(args=(audit_id,))
        return
    task(RUN_TASK).delay(audit_id)


def _run_in_thread(audit_id: int) -> None:
    from django.db import connections

    try:
        task(RUN_TASK).apply(args=(audit_id,))
    finally:
        connections.close_all()


def _finish(audit_id: int, status: str, errors: list[str] | None = None, **fields) -> None:
    while_sqlite_locked(lambda: Audit.objects.filter(pk=audit_id).update(
        status=status, finished_at=timezone.now(), errors=errors or [], **fields))


def _progress(audit_id: int):
    last = [time.monotonic()]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < PROGRESS_SECONDS:
            return
        last[0] = now
        while_sqlite_locked(lambda: Audit.objects.filter(pk=audit_id).update(done=done))
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


def audit_run(*, audit_id: int) -> None:
    """Run a queued audit (module docstring); safe to call twice (an ended audit is left)."""
    audit = Audit.objects.filter(pk=audit_id).first()
    if audit is None or audit.status not in ACTIVE:
        return
    if audit.cancel_requested:
        _finish(audit_id, Audit.Status.CANCELLED)
        return
    while_sqlite_locked(lambda: Audit.objects.filter(pk=audit_id).update(
        status=Audit.Status.RUNNING, done=0))
    try:
        files = AuditFile.objects.get(audit_id=audit_id)
        rows = parse_datapoints(bytes(files.datapoints), source=audit.dataset_name)
        items = [r.item for r in rows]
        human = audit.verifier == Audit.Verifier.HUMAN
        verifier = (HumanVerifier(core_rubric(audit.rubric_snapshot), answers_of(audit))
                    if human else ProgrammaticVerifier(core_rubric(audit.rubric_snapshot)))
        if audit.evaluator == Audit.Evaluator.COMMITMENTS:
            commitments = parse_commitments(bytes(files.commitments),
                                            source=audit.evaluator_name,
                                            rounds=audit.rounds, items=items)
            evaluator = CommitmentsEvaluator(commitments, source=audit.evaluator_name)
        else:
            kind = evaluator_kind(audit.evaluator)
            if kind is None:
                raise EvaluatorUnavailable(f"no evaluator {audit.evaluator!r} is registered")
            evaluator = kind.build(audit, rows)
        result = no_data_algorithm([r.x for r in rows], evaluator, verifier,
                                   rounds=audit.rounds, phi=audit.phi, seed=audit.seed,
                                   items=items, progress=_progress(audit_id))
    except _Cancelled:
        _finish(audit_id, Audit.Status.CANCELLED)
        return
    except ImportFailed as exc:
        _finish(audit_id, Audit.Status.FAILED, exc.errors[:200])
        return
    except CommitmentsError as exc:
        _finish(audit_id, Audit.Status.FAILED, exc.problems[:200])
        return
    except EvaluatorUnavailable as exc:  # e.g. the provider gave up after its retries
        _finish(audit_id, Audit.Status.FAILED, [f"evaluator: {exc}"])
        return
    except Exception as exc:  # a bug: recorded (an audit left 'running' would never end)
        _finish(audit_id, Audit.Status.FAILED, [f"{type(exc).__name__}: {exc}"])
        raise
    if human and verifier.needed:  # a wave of questions: wait for the answers
        decided = sum(1 for o in result.outcomes if o.reason != PENDING)

        def wait() -> None:
            with transaction.atomic():
                questions_create(audit=audit, needed=verifier.needed)
                Audit.objects.filter(pk=audit_id).update(status=Audit.Status.WAITING,
                                                         done=decided)

        while_sqlite_locked(wait)
        return
    summary = audit_summary(result, audit.rounds, audit.phi,
                            references=[r.reference for r in rows])

    def store() -> None:  # one transaction, retried whole while SQLite reports a lock
        with transaction.atomic():
            AuditOutcome.objects.filter(audit_id=audit_id).delete()
            AuditOutcome.objects.bulk_create(
                (AuditOutcome(
                    audit_id=audit_id, position=i, item=str(o.item), success=o.success,
                    label=o.label, final_label=result.labels[i],
                    flipped=bool(result.flipped[i]),
                    challenge=None if o.challenge is None else int(o.challenge),
                    criterion=o.failure.criterion if o.failure else "", reason=o.reason,
                    reference=rows[i].reference,
                    rounds=[_round_row(r) for r in o.rounds])
                 for i, o in enumerate(result.outcomes)), batch_size=1000)
            Audit.objects.filter(pk=audit_id).update(
                status=Audit.Status.SUCCEEDED, finished_at=timezone.now(), errors=[],
                done=result.n, successes=result.successes, flips=result.flips,
                summary=summary)

    while_sqlite_locked(store)


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
