"""Assisted oversight studies (METHODS M2): sentences, arms, raters, rating tasks, ratings,
what each rater was shown and what they did with it.

* ``AssistedSettings`` — one row per assisted study: ratings per sentence and arm, item
  order, live routing (threshold T or bands → arms), bonus rule, tutorial, quiz, AI
  sampling (provider, prompt template, samples per sentence, scorer).
* ``Sentence`` — a target sentence in its prompt and full response, optional gold label
  and stratum, and the AI rating once known (``ai_verdict``, ``ai_confidence``: the
  aggregation of its trace samples, ``assistants.models.TraceSample``). ``route`` says
  whether it waits for the AI, goes to humans or takes the AI's rating.
* ``Arm`` — a set of assistance components (none = the unassisted baseline) with a
  ``version`` that grows whenever the components change.
* ``RaterAssignment`` — a rater's arm, drawn once (balanced, seeded), with the arm's
  version and components at that moment; never changed.
* ``RatingTask`` — a task of the engine (``LeasedTask``): one rating slot of one sentence
  for one arm; ``RatingTaskEvent`` its audit trail; ``RatingSkip`` a rater's skip (the slot
  goes back to the pool, the sentence never comes back to that rater).
* ``Rating`` — the answer (five-way scale or "can't assess", confidence, helpfulness,
  comment, time on task) with the exposure it answered.
* ``Exposure`` — exactly what was shown: trace sample ids, components, SHA-256 of the
  rendered panel. ``Interaction`` — sections expanded and evidence links opened, with
  server timestamps.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from annotations.core.inputs import LONG_TEXT_MAX, SENTENCE_MAX
from annotations.core.models import Study, User
from annotations.core.task_models import LeasedTask, TaskEvent

# The five-way scale's codes (the same strings as assistants.traces.VERDICTS and
# estimators.assisted.factuality.LABELS).
VERDICT_CHOICES = [
    ("inaccurate", "Inaccurate"),
    ("unsupported", "Unsupported"),
    ("disputed", "Disputed"),
    ("accurate", "Accurate"),
    ("no_attribution", "Doesn't require attribution"),
]


class Component(models.TextChoices):
    """What an arm can show of the AI rater's output (METHODS M2 "Assistance components")."""

    SEARCH = "search", "Search results"
    EVIDENCE = "evidence", "Evidence"
    REASONING = "reasoning", "Reasoning"
    JUDGMENTS = "judgments", "Judgments"
    CONFIDENCE = "confidence", "Confidence"
    DEBATE = "debate", "Debate"


COMPONENT_ORDER = [c.value for c in Component]


