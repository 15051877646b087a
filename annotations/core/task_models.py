"""The columns every leased work unit shares (abstract models of the task engine).

A concrete task kind (partitioned ``Query``, assisted ``RatingTask``, ``CritiqueTask``…)
inherits ``LeasedTask`` for its own table, so each keeps its own partial index of pending
rows, and ``TaskEvent`` for its audit table. The functions that move a task through
pending → leased → answered live in ``annotations.core.engine``; nothing else writes these
columns.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models


def new_public_id() -> str:
    """Opaque id of a task as workers see it: 16 random url-safe characters (96 bits), so
    neither its order nor its kind (e.g. routed query or quality check) can be read from it."""
    return secrets.token_urlsafe(12)


class TaskStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    LEASED = "leased", "Leased"
    ANSWERED = "answered", "Answered"


class TaskEventKind(models.TextChoices):
    ROUTED = "routed", "Routed"
    ISSUED = "issued", "Issued"
    RENDERED = "rendered", "Rendered"
    ANSWERED = "answered", "Answered"
    RECLAIMED = "reclaimed", "Lease reclaimed"
    UNDONE = "undone", "Answer undone"
    SKIPPED = "skipped", "Skipped"


class LeasedTask(models.Model):
    """Lease columns: a pending task is handed to one ``holder`` until ``lease_expires_at``
    (heartbeats extend it), then answered or returned to the pool. ``rank`` is the task's
    random queue position (drawn and stored by whoever creates it); ``rendered_at`` is when
    the server first showed it under the current lease (the minimum answer time counts from
    there)."""

    Status = TaskStatus

    public_id = models.CharField(max_length=22, unique=True, default=new_public_id,
                                 editable=False)
    rank = models.BigIntegerField(help_text="Random queue position, drawn and stored.")
    status = models.CharField(max_length=10, choices=TaskStatus.choices,
                              default=TaskStatus.PENDING)
    holder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                               blank=True, related_name="+")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    issued_at = models.DateTimeField(null=True, blank=True)
    rendered_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                    null=True, blank=True, related_name="+")
    time_on_task_ms = models.PositiveIntegerField(null=True, blank=True)
    times_issued = models.PositiveSmallIntegerField(default=0)

    class Meta:
        abstract = True


class TaskEvent(models.Model):
    """One audit row per state change of a task, written in the same transaction. The
    concrete model adds the foreign key to its task (named by its ``TaskKind``)."""

    Kind = TaskEventKind

    kind = models.CharField(max_length=10, choices=TaskEventKind.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                              blank=True, related_name="+")
    at = models.DateTimeField(auto_now_add=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        abstract = True
