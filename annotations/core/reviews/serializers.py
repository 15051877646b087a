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