class AssistedSettings(models.Model):
    """Study-level design of an assisted study (one row, created with the study)."""

    class ItemOrder(models.TextChoices):
        SHARED = "shared", "One random order for all raters (sentences fill up in turn)"
        PER_RATER = "per_rater", "Each rater's own random order"

    class Routing(models.TextChoices):
        ALL = "all", "Every sentence to the raters"
        THRESHOLD = "threshold", "By AI confidence: at or below T to the raters"
        BANDS = "bands", "By AI confidence bands, each band to its arms or to the AI"

    class Scorer(models.TextChoices):
        MOST_EVIDENCE = "most_evidence", "Most evidence items, then most claims"
        IMPORTED = "imported_score", "The score given with each imported trace"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True,
                                 related_name="assisted")
    ratings_per_item = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(50)],
        help_text="Ratings collected per sentence in each arm that rates it.")
    item_order = models.CharField(max_length=10, choices=ItemOrder.choices,
                                  default=ItemOrder.PER_RATER)
    routing = models.CharField(max_length=10, choices=Routing.choices, default=Routing.ALL)
    threshold = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="T: sentences whose AI confidence is at or below T go to the raters; the "
                  "others take the AI's rating. Changing it re-routes only sentences no "
                  "rater has been given yet.")
    band_edges = models.JSONField(
        default=list, blank=True,
        help_text="Upper edges of the confidence bands but the last, ascending, e.g. "
                  "[0.5, 0.8]: band j holds edges[j-1] < confidence ≤ edges[j].")
    band_targets = models.JSONField(
        default=list, blank=True,
        help_text='Per band (one more than edges): "ai", or a list of arm names that rate '
                  'it, e.g. [["Evidence"], ["Baseline"], "ai"].')
    # Bonus (paper A.3.2: at least 6 ratings and 80 % accuracy → a bonus).
    bonus_enabled = models.BooleanField(default=False)
    bonus_min_ratings = models.PositiveSmallIntegerField(default=6)
    bonus_min_accuracy = models.FloatField(
        default=0.8, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    bonus_text = models.TextField(
        blank=True, help_text="What raters are told about the bonus (tutorial).")
    tutorial = models.TextField(
        blank=True, help_text="Markdown shown before the quiz; empty: the platform's text.")
    assisted_warning = models.TextField(
        blank=True, help_text="Extra tutorial section for assisted arms (after the quiz); "
                              "empty: the platform's text.")
    quiz = models.JSONField(
        default=list, blank=True,
        help_text='Comprehension questions: [{"question": …, "options": [..], "answer": '
                  '0-based index, "explain": …}]; every answer must be right to start. '
                  "Empty: the platform's questions.")
    # The AI rater (assistants.provider / sampling).
    n_samples = models.PositiveSmallIntegerField(
        default=10, validators=[MinValueValidator(1), MaxValueValidator(200)],
        help_text="Traces sampled per sentence (the paper: 50).")
    scorer = models.CharField(max_length=20, choices=Scorer.choices,
                              default=Scorer.MOST_EVIDENCE,
                              help_text="Which agreeing sample is displayed (Best-of-N).")
    band_cutoffs = models.JSONField(
        default=list, blank=True,
        help_text="Confidence shown as low below the first, medium below the second, else "
                  "high; empty: [0.7, 0.9].")
    ai_base_url = models.CharField(max_length=500, blank=True,
                                   help_text="OpenAI-compatible endpoint; empty: settings.")
    ai_model = models.CharField(max_length=200, blank=True)
    ai_api_key = models.CharField(max_length=500, blank=True,
                                  help_text="Never shown again once saved.")
    ai_temperature = models.FloatField(default=1.0,
                                       validators=[MinValueValidator(0.0), MaxValueValidator(2.0)])
    ai_max_tokens = models.PositiveIntegerField(default=2048)
    prompt_system = models.TextField(blank=True, help_text="Empty: the platform's default.")
    prompt_user = models.TextField(blank=True, help_text="Empty: the platform's default.")
    # Trust gate (issue 19; docs/audit.md): routing by the AI's confidence only after an
    # audit of the AI rater succeeded on at least this share of datapoints.
    gate_system = models.ForeignKey(
        "assistants.AISystem", on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+", verbose_name="audited AI system",
        help_text="The AI system (of this study) whose latest audit the gate reads.")
    gate_min_success = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        verbose_name="minimum audit success rate",
        help_text="Routing by AI confidence (threshold or bands) is refused unless the "
                  "latest finished audit of that AI system succeeded on at least this share "
                  "(0–1). Empty: no gate.")
    raters_joined = models.PositiveIntegerField(
        default=0, editable=False, help_text="Arm draws so far (the next rater's position).")
    routing_changed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "assisted study settings"
        verbose_name_plural = "assisted study settings"

    def __str__(self) -> str:
        return f"Settings of {self.study}"


