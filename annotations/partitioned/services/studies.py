"""Opening a partitioned study: every item not yet routed gets its queries."""

from __future__ import annotations

from django.db import transaction

from annotations.core.errors import InvalidStudy
from annotations.core.models import Study, StudyMembership, User
from annotations.core.services.studies import membership_add, study_opening
from annotations.core.words import counted
from annotations.partitioned.services.routing import items_route


@transaction.atomic
def partitioned_study_open(*, study: Study, by: User | None = None) -> int:
    """Open a draft (or re-open-route an open) partitioned study and route every item not
    yet routed. Returns the number routed. Refused for a closed study or K < 2; audited as
    every opening is (:func:`study_opening`)."""

    def classes_check(study: Study) -> None:
        k = study.classes.count()
        if k < 2:
            raise InvalidStudy(f"Study '{study}' has {counted(k, 'class')}; at least 2 "
                               "are needed.",
                               field="classes")

    return study_opening(study=study, by=by, check=classes_check,
                         first_tasks=lambda study: items_route(study=study))


def specialist_participant_join(study: Study, user: User) -> None:
    """A participant of a recruitment link joins as a specialist of the class with the
    fewest specialists (ties: the first class), so classes fill up evenly."""
    from django.db.models import Count, Q

    least = (study.classes.annotate(n=Count("specialists", filter=Q(
        specialists__role=StudyMembership.Role.SPECIALIST))).order_by("n", "index").first())
    membership_add(study=study, user=user, role=StudyMembership.Role.SPECIALIST,
                   class_index=least.index)
