"""The study's own audit trail: life-cycle events (opened, closed, settings changed…) written
by the services that make them, in the same transaction.

``StudyEvent.kind`` is a free string checked against a registry rather than database
choices, so that other study types add their kinds (``study_event_kind_register``) without
a migration of this table."""

from __future__ import annotations

from django.conf import settings
from django.db import models

STUDY_EVENT_KINDS: dict[str, str] = {
    "opened": "Opened",
    "items_routed": "Items routed",
    "closed": "Closed",
    "threshold_changed": "Threshold changed",
}


def study_event_kind_register(kind: str, label: str) -> str:
    """Make ``kind`` a known study event kind (idempotent); its label is shown in the admin.
    Returns the kind."""
    if not kind or len(kind) > StudyEvent._meta.get_field("kind").max_length:
        raise ValueError(f"study event kind '{kind}': 1 to 40 characters")
    STUDY_EVENT_KINDS[kind] = label
    return kind


class StudyEvent(models.Model):
    """One life-cycle event of a study: what (``kind``), who (``actor``; None for the
    system), when, and the facts of the change (``detail``, e.g. the number of items
    routed). Rows are only ever added."""

    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE,
                              related_name="events")
    kind = models.CharField(max_length=40)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                              blank=True, related_name="+")
    at = models.DateTimeField(auto_now_add=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "pk"]
        indexes = [models.Index(fields=["study", "at"], name="study_event_study_at")]

    def __str__(self) -> str:
        return f"{self.kind_label} ({self.at:%Y-%m-%d %H:%M:%S})"

    @property
    def kind_label(self) -> str:
        return STUDY_EVENT_KINDS.get(self.kind, self.kind)
