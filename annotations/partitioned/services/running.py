"""Items whose answers the estimates count may not change or go once a partitioned study
runs: refused with the reason, whatever the caller (the classes' rule is the core's,
``core.services.studies.study_classes_change_check``)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from annotations.core.errors import InvalidStudy
from annotations.core.models import Item, Study
from annotations.partitioned.models import Query


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
    from annotations.partitioned.services.imports import study_stratum_sizes_refresh

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
