"""Evaluation tokens, their call log and a study's evaluation settings (issue 20).

A token is scoped to one partitioned study and carries its own policy; only its SHA-256
digest is stored (the token itself is shown once, when created). Every call — accepted or
rejected — is logged with what was released, never with per-item information."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from annotations.core.models import Study

DEFAULT_MIN_BATCH = 100
DEFAULT_MAX_BATCH = 20_000
DEFAULT_DAILY_BUDGET = 20
DEFAULT_LADDER_MARGIN = 0.02
DEFAULT_HOLDOUT_SHARE = 0.2


class EvaluationSettings(models.Model):
    """Per study: the share of labelled items held out from every evaluation (a
    deterministic split seeded by the study's seed; only final reports score them)."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE,
                                 related_name="evaluation_settings")
    holdout_share = models.FloatField(
        default=DEFAULT_HOLDOUT_SHARE,
        validators=[MinValueValidator(0.0), MaxValueValidator(0.9)],
        help_text="Share of the items held out: the service never scores them; each token's "
                  "final report of a chosen candidate scores only them. Changing it "
                  "changes the split.")


class EvaluationToken(models.Model):
    """A bearer token for the evaluation API of one study, with its policy."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="evaluation_tokens")
    name = models.CharField(max_length=120, help_text="Who or what uses it (e.g. 'ADAS run 3').")
    prefix = models.CharField(max_length=12, editable=False,
                              help_text="The token's first characters, to recognise it.")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    min_batch = models.PositiveIntegerField(
        default=DEFAULT_MIN_BATCH, validators=[MinValueValidator(1)],
        help_text="Fewest items a submission must have evaluated (scored labels).")
    max_batch = models.PositiveIntegerField(
        default=DEFAULT_MAX_BATCH, validators=[MinValueValidator(1)],
        help_text="Most predictions one submission may carry.")
    daily_budget = models.PositiveIntegerField(
        default=DEFAULT_DAILY_BUDGET, validators=[MinValueValidator(1)],
        help_text="Evaluations per UTC day: accepted ones and those refused below the minimum "
                  "batch (a final report needs one left).")
    ladder = models.BooleanField(
        default=True, help_text="Release scores through the Ladder: the score changes only "
        "when a submission beats the best so far by the margin, rounded to the margin, and "
        "no other figure is released.")
    ladder_margin = models.FloatField(
        default=DEFAULT_LADDER_MARGIN, validators=[MinValueValidator(0.001),
                                                   MaxValueValidator(0.5)])
    ladder_best = models.FloatField(null=True, blank=True, editable=False,
                                    help_text="The Ladder's best released score so far.")
    final_reports = models.PositiveIntegerField(
        default=1, help_text="Final reports (holdout scores) this token may ask for.")

    class Meta:
        ordering = ["study", "-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class EvaluationCall(models.Model):
    """One call of the evaluation API: who, when, which candidate, how many items, what was
    released; a rejected call keeps its reason and releases nothing."""

    class Kind(models.TextChoices):
        SEARCH = "search", "Search evaluation"
        FINAL = "final", "Final report (holdout)"

    token = models.ForeignKey(EvaluationToken, on_delete=models.CASCADE, related_name="calls")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="evaluation_calls")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.SEARCH)
    candidate = models.CharField(max_length=200, blank=True, default="")
    n_items = models.PositiveIntegerField(default=0, help_text="Predictions submitted.")
    n_used = models.PositiveIntegerField(default=0, help_text="Items evaluated.")
    accepted = models.BooleanField(default=False)
    reason = models.TextField(blank=True, default="", help_text="Why it was rejected.")
    score = models.FloatField(null=True, blank=True,
                              help_text="The engine's fitness score (ML estimate), unreleased "
                                        "when the Ladder is on: researchers only.")
    released = models.JSONField(default=dict, blank=True,
                                help_text="Exactly the figures the caller received.")
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["token", "accepted", "created_at"],
                                name="evalcall_budget_idx")]
