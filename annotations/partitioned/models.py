"""Models of partitioned studies: the queries ("is it class k?") routed to specialists, their
events and skips. Studies, classes, members and items are the core's
(``annotations.core.models``)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from annotations.core.models import Item, Study, User
from annotations.core.task_models import LeasedTask, TaskEvent


class RoutingDesign(models.Model):
    """How a partitioned study draws the classes it asks about its items, and in which order
    it asks its items, from this design's start until the next one
    (``services.designs.routing_design_set``). Every query keeps the design it was drawn
    under (``Query.design``); no design row = the uniform design (the paper's, and the
    default). Class probabilities: ``estimators.partitioned.designs``; Neyman's order of
    items across strata: ``estimators.partitioned.allocation``."""

    class Kind(models.TextChoices):
        UNIFORM = "uniform", "Uniform (every class equally often; the paper's)"
        TARGETED = "targeted", "Targeted (mostly the classes the AI systems picked)"
        NEYMAN = "neyman", "Neyman (strata whose answers vary more asked more; classes uniform)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="routing_designs")
    number = models.PositiveIntegerField(help_text="1 = the study's first design change.")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    epsilon = models.FloatField(
        null=True, blank=True,
        help_text="Targeted: the share of items asked as under the uniform design (every "
        "class keeps a probability of at least ε/K).")
    allocation = models.JSONField(
        null=True, blank=True,
        help_text="Neyman: each stratum's answering rate relative to the fastest (a share "
        "of its items; the pilot's spread, at least 0.1), and what it came from.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "number"], name="design_unique_number"),
            models.CheckConstraint(
                condition=Q(kind__in=["uniform", "neyman"], epsilon__isnull=True)
                | Q(kind="targeted", epsilon__gt=0, epsilon__lte=1),
                name="design_epsilon_iff_targeted"),
            models.CheckConstraint(
                condition=Q(kind="neyman", allocation__isnull=False)
                | ~Q(kind="neyman") & Q(allocation__isnull=True),
                name="design_allocation_iff_neyman"),
        ]
        ordering = ["study", "number"]

    def __str__(self) -> str:
        if self.kind == self.Kind.TARGETED:
            return f"Design {self.number}: targeted, ε = {self.epsilon:g}"
        if self.kind == self.Kind.NEYMAN:
            return f"Design {self.number}: Neyman allocation across strata"
        return f"Design {self.number}: uniform"


class Query(LeasedTask):
    """'Is the answer class k?' about one item, routed to class k's pool and leased to one
    specialist at a time (the task engine's lease columns: ``LeasedTask``). Every draw (k,
    sequence, rank) is stored when the query is made. Specialists only ever see
    ``public_id``, never the database id: database ids grow, and quality checks, made on
    demand, would always be the newest."""

    class Answer(models.TextChoices):
        YES = "yes", _("Yes")
        NO = "no", _("No")
        UNSURE = "unsure", _("Not sure")

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="queries")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="queries")
    k = models.PositiveSmallIntegerField(help_text="Class asked (option position).")
    sequence = models.PositiveSmallIntegerField(default=0, help_text="0 = first query of the item.")
    stratum = models.CharField(max_length=120, blank=True, default="")
    is_quality_check = models.BooleanField(default=False)
    answer = models.CharField(max_length=10, choices=Answer.choices, blank=True, default="")
    qc_correct = models.BooleanField(
        null=True, blank=True, help_text="Quality-check queries: was the answer right?"
    )
    # Bit s is set when AI system with ordinal s predicted class k (match) / predicted
    # anything parseable (present). Written with the answer and refreshed on prediction
    # import, so recomputing a study is one aggregation over this table.
    match_mask = models.BigIntegerField(default=0)
    present_mask = models.BigIntegerField(default=0)
    # The same for confidence bands (annotations.partitioned.services.banding): bit s of
    # band_bit<l> is bit l of
    # system s's band index for this item (1..7; 0: no confidence). NULL = 0 (no system of
    # the study gives confidences).
    band_bit0 = models.BigIntegerField(null=True, blank=True)
    band_bit1 = models.BigIntegerField(null=True, blank=True)
    band_bit2 = models.BigIntegerField(null=True, blank=True)
    # The routing design the item's class order was drawn under (NULL: uniform, as every
    # query before designs existed) and what recomputes its probabilities exactly:
    # draw_uniform — the item's mixture coin (True: its whole order is the uniform
    # design's; the "uniform part" of a targeted study), draw_p — π_j(k | the item's earlier
    # classes) of this query's class, draw_targets — [[class, m], …]: how many of the
    # study's AI systems predicted each class for the item when it was routed.
    # Never shown to specialists (estimators.partitioned.designs).
    design = models.ForeignKey(RoutingDesign, null=True, blank=True, on_delete=models.PROTECT,
                               related_name="queries")
    draw_uniform = models.BooleanField(null=True, blank=True)
    draw_p = models.FloatField(null=True, blank=True)
    draw_targets = models.JSONField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "queries"
        constraints = [
            models.UniqueConstraint(
                fields=["item", "sequence"],
                condition=Q(is_quality_check=False),
                name="query_unique_item_sequence",
            ),
            models.UniqueConstraint(
                fields=["item", "answered_by"],
                condition=Q(is_quality_check=True),
                name="query_one_check_per_specialist",
            ),
            models.CheckConstraint(
                condition=Q(status="leased", holder__isnull=False, lease_expires_at__isnull=False)
                | ~Q(status="leased"),
                name="query_leased_has_holder",
            ),
            models.CheckConstraint(
                condition=Q(status="answered", answered_at__isnull=False) & ~Q(answer="")
                | ~Q(status="answered") & Q(answer=""),
                name="query_answer_iff_answered",
            ),
        ]
        indexes = [
            models.Index(
                fields=["study", "k", "rank"],
                condition=Q(status="pending", is_quality_check=False),
                name="query_pending_queue",
            ),
            models.Index(
                fields=["holder", "status"], condition=Q(status="leased"), name="query_leases"
            ),
            models.Index(
                fields=["lease_expires_at"],
                condition=Q(status="leased"),
                name="query_lease_expiry",
            ),
            models.Index(fields=["study", "status", "k"], name="query_study_status"),
        ]

    def __str__(self) -> str:
        return f"Q{self.pk} item={self.item_id} k={self.k}"


class QueryEvent(TaskEvent):
    """Audit trail: every state change of a query, written in the same transaction."""

    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="events")

    class Meta:
        indexes = [models.Index(fields=["query", "at"])]


class QuerySkip(models.Model):
    """A specialist handed a query back: it returns to its class's pool and is never offered
    to them again (the lease statement excludes it by this table's (user, query) key)."""

    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="skips")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="skips")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="skips")
    k = models.PositiveSmallIntegerField()
    is_quality_check = models.BooleanField(default=False)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "query"], name="skip_unique_user_query"),
        ]
        indexes = [models.Index(fields=["study", "k"], name="skip_study_class")]