class Sentence(models.Model):
    """One AI-written target sentence to rate, in its prompt and full response."""

    class Route(models.TextChoices):
        WAITING = "waiting", "Waiting for the AI rating"
        HUMAN = "human", "Rated by humans"
        AI = "ai", "Takes the AI rating"

    class AiSource(models.TextChoices):
        NONE = "", "None yet"
        TRACES = "traces", "Aggregated from trace samples"
        IMPORTED = "imported", "Imported with the sentence"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="sentences")
    external_id = models.CharField(max_length=200)
    prompt = models.TextField(max_length=LONG_TEXT_MAX)
    response = models.TextField(max_length=LONG_TEXT_MAX)
    target = models.TextField(max_length=SENTENCE_MAX,
                              help_text="The sentence of the response to rate.")
    gold = models.CharField(max_length=16, choices=VERDICT_CHOICES, blank=True, default="",
                            help_text="Hidden from raters.")
    stratum = models.CharField(max_length=120, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    searches = models.JSONField(
        null=True, blank=True,
        help_text="Search results given to the AI rater (assistants.traces Search dicts).")
    ai_verdict = models.CharField(max_length=16, choices=VERDICT_CHOICES, blank=True,
                                  default="")
    ai_confidence = models.FloatField(null=True, blank=True)
    ai_n_agree = models.PositiveSmallIntegerField(null=True, blank=True)
    ai_n_verified = models.PositiveSmallIntegerField(null=True, blank=True)
    ai_n_samples = models.PositiveSmallIntegerField(null=True, blank=True)
    ai_source = models.CharField(max_length=10, choices=AiSource.choices, blank=True,
                                 default="")
    ai_rated_at = models.DateTimeField(null=True, blank=True)
    route = models.CharField(max_length=8, choices=Route.choices, default=Route.WAITING)
    band = models.PositiveSmallIntegerField(null=True, blank=True)
    routed_at = models.DateTimeField(null=True, blank=True)
    rank = models.BigIntegerField(default=0, help_text="Random order, drawn at import.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"],
                                    name="sentence_unique_external_id"),
            models.CheckConstraint(
                condition=Q(ai_confidence__isnull=True)
                | Q(ai_confidence__gte=0.0, ai_confidence__lte=1.0),
                name="sentence_confidence_range"),
        ]
        indexes = [
            models.Index(fields=["study", "route"], name="sentence_study_route"),
            models.Index(fields=["study", "ai_confidence"], name="sentence_study_confidence"),
        ]

    def __str__(self) -> str:
        return self.external_id


class Arm(models.Model):
    """A between-subjects condition: the components of the AI output its raters see. No
    component = the unassisted baseline. ``version`` grows with every change of the
    components (raters keep the version they joined under)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="arms")
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    show_search = models.BooleanField(default=False, verbose_name="search results")
    show_evidence = models.BooleanField(default=False, verbose_name="evidence",
                                        help_text="Implies search results.")
    show_reasoning = models.BooleanField(default=False, verbose_name="reasoning")
    show_judgments = models.BooleanField(default=False, verbose_name="judgments")
    show_confidence = models.BooleanField(default=False, verbose_name="confidence")
    show_debate = models.BooleanField(
        default=False, verbose_name="debate",
        help_text="Two traces arguing for opposite verdicts, each with the arm's other "
                  "components; never with confidence.")
    is_active = models.BooleanField(default=True,
                                    help_text="New raters are drawn only into active arms.")
    version = models.PositiveIntegerField(default=1, editable=False)
    position = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="arm_unique_name"),
            models.CheckConstraint(condition=Q(show_evidence=False) | Q(show_search=True),
                                   name="arm_evidence_implies_search"),
            models.CheckConstraint(condition=Q(show_debate=False) | Q(show_confidence=False),
                                   name="arm_debate_no_confidence"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def components(self) -> list[str]:
        """Component codes in display order (empty: baseline)."""
        return [c for c in COMPONENT_ORDER if getattr(self, f"show_{c}")]

    @property
    def is_baseline(self) -> bool:
        return not self.components

    def clean(self) -> None:
        """Evidence implies the search results it quotes from: ticking evidence ticks search
        too (issue 17: it was refused). A debate shows no confidence and needs something of
        its two traces."""
        errors = {}
        if self.show_evidence and not self.show_search:
            self.show_search = True
        if self.show_debate and self.show_confidence:
            errors["show_confidence"] = "A debate shows no confidence."
        if self.show_debate and not (self.show_search or self.show_reasoning
                                     or self.show_judgments):
            errors["show_debate"] = ("A debate shows two traces: tick what of them to show "
                                     "(search, evidence, reasoning, judgments).")
        if errors:
            raise ValidationError(errors)


class RaterAssignment(models.Model):
    """A rater's arm in a study: drawn once when they join (balanced permuted blocks,
    seeded by the study), stored with the arm's version and components; never changed.
    The tutorial and quiz must be passed before the first task."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="rater_assignments")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="rater_assignments")
    arm = models.ForeignKey(Arm, on_delete=models.RESTRICT, related_name="assignments")
    arm_version = models.PositiveIntegerField()
    components = models.JSONField(default=list)
    sequence = models.PositiveIntegerField(help_text="Join order: position in the blocks.")
    assigned_at = models.DateTimeField(auto_now_add=True)
    quiz_passed_at = models.DateTimeField(null=True, blank=True)
    quiz_attempts = models.PositiveSmallIntegerField(default=0)
    warning_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "user"], name="assignment_unique_rater"),
            models.UniqueConstraint(fields=["study", "sequence"],
                                    name="assignment_unique_sequence"),
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.arm} v{self.arm_version}"

    @property
    def ready(self) -> bool:
        """Quiz passed, and for assisted arms the assistance warning seen."""
        return self.quiz_passed_at is not None and (
            not self.components or self.warning_seen_at is not None)


