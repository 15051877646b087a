"""A study's webhooks and the log of their deliveries.

``Webhook``: a researcher's endpoint (``url``, checked against the operator's egress policy
when saved and again at each delivery), the notices it hears (``events``), its thresholds
for study.target_reached (``target_answers``; ``target_width``: an AI system's interval
narrower than it), the ``secret`` its deliveries are signed with (HMAC-SHA256), and whether
it is ``active`` — a webhook whose deliveries keep failing is switched off, with the reason.

``WebhookDelivery``: one notice to one webhook — its body as sent (``payload``), its state
(pending until delivered or given up), attempts, the last answer's status or error, and
when it is due next. Rows are the delivery log (the admin's), kept after success.
"""

from __future__ import annotations

import secrets
import uuid

from django.conf import settings
from django.db import models


def webhook_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


class Webhook(models.Model):
    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE,
                              related_name="webhooks")
    url = models.URLField(max_length=500, help_text="Where the platform POSTs its notices "
                          "(https://…; the operator's allow-list decides which hosts).")
    events = models.JSONField(default=list, help_text="The notices it hears.")
    target_answers = models.PositiveIntegerField(
        null=True, blank=True, help_text="study.target_reached once this many answers are "
        "recorded.")
    target_width = models.FloatField(
        null=True, blank=True, help_text="study.target_reached, per AI system (partitioned) "
        "or level (critique), once its accuracy interval is narrower than this (e.g. 0.1).")
    reached = models.JSONField(default=list, blank=True, editable=False,
                               help_text="The targets already told (each once).")
    secret = models.CharField(max_length=80, default=webhook_secret, editable=False)
    active = models.BooleanField(default=True)
    failures_in_row = models.PositiveIntegerField(default=0, editable=False)
    disabled_reason = models.CharField(max_length=500, blank=True, default="", editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+",
                                   editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "pk"]

    def __str__(self) -> str:
        return f"{self.url} ({self.study})"


class WebhookDelivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed (given up)"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)
    delivery_id = models.UUIDField(default=uuid.uuid4, editable=False, unique=True,
                                   help_text="Sent as Oversight-Delivery: receivers drop "
                                   "a repeat.")
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True, editable=False)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True,
                                                   help_text="The receiver's HTTP status.")
    last_error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "next_attempt_at"],
                                name="webhook_delivery_due")]

    def __str__(self) -> str:
        return f"{self.event} → {self.webhook.url} ({self.status})"
