"""AI systems under evaluation and their predictions per item."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from annotations.core.models import Item, Study
from assistants.band_edges import MAX_CONFIDENCE_BANDS, edges_problem

MAX_SYSTEMS_PER_STUDY = 63  # one bit each in Query.match_mask / present_mask (signed bigint)


class AISystem(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="ai_systems")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    ordinal = models.PositiveSmallIntegerField(
        editable=False, validators=[MaxValueValidator(MAX_SYSTEMS_PER_STUDY - 1)]
    )
    reference_correct = models.PositiveIntegerField(default=0, editable=False)
    reference_n = models.PositiveIntegerField(
        default=0, editable=False, help_text="Items with a hidden gold label and a prediction."
    )
    # Confidence bands in use (annotations.partitioned.services.banding): upper edges but the last
    # (band j, 1-based,
    # holds edges[j-2] < confidence <= edges[j-1]), and per band {"n", "mean_confidence"}
    # over the study's items (quality checks excluded). Empty: no confidences.
    band_edges = models.JSONField(default=list, editable=False)
    band_stats = models.JSONField(default=list, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "AI system"
        ordering = ["study", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="system_unique_name"),
            models.UniqueConstraint(fields=["study", "ordinal"], name="system_unique_ordinal"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.pk is None:
            return
        before = AISystem.objects.filter(pk=self.pk).values_list("study_id", flat=True).first()
        if before is not None and before != self.study_id:
            raise ValidationError({"study": "An AI system cannot move to another study."})


class Prediction(models.Model):
    """A system's answer for an item. ``option`` is the original option index (None when the
    output was missing or unparseable: a wrong answer); ``position`` is where that option is
    shown, i.e. the predicted class."""

    system = models.ForeignKey(AISystem, on_delete=models.CASCADE, related_name="predictions")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="predictions")
    option = models.PositiveSmallIntegerField(null=True, blank=True)
    position = models.PositiveSmallIntegerField(null=True, blank=True)
    raw = models.TextField(blank=True)
    confidence = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="The system's own confidence in this answer (0–1), when it gives one: the "
        "dashboard estimates its accuracy per confidence band.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["system", "item"], name="prediction_unique"),
            models.CheckConstraint(
                condition=models.Q(confidence__isnull=True)
                | models.Q(confidence__gte=0.0, confidence__lte=1.0),
                name="prediction_confidence_range"),
        ]
        indexes = [models.Index(fields=["item", "position"])]

    def clean(self) -> None:
        # The database refuses the pair too (migration assistants 0002): a prediction of
        # one study's system about another study's item would corrupt that study's masks.
        if self.system_id and self.item_id and self.system.study_id != self.item.study_id:
            raise ValidationError({"item": "This item belongs to another study than the "
                                           "AI system."})
        if self.item_id and self.option is not None:
            n = len(self.item.options) or self.item.study.classes.count()
            if self.option >= n:
                raise ValidationError({"option": f"Option {self.option} is outside "
                                                 f"0..{n - 1} (an index of the item's "
                                                 f"options)."})


# ------------------------------------------------- partitioned studies: confidence bands

class ConfidenceBands(models.Model):
    """How a partitioned study groups its AI systems' confidences into bands (the
    dashboard's accuracy per band and the hybridization curve). No row: the default,
    tertiles of each system's own confidences."""

    class Scheme(models.TextChoices):
        QUANTILE = "quantile", "Equal shares of each system's items (quantiles)"
        FIXED = "fixed", "Fixed edges, the same for every system"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True,
                                 related_name="confidence_bands")
    scheme = models.CharField(max_length=10, choices=Scheme.choices, default=Scheme.QUANTILE)
    n_bands = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(2), MaxValueValidator(MAX_CONFIDENCE_BANDS)],
        help_text="Quantile scheme: how many bands (ties never straddle a band edge, so a "
        "system with few distinct confidences may get fewer).")
    edges = models.JSONField(
        default=list, blank=True,
        help_text="Fixed scheme: the upper edges of every band but the last, ascending, "
        "strictly between 0 and 1, e.g. [0.5, 0.8]: bands ≤ 0.5, 0.5–0.8, > 0.8.")

    class Meta:
        verbose_name = "confidence bands"
        verbose_name_plural = "confidence bands"

    def __str__(self) -> str:
        return f"Confidence bands of {self.study}"

    def clean(self) -> None:
        if self.scheme == self.Scheme.FIXED:
            problem = edges_problem(self.edges)
            if problem:
                raise ValidationError({"edges": problem})