# --- maintained sufficient statistics (services/tallies.py) --------------------------------
class TallyKey(models.Model):
    """What every figure of a partitioned study's estimates is counted by: one routed query's
    place — its class ``k`` and ``stratum``; ``state`` — "open" (pending or leased), its
    answer ("yes", "no", "unsure") once answered, or "skip" (a hand-back, counted by class
    alone); ``first`` (the item's first query), ``uniform`` (the uniform part of the draws:
    ``Query.draw_uniform`` NULL or true), ``neyman`` (drawn under a Neyman design),
    ``rejected`` (its answer is left out: a review rejected it, or an exclusion holds it —
    ``core.exclusion_models``) and ``withdrawn`` (its item was withdrawn)."""

    stratum = models.CharField(max_length=120, blank=True, default="")
    k = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=10)
    first = models.BooleanField(default=False)
    uniform = models.BooleanField(default=True)
    neyman = models.BooleanField(default=False)
    rejected = models.BooleanField(default=False)
    withdrawn = models.BooleanField(default=False)

    KEY = ("stratum", "k", "state", "first", "uniform", "neyman", "rejected", "withdrawn")

    class Meta:
        abstract = True


class TallyEntry(TallyKey):
    """The log of changes to the statistics: one signed row per query whose counted place
    changed, written by database triggers in the transaction of the change (migration
    0035: on queries, skips, flags and reviews) — an answer is +1 at its answer and −1 at
    "open", an undo or a withdrawal the compensating pair. Never updated; folded into
    :class:`TallyGroup` and deleted by ``services.tallies.tallies_fold``. ``study_id`` is no
    foreign key: rows written while a study is being deleted must not block it (the fold
    drops the entries of studies that are gone)."""

    id = models.BigAutoField(primary_key=True)
    study_id = models.BigIntegerField()
    sign = models.SmallIntegerField()
    # answered queries: the AI systems' bits at the answer (Query's columns; 0 otherwise)
    match_mask = models.BigIntegerField(default=0)
    present_mask = models.BigIntegerField(default=0)
    band_bit0 = models.BigIntegerField(default=0)
    band_bit1 = models.BigIntegerField(default=0)
    band_bit2 = models.BigIntegerField(default=0)
    # the query's item (migration 0037; null for skips and older entries): the fold reads
    # the touched items' labels to keep the clustered variance's sums (``TallyState.moments``)
    item_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["study_id", "id"], name="tally_entry_study")]