class RatingTask(LeasedTask):
    """One rating slot: sentence × arm × slot (0 … ratings_per_item − 1), leased through the
    task engine to a rater of that arm who has neither rated, held nor skipped the
    sentence."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="rating_tasks")
    sentence = models.ForeignKey(Sentence, on_delete=models.CASCADE, related_name="tasks")
    arm = models.ForeignKey(Arm, on_delete=models.CASCADE, related_name="tasks")
    slot = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["sentence", "arm", "slot"],
                                    name="rating_task_unique_slot"),
            models.UniqueConstraint(fields=["sentence", "answered_by"],
                                    condition=Q(answered_by__isnull=False),
                                    name="rating_task_one_per_rater"),
            models.CheckConstraint(
                condition=Q(status="leased", holder__isnull=False,
                            lease_expires_at__isnull=False) | ~Q(status="leased"),
                name="rating_task_leased_has_holder"),
        ]
        indexes = [
            models.Index(fields=["study", "arm", "rank"], condition=Q(status="pending"),
                         name="rating_task_pending_queue"),
            models.Index(fields=["holder", "status"], condition=Q(status="leased"),
                         name="rating_task_leases"),
            models.Index(fields=["lease_expires_at"], condition=Q(status="leased"),
                         name="rating_task_lease_expiry"),
            models.Index(fields=["sentence", "holder"], name="rating_task_sentence_holder"),
        ]

    def __str__(self) -> str:
        return f"R{self.pk} sentence={self.sentence_id} arm={self.arm_id} slot={self.slot}"


class RatingTaskEvent(TaskEvent):
    task = models.ForeignKey(RatingTask, on_delete=models.CASCADE, related_name="events")

    class Meta:
        indexes = [models.Index(fields=["task", "at"], name="rating_event_task_at")]


class RatingSkip(models.Model):
    """A rater skipped a sentence: the slot went back to the pool; the sentence is never
    offered to them again. Kept for the analysis (skips are excluded from accuracy)."""

    task = models.ForeignKey(RatingTask, on_delete=models.CASCADE, related_name="skips")
    sentence = models.ForeignKey(Sentence, on_delete=models.CASCADE, related_name="skips")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="rating_skips")
    arm = models.ForeignKey(Arm, on_delete=models.CASCADE, related_name="skips")
    exposure = models.ForeignKey("Exposure", on_delete=models.SET_NULL, null=True, blank=True,
                                 related_name="+")
    time_on_task_ms = models.PositiveIntegerField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "sentence"],
                                    name="rating_skip_unique_user_sentence"),
        ]


class Rating(models.Model):
    """A rater's answer to one rating task (exactly one per answered task)."""

    class Label(models.TextChoices):
        INACCURATE = "inaccurate", _("Inaccurate")
        UNSUPPORTED = "unsupported", _("Unsupported")
        DISPUTED = "disputed", _("Disputed")
        ACCURATE = "accurate", _("Accurate")
        NO_ATTRIBUTION = "no_attribution", _("Doesn't require attribution")
        CANT_ASSESS = "cant_assess", _("Can't confidently assess")

    class Confidence(models.IntegerChoices):
        NOT_AT_ALL = 0, _("Not at all confident")
        SOMEWHAT = 1, _("Somewhat confident")
        MOSTLY = 2, _("Mostly confident")
        COMPLETELY = 3, _("Completely confident")

    class Helpfulness(models.IntegerChoices):
        NOT_AT_ALL = 0, _("Not at all helpful")
        SOMEWHAT = 1, _("Somewhat helpful")
        EXTREMELY = 2, _("Extremely helpful")

    task = models.OneToOneField(RatingTask, on_delete=models.CASCADE, related_name="rating")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="ratings")
    sentence = models.ForeignKey(Sentence, on_delete=models.CASCADE, related_name="ratings")
    arm = models.ForeignKey(Arm, on_delete=models.CASCADE, related_name="ratings")
    arm_version = models.PositiveIntegerField()
    rater = models.ForeignKey(User, on_delete=models.CASCADE, related_name="ratings")
    label = models.CharField(max_length=16, choices=Label.choices)
    confidence = models.PositiveSmallIntegerField(
        choices=Confidence.choices, null=True, blank=True,
        help_text="None for \"can't confidently assess\" (the question is not asked then).")
    helpfulness = models.PositiveSmallIntegerField(choices=Helpfulness.choices, null=True,
                                                   blank=True)
    comment = models.TextField(blank=True, max_length=5000)
    time_on_task_ms = models.PositiveIntegerField(null=True, blank=True)
    exposure = models.ForeignKey("Exposure", on_delete=models.SET_NULL, null=True, blank=True,
                                 related_name="ratings")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["sentence", "rater"],
                                    name="rating_one_per_rater_sentence"),
        ]
        indexes = [models.Index(fields=["study", "arm"], name="rating_study_arm")]


