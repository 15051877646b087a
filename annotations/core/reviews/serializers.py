"""The review API's serializers (unique names for the OpenAPI schema)."""

from __future__ import annotations

from rest_framework import serializers

from annotations.core.models import AnswerReview


class ReviewAnswerOutputSerializer(serializers.Serializer):
    """An answer with its review. ``state``: "" (not reviewed), accepted, rejected (left out
    of the estimates) or undone (a rejection taken back)."""

    id = serializers.IntegerField(source="answer.id")
    item_id = serializers.IntegerField(source="answer.item_id")
    item = serializers.CharField(source="answer.item", help_text="The item's external id.")
    item_text = serializers.CharField(source="answer.item_text")
    asked = serializers.CharField(source="answer.asked")
    answer = serializers.CharField(source="answer.answer")
    detail = serializers.CharField(source="answer.detail",
                                   help_text="The labeller's comment or reasoning.")
    by = serializers.CharField(source="answer.by")
    at = serializers.DateTimeField(source="answer.at", allow_null=True)
    state = serializers.CharField()
    reason = serializers.CharField()
    reviewed_by = serializers.CharField()
    reviewed_at = serializers.DateTimeField(allow_null=True)


class ReviewAnswerPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    results = ReviewAnswerOutputSerializer(many=True)


class ReviewDecisionInputSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["accept", "reject"])
    reason = serializers.CharField(required=False, allow_blank=True, default="",
                                   max_length=AnswerReview.REASON_MAX,
                                   help_text="Why (required to reject).")


class ReviewOutputSerializer(serializers.Serializer):
    answer = serializers.IntegerField(source="answer_id")
    state = serializers.CharField()
    reason = serializers.CharField()
    reviewed_by = serializers.CharField(source="reviewed_by.username", allow_null=True)
    reviewed_at = serializers.DateTimeField()
    undone_at = serializers.DateTimeField(allow_null=True)


class DisagreementOutputSerializer(serializers.Serializer):
    item_id = serializers.IntegerField()
    item = serializers.CharField()
    item_text = serializers.CharField()
    summary = serializers.CharField()
    answer_ids = serializers.ListField(child=serializers.IntegerField())


class ReviewItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    external_id = serializers.CharField()
    text = serializers.CharField()
    options = serializers.ListField(child=serializers.CharField())
    context = serializers.ListField(child=serializers.CharField())


class ReviewFlagSerializer(serializers.Serializer):
    reason = serializers.CharField()
    note = serializers.CharField()
    flagged_by = serializers.CharField(source="user.username")
    flagged_at = serializers.DateTimeField(source="updated_at")
    resolution = serializers.CharField()


class ReviewItemContextSerializer(serializers.Serializer):
    item = ReviewItemSerializer()
    answers = ReviewAnswerOutputSerializer(many=True)
    flags = ReviewFlagSerializer(many=True)


class WorkerOutputSerializer(serializers.Serializer):
    """One worker of the Workers page (``core.reviews.workers.WorkerRow``): seconds are
    null without a timed answer, the gold interval's ends null without a check."""

    user_id = serializers.IntegerField()
    name = serializers.CharField()
    member = serializers.BooleanField()
    answers = serializers.IntegerField()
    excluded = serializers.IntegerField(help_text="Answers exclusions took out.")
    worker_excluded = serializers.BooleanField()
    median_seconds = serializers.FloatField(allow_null=True, source="median_or_none")
    p10_seconds = serializers.FloatField(allow_null=True, source="p10_or_none")
    p90_seconds = serializers.FloatField(allow_null=True, source="p90_or_none")
    seconds_histogram = serializers.ListField(child=serializers.IntegerField(),
                                              source="histogram")
    gold_correct = serializers.IntegerField()
    gold_checked = serializers.IntegerField(source="gold_n")
    gold_accuracy = serializers.FloatField(allow_null=True)
    gold_lower_95 = serializers.FloatField(allow_null=True, source="gold_lo_or_none")
    gold_upper_95 = serializers.FloatField(allow_null=True, source="gold_hi_or_none")
    agreeing = serializers.IntegerField(source="agree")
    compared = serializers.IntegerField(source="agree_n")
    agreement = serializers.FloatField(allow_null=True)
    skips = serializers.IntegerField()
    undos = serializers.IntegerField()
    flags = serializers.IntegerField()


class ExclusionInputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["worker", "before", "after", "faster"])
    reason = serializers.CharField(max_length=2000)
    worker = serializers.IntegerField(required=False, allow_null=True,
                                      help_text="The worker's user id (required for 'worker').")
    at = serializers.DateTimeField(required=False, allow_null=True,
                                   help_text="'before' / 'after': ISO 8601 with its zone.")
    faster_than_seconds = serializers.FloatField(required=False, allow_null=True)


class ExclusionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    rule = serializers.CharField(source="describe")
    worker = serializers.IntegerField(source="worker_id", allow_null=True)
    at = serializers.DateTimeField(allow_null=True)
    faster_than_ms = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()
    answers = serializers.IntegerField(help_text="Answers it took out when made.")
    applying = serializers.BooleanField(help_text=(
        "A job is still taking its answers out (or, undone, putting them back): a rule over "
        "more answers than the operator's inline limit."))
    released = serializers.IntegerField(help_text="Leases it ended.")
    created_by = serializers.CharField(source="created_by.username", allow_null=True)
    created_at = serializers.DateTimeField()
    undone_by = serializers.CharField(source="undone_by.username", allow_null=True,
                                      default=None)
    undone_at = serializers.DateTimeField(allow_null=True)
    undo_reason = serializers.CharField()
