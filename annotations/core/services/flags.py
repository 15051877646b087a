"""Flags on items, one mechanism for every study type: a labeller flags the item of a task
they were shown as broken or ambiguous (``flag_item``); a researcher resolves the item's
open flags as fixed, dismissed or withdrawn (``flag_resolve``).

Each study type registers what its item is (``flaggable_register`` in its ``hooks.py``):
its task kind (whose ``item_field`` names the task's item), the item's model, its noun and
where a researcher edits it. A withdrawn item is passed over by the engine's lease statement
and left out of the type's estimates (each type's analysis filters
``ItemFlag.withdrawn_ids``); withdrawing recomputes the study.

Labellers name the task by the public id they were shown, never an item's database id, so
no one can probe ids: a task they were never issued gets the same answer as one that does
not exist."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import models, transaction
from django.utils import timezone

from annotations.core.engine import TaskKind
from annotations.core.errors import DomainError, NotPermitted
from annotations.core.models import ItemFlag, Study, StudyMembership, User
from annotations.core.selectors import item_external_ids, user_roles
from annotations.core.services.notices import study_notice
from annotations.core.services.recompute import study_recompute_schedule
from annotations.core.services.studies import study_roles
from annotations.core.task_models import TaskEventKind


class UnknownTask(DomainError):
    """The task is not one the caller was shown (or does not exist: the same answer)."""

    code = "unknown_task"
    http_status = 404


class InvalidFlag(DomainError):
    code = "invalid_flag"


@dataclass(frozen=True)
class Flaggable:
    """A study type's item, for flags. ``task_kind.item_field`` is the task's foreign key to
    it; ``noun`` is the labellers' word (item, sentence, question); ``text(item)`` what the
    researchers' queue shows of it; ``edit_url(item)`` where it is corrected (None: nowhere
    in the site)."""

    task_kind: TaskKind
    item_model: type[models.Model]
    noun: str
    text: Callable[[Any], str]
    edit_url: Callable[[Any], str | None] = lambda item: None


_FLAGGABLE: dict[str, Flaggable] = {}


def flaggable_register(kind: str, flaggable: Flaggable) -> None:
    """Make items of studies of ``kind`` flaggable (called from the type's ``hooks.py``)."""
    if not flaggable.task_kind.item_field:
        raise ValueError(f"Task kind {flaggable.task_kind.name} names no item_field.")
    _FLAGGABLE[kind] = flaggable


def flaggable(kind: str) -> Flaggable:
    return _FLAGGABLE[kind]


def worker_role(study: Study) -> str:
    """The role whose members do the study's work (and so may flag its items)."""
    return study_roles(study.kind)[0][0]


def _shown_item_id(study: Study, user: User, public_id: str) -> int:
    """The item of the task ``public_id`` of ``study`` that ``user`` holds or was issued
    (its audit trail has their ``issued`` row); UnknownTask otherwise, whether or not it
    exists."""
    kind = flaggable(study.kind).task_kind
    task = (kind.model.objects.filter(study=study, public_id=str(public_id)[:64])
            .only("pk", "holder_id", "answered_by_id", f"{kind.item_field}_id").first())
    shown = task is not None and (
        user.pk in (task.holder_id, task.answered_by_id)
        or kind.event_model.objects.filter(**{kind.event_task_field: task},
                                           kind=TaskEventKind.ISSUED, actor=user).exists())
    if not shown:
        raise UnknownTask(f"No task '{public_id}' of yours in this study.", field="task")
    return getattr(task, f"{kind.item_field}_id")


@transaction.atomic
def flag_item(*, study: Study, user: User, public_id: str, reason: str,
              note: str = "") -> tuple[ItemFlag, bool]:
    """Flag the item of the task ``public_id`` as ``reason`` (broken / ambiguous) with an
    optional ``note``, for ``user``, a worker of ``study`` (specialist, rater, annotator)
    who holds or was shown the task. A second flag of the same person on the same item
    rewrites the first (reason, note) and reopens it if it was fixed or dismissed; a
    withdrawn item stays withdrawn (a new flag on it is born withdrawn). Returns (flag, created).

    Refusals: NotPermitted (not a worker of the study), UnknownTask (not a task they were
    shown), InvalidFlag (reason or note)."""
    role = worker_role(study)
    if not StudyMembership.objects.filter(study=study, user=user, role=role).exists():
        raise NotPermitted("Only the study's labellers flag its items.")
    if reason not in ItemFlag.Reason.values:
        raise InvalidFlag(f"Choose a reason: {' or '.join(ItemFlag.Reason.values)}.",
                          field="reason")
    note = (note or "").strip()
    if len(note) > ItemFlag.NOTE_MAX:
        raise InvalidFlag(f"The note has {len(note)} characters; at most "
                          f"{ItemFlag.NOTE_MAX}.", field="note")
    item_id = _shown_item_id(study, user, public_id)
    flag = (ItemFlag.objects.select_for_update()
            .filter(study=study, item_id=item_id, user=user).first())
    if flag is None:
        withdrawn = ItemFlag.objects.filter(study=study, item_id=item_id,
                                            resolution=ItemFlag.Resolution.WITHDRAWN)
        state = ({"resolution": ItemFlag.Resolution.WITHDRAWN, "resolved_at": timezone.now()}
                 if withdrawn.exists() else {})
        flag = ItemFlag.objects.create(study=study, item_id=item_id, user=user,
                                       reason=reason, note=note, **state)
        # the item's id in the study and the reason; not the note (free text of a worker)
        study_notice(study.pk, "flag.raised", {
            "item": item_external_ids(flaggable(study.kind).item_model, [item_id]).get(
                item_id, ""), "reason": reason,
            "open_flags": ItemFlag.objects.filter(
                study=study, resolution=ItemFlag.Resolution.OPEN).count()})
        return flag, True
    flag.reason, flag.note = reason, note
    fields = ["reason", "note", "updated_at"]
    if flag.resolution in (ItemFlag.Resolution.FIXED, ItemFlag.Resolution.DISMISSED):
        flag.resolution, flag.resolved_at, flag.resolved_by = ItemFlag.Resolution.OPEN, None, None
        fields += ["resolution", "resolved_at", "resolved_by"]
    flag.save(update_fields=fields)
    return flag, False


@transaction.atomic
def flag_resolve(*, study: Study, item_id: int, resolution: str, user: User) -> int:
    """Resolve the open flags of one item of ``study`` as ``resolution`` (fixed, dismissed,
    withdrawn), by ``user``, one of its researchers. Withdrawing marks every flag of the
    item withdrawn (the item stays withdrawn whatever happens to the others), so it is
    leased no more and its answers leave the estimates: the study is recomputed. Returns
    how many flags changed."""
    if StudyMembership.Role.RESEARCHER not in user_roles(user=user, study=study):
        raise NotPermitted("Only the study's researchers resolve flags.")
    if resolution not in ItemFlag.Resolution.values or not resolution:
        raise InvalidFlag(f"Unknown resolution '{resolution}'.", field="resolution")
    flags = ItemFlag.objects.filter(study=study, item_id=item_id)
    if resolution == ItemFlag.Resolution.WITHDRAWN:
        flags = flags.exclude(resolution=ItemFlag.Resolution.WITHDRAWN)
    else:
        flags = flags.filter(resolution=ItemFlag.Resolution.OPEN)
    changed = flags.update(resolution=resolution, resolved_at=timezone.now(),
                           resolved_by=user, updated_at=timezone.now())
    if changed and resolution == ItemFlag.Resolution.WITHDRAWN:
        transaction.on_commit(partial(study_recompute_schedule, study.pk))
    return changed