class TallyGroup(TallyKey):
    """The folded statistics: per study and :class:`TallyKey`, ``n`` queries, and per AI
    system (by ordinal) how many of them carry each 5-bit code present | match << 1 |
    band << 2 (``selectors.CODE_COLUMNS``): ``codes`` = {"ordinal": {"code": n}}, nonzero
    counts only (code 0 is ``n`` less the others)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="tally_groups")
    n = models.BigIntegerField(default=0)
    codes = models.JSONField(default=dict)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", *TallyKey.KEY],
                                               name="tally_group_unique_key")]


class TallyState(models.Model):
    """One row per study whose statistics are kept: the fold's lock (folds of a study run
    one at a time, ``select_for_update``), what the folds did, and the last consistency
    check against the full recompute (``services.tallies.tallies_check``). No row: the
    statistics were never built (the next fold builds them from the queries)."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True,
                                 related_name="tally_state")
    built_at = models.DateTimeField(null=True, blank=True)
    folded_at = models.DateTimeField(null=True, blank=True)
    entries_folded = models.BigIntegerField(default=0)
    checked_at = models.DateTimeField(null=True, blank=True)
    check_ok = models.BooleanField(null=True, blank=True)
    check_difference = models.FloatField(null=True, blank=True)
    check_detail = models.TextField(blank=True, default="")
    # several queries per item: the clustered variance's sums over the study's items
    # (``estimators.partitioned.moment_sums.MomentSums`` of every label and of the uniform
    # part's, ``services.tallies``), an .npz; null: not kept (one query per item)
    moments = models.BinaryField(null=True, blank=True, editable=False)
    # a study with a targeted routing design: the design-weighted estimate's item types
    # with their counts (``services.tally_designs``), an .npz; null: not kept
    design = models.BinaryField(null=True, blank=True, editable=False)


class TallyItem(models.Model):
    """An item's share of its study's kept design statistics (``TallyState.design``): how
    many of its answered steps the design-weighted estimate reads, per AI system the key of
    the item's **type** (its steps as that system's estimate sees them; none without such a
    step), and its queries per routing design, answered and open. The fold takes the item's
    old share out by these before it adds the new one (``services.tally_designs``); an item
    without a routed query has no row."""

    id = models.BigAutoField(primary_key=True)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="tally_items")
    item_id = models.BigIntegerField()
    steps = models.PositiveIntegerField()
    keys = models.BinaryField()  # uint64 per system, in the order of the statistics' systems
    designs = models.BinaryField()  # int64 (design id, 0: none; answered; open) per design

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "item_id"],
                                               name="tally_item_unique")]
