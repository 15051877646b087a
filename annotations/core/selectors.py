"""Reads every study type shares (querysets and plain dataclasses for views, API, tasks):
roles and permissions, the user's studies, classes and events, snapshots, recompute
health, items and import jobs. Each study type reads its own in ``<type>/selectors.py``."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from annotations.core.events import StudyEvent
from annotations.core.models import (
    EstimateSnapshot,
    Item,
    ItemFlag,
    RecomputeState,
    Study,
    StudyClass,
    StudyMembership,
    User,
)
from annotations.core.task_models import TaskStatus

Role = StudyMembership.Role
DASHBOARD_ROLES = (Role.RESEARCHER, Role.MANAGER)


# --- permissions -------------------------------------------------------------------------
def researched_study_ids(*, user: User) -> set[int] | None:
    """The studies the user researches (configures); None means every study (superuser)."""
    if user.is_superuser:
        return None
    return set(StudyMembership.objects.filter(user=user, role=Role.RESEARCHER)
               .values_list("study_id", flat=True))


def user_roles(*, user: User, study: Study) -> set[str]:
    """Roles the user holds in the study; superusers are researchers everywhere."""
    if not user.is_authenticated:
        return set()
    roles = set(
        StudyMembership.objects.filter(study=study, user=user).values_list("role", flat=True)
    )
    if user.is_superuser:
        roles.add(Role.RESEARCHER)
    return roles


def study_for_roles(*, user: User, study_id: int, roles, refusal: str
                    ) -> tuple[Study, set[str]]:
    """(the study, the user's roles in it) when the user holds one of ``roles`` there: 404
    when no such study exists, ``NotPermitted(refusal)`` (403) otherwise. The pages and
    endpoints of one role group (review, workers, payments) start here."""
    from django.shortcuts import get_object_or_404

    from annotations.core.errors import NotPermitted

    study = get_object_or_404(Study, pk=study_id)
    held = user_roles(user=user, study=study)
    if not held & set(roles):
        raise NotPermitted(refusal)
    return study, held


def user_can_view_dashboard(*, user: User, study: Study) -> bool:
    return bool(user_roles(user=user, study=study) & set(DASHBOARD_ROLES))


def studies_for_user(*, user: User) -> list[tuple[Study, set[str], StudyMembership | None]]:
    """(study, roles, specialist membership) for every study the user belongs to."""
    memberships = StudyMembership.objects.filter(user=user).select_related("study", "study_class")
    by_study: dict[int, tuple[Study, set[str], StudyMembership | None]] = {}
    for m in memberships:
        study, roles, spec = by_study.get(m.study_id, (m.study, set(), None))
        roles.add(m.role)
        if m.role == Role.SPECIALIST:
            spec = m
        by_study[m.study_id] = (study, roles, spec)
    if user.is_superuser:
        for study in Study.objects.exclude(pk__in=by_study):
            by_study[study.pk] = (study, {Role.RESEARCHER}, None)
        for _study, roles, _ in by_study.values():
            roles.add(Role.RESEARCHER)
    return sorted(by_study.values(), key=lambda t: t[0].name)


def study_name_taken(*, name: str, created_by: User | None,
                     exclude_pk: int | None = None) -> bool:
    """Whether ``created_by`` already has a study of this name (studies without a creator:
    another one without a creator). Names are unique per creator only: whether another
    researcher uses a name is never asked, so never told."""
    studies = Study.objects.filter(name=name, created_by=created_by)
    return studies.exclude(pk=exclude_pk).exists() if exclude_pk else studies.exists()


def username_look_alikes(*, names, exclude_pk: int | None = None) -> dict[str, User]:
    """Accounts whose user name a reader cannot tell from one of ``names`` (the same
    ``username_key``: NFKC, confusables skeleton, case), by key — one query."""
    from annotations.core.usernames import username_key

    users = User.objects.filter(username_key__in={username_key(n) for n in names})
    if exclude_pk is not None:
        users = users.exclude(pk=exclude_pk)
    return {u.username_key: u for u in users.order_by("pk")}


def row_id_possible(row_id: int) -> bool:
    """Whether a database row can have this id (ids come from URLs; SQLite refuses integers
    beyond 64 bits, and foreign-key lookups are not range-checked by Django)."""
    return 0 < row_id < 2**63


def study_events(*, study: Study) -> list[StudyEvent]:
    """The study's audit trail (opened, closed…), oldest first, with the actors."""
    return list(StudyEvent.objects.filter(study=study).select_related("actor")
                .order_by("at", "pk"))


def study_classes(*, study: Study) -> list[StudyClass]:
    return list(study.classes.order_by("index"))


def study_has_answers(*, study: Study) -> bool:
    """Whether any task of the study (a query, a rating task or a critique task) was
    answered: its record, which is never deleted with the study."""
    return any(tasks.filter(status=TaskStatus.ANSWERED).exists()  # one TaskStatus for all
               for tasks in (study.queries, study.rating_tasks, study.critique_tasks))


# --- snapshots ------------------------------------------------------------------------------
def study_latest_snapshot(*, study: Study) -> EstimateSnapshot | None:
    return EstimateSnapshot.objects.filter(study=study).order_by("-computed_at", "-id").first()


def study_snapshot_history(*, study: Study, limit: int = 200) -> list[EstimateSnapshot]:
    snaps = list(
        EstimateSnapshot.objects.filter(study=study).order_by("-computed_at", "-id")[:limit]
    )
    return snaps[::-1]


# --- recompute health -----------------------------------------------------------------------
# A study's figures are stale once answers have waited this long for a snapshot.
STALE_AFTER = dt.timedelta(seconds=60)


@dataclass(frozen=True)
class RecomputeHealth:
    """Whether a study's latest snapshot can be trusted to be current.

    ``stale`` when the last recompute failed (``failed_at``, ``error``: the exception's
    type and first line) or when answers have waited longer than ``STALE_AFTER`` for a
    snapshot; ``stale_since`` is when the figures stopped including every answer (the
    failure's time when no answer is waiting)."""

    stale: bool = False
    stale_since: dt.datetime | None = None
    behind_since: dt.datetime | None = None
    failed_at: dt.datetime | None = None
    error: str = ""

    @property
    def token(self) -> str:
        """Changes whenever what the dashboard says about health changes (its poll URL)."""
        if self.failed_at is not None:
            return f"f{self.failed_at.timestamp():.0f}"
        return f"s{self.stale_since.timestamp():.0f}" if self.stale else "ok"


def _health(state: RecomputeState | None, now: dt.datetime) -> RecomputeHealth:
    if state is None:
        return RecomputeHealth()
    if state.failed_at is not None:
        return RecomputeHealth(stale=True, stale_since=state.dirty_since or state.failed_at,
                               behind_since=state.dirty_since, failed_at=state.failed_at,
                               error=state.error)
    if state.dirty_since is not None and now - state.dirty_since > STALE_AFTER:
        return RecomputeHealth(stale=True, stale_since=state.dirty_since,
                               behind_since=state.dirty_since)
    return RecomputeHealth(behind_since=state.dirty_since)


def study_recompute_health(*, study: Study, now: dt.datetime | None = None) -> RecomputeHealth:
    state = RecomputeState.objects.filter(study=study).first()
    return _health(state, now or timezone.now())


def stale_studies(*, now: dt.datetime | None = None) -> list[tuple[Study, RecomputeHealth]]:
    """Every study whose figures are stale (for /healthz), oldest first."""
    now = now or timezone.now()
    states = (RecomputeState.objects.select_related("study")
              .filter(Q(failed_at__isnull=False) | Q(dirty_since__lt=now - STALE_AFTER)))
    rows = [(state.study, _health(state, now)) for state in states]
    return sorted(rows, key=lambda r: (r[1].stale_since, r[0].pk))


def study_items(*, study: Study) -> QuerySet[Item]:
    return Item.objects.filter(study=study).order_by("pk")


# --- import jobs -----------------------------------------------------------------------------
# The bar's percent at the end of reading the file and at the end of writing (bench_imports:
# reading is about a quarter of an import's time); committing shows 99, success 100.
IMPORT_READ_PERCENT = 25
IMPORT_WRITTEN_PERCENT = 98


@dataclass(frozen=True)
class ImportJobProgress:
    """What the job page and the API show of a job's progress. ``percent`` runs over the
    phases (reading: 0 to 25, writing: 25 to 98, committing: 99); None for a failed job."""

    status: str
    phase: str
    done: int
    total: int
    percent: int | None


def import_job_progress(*, job) -> ImportJobProgress:
    """A job's progress: its row, or — SQLite, while it runs — the figures its runner keeps
    in the cache (the import's transaction holds the database's write lock there)."""
    from django.core.cache import cache

    from annotations.core.models import ImportJob

    phase, done, total = job.phase, job.done, job.total
    if job.status == ImportJob.Status.RUNNING and connection.vendor != "postgresql":
        try:
            cached = cache.get(progress_key(job.pk))
        except Exception:  # noqa: BLE001 - Redis down: the row's figures
            cached = None
        if cached:
            phase, done, total = cached
    done = min(done, total) if total else done
    if job.status == ImportJob.Status.SUCCEEDED:
        percent = 100
    elif job.status == ImportJob.Status.FAILED:
        percent = None
    else:
        share = done / total if total else 0.0
        if phase == "reading":
            percent = round(IMPORT_READ_PERCENT * share)
        elif phase == "writing":
            percent = round(IMPORT_READ_PERCENT
                            + (IMPORT_WRITTEN_PERCENT - IMPORT_READ_PERCENT) * share)
        elif phase == "committing":
            percent = 99
        else:
            percent = 0
    return ImportJobProgress(status=job.status, phase=phase, done=done, total=total,
                             percent=percent)


def study_import_jobs(*, study: Study, kind: str | None = None) -> QuerySet:
    """The study's import jobs, newest first (without their files)."""
    from annotations.core.models import ImportJob

    jobs = ImportJob.objects.filter(study=study).select_related("created_by")
    return jobs.filter(kind=kind) if kind else jobs


def progress_key(job_id: int) -> str:
    return f"import-progress:{job_id}"


# --- flags -------------------------------------------------------------------------------
@dataclass(frozen=True)
class FlagCounts:
    """Items of a study by the state of their flags: ``open`` items have an open flag and
    still count in the estimates; ``withdrawn`` items are left out of them."""

    open: int
    withdrawn: int


def study_flag_counts(*, study: Study) -> FlagCounts:
    rows = dict(ItemFlag.objects.filter(study=study, resolution__in=[
        ItemFlag.Resolution.OPEN, ItemFlag.Resolution.WITHDRAWN])
        .values("resolution").annotate(n=Count("item_id", distinct=True))
        .values_list("resolution", "n").order_by())
    return FlagCounts(open=rows.get(ItemFlag.Resolution.OPEN, 0),
                      withdrawn=rows.get(ItemFlag.Resolution.WITHDRAWN, 0))


def study_flags(*, study: Study) -> QuerySet[ItemFlag]:
    """The study's flags, open first then newest (``ItemFlag.Meta.ordering``), with their
    authors."""
    return ItemFlag.objects.filter(study=study).select_related("user").order_by(
        "resolution", "-updated_at", "-id")


def item_external_ids(item_model, pks) -> dict[int, str]:
    """{primary key: id in the study} of a study type's items (``item_model``: the
    flaggable's ``Item``, ``Sentence`` or ``CritiqueQuestion``), one query."""
    return dict(item_model.objects.filter(pk__in=set(pks)).values_list("pk", "external_id"))


def flag_rows(flags: list[ItemFlag], item_model) -> list[dict]:
    """The API's rows of ``flags`` (one page): each item named by its id in the study (the
    study type's ``item_model``, one query per page)."""
    ids = item_external_ids(item_model, (f.item_id for f in flags))
    return [{"item": ids.get(f.item_id, str(f.item_id)), "reason": f.reason, "note": f.note,
             "flagged_by": f.user.username, "flagged_at": f.updated_at,
             "resolution": f.resolution, "resolved_at": f.resolved_at} for f in flags]


def study_memberships(*, study: Study) -> QuerySet[StudyMembership]:
    """The study's members by role and name, with their accounts and classes."""
    return (StudyMembership.objects.filter(study=study).select_related("user", "study_class")
            .order_by("role", "user__username"))
