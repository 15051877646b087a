"""Output serializers of what every study type shares: a study with its classes and the
caller's roles (unique names for the OpenAPI schema)."""

from __future__ import annotations

from rest_framework import serializers

from annotations.core.models import Study, StudyClass


class StudyClassOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = StudyClass
        fields = ["index", "name", "description"]


class StudyOutputSerializer(serializers.ModelSerializer):
    classes = StudyClassOutputSerializer(many=True, read_only=True)
    k = serializers.SerializerMethodField()
    roles = serializers.SerializerMethodField()

    class Meta:
        model = Study
        fields = ["id", "name", "description", "status", "k", "classes", "queries_per_item",
                  "lease_minutes", "shuffle_options", "gold_rate", "target_ci_width",
                  "interval_method", "opened_at", "closed_at", "roles"]

    def get_k(self, obj: Study) -> int:
        return len(obj.classes.all())

    def get_roles(self, obj: Study) -> list[str]:
        return sorted(self.context.get("roles", {}).get(obj.pk, []))


class FlagInputSerializer(serializers.Serializer):
    task = serializers.CharField(max_length=64, help_text="The public id of a task you hold or "
                                 "were given (as the next-task endpoint returned it).")
    reason = serializers.ChoiceField(choices=["broken", "ambiguous"],
                                     help_text="broken: cannot be answered as shown; "
                                     "ambiguous: more than one answer fits.")
    note = serializers.CharField(required=False, allow_blank=True, default="",
                                 max_length=2000, help_text="What is wrong (optional).")


class FlagOutputSerializer(serializers.Serializer):
    """A flag as its author sees it: the task they named, never the item's id or others'
    flags."""

    task = serializers.CharField()
    reason = serializers.CharField()
    note = serializers.CharField()
    flagged_at = serializers.DateTimeField()
