"""Recursive critique studies (METHODS.md M3; paper 002): questions, the study's settings,
outputs (responses and critiques, written by annotators or by an AI system), critique tasks
(a kind of the task engine), the per-task list of people who may not receive it, and AI runs.

The tree of one question: ``counts[0]`` responses (level 0); ``counts[1]`` level-1
critiques, all of the responses in slots 0 and 1; ``counts[2]`` level-2 critiques of the
level-1 critiques in slots 0 and 1; … up to the top level L. The pair a level critiques is
always the two outputs of the level below in slots 0 and 1 (the *chain*); ``slot`` is an
output's (or task's) position in its level, drawn when the tasks are made.

Invariants live here (constraints); workflows live in ``annotations.critique.services``.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_noop

from annotations.core.inputs import AI_TEXT_MAX, LONG_TEXT_MAX
from annotations.core.models import Study
from annotations.core.task_models import LeasedTask, TaskEvent

__all__ = [
    "CritiqueChoice", "CritiqueMode", "CritiqueOutput", "CritiqueQuestion", "CritiqueRun",
    "CritiqueRunFile",
    "CritiqueSettings", "CritiqueTask", "CritiqueTaskBlock", "CritiqueTaskEvent",
]

MAX_LEVEL = 4
DEFAULT_COUNTS = (7, 5, 3, 1)
DEFAULT_TIME_LIMIT_MINUTES = 20


class CritiqueMode(models.TextChoices):
    HUMANS = "humans", "Humans at every level"
    AI_BELOW = "ai_below", "AI below the top level, humans at the top level"
    AI = "ai", "AI at every level"


def default_counts() -> list[int]:
    return list(DEFAULT_COUNTS[:3])


def _default_template(kind: str, part: str) -> str:
    from assistants.prompts import DEFAULT_TEMPLATES

    return getattr(DEFAULT_TEMPLATES[kind], part)


def default_response_template() -> str:
    return _default_template("response", "user")


def default_critique_template() -> str:
    return _default_template("critique", "user")


class CritiqueSettings(models.Model):
    """How a critique study (``Study.kind == "critique"``) runs: its top level L, the
    sampling counts per level (``counts[l]`` outputs of level l per question, L + 1 values),
    who writes each level (``mode``), the per-task time limit (the lease length) and the
    prompt templates of its AI outputs."""

    Mode = CritiqueMode

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True,
                                 related_name="critique_settings")
    top_level = models.PositiveSmallIntegerField(
        default=2, validators=[MinValueValidator(1), MaxValueValidator(MAX_LEVEL)],
        help_text="L: the highest critique level (1 = critiques of responses, 2 = critiques "
        "of critiques, up to 4).")
    counts = models.JSONField(
        default=default_counts,
        help_text="Outputs per question at each level 0…L (the paper's tree: 7, 5, 3, 1). "
        "Every level below L needs at least 2 (the next level critiques two of them); the "
        "effort-matched vote against level t needs 2(t − l) + 1 outputs at level l.")
    mode = models.CharField(max_length=10, choices=CritiqueMode.choices,
                            default=CritiqueMode.HUMANS)
    time_limit_minutes = models.PositiveSmallIntegerField(
        default=DEFAULT_TIME_LIMIT_MINUTES,
        validators=[MinValueValidator(1), MaxValueValidator(240)],
        help_text="Time an annotator has for one task; then it goes back to the pool.")
    response_system = models.TextField(blank=True, default="")
    response_template = models.TextField(default=default_response_template)
    critique_system = models.TextField(blank=True, default="")
    critique_template = models.TextField(default=default_critique_template)
    ai_base_url = models.CharField(
        max_length=300, blank=True, default="",
        help_text="OpenAI-compatible endpoint (…/v1); empty: the server's OVERSIGHT_AI_BASE_URL.")
    ai_model = models.CharField(
        max_length=200, blank=True, default="",
        help_text="Model name sent to the endpoint; empty: the server's OVERSIGHT_AI_MODEL.")
    ai_api_key = models.CharField(
        max_length=500, blank=True, default="",
        help_text="The endpoint's key; empty: the server's OVERSIGHT_AI_API_KEY. Never shown "
                  "again once saved.")

    class Meta:
        verbose_name = "critique study"
        verbose_name_plural = "critique studies"

    def __str__(self) -> str:
        return str(self.study)

    @property
    def levels(self) -> range:
        return range(self.top_level + 1)

    def count_at(self, level: int) -> int:
        return int(self.counts[level])

    def human_level(self, level: int) -> bool:
        """Whether annotators write level ``level`` (else an AI system does)."""
        if self.mode == CritiqueMode.HUMANS:
            return True
        if self.mode == CritiqueMode.AI_BELOW:
            return level == self.top_level
        return False

    @property
    def human_levels(self) -> list[int]:
        return [lv for lv in self.levels if self.human_level(lv)]

    @property
    def ai_levels(self) -> list[int]:
        return [lv for lv in self.levels if not self.human_level(lv)]


class CritiqueQuestion(models.Model):
    """A multiple-choice question. ``gold`` (0-based option index) is hidden from
    annotators; without it the question counts for confidence and time only.
    ``generated_level`` is the highest level whose human tasks exist (−1: none yet)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE,
                              related_name="critique_questions")
    external_id = models.CharField(max_length=200)
    text = models.TextField(max_length=LONG_TEXT_MAX)
    options = models.JSONField(default=list)
    gold = models.PositiveSmallIntegerField(null=True, blank=True)
    domain = models.CharField(max_length=120, blank=True, default="")
    generated_level = models.SmallIntegerField(default=-1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"],
                                    name="critique_question_unique_external_id"),
        ]
        indexes = [models.Index(fields=["study", "domain"], name="critique_q_domain")]

    def __str__(self) -> str:
        return self.external_id


