"""Studies of every type with answers, for the review tests (``core.reviews``)."""

from __future__ import annotations

import json

from django.db import transaction

from annotations.assisted.services.rating import RatingInput, rating_lease_next, rating_submit
from annotations.core.services.recompute import study_recompute_any
from annotations.core.services.studies import membership_add
from annotations.models import CritiqueOutput, Query, Rating, Study, StudyMembership
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.annotations.assisted.helpers import add_rater, make_assisted_study
from tests.annotations.critique.helpers import answer_next, make_critique_study
from tests.factories import UserFactory, make_study, specialist


def reviewer_of(study, name: str | None = None):
    user = UserFactory(username=name or f"{study.pk}-reviewer")
    membership_add(study=study, user=user, role=StudyMembership.Role.REVIEWER)
    return user


def researcher_of(study):
    """The study's researcher (the builders make one for partitioned and assisted studies;
    added here for critique studies)."""
    from annotations.core.models import User

    found = User.objects.filter(username=f"{study.pk}-researcher").first()
    if found is not None:
        return found
    user = UserFactory(username=f"{study.pk}-researcher", is_staff=True)
    membership_add(study=study, user=user, role=StudyMembership.Role.RESEARCHER)
    return user


def partitioned_answered():
    """A partitioned study (K = 2, one query per item, an AI system) whose queries are all
    answered; (study, its answers' model, the answer ids)."""
    study = make_study(k=2, n_items=8, systems={"sys": 0.75})
    for c in (0, 1):
        user = specialist(study, c)
        n = 0
        while (q := query_lease_next(study=study, user=user)) is not None:
            label_submit(query_id=q.pk, user=user, answer="yes" if n % 3 else "no")
            n += 1
    ids = list(Query.objects.filter(study=study, status="answered", is_quality_check=False)
               .order_by("pk").values_list("pk", flat=True))
    return study, Query, ids


def assisted_answered():
    """An assisted study whose sentences two raters rated, disagreeing on the first."""
    study = make_assisted_study(n_sentences=4, ratings_per_item=2)
    for j in range(2):
        rater = add_rater(study)
        n = 0
        while (task := rating_lease_next(study=study, user=rater)) is not None:
            label = "inaccurate" if (j == 1 and n == 0) else ("accurate" if n % 2 else
                                                            "unsupported")
            rating_submit(user=rater, public_id=task.public_id,
                          data=RatingInput(label, 2))
            n += 1
    ids = list(Rating.objects.filter(study=study).order_by("pk").values_list("pk", flat=True))
    return study, Rating, ids


def critique_answered():
    """A critique study (levels 0 and 1) answered by its annotators, finals varying."""
    study, users = make_critique_study(n_questions=3, top_level=1)
    researcher_of(study)
    for j, user in enumerate(users):
        n = 0
        while answer_next(study, user, final=(j + n) % 3, choice="first" if n % 2 else
                          "second", reasoning=f"reasoning {j}-{n}")[0] is not None:
            n += 1
    ids = list(CritiqueOutput.objects.filter(study=study, author_kind="human", level=0)
               .order_by("pk").values_list("pk", flat=True))
    return study, CritiqueOutput, ids


class _Rollback(Exception):
    pass


def estimates_of(study: Study) -> str:
    """The study's recomputed payload, without what differs from one run to the next and
    the progress counts (answers given, left out or not: partitioned per class, critique
    per level)."""
    payload = study_recompute_any(study_id=study.pk).payload
    for key in ("duration_ms", "computed_at", "timings"):
        payload.pop(key, None)
    if study.kind == Study.Kind.PARTITIONED:
        payload.pop("n_answered")
        payload.pop("classes")
    if study.kind == Study.Kind.CRITIQUE:
        payload.pop("progress")
    return json.dumps(payload, sort_keys=True, default=str)


def estimates_without(study: Study, model, answer_ids: list[int]) -> str:
    """The estimates computed with the answers deleted (rolled back afterwards): what
    leaving them out — a rejection, an exclusion — must give."""
    out = {}
    try:
        with transaction.atomic():
            model.objects.filter(pk__in=answer_ids).delete()
            out["estimates"] = estimates_of(study)
            raise _Rollback
    except _Rollback:
        pass
    return out["estimates"]
