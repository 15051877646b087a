"""Reads of the evaluation service: budget spent, the call log, a candidate's history."""

from __future__ import annotations

import datetime as dt

from django.db.models import Count, Q
from django.http import Http404
from django.utils import timezone

from annotations.core.models import Study, User
from annotations.core.services.studies import researcher_may_configure
from annotations.evaluation.models import EvaluationCall, EvaluationToken


def evaluation_study(*, user: User, study_id: int) -> Study:
    """The study whose evaluations ``user`` asks for; Http404 unless they research it."""
    study = Study.objects.filter(pk=study_id).first()
    if study is None or not user.is_authenticated or not researcher_may_configure(
            user=user, study=study):
        raise Http404("No such study.")
    return study


def day_start(now=None) -> dt.datetime:
    """00:00 UTC of the current day: the daily budget renews then."""
    now = (now or timezone.now()).astimezone(dt.UTC)
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def budget_spent_q(prefix: str = "") -> Q:
    """The calls that spend the daily budget: accepted search evaluations, and calls of
    either kind refused below the minimum batch (such a refusal tells something about the
    submitted items, so it is never free); other refusals and final reports spend none."""
    return (Q(**{f"{prefix}accepted": True, f"{prefix}kind": EvaluationCall.Kind.SEARCH})
            | Q(**{f"{prefix}accepted": False,
                   f"{prefix}reason__startswith": "below_min_batch:"}))


def budget_used(token: EvaluationToken, now=None) -> int:
    """Calls of ``token`` since 00:00 UTC that spend the budget (``budget_spent_q``)."""
    return token.calls.filter(budget_spent_q(), created_at__gte=day_start(now)).count()


def study_token_usage(*, study: Study) -> list[dict]:
    """Per token of ``study``: the token, today's spent budget, its calls accepted and
    rejected — one query."""
    start = day_start()
    search = budget_spent_q("calls__")
    rows = (EvaluationToken.objects.filter(study=study)
            .annotate(today=Count("calls", filter=search & Q(calls__created_at__gte=start)),
                      accepted=Count("calls", filter=Q(calls__accepted=True)),
                      rejected=Count("calls", filter=Q(calls__accepted=False))))
    return [{"token": t, "today": t.today, "left": max(0, t.daily_budget - t.today),
             "accepted": t.accepted, "rejected": t.rejected} for t in rows]


def study_calls(*, study: Study):
    """The study's call log, newest first."""
    return EvaluationCall.objects.filter(study=study).select_related("token")


def candidate_history(*, study: Study, candidate: str) -> list[dict]:
    """A candidate's accepted search submissions in order: submission number, time, token,
    the engine's score (researchers only) and the score released to the caller."""
    calls = (EvaluationCall.objects.filter(study=study, candidate=candidate, accepted=True,
                                           kind=EvaluationCall.Kind.SEARCH)
             .select_related("token").order_by("created_at", "id"))
    return [{"n": i, "at": c.created_at, "token": c.token.name, "items": c.n_used,
             "score": c.score, "released": c.released.get("score")}
            for i, c in enumerate(calls, start=1)]


def study_candidates(*, study: Study) -> list[str]:
    return list(EvaluationCall.objects.filter(study=study, accepted=True)
                .values_list("candidate", flat=True).distinct().order_by("candidate"))


def registered_candidates(*, study: Study) -> list[str]:
    """Evaluated candidates that are also AI systems of the study (registered), by name."""
    from assistants.models import AISystem

    names = set(AISystem.objects.filter(study=study).values_list("name", flat=True))
    return [name for name in study_candidates(study=study) if name in names]
