"""Evaluator audits (issue 19; docs/audit.md): a study's rubrics of programmatic criteria, its
audits (the No-Data Algorithm run against an evaluator over a data set) and each audit's
per-datapoint outcomes.

Invariants live here (constraints); the checks a criterion may use, their parameters and
every workflow live in ``services/``.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from annotations.core.models import Study
from annotations.core.task_models import LeasedTask, TaskEvent

MAX_ROUNDS = 10


class Rubric(models.Model):
    """The ordered criteria C of a study's audits and the aggregator σ that describes how
    they combine into a label (the verifier never uses σ: it checks the criteria)."""

    class Aggregator(models.TextChoices):
        MAJORITY = "majority", "Majority vote (a tie gives 1)"
        ANY = "any", "Any of"
        ALL = "all", "All of"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="rubrics")
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True, default="", max_length=2000)
    aggregator = models.CharField(max_length=10, choices=Aggregator.choices,
                                  default=Aggregator.MAJORITY)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"],
                                               name="rubric_unique_name")]

    def __str__(self) -> str:
        return self.name


class Criterion(models.Model):
    """One programmatic criterion of a rubric: a registered check (``services.checks``) with
    its parameters — never code. ``field`` (optional) reads that key of a JSON-object
    datapoint instead of the datapoint itself."""

    class Kind(models.TextChoices):
        CONTAINS = "contains", "contains the text"
        REGEX = "regex", "matches the regular expression (RE2: linear time)"
        COUNT_ABOVE = "count_above", "has more than N occurrences of the text"
        LENGTH_ABOVE = "length_above", "is longer than N characters"
        FIELD_EQUALS = "field_equals", "its field equals the value"

    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="criteria")
    position = models.PositiveSmallIntegerField(default=0, help_text="Order in the rubric.")
    name = models.CharField(max_length=60, help_text="Short, distinct within the rubric.")
    kind = models.CharField("check", max_length=20, choices=Kind.choices)
    text = models.CharField(max_length=500, blank=True, default="",
                            help_text="The text (contains, count) or pattern (regex).")
    number = models.IntegerField(null=True, blank=True, help_text="N (count, length).")
    field = models.CharField(max_length=120, blank=True, default="",
                             help_text="A JSON datapoint's field to read (field equals: "
                                       "required; others: optional).")
    value = models.JSONField(null=True, blank=True,
                             help_text="The value the field must equal (JSON).")

    class Meta:
        ordering = ["rubric", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["rubric", "name"],
                                               name="criterion_unique_name")]

    def __str__(self) -> str:
        return self.name


class Audit(models.Model):
    """The No-Data Algorithm run against an evaluator of the study: r rounds of the EV
    protocol per datapoint, the programmatic verifier on ``rubric``, failures flipped with
    probability φ, from ``seed``. Runs as Celery tasks, one chunk each, on the ``audits``
    queue, with progress; cancellable."""

    class Evaluator(models.TextChoices):
        COMMITMENTS = "commitments", "Imported commitments (JSONL)"
        AI = "ai", "An AI system through the OpenAI-compatible provider"

    class Strategy(models.TextChoices):
        PICK = "pick", "Picks x′ from the data set (worked best for LLMs)"
        GENERATE = "generate", "Writes x′ itself"

    class Dataset(models.TextChoices):
        ITEMS = "items", "The study's items (their text)"
        UPLOAD = "upload", "An uploaded file of datapoints (JSONL)"

    class Verifier(models.TextChoices):
        PROGRAMMATIC = "programmatic", "Programmatic (the rubric's checks)"
        HUMAN = "human", "Specialists (each criterion check a yes/no question)"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        WAITING = "waiting", "Waiting for the specialists' answers"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="audits")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="audits")
    evaluator = models.CharField(max_length=12, choices=Evaluator.choices,
                                 default=Evaluator.COMMITMENTS)
    evaluator_name = models.CharField(max_length=255, blank=True, default="")
    # The AI system audited (its page and an assisted study's trust gate read its latest
    # audit). A string reference: the audit layer never imports the assistants app.
    ai_system = models.ForeignKey("assistants.AISystem", on_delete=models.SET_NULL, null=True,
                                  blank=True, related_name="audits",
                                  help_text="The study's AI system this audit is of.")
    # The AI-provider evaluator (evaluator = ai): endpoint, strategy, prompt templates
    ai_base_url = models.CharField(max_length=500, blank=True, default="",
                                   help_text="OpenAI-compatible endpoint; empty: the site's.")
    ai_model = models.CharField(max_length=200, blank=True, default="")
    ai_strategy = models.CharField(max_length=10, choices=Strategy.choices,
                                   default=Strategy.PICK)
    prompt_system = models.TextField(blank=True, default="", max_length=20000,
                                     help_text="Empty: the platform's default.")
    prompt_user = models.TextField(blank=True, default="", max_length=20000,
                                   help_text="Empty: the platform's default.")
    verifier = models.CharField(max_length=12, choices=Verifier.choices,
                                default=Verifier.PROGRAMMATIC)
    dataset = models.CharField(max_length=8, choices=Dataset.choices, default=Dataset.UPLOAD)
    dataset_name = models.CharField(max_length=255, blank=True, default="")
    rounds = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(MAX_ROUNDS)])
    phi = models.FloatField(default=0.5, validators=[MinValueValidator(0.0),
                                                     MaxValueValidator(1.0)],
                            help_text="Flip probability of a failed datapoint's label.")
    seed = models.BigIntegerField(default=0)
    # the rubric as it was when the audit started (a later edit never changes a result)
    rubric_snapshot = models.JSONField(default=dict, editable=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(null=True, blank=True)
    flips = models.PositiveIntegerField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    # where a chunked run carries on (services.runs): the next position, the evaluator's
    # Generator state, whether this pass asked the specialists anything
    checkpoint = models.JSONField(default=dict, blank=True, editable=False)
    # written by a running chunk about every half second; an old one means its worker died
    heartbeat_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(phi__gte=0.0) & Q(phi__lte=1.0),
                                   name="audit_phi_probability"),
            models.CheckConstraint(condition=Q(rounds__gte=1) & Q(rounds__lte=MAX_ROUNDS),
                                   name="audit_rounds_range"),
        ]

    def __str__(self) -> str:
        return f"Audit #{self.pk} ({self.status})"


class AuditFile(models.Model):
    """The bytes an audit was started with (the commitments; the datapoints when uploaded),
    kept apart from the audit row so that listing audits never reads them, and kept after
    the run: the result can be downloaded and rerun from them."""

    audit = models.OneToOneField(Audit, on_delete=models.CASCADE, primary_key=True,
                                 related_name="file")
    commitments = models.BinaryField()
    datapoints = models.BinaryField(null=True, blank=True)


class AuditOutcome(models.Model):
    """One datapoint's result: success, the evaluator's label, the label after φ's flip, the
    challenge failed and why, every round played (label, x′, challenge, passed), and a
    person's label when the data set gave one."""

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="outcomes")
    position = models.PositiveIntegerField()
    item = models.CharField(max_length=200)
    success = models.BooleanField()
    label = models.PositiveSmallIntegerField(null=True, blank=True)
    final_label = models.PositiveSmallIntegerField(null=True, blank=True)
    flipped = models.BooleanField(default=False)
    challenge = models.PositiveSmallIntegerField(null=True, blank=True)
    criterion = models.CharField(max_length=60, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    rounds = models.JSONField(default=list)
    reference = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="A person's label of the datapoint, when given.")

    class Meta:
        ordering = ["audit", "position"]
        constraints = [models.UniqueConstraint(fields=["audit", "position"],
                                               name="audit_outcome_unique_position")]


class VerifierQuestion(LeasedTask):
    """A human verifier's question (beyond the paper): does ``criterion`` hold for this
    datapoint? — yes or no, put to one of the study's workers through the task engine
    (``services.verify``). The same datapoint and criterion are asked once per audit; the
    worker sees the datapoint and the question only (never the evaluator, its label, or
    whether the datapoint is x or an x′)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="questions")
    key = models.CharField(max_length=64, help_text="SHA-256 of the datapoint's JSON.")
    datapoint = models.JSONField()
    criterion = models.CharField(max_length=60)
    question = models.CharField(max_length=700)
    answer = models.BooleanField(null=True, blank=True)

    class Meta:
        ordering = ["audit", "rank"]
        constraints = [models.UniqueConstraint(fields=["audit", "key", "criterion"],
                                               name="verifier_question_unique")]
        indexes = [models.Index(fields=["study", "status"], name="verifier_q_study_status")]


class VerifierQuestionEvent(TaskEvent):
    question = models.ForeignKey(VerifierQuestion, on_delete=models.CASCADE,
                                 related_name="events")
