"""Study life cycle: create with classes, add members, open (routes items), close."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from annotations.errors import InvalidStudy
from annotations.models import Study, StudyClass, StudyMembership, User
from annotations.services.routing import items_route


@transaction.atomic
def study_create(*, name: str, classes: Sequence[str | tuple[str, str]], description: str = "",
                 queries_per_item: int = 1, lease_minutes: int = 10,
                 shuffle_options: bool = True, gold_rate: float = 0.0,
                 seed: int | None = None,
                 interval_method: str = Study.IntervalMethod.AUTO) -> Study:
    """Create a draft study with K named classes (name or (name, description) pairs)."""
    if len(classes) < 2:
        raise InvalidStudy(f"A study needs at least 2 classes (K = {len(classes)}).",
                           field="classes")
    if queries_per_item < 1:
        raise InvalidStudy("queries_per_item must be at least 1.", field="queries_per_item")
    if not 0.0 <= gold_rate <= 0.5:
        raise InvalidStudy("gold_rate must be between 0 and 0.5.", field="gold_rate")
    if interval_method not in Study.IntervalMethod.values:
        raise InvalidStudy(f"interval_method must be one of "
                           f"{', '.join(Study.IntervalMethod.values)}.", field="interval_method")
    extra = {"seed": seed} if seed is not None else {}
    study = Study.objects.create(
        name=name, description=description, queries_per_item=queries_per_item,
        lease_minutes=lease_minutes, shuffle_options=shuffle_options, gold_rate=gold_rate,
        interval_method=interval_method, **extra,
    )
    pairs = [(c, "") if isinstance(c, str) else c for c in classes]
    names = [n for n, _ in pairs]
    if len(set(names)) != len(names):
        raise InvalidStudy("Class names must be distinct.", field="classes")
    StudyClass.objects.bulk_create(
        StudyClass(study=study, index=i, name=n, description=d) for i, (n, d) in enumerate(pairs)
    )
    return study


def membership_add(*, study: Study, user: User, role: str,
                   class_index: int | None = None) -> StudyMembership:
    study_class = None
    if role == StudyMembership.Role.SPECIALIST:
        if class_index is None:
            raise InvalidStudy("A specialist needs a class.", field="class_index")
        study_class = study.classes.filter(index=class_index).first()
        if study_class is None:
            raise InvalidStudy(f"Study '{study}' has no class {class_index}.",
                               field="class_index")
    membership, _ = StudyMembership.objects.get_or_create(
        study=study, user=user, role=role, defaults={"study_class": study_class}
    )
    if role == StudyMembership.Role.RESEARCHER:
        researchers_staff_ensure(study=study)
    return membership


def researchers_staff_ensure(*, study: Study) -> int:
    """Researchers configure studies in the admin, which needs staff status: grant it to
    every researcher of ``study`` (the admin inline calls this after saving members)."""
    return User.objects.filter(
        memberships__study=study, memberships__role=StudyMembership.Role.RESEARCHER,
        is_staff=False,
    ).update(is_staff=True)


@transaction.atomic
def study_open(*, study: Study) -> int:
    """Open a study and route every item not yet routed. Returns the number routed."""
    k = study.classes.count()
    if k < 2:
        raise InvalidStudy(f"Study '{study}' has K = {k} classes; at least 2 are needed.",
                           field="classes")
    if study.status == Study.Status.CLOSED:
        raise InvalidStudy(f"Study '{study}' is closed.", field="status")
    study.status = Study.Status.OPEN
    study.opened_at = study.opened_at or timezone.now()
    study.save(update_fields=["status", "opened_at"])
    return items_route(study=study)


@transaction.atomic
def study_close(*, study: Study) -> None:
    study.status = Study.Status.CLOSED
    study.closed_at = timezone.now()
    study.save(update_fields=["status", "closed_at"])
