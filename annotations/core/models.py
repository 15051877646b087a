"""Studies, their classes and members, items, routed queries and estimate snapshots.

Invariants live here (constraints, ``clean``); workflows live in ``services``.
"""

from __future__ import annotations

import secrets

from django.contrib.auth.models import AbstractUser
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy as _

from annotations.core.inputs import LONG_TEXT_MAX
from annotations.core.task_models import TaskStatus
from annotations.core.words import counted


class User(AbstractUser):
    """Platform account. Roles are per study (``StudyMembership``); ``is_staff`` opens the admin.
    ``password_must_change``: the password was made by a researcher (a new member's, or a
    reset); the person replaces it at their first sign-in before anything else
    (``core.accounts.PasswordChangeRequired``), and it signs in once
    (``one_time_password_used_at``). ``username_key``: the name as a reader sees it
    (``core.usernames.username_key``), kept with the name so that look-alikes are refused."""

    password_must_change = models.BooleanField(
        default=False, help_text="Set on passwords a researcher hands out; cleared when the "
                                 "person chooses their own.")
    one_time_password_used_at = models.DateTimeField(
        null=True, blank=True, editable=False,
        help_text="When the password a researcher handed out signed in: it does not again.")
    username_key = models.CharField(
        max_length=600, db_index=True, editable=False, default="",
        help_text="The user name as a reader sees it (NFKC, Unicode confusables skeleton, "
                  "case-folded): look-alike names are refused.")

    def save(self, *args, **kwargs):
        # derived from the name like a generated column (SQL cannot compute the skeleton)
        from annotations.core.usernames import username_key

        self.username_key = username_key(self.username)
        fields = kwargs.get("update_fields")
        if fields is not None and "username" in fields:
            kwargs["update_fields"] = {*fields, "username_key"}
        super().save(*args, **kwargs)


def _new_seed() -> int:
    return secrets.randbits(62)


class Study(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", _("Draft")
        OPEN = "open", _("Open")
        CLOSED = "closed", _("Closed")

    class Kind(models.TextChoices):
        PARTITIONED = "partitioned", "Partitioned supervision"
        ASSISTED = "assisted", "Assisted oversight"
        CRITIQUE = "critique", "Recursive critique"

    # estimators.partitioned.accuracy.estimate(interval=…)
    class IntervalMethod(models.TextChoices):
        AUTO = "auto", "Standard 95 % (exact where labels are few)"
        CONSERVATIVE = "conservative", "Conservative for audits (at least 95 %, wider)"

    # Unique among one creator's studies only: a global uniqueness would tell a researcher
    # which names other researchers' studies bear.
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, editable=False,
        related_name="studies_created",
        help_text="Who created the study (its names are unique among their studies); empty "
        "for studies made by commands and demos.",
    )
    kind = models.CharField(
        max_length=12, choices=Kind.choices, default=Kind.PARTITIONED,
        help_text="Partitioned: specialists answer 'is it class k?' about items. Assisted: "
        "raters judge AI-written sentences, some helped by an AI rater. Critique: answers, "
        "critiques and critiques of critiques. Fixed once the study is created.",
    )
    description = models.TextField(blank=True)
    guidelines = models.TextField(
        blank=True,
        help_text="Shown to every specialist on the labelling page (Markdown; raw HTML is "
        "removed).",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    queries_per_item = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1)],
        help_text="Distinct classes asked per item, drawn without replacement; stops at the "
        "first 'yes'.",
    )
    lease_minutes = models.PositiveSmallIntegerField(
        default=10, validators=[MinValueValidator(1), MaxValueValidator(240)]
    )
    shuffle_options = models.BooleanField(
        default=True,
        help_text="Shuffle each item's own options (multiple choice; classes named by "
        "position, e.g. A–D: class k = the option shown at position k). Items without options, "
        "or whose options are exactly the class names in order (named categories such as Cat, "
        "Dog, Bird), are never shuffled; options naming classes in another order are refused "
        "at import.",
    )
    gold_rate = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(0.5)],
        help_text="Share of a specialist's queries drawn from quality-control gold items.",
    )
    target_ci_width = models.FloatField(
        default=0.05,
        validators=[MinValueValidator(0.001), MaxValueValidator(1.0)],
        help_text="Full width of the 95% interval the dashboard plans for.",
    )
    seed = models.BigIntegerField(default=_new_seed, help_text="Seed of every random draw.")
    interval_method = models.CharField(
        max_length=12, choices=IntervalMethod.choices, default=IntervalMethod.AUTO,
        help_text="How the 95 % intervals are made. Ordinary-only and complementary-only "
        "columns: Standard — Blaker's interval, at least 95 % whatever the true accuracy; "
        "Conservative — Clopper–Pearson, wider. Other columns, where a system has few errors, "
        "few correct answers or few complementary hits (elsewhere: the likelihood-ratio "
        "interval): Standard — the mid-p exact interval, about 95 % on average, narrower; "
        "Conservative — at least 95 % whatever the true accuracy, often over 99 % on small "
        "samples — for audits. Both give the same interval for the same data. Fixed once the "
        "study opens.",
    )
    routing_batches = models.PositiveIntegerField(default=0, editable=False)
    # Items per stratum (quality checks excluded), kept by the item services: the
    # population weights of the stratified estimate without a count over every item.
    stratum_sizes = models.JSONField(default=dict, editable=False)
    # Exclusions standing (``core.exclusion_models.Exclusion`` not undone), kept by their
    # services: an answer's service reads it with the study and skips every exclusion
    # statement while it is 0.
    exclusions_standing = models.PositiveIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["created_by", "name"],
                                    name="study_unique_name_per_creator"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def k(self) -> int:
        return self.classes.count()


