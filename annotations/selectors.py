"""Every read of the annotations app: querysets and plain dataclasses for views, API, tasks."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
from django.db import connection
from django.db.models import Case, Count, F, IntegerField, Q, QuerySet, Sum, When
from django.utils import timezone

from annotations.models import (
    EstimateSnapshot,
    Item,
    Query,
    QuerySkip,
    RecomputeState,
    Study,
    StudyClass,
    StudyMembership,
    User,
)

Role = StudyMembership.Role
DASHBOARD_ROLES = (Role.RESEARCHER, Role.MANAGER)


# --- permissions -------------------------------------------------------------------------
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


def specialist_membership(*, user: User, study: Study) -> StudyMembership | None:
    return (
        StudyMembership.objects.select_related("study_class")
        .filter(user=user, study=study, role=Role.SPECIALIST)
        .first()
    )


def study_classes(*, study: Study) -> list[StudyClass]:
    return list(study.classes.order_by("index"))


# --- the specialist's view of a query (hidden information filtered here) --------------------
@dataclass(frozen=True)
class QueryForSpecialist:
    """Exactly what a specialist may see: no gold label, no AI prediction, no other answers,
    and nothing that tells a quality check from a routed query (``id`` is the random public
    id, never the database id)."""

    id: str
    study_id: int
    item_text: str
    options: list[tuple[str, str]]  # (class name = position label, option text)
    class_index: int
    class_name: str
    class_description: str
    lease_expires_at: object
    issued_at: object


def query_for_specialist(*, query: Query, study: Study | None = None) -> QueryForSpecialist:
    """The specialist's view of ``query`` (pass its study if at hand: one query fewer)."""
    item = Item.objects.only("text", "options", "option_order").get(pk=query.item_id)
    classes = study_classes(study=study if study is not None else query.study)
    names = [c.name for c in classes]
    asked = classes[query.k]
    return QueryForSpecialist(
        id=query.public_id,
        study_id=query.study_id,
        item_text=item.text,
        options=list(zip(names, item.displayed_options(names), strict=True)),
        class_index=query.k,
        class_name=asked.name,
        class_description=asked.description,
        lease_expires_at=query.lease_expires_at,
        issued_at=query.issued_at,
    )


def specialist_progress(*, user: User, study: Study, since=None) -> dict[str, int]:
    """What the labelling page counts: ``answered`` (all of this user's answers in the
    study), ``session`` (those since ``since``) and ``remaining`` in their class.

    ``remaining`` = pending routed queries of the class − quality checks of the class that
    are leased or answered, floored at 0. Quality checks are made on demand, outside the
    pool; counted this way a check moves the figure exactly as a routed query does (−1 when
    handed out, 0 when answered, +1 when skipped or expired), so it cannot be recognised by
    it. The price: the figure undercounts the pool by the checks issued so far."""
    membership = specialist_membership(user=user, study=study)
    answered = Query.objects.filter(study=study, answered_by=user)
    session = answered.filter(answered_at__gte=since) if since is not None else answered
    remaining = 0
    if membership is not None:
        counts = Query.objects.filter(study=study, k=membership.study_class.index).aggregate(
            pending=Count("id", filter=Q(status=Query.Status.PENDING, is_quality_check=False)),
            checks=Count("id", filter=Q(is_quality_check=True)
                         & ~Q(status=Query.Status.PENDING)),
        )
        remaining = max(0, counts["pending"] - counts["checks"])
    return {"answered": answered.count(), "session": session.count(), "remaining": remaining}


# --- counts for the estimators -------------------------------------------------------------
@dataclass(frozen=True)
class LabelCounts:
    """Answered, non-quality-check queries grouped by (stratum, class k, answer).

    ``n[g]`` queries in group g; ``match[g, s]`` of them where system s predicted class k;
    ``present[g, s]`` where system s gave a parseable prediction."""

    strata: np.ndarray
    k: np.ndarray
    answer: np.ndarray
    n: np.ndarray
    match: np.ndarray
    present: np.ndarray


