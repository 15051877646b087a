"""What may not change once a study runs: its classes (K and every class index are part of
each routed query and of the estimators) — refused with the reason, whatever the caller."""

from __future__ import annotations

from django.db import transaction

from annotations.errors import InvalidStudy
from annotations.models import Study, StudyClass


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