class StudyClass(models.Model):
    """Class k of a study (0-based ``index``); a pool of specialists answers 'is it class k?'."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="classes")
    index = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    guidelines = models.TextField(
        blank=True,
        help_text="Shown to this class's specialists on the labelling page (Markdown; raw "
        "HTML is removed).",
    )

    class Meta:
        ordering = ["study", "index"]
        constraints = [
            models.UniqueConstraint(fields=["study", "index"], name="class_unique_index"),
            models.UniqueConstraint(fields=["study", "name"], name="class_unique_name"),
        ]
        verbose_name_plural = "study classes"

    def __str__(self) -> str:
        return f"{self.index}: {self.name}"


class StudyMembership(models.Model):
    """A user's role in one study: the per-study permission every view and API checks."""

    class Role(models.TextChoices):
        RESEARCHER = "researcher", "Researcher"
        MANAGER = "manager", "Manager"
        SPECIALIST = "specialist", "Specialist"
        ANNOTATOR = "annotator", "Annotator"  # raters (assisted) and critique annotators
        REVIEWER = "reviewer", "Reviewer"  # accepts or rejects answers (core.services.reviews)

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=12, choices=Role.choices)
    study_class = models.ForeignKey(
        StudyClass,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="specialists",
        help_text="Required for specialists: the class whose question they answer.",
    )
    draws = models.PositiveIntegerField(
        default=0, editable=False, help_text="Next-query requests so far (seeds the QC draw)."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study", "user", "role"], name="membership_unique_role"
            ),
            models.CheckConstraint(
                condition=Q(role="specialist", study_class__isnull=False)
                | (~Q(role="specialist") & Q(study_class__isnull=True)),
                name="membership_class_iff_specialist",
            ),
        ]

    def __str__(self) -> str:
        suffix = f" ({self.study_class.name})" if self.study_class_id else ""
        return f"{self.user} — {self.role}{suffix}"

    def clean(self) -> None:
        if self.role == self.Role.SPECIALIST and not self.study_class_id:
            raise ValidationError({"study_class": "A specialist needs a class."})
        if self.role != self.Role.SPECIALIST and self.study_class_id:
            raise ValidationError({"study_class": "Only specialists have a class."})
        if self.study_class_id and self.study_class.study_id != self.study_id:
            raise ValidationError({"study_class": "The class belongs to another study."})


