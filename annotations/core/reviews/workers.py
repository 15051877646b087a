"""Reads of the Workers page, every study type's: each worker of the study with their
answers, time per answer, gold-check accuracy (exact interval), agreement with the others'
majority where the design compares answers, skips, undos, flags, and what exclusions took
out (``estimators.numerics.workers`` computes the figures from the type's
``Reviewable.worker_answers``); and the study's exclusions with their trail.

Who: the study's researchers and managers (``workers_study``). Cost: one pass over the
study's answers per new snapshot, change of its exclusions or of its members
(:func:`_rows_key`); the reads in between — another sort, the CSV, the API, the
dashboard's compact table — are served from the cache, so a figure is as of the study's
latest estimates."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from django.core.cache import cache
from django.db.models import Count, Max, Q

from annotations.core.exclusion_models import ExcludedAnswer, Exclusion
from annotations.core.models import EstimateSnapshot, ItemFlag, Study, StudyMembership, User
from annotations.core.reviews.registry import reviewable
from annotations.core.selectors import study_for_roles
from annotations.core.services.flags import flaggable, worker_role
from annotations.core.task_models import TaskEventKind
from estimators.numerics.workers import TIME_EDGES, leave_one_out_agreement, worker_figures

Role = StudyMembership.Role
WORKERS_ROLES = (Role.RESEARCHER, Role.MANAGER)
COMPACT_ROWS = 5
ROWS_SECONDS = 300  # the rows' cache, per snapshot and exclusions


def workers_study(*, user: User, study_id: int) -> tuple[Study, bool]:
    """(the study, may the user exclude) for its researchers (who exclude) and managers
    (who read): 404 when it does not exist, NotPermitted otherwise."""
    study, roles = study_for_roles(user=user, study_id=study_id, roles=WORKERS_ROLES,
                                   refusal="Only the study's researchers and managers see "
                                           "its workers.")
    return study, Role.RESEARCHER in roles


@dataclass(frozen=True)
class WorkerRow:
    """One worker's line (module docstring). Seconds are NaN without a timed answer; the
    gold interval's ends NaN without a check; ``agreement`` None where nothing compares."""

    user_id: int
    name: str
    answers: int
    excluded: int
    worker_excluded: bool
    median_s: float
    p10_s: float
    p90_s: float
    histogram: list[int]
    gold_correct: int
    gold_n: int
    gold_lo: float
    gold_hi: float
    agree: int
    agree_n: int
    skips: int
    undos: int
    flags: int
    member: bool = True

    @property
    def gold_accuracy(self) -> float | None:
        return self.gold_correct / self.gold_n if self.gold_n else None

    @property
    def agreement(self) -> float | None:
        return self.agree / self.agree_n if self.agree_n else None

    median_or_none = property(lambda self: _num(self.median_s))
    p10_or_none = property(lambda self: _num(self.p10_s))
    p90_or_none = property(lambda self: _num(self.p90_s))
    gold_lo_or_none = property(lambda self: _num(self.gold_lo))
    gold_hi_or_none = property(lambda self: _num(self.gold_hi))

    @property
    def gold_percent(self) -> float | None:
        return None if self.gold_accuracy is None else 100 * self.gold_accuracy

    @property
    def gold_interval_percent(self) -> tuple[int, int] | None:
        """The interval in whole percent, rounded outwards (the shown interval holds the
        computed one, so it covers at least as often)."""
        if not self.gold_n:
            return None
        return math.floor(100 * self.gold_lo + 1e-9), math.ceil(100 * self.gold_hi - 1e-9)

    @property
    def agreement_percent(self) -> float | None:
        return None if self.agreement is None else 100 * self.agreement


SORTS = {
    "name": lambda r: r.name.casefold(),
    "answers": lambda r: r.answers,
    "median": lambda r: (math.isnan(r.median_s), r.median_s),
    "gold": lambda r: (r.gold_accuracy is None, r.gold_accuracy or 0.0),
    "agreement": lambda r: (r.agreement is None, r.agreement or 0.0),
    "skips": lambda r: r.skips,
    "undos": lambda r: r.undos,
    "flags": lambda r: r.flags,
    "excluded": lambda r: r.excluded,
}


def _events_by_actor(study: Study, event: str) -> dict[int, int]:
    kind = flaggable(study.kind).task_kind
    return dict(kind.event_model.objects.filter(
        **{f"{kind.event_task_field}__study": study}, kind=event, actor__isnull=False)
        .values("actor").annotate(n=Count("pk")).values_list("actor", "n").order_by())


def _rows_key(study: Study) -> str:
    """What the rows are cached under: the study (its creation, should an id come back),
    its latest snapshot (new answers make one), its exclusions' state (a new rule, an
    undo, a job done) and its members (a worker added or removed)."""
    snapshot = (EstimateSnapshot.objects.filter(study=study).order_by("-pk")
                .values_list("pk", flat=True).first())
    rules = Exclusion.objects.filter(study=study).aggregate(
        last=Max("pk"), undone=Count("undone_at"),
        applying=Count("pk", filter=Q(applying=True)))
    members = StudyMembership.objects.filter(study=study).aggregate(n=Count("pk"),
                                                                     last=Max("pk"))
    return (f"workers-rows:{study.pk}:{study.created_at.timestamp()}:{snapshot}:"
            f"{rules['last']}:{rules['undone']}:{rules['applying']}:"
            f"{members['n']}:{members['last']}")