class CritiqueTask(LeasedTask):
    """One output to write, leased to one annotator for the study's time limit (the task
    engine's ``LeasedTask``). Level 0 asks a response; level l ≥ 1 a critique of ``first``
    and ``second`` — the chain pair of level l − 1 in the order this task shows them (drawn
    at random when the task is made, stored). The answer is the ``CritiqueOutput`` whose
    ``task`` is this one."""

    # Foreign keys without their own index where a composite index starts with them (study,
    # question) or nothing looks them up (inputs): every index slows the bulk generation.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="critique_tasks",
                              db_index=False)
    question = models.ForeignKey(CritiqueQuestion, on_delete=models.CASCADE,
                                 related_name="tasks", db_index=False)
    level = models.PositiveSmallIntegerField()
    slot = models.PositiveSmallIntegerField()
    first = models.ForeignKey("CritiqueOutput", on_delete=models.CASCADE, null=True,
                              blank=True, related_name="+", db_index=False)
    second = models.ForeignKey("CritiqueOutput", on_delete=models.CASCADE, null=True,
                               blank=True, related_name="+", db_index=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["question", "level", "slot"],
                                    name="critique_task_unique_slot"),
            models.CheckConstraint(
                condition=Q(status="leased", holder__isnull=False,
                            lease_expires_at__isnull=False) | ~Q(status="leased"),
                name="critique_task_leased_has_holder"),
            models.CheckConstraint(
                condition=Q(level=0, first__isnull=True, second__isnull=True)
                | Q(level__gt=0, first__isnull=False, second__isnull=False),
                name="critique_task_inputs_iff_critique"),
        ]
        indexes = [
            models.Index(fields=["study", "level", "rank"], condition=Q(status="pending"),
                         name="critique_task_pending"),
            models.Index(fields=["holder", "status"], condition=Q(status="leased"),
                         name="critique_task_leases"),
            models.Index(fields=["lease_expires_at"], condition=Q(status="leased"),
                         name="critique_task_expiry"),
            models.Index(fields=["study", "answered_by", "level"],
                         name="critique_task_done_by"),
            models.Index(fields=["study", "status", "level"], name="critique_task_status"),
        ]

    def __str__(self) -> str:
        return f"T{self.pk} q={self.question_id} level={self.level} slot={self.slot}"


class CritiqueTaskEvent(TaskEvent):
    """Audit trail of a critique task (the engine writes it)."""

    task = models.ForeignKey(CritiqueTask, on_delete=models.CASCADE, related_name="events")

    class Meta:
        indexes = [models.Index(fields=["task", "at"], name="critique_event_task_at")]


class CritiqueTaskBlock(models.Model):
    """``user`` may not receive ``task``: they wrote an output in its chain (any level
    below), or another output of its sibling group (one output per person per group, so
    a majority vote never counts one person twice), or they skipped it. The lease
    statement probes this table's (task, user) key with NOT EXISTS."""

    class Reason(models.TextChoices):
        CHAIN = "chain", "Wrote an output in the task's chain"
        SIBLING = "sibling", "Wrote another output of the same level of the question"
        SKIPPED = "skipped", "Skipped it (handed it back for someone else)"

    # No database constraint: a foreign-key check takes a KEY SHARE lock on the task at
    # commit, and the sibling tasks an answer blocks may be locked FOR UPDATE by a
    # concurrent lease — a deadlock. Rows go with their task (CASCADE in Django) and the
    # unique (task, user) index starts with the task.
    task = models.ForeignKey(CritiqueTask, on_delete=models.CASCADE, related_name="blocks",
                             db_index=False, db_constraint=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    reason = models.CharField(max_length=8, choices=Reason.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "user"], name="critique_block_unique"),
        ]