class Item(models.Model):
    """One question with K options. ``option_order[p]`` is the original index shown at
    position p (drawn once, stored); class k is position k. ``gold_option`` (original index)
    is hidden: used for validation and, on quality-control items, to score specialists."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=200)
    text = models.TextField(max_length=LONG_TEXT_MAX)
    options = models.JSONField(default=list, blank=True)
    option_order = models.JSONField(default=list, editable=False)
    class_order = models.JSONField(
        default=list, editable=False, help_text="Classes drawn for this item, in asking order."
    )
    metadata = models.JSONField(default=dict, blank=True)
    stratum = models.CharField(max_length=120, blank=True, default="")
    gold_option = models.PositiveSmallIntegerField(null=True, blank=True)
    is_quality_check = models.BooleanField(
        default=False, help_text="Gold item interleaved to check specialists; never estimated."
    )
    routed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study", "external_id"], name="item_unique_external_id"
            ),
            models.CheckConstraint(
                condition=Q(is_quality_check=False) | Q(gold_option__isnull=False),
                name="item_quality_check_has_gold",
            ),
        ]
        indexes = [models.Index(fields=["study", "stratum"])]

    def __str__(self) -> str:
        return self.external_id

    # Why a running study's items are fixed (admin, API and import say the same).
    ROUTED_FIXED = "The item has routed queries: its options (and K) are fixed once it is routed."
    ANSWERED_FIXED = ("an answered item cannot be rewritten (its labels answer the stored "
                      "question)")
    LEASED_FIXED = ("a specialist is answering it right now: its text can change once they "
                    "have answered or their lease has ended")
    CONTENT_FIELDS = ("text", "stratum", "gold_option", "metadata")

    def clean(self) -> None:
        if self.study_id and self.options:
            k = self.study.classes.count()
            if len(self.options) != k:
                options = counted(len(self.options), "option")
                raise ValidationError({"options": f"{options} but the study has K={k}."})
        if self.pk is None:
            return
        before = Item.objects.filter(pk=self.pk).first()
        if before is None:
            return
        if before.study_id != self.study_id:
            raise ValidationError({"study": "An item cannot move to another study."})
        queries = self.queries.all()  # the partitioned study type's queries of this item
        if ((before.options, before.is_quality_check) != (self.options, self.is_quality_check)
                and queries.exists()):
            raise ValidationError({"options": self.ROUTED_FIXED})
        changed = [f for f in self.CONTENT_FIELDS if getattr(before, f) != getattr(self, f)]
        if changed and queries.filter(status=TaskStatus.ANSWERED).exists():
            raise ValidationError({changed[0]: f"The item has answered queries; "
                                               f"{self.ANSWERED_FIXED}."})
        if "text" in changed and queries.filter(status=TaskStatus.LEASED).exists():
            raise ValidationError({"text": f"{capfirst(self.LEASED_FIXED)}."})

    def position_of(self, original_index: int | None) -> int | None:
        """Displayed position (= class) of an original option index; None when missing."""
        if original_index is None:
            return None
        try:
            return self.option_order.index(original_index)
        except ValueError:
            return None

    def displayed_options(self, class_names: list[str]) -> list[str]:
        if not self.options:
            return list(class_names)
        return [self.options[i] for i in self.option_order]


class EstimateSnapshot(models.Model):
    """What a recompute found: dashboards and the API read these, never the labels."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="snapshots")
    computed_at = models.DateTimeField(auto_now_add=True)
    n_answered = models.PositiveIntegerField()
    duration_ms = models.FloatField()
    payload = models.JSONField()

    class Meta:
        ordering = ["-computed_at", "-id"]
        get_latest_by = ["computed_at", "id"]
        indexes = [models.Index(fields=["study", "-computed_at"])]