def study_workers(*, study: Study, sort: str = "name", descending: bool = False
                  ) -> list[WorkerRow]:
    """Every worker of the study — its members of the working role, and anyone else who
    answered — as ``WorkerRow``, sorted by ``sort`` (a key of :data:`SORTS`; unknown: by
    name). Cached under :func:`_rows_key` (module docstring)."""
    key = _rows_key(study)
    rows = cache.get(key)
    if rows is None:
        rows = _worker_rows(study)
        cache.set(key, rows, ROWS_SECONDS)
    return sorted(rows, key=SORTS.get(sort, SORTS["name"]), reverse=descending)


def _worker_rows(study: Study) -> list[WorkerRow]:
    data = reviewable(study.kind).worker_answers(study)
    members = set(StudyMembership.objects.filter(study=study, role=worker_role(study))
                  .values_list("user_id", flat=True))
    compared = (data.unit >= 0) & (data.value >= 0)
    agreement = np.full(data.worker.size, np.nan)
    agreement[compared] = leave_one_out_agreement(data.unit[compared], data.value[compared])
    ids = np.array(sorted(members | set(data.worker.tolist())), dtype=np.int64)
    figures = worker_figures(data.worker, data.ms / 1000.0, data.correct, agreement,
                             workers=ids)
    names = dict(User.objects.filter(pk__in=ids.tolist()).values_list("pk", "username"))
    skips = _events_by_actor(study, TaskEventKind.SKIPPED)
    undos = _events_by_actor(study, TaskEventKind.UNDONE)
    flags = dict(ItemFlag.objects.filter(study=study).values("user")
                 .annotate(n=Count("pk")).values_list("user", "n").order_by())
    excluded = dict(ExcludedAnswer.objects.filter(study=study).values("worker")
                    .annotate(n=Count("pk")).values_list("worker", "n").order_by())
    held = set(Exclusion.objects.filter(study=study, undone_at=None,
                                        kind=Exclusion.Kind.WORKER)
               .values_list("worker_id", flat=True))
    return [WorkerRow(
        user_id=uid, name=names.get(uid, f"user {uid}"),
        answers=int(figures.answers[i]), excluded=excluded.get(uid, 0),
        worker_excluded=uid in held, median_s=float(figures.median_s[i]),
        p10_s=float(figures.p10_s[i]), p90_s=float(figures.p90_s[i]),
        histogram=figures.histogram[i].tolist(),
        gold_correct=int(figures.gold_correct[i]), gold_n=int(figures.gold_n[i]),
        gold_lo=float(figures.gold_lo[i]), gold_hi=float(figures.gold_hi[i]),
        agree=int(figures.agree[i]), agree_n=int(figures.agree_n[i]),
        skips=skips.get(uid, 0), undos=undos.get(uid, 0), flags=flags.get(uid, 0),
        member=uid in members) for i, uid in enumerate(ids.tolist())]


def compares_answers(rows: list[WorkerRow]) -> bool:
    """Whether the study's design compares answers (an agreement column to show)."""
    return any(r.agree_n for r in rows)


@dataclass(frozen=True)
class CompactWorkers:
    """The dashboard's version: how many workers answered, the answers excluded, and the
    rows most worth a look (lowest gold accuracy, then fastest median)."""

    workers: int
    excluded: int
    rows: list[WorkerRow] = field(default_factory=list)


def workers_compact(*, study: Study) -> CompactWorkers:
    """:class:`CompactWorkers`, from :func:`study_workers`' cached rows."""
    rows = [r for r in study_workers(study=study) if r.answers]
    rows.sort(key=lambda r: (r.gold_accuracy if r.gold_accuracy is not None else 2.0,
                             r.median_s if not math.isnan(r.median_s) else math.inf))
    return CompactWorkers(workers=len(rows), excluded=sum(r.excluded for r in rows),
                          rows=rows[:COMPACT_ROWS])


def study_exclusions(*, study: Study) -> list[Exclusion]:
    """The study's exclusions, newest first, with who made and undid them."""
    return list(Exclusion.objects.filter(study=study)
                .select_related("worker", "created_by", "undone_by"))


def time_bins() -> list[str]:
    """The time histogram's bin labels ("< 1 s", "1–2 s", …, "≥ 300 s")."""
    edges = [f"{e:g}" for e in TIME_EDGES]
    return ([f"< {edges[0]} s"] + [f"{a}–{b} s" for a, b in zip(edges, edges[1:], strict=False)]
            + [f"≥ {edges[-1]} s"])


def workers_csv_rows(rows: list[WorkerRow]):
    """The page's table as CSV rows (every figure, the histogram as one column per bin)."""
    bins = time_bins()
    for r in rows:
        yield {
            "worker": r.name, "member": r.member, "answers": r.answers,
            "excluded_answers": r.excluded, "worker_excluded": r.worker_excluded,
            "median_seconds": _num(r.median_s), "p10_seconds": _num(r.p10_s),
            "p90_seconds": _num(r.p90_s), "gold_correct": r.gold_correct,
            "gold_checked": r.gold_n, "gold_accuracy": r.gold_accuracy,
            "gold_lower_95": _num(r.gold_lo), "gold_upper_95": _num(r.gold_hi),
            "agreeing": r.agree, "compared": r.agree_n, "agreement": r.agreement,
            "skips": r.skips, "undos": r.undos, "flags": r.flags,
            **{f"seconds {b}": n for b, n in zip(bins, r.histogram, strict=True)},
        }


def _num(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 6)