class CritiqueChoice(models.TextChoices):
    FIRST = "first", "The input shown first"
    SECOND = "second", "The input shown second"
    NEITHER = "neither", "Neither"
    UNPARSEABLE = "unparseable", "Unparseable (AI output)"


class CritiqueOutput(models.Model):
    """A response (level 0) or a critique (level l ≥ 1) of ``first`` and ``second`` (two
    outputs of level l − 1, in the order its writer saw them). ``final`` is the chosen
    option (0-based; None = an AI output whose answer could not be parsed — never
    guessed); ``choice`` which input the critique found better, in shown order. Human
    outputs come from a task (``task``, ``author``, confidence 1–5, time on task); AI
    outputs from an import or a provider run (``ai_model``, ``raw_text`` as written)."""

    # The words of each confidence on the work page (its keys are the numbers) and in the
    # exports' confidence_label column.
    CONFIDENCE_WORDS = {1: gettext_noop("a guess"), 2: gettext_noop("unsure"),
                        3: gettext_noop("fairly sure"), 4: gettext_noop("confident"),
                        5: gettext_noop("certain")}  # the page translates them; exports not

    class Author(models.TextChoices):
        HUMAN = "human", "Annotator"
        AI = "ai", "AI system"

    class Source(models.TextChoices):
        TASK = "task", "Annotator task"
        IMPORT = "import", "JSONL import"
        PROVIDER = "provider", "AI endpoint"

    Choice = CritiqueChoice

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="critique_outputs",
                              db_index=False)
    question = models.ForeignKey(CritiqueQuestion, on_delete=models.CASCADE,
                                 related_name="outputs", db_index=False)
    level = models.PositiveSmallIntegerField()
    slot = models.PositiveSmallIntegerField()
    first = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True,
                              related_name="+", db_index=False)
    second = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True,
                               related_name="+", db_index=False)
    reasoning = models.TextField(blank=True, default="", max_length=AI_TEXT_MAX)
    final = models.PositiveSmallIntegerField(null=True, blank=True)
    choice = models.CharField(max_length=12, choices=CritiqueChoice.choices, blank=True,
                              default="")
    confidence = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(5)])
    time_ms = models.PositiveIntegerField(null=True, blank=True)
    author_kind = models.CharField(max_length=6, choices=Author.choices)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                               blank=True, related_name="+")
    ai_model = models.CharField(max_length=200, blank=True, default="")
    raw_text = models.TextField(blank=True, default="", max_length=AI_TEXT_MAX)
    external_id = models.CharField(max_length=200, blank=True, default="")
    source = models.CharField(max_length=8, choices=Source.choices)
    task = models.OneToOneField(CritiqueTask, on_delete=models.SET_NULL, null=True,
                                blank=True, related_name="output")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["question", "level", "slot"],
                                    name="critique_output_unique_slot"),
            models.UniqueConstraint(fields=["study", "external_id"],
                                    condition=~Q(external_id=""),
                                    name="critique_output_unique_external_id"),
            models.CheckConstraint(
                condition=Q(level=0, first__isnull=True, second__isnull=True, choice="")
                | Q(level__gt=0, first__isnull=False, second__isnull=False) & ~Q(choice=""),
                name="critique_output_inputs_iff_critique"),
            models.CheckConstraint(
                condition=Q(author_kind="ai")
                | Q(final__isnull=False, confidence__gte=1, confidence__lte=5)
                & ~Q(choice="unparseable"),
                name="critique_output_human_complete"),
        ]
        indexes = [
            models.Index(fields=["study", "level", "slot"], name="critique_output_level"),
        ]

    def __str__(self) -> str:
        return f"O{self.pk} q={self.question_id} level={self.level} slot={self.slot}"


class CritiqueRun(models.Model):
    """An AI job with progress: a JSONL import of outputs or a run of the study's AI
    endpoint. A run stores its outputs batch by batch, each batch all or nothing."""

    class Kind(models.TextChoices):
        IMPORT = "import", "JSONL import"
        PROVIDER = "provider", "AI endpoint"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="critique_runs")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    name = models.CharField(max_length=255, blank=True, default="")
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    stored = models.PositiveIntegerField(default=0)
    unparseable = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    summary = models.JSONField(
        default=dict, blank=True,
        help_text="An import run that succeeded: the summary every import ends on "
                  "(core.services.import_jobs.import_summary).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} ({self.status})"


class CritiqueRunFile(models.Model):
    """The bytes of an import run's upload until the run ends — kept apart from the run,
    as ``ImportJobFile`` from its job, so that listing runs never reads them (and bytes,
    not text: a NUL byte is reported by line and field by the import, not refused by
    PostgreSQL)."""

    run = models.OneToOneField(CritiqueRun, on_delete=models.CASCADE, primary_key=True,
                               related_name="file")
    data = models.BinaryField()