# ---------------------------------------------------------------- assisted studies: traces


class TraceSample(models.Model):
    """One sampled (or imported) trace of the AI rater for one sentence of an assisted
    study. ``trace`` is the parsed trace (``assistants.traces.Trace.to_dict()``) or None
    when the reply held none; ``verified`` is the format verifier's verdict, ``reasons``
    why it failed (or the parse/provider error). Only verified samples count in the AI
    rating. ``is_displayed`` marks the sample shown to raters (best agreeing with the
    mode), ``debate_side`` the two samples of the debate (accurate / inaccurate). Samples a
    rater was shown are never replaced."""

    class Source(models.TextChoices):
        IMPORTED = "imported", "Imported (JSONL)"
        SAMPLED = "sampled", "Sampled from the endpoint"

    class DebateSide(models.TextChoices):
        NONE = "", "—"
        ACCURATE = "accurate", "Argues accurate"
        INACCURATE = "inaccurate", "Argues inaccurate"

    sentence = models.ForeignKey("annotations.Sentence", on_delete=models.CASCADE,
                                 related_name="trace_samples")
    index = models.PositiveSmallIntegerField()
    source = models.CharField(max_length=8, choices=Source.choices)
    raw_text = models.TextField(blank=True)
    trace = models.JSONField(null=True, blank=True)
    verdict = models.CharField(max_length=16, blank=True, default="",
                               help_text="The trace's overall verdict (empty without a trace).")
    verified = models.BooleanField(default=False)
    reasons = models.JSONField(default=list, blank=True)
    score = models.FloatField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True)
    latency = models.FloatField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    is_displayed = models.BooleanField(default=False)
    debate_side = models.CharField(max_length=10, choices=DebateSide.choices, blank=True,
                                   default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["sentence", "index"]
        constraints = [
            models.UniqueConstraint(fields=["sentence", "index"], name="trace_unique_index"),
            models.UniqueConstraint(fields=["sentence"], condition=models.Q(is_displayed=True),
                                    name="trace_one_displayed"),
            models.UniqueConstraint(fields=["sentence", "debate_side"],
                                    condition=~models.Q(debate_side=""),
                                    name="trace_one_per_debate_side"),
        ]

    def __str__(self) -> str:
        return f"{self.sentence_id}#{self.index}"


class SamplingRun(models.Model):
    """One request to sample traces for a study's sentences from an OpenAI-compatible
    endpoint: one Celery task per sentence (``SentenceSampling``); the study page shows its
    progress. ``config`` is what was used, without the key."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="sampling_runs")
    n_samples = models.PositiveSmallIntegerField()
    config = models.JSONField(default=dict)
    requested_by = models.ForeignKey("annotations.User", on_delete=models.SET_NULL, null=True,
                                     blank=True, related_name="+")
    requested_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]


class SentenceSampling(models.Model):
    """One sentence of a sampling run: queued → running → done | failed (after retries; the
    error names the endpoint, never the key). A failure stores no sample and no rating."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(SamplingRun, on_delete=models.CASCADE, related_name="sentences")
    sentence = models.ForeignKey("annotations.Sentence", on_delete=models.CASCADE,
                                 related_name="samplings")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "sentence"], name="sampling_unique_sentence"),
        ]
        indexes = [models.Index(fields=["run", "status"], name="sampling_run_status")]
