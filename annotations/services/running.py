"""What may not change once a study runs: its classes (K and every class index are part of
each routed query and of the estimators), and items whose answers the estimates count —
refused with the reason, whatever the caller."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from annotations.errors import InvalidStudy
from annotations.models import Item, Query, Study, StudyClass


def study_classes_change_check(*, study: Study, deleting: int = 0, adding: int = 0,
                               reindexing: int = 0) -> None:
    """Refuse deleting, adding or renumbering classes of a study that is not a draft
    (renaming and describing them stays allowed)."""
    if study.status == Study.Status.DRAFT or not (deleting or adding or reindexing):
        return
    k = study.classes.count()
    state = "open" if study.status == Study.Status.OPEN else "closed"
    raise InvalidStudy(
        f"The study is {state}: its classes are fixed (K = {k} is part of every routed query). "
        "Close it and start a new study to change the classes.", field="classes")


@transaction.atomic
def study_class_delete(*, study_class: StudyClass) -> None:
    """Delete a class of a draft study (its specialists' memberships go with it)."""
    study = Study.objects.select_for_update().get(pk=study_class.study_id)
    study_classes_change_check(study=study, deleting=1)
    study_class.delete()


def items_answered(items: QuerySet[Item]) -> list[str]:
    """External ids of the given items that hold an answered routed query."""
    return sorted(set(
        Query.objects.filter(item__in=items, status=Query.Status.ANSWERED,
                             is_quality_check=False).values_list("item__external_id", flat=True)))


@transaction.atomic
def items_delete(*, items: QuerySet[Item]) -> int:
    """Delete items (with their pending queries) and refresh the studies' stratum sizes; all
    or nothing. Refused when any of them holds an answered routed query: deleting the item
    would delete labels the estimates count (close the study instead). Returns how many
    items were deleted."""
    from annotations.services.imports import study_stratum_sizes_refresh

    answered = items_answered(items)
    if answered:
        shown = ", ".join(f"'{i}'" for i in answered[:5]) + (" …" if len(answered) > 5 else "")
        raise InvalidStudy(
            f"{len(answered)} of these items have answered queries ({shown}): their labels "
            "are part of the estimates, so they cannot be deleted. Close the study instead.",
            field="items")
    studies = list(Study.objects.filter(items__in=items).distinct())
    deleted = Item.objects.filter(pk__in=list(items.values_list("pk", flat=True))).delete()
    for study in studies:
        study_stratum_sizes_refresh(study=study)
    return deleted[1].get(Item._meta.label, 0)