class RecomputeState(models.Model):
    """Health of a study's live recompute (one row per study, written by
    ``services.recompute``): which answers the latest snapshot includes, and the last failure.

    ``requested_seq`` is bumped after each answer commits; a recompute reads it before it
    counts the labels and, on success, stores what it read as ``computed_seq``. The
    snapshot is behind the answers exactly while ``requested_seq > computed_seq``;
    ``dirty_since`` is when that began."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True,
                                 related_name="recompute_state")
    requested_seq = models.PositiveBigIntegerField(default=0)
    computed_seq = models.PositiveBigIntegerField(default=0)
    dirty_since = models.DateTimeField(null=True, blank=True)
    succeeded_at = models.DateTimeField(null=True, blank=True)
    # The latest failed attempt since the last success (cleared by a success). ``error`` is
    # the exception's type and first line, never a traceback.
    failed_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["dirty_since"], condition=Q(dirty_since__isnull=False),
                         name="recompute_state_dirty"),
        ]


class ImportJob(models.Model):
    """One import of a file of items or AI predictions (or an audit's two files) into a
    study, run as a task (``services/import_jobs.py``): all or nothing, with its progress,
    outcome and errors.

    The uploaded bytes wait in ``ImportJobFile`` (the database, not MEDIA_ROOT: the web and
    worker containers share no disk) and are deleted when the job ends. ``phase``/``done``/
    ``total`` are the latest progress (on PostgreSQL written by a second connection while
    the import's transaction is open; on SQLite the job's final state only — the running
    progress is in the cache there). ``summary`` is the import's result, ``errors`` every
    problem as 'file:line: field: message'."""

    class Kind(models.TextChoices):
        ITEMS = "items", "items"
        PREDICTIONS = "predictions", "AI predictions"
        AUDIT = "audit", "audit files"  # an audit's datapoints and commitments, checked
        # an Inspect, lm-evaluation-harness or Every Eval Ever log (core.services.eval_logs), into
        # any study type (core.services.eval_logs)
        EVAL_LOG = "eval_log", "evaluation log"
        SENTENCES = "sentences", "sentences"  # assisted
        TRACES = "traces", "AI traces"  # assisted
        QUESTIONS = "questions", "questions"  # critique
        AI_OUTPUTS = "ai_outputs", "AI outputs"  # critique

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="import_jobs")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=255, help_text="The file's name (API: 'request').")
    fmt = models.CharField(max_length=8, help_text="csv or jsonl; an evaluation log's "
                           "format: inspect, lm-eval or eee")
    update = models.BooleanField(default=False, help_text="Rewrite existing ids.")
    size = models.PositiveBigIntegerField(help_text="Bytes uploaded.")
    sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    phase = models.CharField(max_length=20, blank=True, default="")
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    options = models.JSONField(
        default=dict, blank=True,
        help_text="What the import service needs beyond the file (an audit's rubric, rounds, "
                  "files …); empty for items and predictions.")
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(null=True, blank=True,
                                      help_text="The latest progress written.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["study", "-created_at"], name="import_job_study_created")]
        constraints = [
            # a second submission of the same file with the same options while the first
            # is still queued or running is that job (double clicks, client retries)
            models.UniqueConstraint(
                fields=["study", "kind", "sha256", "update"],
                condition=Q(status__in=["queued", "running"]),
                name="import_job_one_active_per_file"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} from {self.name} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)


class ImportJobFile(models.Model):
    """The bytes of a job's upload until the job ends (kept apart so that listing jobs
    never reads them)."""

    job = models.OneToOneField(ImportJob, on_delete=models.CASCADE, primary_key=True,
                               related_name="file")
    data = models.BinaryField()


class ItemFlag(models.Model):
    """A labeller's flag on the item of a task they were shown: broken or ambiguous, with a
    note (``core.services.flags``). The item is the study type's own item (partitioned:
    ``Item``; assisted: ``Sentence``; critique: ``CritiqueQuestion``), named by its primary
    key in ``item_id`` — the study's type says which table (``flaggable_register``). One flag
    per person and item: flagging again rewrites it.

    A researcher resolves the open flags of an item: fixed (the item was corrected),
    dismissed (nothing wrong) or withdrawn — a withdrawn item is no longer handed out (the
    engine's ``lease_first`` passes over its tasks) and its answers leave the estimates."""

    class Reason(models.TextChoices):
        BROKEN = "broken", _("Broken (cannot be answered as shown)")
        AMBIGUOUS = "ambiguous", _("Ambiguous (more than one answer fits)")

    class Resolution(models.TextChoices):
        OPEN = "", "Open"
        FIXED = "fixed", "Fixed"
        WITHDRAWN = "withdrawn", "Withdrawn"
        DISMISSED = "dismissed", "Dismissed"

    NOTE_MAX = 2000

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="item_flags")
    item_id = models.PositiveBigIntegerField(
        help_text="The study type's item (partitioned: item; assisted: sentence; critique: "
                  "question).")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="item_flags",
                             verbose_name="flagged by")
    reason = models.CharField(max_length=10, choices=Reason.choices)
    note = models.TextField(max_length=NOTE_MAX, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    resolution = models.CharField(max_length=10, choices=Resolution.choices, blank=True,
                                  default=Resolution.OPEN)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")

    class Meta:
        ordering = ["resolution", "-updated_at", "-id"]
        constraints = [
            # the index of this key also serves the lease statement's "not withdrawn" probe
            models.UniqueConstraint(fields=["study", "item_id", "user"],
                                    name="item_flag_one_per_user"),
            models.CheckConstraint(
                condition=Q(resolution="", resolved_at__isnull=True)
                | (~Q(resolution="") & Q(resolved_at__isnull=False)),
                name="item_flag_resolved_iff_resolution"),
        ]
        indexes = [models.Index(fields=["study", "resolution"], name="item_flag_study_state")]

    def __str__(self) -> str:
        return f"{self.get_reason_display()} flag on item {self.item_id} by {self.user}"

    @classmethod
    def withdrawn_ids(cls, study: Study | int) -> models.QuerySet:
        """The ids of the study's withdrawn items (a subquery for ``…__in``): what routing and
        the estimates leave out."""
        return (cls.objects.filter(study=study, resolution=cls.Resolution.WITHDRAWN)
                .values("item_id"))

    @classmethod
    def not_withdrawn_sql(cls, study_column: str, item_column: str) -> str:
        """The same as a SQL condition on a row whose study and item are the columns given
        (e.g. ``q.study_id``, ``q.item_id``), for raw statements; it takes no parameters."""
        return (f"NOT EXISTS (SELECT 1 FROM {cls._meta.db_table} wf WHERE wf.study_id = "
                f"{study_column} AND wf.item_id = {item_column} AND wf.resolution = "
                f"'{cls.Resolution.WITHDRAWN.value}')")


class AnswerReview(models.Model):
    """A reviewer's (or researcher's) verdict on one answer of any study type: the answer is
    the row ``answer_id`` of the table ``answer_type`` (partitioned: ``Query``; assisted:
    ``Rating``; critique: ``CritiqueOutput`` — each type registers its own with
    ``core.services.reviews.reviewable_register``). One row per answer, kept for good:

    * accepted — the answer was checked and stays in the estimates;
    * rejected — it leaves the estimates (every type's analysis filters its answers through
      :meth:`rejected_ids` / :meth:`not_rejected_sql`), kept with its ``reason``;
    * undone — a rejection taken back: the answer is in the estimates again; the reason and
      who rejected it stay, with who undid it and when.

    Every change is also a ``StudyEvent`` (``answer_accepted``, ``answer_rejected``,
    ``answer_restored``)."""

    class State(models.TextChoices):
        ACCEPTED = "accepted", "Accepted"
        REJECTED = "rejected", "Rejected"
        UNDONE = "undone", "Rejection undone"

    REASON_MAX = 2000

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="answer_reviews")
    answer_type = models.ForeignKey(ContentType, on_delete=models.CASCADE, related_name="+")
    answer_id = models.PositiveBigIntegerField()
    state = models.CharField(max_length=10, choices=State.choices)
    reason = models.TextField(max_length=REASON_MAX, blank=True, default="")
    reviewed_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    reviewed_at = models.DateTimeField()
    undone_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")
    undone_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-reviewed_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["answer_type", "answer_id"],
                                    name="answer_review_one_per_answer"),
            models.CheckConstraint(
                condition=~Q(state="rejected") | ~Q(reason=""),
                name="answer_review_rejected_has_reason"),
        ]
        indexes = [models.Index(fields=["study", "state"], name="answer_review_study_state")]

    def __str__(self) -> str:
        return f"{self.get_state_display()}: {self.answer_type.model} {self.answer_id}"

    @classmethod
    def rejected_ids(cls, study: Study | int, model: type[models.Model]) -> models.QuerySet:
        """The ids of the study's rejected answers of ``model`` (a subquery for
        ``…__in``): what every estimate leaves out."""
        return (cls.objects.filter(study=study, state=cls.State.REJECTED,
                                   answer_type=ContentType.objects.get_for_model(model))
                .values("answer_id"))

    @classmethod
    def not_rejected_sql(cls, model: type[models.Model], study_column: str,
                         id_column: str) -> str:
        """The same as a SQL condition on a row of ``model`` whose study and id are the
        columns given (e.g. ``q.study_id``, ``q.id``), for raw statements; it takes no
        parameters (the content type's id is an integer written into the statement)."""
        type_id = int(ContentType.objects.get_for_model(model).pk)
        return (f"NOT EXISTS (SELECT 1 FROM {cls._meta.db_table} ar WHERE ar.study_id = "
                f"{study_column} AND ar.answer_type_id = {type_id} AND ar.answer_id = "
                f"{id_column} AND ar.state = '{cls.State.REJECTED.value}')")