def study_label_counts(*, study: Study, ordinals: list[int]) -> LabelCounts:
    """One SQL aggregation over the study's answered queries (bit sums over the masks)."""
    aggregates = {}
    for o in ordinals:
        aggregates[f"m{o}"] = Sum(F("match_mask").bitrightshift(o).bitand(1))
        aggregates[f"p{o}"] = Sum(F("present_mask").bitrightshift(o).bitand(1))
    rows = list(
        Query.objects.filter(study=study, status=Query.Status.ANSWERED, is_quality_check=False)
        .values("stratum", "k", "answer")
        .annotate(n=Count("id"), **aggregates)
        .order_by("stratum", "k", "answer")
    )
    g = len(rows)
    match = np.zeros((g, len(ordinals)))
    present = np.zeros((g, len(ordinals)))
    for i, row in enumerate(rows):
        for j, o in enumerate(ordinals):
            match[i, j] = float(row[f"m{o}"] or 0)
            present[i, j] = float(row[f"p{o}"] or 0)
    return LabelCounts(
        strata=np.array([r["stratum"] for r in rows], dtype=object),
        k=np.array([r["k"] for r in rows], dtype=int),
        answer=np.array([r["answer"] for r in rows], dtype=object),
        n=np.array([r["n"] for r in rows], dtype=float),
        match=match,
        present=present,
    )


@dataclass(frozen=True)
class ItemLabels:
    """Every answered 'yes'/'no' query of a study (labels on axis 0), for the item-clustered
    variance: the label's item as an index 0..n_items−1, its class k and answer, and per AI
    system (columns, in ``ordinals`` order) the bits of its masks."""

    item: np.ndarray
    n_items: int
    item_strata: np.ndarray  # stratum of each item
    k: np.ndarray
    yes: np.ndarray  # bool: 'yes' (else 'no')
    match: np.ndarray  # (labels, systems) 0/1
    present: np.ndarray


def study_item_labels(*, study: Study, ordinals: list[int]) -> ItemLabels:
    """The study's answered 'yes'/'no' queries (quality checks excluded) as integer arrays
    read straight from the cursor (a list of int tuples becomes one numpy array in C), mask
    bits unpacked in numpy; each item's stratum from a second, distinct query."""
    answered = Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                    is_quality_check=False,
                                    answer__in=[Query.Answer.YES, Query.Answer.NO])
    labels = (answered.annotate(is_yes=Case(When(answer=Query.Answer.YES, then=1), default=0,
                                    output_field=IntegerField()))
              .values_list("item_id", "k", "is_yes", "match_mask", "present_mask")
              .order_by())
    sql, params = labels.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    data = np.array(rows, dtype=np.int64).reshape(-1, 5)
    items, index = np.unique(data[:, 0], return_inverse=True)
    # the stratum the counts use (the query's copy of its item's)
    strata = dict(answered.values_list("item_id", "stratum").distinct().order_by())
    bits = np.array(ordinals, dtype=np.int64)
    return ItemLabels(
        item=index.ravel(), n_items=len(items),
        item_strata=np.array([strata.get(int(i), "") for i in items], dtype=object),
        k=data[:, 1].astype(int), yes=data[:, 2] == 1,
        match=((data[:, 3:4] >> bits) & 1).astype(np.int8),
        present=((data[:, 4:5] >> bits) & 1).astype(np.int8),
    )


def study_first_query_answers(*, study: Study) -> dict[int, dict[str, int]]:
    """Per class: answers to the *first* query of each item (quality checks excluded) — the
    queries whose class is drawn uniformly whatever came before (the yes-share check)."""
    out: dict[int, dict[str, int]] = {}
    for row in (Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                     is_quality_check=False, sequence=0)
                .values("k", "answer").annotate(n=Count("id")).order_by()):
        out.setdefault(row["k"], {})[row["answer"]] = row["n"]
    return out


@dataclass
class ClassProgress:
    index: int
    name: str
    yes: int = 0
    no: int = 0
    unsure: int = 0
    pending: int = 0
    leased: int = 0
    specialists: int = 0
    skipped: int = 0  # hand-backs (a query skipped by two specialists counts twice)

    @property
    def answered(self) -> int:
        return self.yes + self.no + self.unsure

    @property
    def routed(self) -> int:
        return self.answered + self.pending + self.leased

    @property
    def completion_rate(self) -> float | None:
        return self.answered / self.routed if self.routed else None

    @property
    def abstention_rate(self) -> float | None:
        return self.unsure / self.answered if self.answered else None

    @property
    def skip_rate(self) -> float | None:
        """Share of the class's specialists' decisions that were skips: skipped /
        (answered + skipped); None before any."""
        decided = self.answered + self.skipped
        return self.skipped / decided if decided else None