class Exposure(models.Model):
    """What one rendering of a task showed its rater (page or API): the arm, its version
    and components, the trace samples' ids and the SHA-256 of the rendered AI panel (empty
    string hashed for a blind arm). One row per distinct panel per lease."""

    class Via(models.TextChoices):
        PAGE = "page", "Rating page"
        API = "api", "API"

    task = models.ForeignKey(RatingTask, on_delete=models.CASCADE, related_name="exposures")
    rater = models.ForeignKey(User, on_delete=models.CASCADE, related_name="exposures")
    arm = models.ForeignKey(Arm, on_delete=models.CASCADE, related_name="exposures")
    arm_version = models.PositiveIntegerField()
    components = models.JSONField(default=list)
    trace_ids = models.JSONField(default=list, help_text="assistants.TraceSample ids shown.")
    panel_sha256 = models.CharField(max_length=64)
    lease = models.PositiveSmallIntegerField(help_text="The task's times_issued when shown.")
    via = models.CharField(max_length=4, choices=Via.choices)
    shown_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "rater", "lease", "via", "panel_sha256"],
                                    name="exposure_unique_panel"),
        ]


class Interaction(models.Model):
    """What the rater did with the panel: a section expanded/collapsed, an evidence or
    search-result link opened. ``at`` is the server's clock; ``client_ms`` the page's
    own milliseconds since it was shown (informative only)."""

    class Kind(models.TextChoices):
        EXPAND = "expand", "Section expanded"
        COLLAPSE = "collapse", "Section collapsed"
        OPEN_LINK = "open_link", "Link opened"

    task = models.ForeignKey(RatingTask, on_delete=models.CASCADE, related_name="interactions")
    exposure = models.ForeignKey(Exposure, on_delete=models.CASCADE, null=True, blank=True,
                                 related_name="interactions")
    rater = models.ForeignKey(User, on_delete=models.CASCADE, related_name="interactions")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    section = models.CharField(max_length=40, help_text="A panel section (component code, "
                                                        "or debate side).")
    target = models.CharField(max_length=300, blank=True,
                              help_text="Link opened: e.g. evidence:2 or search:0:1.")
    client_ms = models.PositiveIntegerField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["task", "at"], name="interaction_task_at")]


class QuizAttempt(models.Model):
    """One submission of the comprehension quiz (all answers must be right to pass)."""

    assignment = models.ForeignKey(RaterAssignment, on_delete=models.CASCADE,
                                   related_name="quiz_submissions")
    answers = models.JSONField(default=list)
    passed = models.BooleanField()
    at = models.DateTimeField(auto_now_add=True)


class RoutingChange(models.Model):
    """A change of live routing (threshold or bands) and what it moved."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="routing_changes")
    actor = models.ForeignKey(User, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+")
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    to_humans = models.PositiveIntegerField(default=0)
    to_ai = models.PositiveIntegerField(default=0)
    kept = models.PositiveIntegerField(default=0, help_text="Sentences a rater already had.")
    at = models.DateTimeField(auto_now_add=True)


class AssistedStudyManager(models.Manager):
    def get_queryset(self):
        return super().get_queryset().filter(kind=Study.Kind.ASSISTED)


class AssistedStudy(Study):
    """Assisted studies only (the researcher's admin page of the study type)."""

    objects = AssistedStudyManager()

    class Meta:
        proxy = True
        verbose_name = "assisted study"
        verbose_name_plural = "assisted studies"
