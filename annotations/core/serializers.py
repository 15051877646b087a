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
        fields = ["id", "name", "kind", "description", "status", "k", "classes",
                  "queries_per_item",
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


class StudyCreateInputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Study.Kind.values)
    name = serializers.CharField(max_length=200)
    settings = serializers.DictField(
        required=False, default=dict,
        help_text="The type's settings. partitioned: classes (names, or [name, "
        "description] pairs; required), description, queries_per_item, lease_minutes, "
        "shuffle_options, gold_rate, seed, interval_method. assisted: description, seed, "
        "lease_minutes, ratings_per_item, item_order, routing, arms ([{name, components}]; "
        "components among search, evidence, reasoning, judgments, confidence, debate; a "
        "baseline arm is made first). critique: description, guidelines, seed, top_level, "
        "counts, mode (humans, ai_below, ai), time_limit_minutes.")


class MemberInputSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.CharField(max_length=20, help_text="specialist (partitioned), "
                                 "annotator (assisted raters, critique annotators), manager, "
                                 "reviewer or researcher")
    class_index = serializers.IntegerField(required=False, allow_null=True, default=None,
                                           min_value=0, help_text="Specialists: their class.")
    email = serializers.EmailField(required=False, allow_blank=True, default="")


class MemberOutputSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.CharField()
    class_index = serializers.IntegerField(allow_null=True)
    password = serializers.CharField(allow_null=True, required=False, help_text="A new "
                                     "account's one-time password: given once, never again.")
    invitation = serializers.CharField(allow_null=True, required=False, help_text="A new "
                                       "account's link to choose its own password instead.")


class FlagListOutputSerializer(serializers.Serializer):
    """A flag as the study's researchers and managers read it."""

    item = serializers.CharField(help_text="The item's id in the study (as imported).")
    reason = serializers.CharField()
    note = serializers.CharField()
    flagged_by = serializers.CharField()
    flagged_at = serializers.DateTimeField()
    resolution = serializers.CharField(help_text="'' (open), fixed, withdrawn or dismissed")
    resolved_at = serializers.DateTimeField(allow_null=True)