def study_class_progress(*, study: Study) -> list[ClassProgress]:
    """Per class: ordinary (yes), complementary (no), abstained, pending and leased queries,
    and skips (quality checks excluded throughout)."""
    classes = {
        c.index: ClassProgress(index=c.index, name=c.name) for c in study_classes(study=study)
    }
    rows = (
        Query.objects.filter(study=study, is_quality_check=False)
        .values("k", "status", "answer")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        cp = classes.get(row["k"])
        if cp is None:
            continue
        if row["status"] == Query.Status.ANSWERED:
            setattr(cp, row["answer"], getattr(cp, row["answer"]) + row["n"])
        else:
            setattr(cp, row["status"], getattr(cp, row["status"]) + row["n"])
    for row in (
        StudyMembership.objects.filter(study=study, role=Role.SPECIALIST)
        .values("study_class__index")
        .annotate(n=Count("id"))
        .order_by()
    ):
        classes[row["study_class__index"]].specialists = row["n"]
    for row in (
        QuerySkip.objects.filter(study=study, is_quality_check=False)
        .values("k").annotate(n=Count("id")).order_by()
    ):
        if row["k"] in classes:
            classes[row["k"]].skipped = row["n"]
    return [classes[i] for i in sorted(classes)]


@dataclass
class QualityRow:
    label: str
    correct: int = 0
    wrong: int = 0
    unsure: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def accuracy(self) -> float | None:
        n = self.correct + self.wrong
        return self.correct / n if n else None


def quality_check_summary(*, study: Study) -> tuple[list[QualityRow], list[QualityRow]]:
    """Accuracy on interleaved gold items, per specialist and per class (researchers only)."""
    base = Query.objects.filter(study=study, is_quality_check=True, status=Query.Status.ANSWERED)
    agg = {
        "correct": Count("id", filter=Q(qc_correct=True)),
        "wrong": Count("id", filter=Q(qc_correct=False)),
        "unsure": Count("id", filter=Q(answer=Query.Answer.UNSURE)),
    }
    names = {c.index: c.name for c in study_classes(study=study)}
    per_user = [
        QualityRow(
            label=r["answered_by__username"],
            correct=r["correct"],
            wrong=r["wrong"],
            unsure=r["unsure"],
            extra={"class": names.get(r["k"], "")},
        )
        for r in base.values("answered_by__username", "k")
        .annotate(**agg)
        .order_by("answered_by__username")
    ]
    per_class = [
        QualityRow(
            label=names.get(r["k"], str(r["k"])),
            correct=r["correct"],
            wrong=r["wrong"],
            unsure=r["unsure"],
        )
        for r in base.values("k").annotate(**agg).order_by("k")
    ]
    return per_user, per_class


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


# --- the researcher's study page -----------------------------------------------------------
@dataclass(frozen=True)
class SetupChecklist:
    """What a study has and lacks before (and while) it runs: the study page's checklist and
    the open confirmation. ``missing`` holds plain-language warnings, empty when ready."""

    status: str
    classes: list[tuple[str, int]]  # (class name, specialists)
    managers: int
    items: int
    quality_checks: int
    routed: int
    systems: int
    missing: list[str] = field(default_factory=list)


def study_setup_checklist(*, study: Study) -> SetupChecklist:
    from assistants.models import AISystem

    classes = list(study.classes.order_by("index").annotate(
        n=Count("specialists", filter=Q(specialists__role=Role.SPECIALIST))))
    items = Item.objects.filter(study=study).aggregate(
        items=Count("id", filter=Q(is_quality_check=False)),
        checks=Count("id", filter=Q(is_quality_check=True)),
        routed=Count("id", filter=Q(routed_at__isnull=False)))
    managers = StudyMembership.objects.filter(study=study, role=Role.MANAGER).count()
    systems = AISystem.objects.filter(study=study).count()
    missing = []
    if len(classes) < 2:
        missing.append(f"at least 2 classes (has {len(classes)})")
    empty = [c.name for c in classes if not c.n]
    if empty:
        missing.append("a specialist for class " + ", ".join(empty))
    if not items["items"]:
        missing.append("items (Import items)")
    if not systems:
        missing.append("AI systems (Import AI predictions)")
    if not managers:
        missing.append("a manager to read the dashboard")
    return SetupChecklist(status=study.status, classes=[(c.name, c.n) for c in classes],
                          managers=managers, items=items["items"],
                          quality_checks=items["checks"], routed=items["routed"],
                          systems=systems, missing=missing)
