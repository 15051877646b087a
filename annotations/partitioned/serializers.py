"""Explicit input/output serializers for the REST API (unique names for the schema)."""

from __future__ import annotations

from rest_framework import serializers

from annotations.core.inputs import LONG_TEXT_MAX, OPTION_MAX
from annotations.partitioned.models import Query
from estimators.partitioned.intervals import APPROXIMATE_BELOW


class ItemOutputSerializer(serializers.Serializer):
    id = serializers.CharField(source="external_id")
    text = serializers.CharField()
    options = serializers.ListField(child=serializers.CharField())
    option_order = serializers.ListField(child=serializers.IntegerField())
    class_order = serializers.ListField(child=serializers.IntegerField())
    stratum = serializers.CharField()
    metadata = serializers.DictField()
    quality_check = serializers.BooleanField(source="is_quality_check")
    gold = serializers.SerializerMethodField(
        help_text="The right option's text (the class name for items without options).")
    gold_index = serializers.IntegerField(
        source="gold_option", allow_null=True,
        help_text="The right option's 0-based index in options (hidden from specialists).")

    def get_gold(self, obj) -> str | None:
        if obj.gold_option is None:
            return None
        options = obj.options or self.context.get("class_names", {}).get(obj.study_id, [])
        return options[obj.gold_option] if obj.gold_option < len(options) else None


class ItemInputSerializer(serializers.Serializer):
    id = serializers.CharField()
    text = serializers.CharField(max_length=LONG_TEXT_MAX)
    options = serializers.ListField(child=serializers.CharField(max_length=OPTION_MAX),
                                    required=False)
    stratum = serializers.CharField(required=False, allow_blank=True)
    # JSON values as sent (3.0 stays a number): the import service applies the rule
    gold = serializers.JSONField(
        required=False, allow_null=True,
        help_text="The right option's text (for items without options: the class name); a "
        "number is read as its text (3 and 3.0 mean the option \"3\"), never as an index. "
        "Hidden from specialists.")
    gold_index = serializers.JSONField(
        required=False, allow_null=True,
        help_text="Instead of gold: the right option's 0-based index in options (2, 2.0 or "
        "\"2\"); anything else is an error.")
    quality_check = serializers.BooleanField(required=False)
    metadata = serializers.DictField(required=False)


class PredictionInputSerializer(serializers.Serializer):
    item_id = serializers.CharField()
    system = serializers.CharField()
    # JSON values as sent (3.0 stays a number): the import service applies the rule
    prediction = serializers.JSONField(
        required=False, allow_null=True,
        help_text="The predicted option's text (a number is read as its text: 3 and 3.0 "
        "match the option \"3\"). A text that names no option is scored as a wrong answer "
        "and counted in 'unparseable'.")
    prediction_index = serializers.JSONField(
        required=False, allow_null=True,
        help_text="Instead of prediction: the 0-based index of the original option (3, 3.0 "
        "or \"3\"); anything else is an error.")
    confidence = serializers.JSONField(
        required=False, allow_null=True,
        help_text="Optional: the system's confidence in this answer, a number from 0 to 1 "
        "(the dashboard then estimates its accuracy per confidence band).")


class PredictionOutputSerializer(serializers.Serializer):
    item_id = serializers.CharField(source="item.external_id")
    system = serializers.CharField(source="system.name")
    option = serializers.IntegerField(allow_null=True)
    position = serializers.IntegerField(allow_null=True)
    raw = serializers.CharField()
    confidence = serializers.FloatField(allow_null=True)


class ImportOutputSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField(
        required=False, help_text="Items: records identical to the stored item (update).")
    routed = serializers.IntegerField(
        required=False, help_text="Items: routed at once (the study is open).")


class PredictionImportOutputSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    systems_created = serializers.ListField(child=serializers.CharField())
    unparseable = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Per system: predictions naming no option (stored raw, scored as wrong).")
    missing = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Per system: empty predictions (scored as wrong).")


class QueryOutputSerializer(serializers.Serializer):
    """What a specialist may see of a query: no gold, no AI prediction, nothing that tells a
    quality check from a routed query. ``id`` is the query's random public id."""

    id = serializers.CharField()
    study_id = serializers.IntegerField()
    item_text = serializers.CharField()
    options = serializers.SerializerMethodField()
    class_index = serializers.IntegerField()
    class_name = serializers.CharField()
    class_description = serializers.CharField()
    lease_expires_at = serializers.DateTimeField()

    def get_options(self, obj) -> list[dict[str, str]]:
        return [{"class": name, "text": text} for name, text in obj.options]


class AnswerInputSerializer(serializers.Serializer):
    answer = serializers.ChoiceField(choices=Query.Answer.values)


class AnswerOutputSerializer(serializers.Serializer):
    query_id = serializers.CharField(source="query.public_id")
    answer = serializers.CharField(source="query.answer")
    answered_at = serializers.DateTimeField(source="query.answered_at")
    created = serializers.BooleanField()


class EstimateFieldsSerializer(serializers.Serializer):
    accuracy = serializers.FloatField(allow_null=True)
    accuracy_clipped = serializers.FloatField(allow_null=True)
    se = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(
        allow_null=True,
        help_text="95 % interval: ord and comp (one binomial each): Blaker's interval, at "
        "least 95 % at every accuracy (Clopper-Pearson's from 1 000 events of each kind; the "
        "study's 'conservative' option: Clopper-Pearson); "
        "the others: likelihood ratio (IVW: Wald) where events are plentiful, else the mid-p "
        "exact interval (conservative option: the conservative one). The same counts always "
        "give the same interval (the guide /help/estimators/). A method without data is null.")
    ci_high = serializers.FloatField(allow_null=True)
    bound = serializers.FloatField(allow_null=True)
    weight = serializers.FloatField(allow_null=True)
    approximate = serializers.BooleanField(
        help_text=f"True where the interval rests on fewer than {APPROXIMATE_BELOW} events of "
        "a kind (wrong or "
        "right ordinary answers, complementary answers naming the AI's prediction; effective "
        "counts with several queries per item): its real coverage then stands away from 95 "
        "% (the guide /help/coverage/, 'Approximate intervals').")


class SnapshotOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    computed_at = serializers.DateTimeField()
    n_answered = serializers.IntegerField()
    duration_ms = serializers.FloatField()
    payload = serializers.JSONField(
        help_text="k, confidence, interval_method (auto | conservative), n_answered; classes "
        "(per class yes/no/unsure/pending/leased/skipped, completion, abstention and skip "
        "rates); completion_imbalance {ratio, warning}; assumptions [{code, message}] "
        "(completion_imbalance, abstention_differs, yes_share_departs); "
        "yes_share {expected, yes, answered, share, p_value, flag, level, "
        "first_queries_only, classes [{index, name, yes, answered, share, p_value, flag}]}; "
        "plan {target_width, pilot_accuracy, ordinary_only, complementary_only, "
        "routed_queries, items, design_effect} or null before any label; strata; systems: "
        "per system id, name, counts {n_ord, s_ord, n_comp, s_comp}, estimates per method "
        "(ord, comp, ivw, ivw_pilot, ivw_fixed, ml; each {accuracy, accuracy_clipped, se, "
        "ci_low, ci_high, bound, bound_valid, weight, approximate} or null without data), ipw "
        "{accuracy, se, ci_low, ci_high, approximate} or null, "
        "stratified {accuracy, se, ci_low, ci_high, approximate, weights} or null, "
        "design_effect or null, "
        "flags [few_labels_for_guarantee], labels_needed or null, reference {n, accuracy} and "
        "strata {name: {n_ord, n_comp, ML fields, estimates per method}}. "
        "Studies with answers drawn by a targeted routing design also carry: uniform_part "
        "{answers} (every figure above then reads only the answers drawn as under the "
        "uniform design), design {answers, items, designs [{number, kind, label, epsilon, "
        "answered}]} and, per system, design {accuracy, se, ci_low, ci_high, approximate, "
        "uniform_answers}: the estimate from every answer, weighted by its routing design, "
        "and the answers a uniform design would need for the same standard error."
    )


class ImportJobOutputSerializer(serializers.Serializer):
    """An import job: poll ``url`` until ``status`` is succeeded or failed."""

    id = serializers.IntegerField()
    url = serializers.SerializerMethodField(help_text="This job (GET it to follow it).")
    study = serializers.IntegerField(source="study_id")
    kind = serializers.CharField(help_text="items or predictions")
    name = serializers.CharField(help_text="The file's name ('request' for a JSON body).")
    format = serializers.CharField(source="fmt")
    update = serializers.BooleanField()
    status = serializers.ChoiceField(choices=["queued", "running", "succeeded", "failed"])
    phase = serializers.SerializerMethodField(
        help_text="While running: waiting (another import of the study), reading (records "
        "of the file's lines), writing (rows) or committing.")
    done = serializers.SerializerMethodField()
    total = serializers.SerializerMethodField()
    percent = serializers.SerializerMethodField(help_text="0–100 over both phases; null "
                                                "when failed.")
    summary = serializers.DictField(
        help_text="When succeeded: the import's counts, as the synchronous import returns "
        "them, and 'text', the one-line summary.")
    errors = serializers.ListField(
        child=serializers.CharField(),
        help_text="When failed: every problem as 'file:line: field: message' (nothing was "
        "written).")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def _progress(self, obj):
        from annotations.core.selectors import import_job_progress

        cache = self.context.setdefault("_progress", {})
        if obj.pk not in cache:
            cache[obj.pk] = import_job_progress(job=obj)
        return cache[obj.pk]

    def get_url(self, obj) -> str:
        from django.urls import reverse

        path = reverse("api-import-job", args=[obj.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path

    def get_phase(self, obj) -> str:
        return self._progress(obj).phase

    def get_done(self, obj) -> int:
        return self._progress(obj).done

    def get_total(self, obj) -> int:
        return self._progress(obj).total

    def get_percent(self, obj) -> int | None:
        return self._progress(obj).percent


class ImportJobInputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["items", "predictions", "sentences", "traces", "questions", "ai_outputs",
                 "eval_log"],
        help_text="items or predictions (partitioned studies), sentences or traces "
                  "(assisted), questions or ai_outputs (critique), or eval_log: an evaluation "
                  "log into a study of any type (its samples become items, questions or "
                  "sentences; the model's answers an AI system's).")
    file = serializers.FileField(help_text="CSV (with a header row) or JSONL, UTF-8; the name "
                                 "ends in .csv, .jsonl or .ndjson. eval_log: an Inspect log "
                                 "(.eval or .json), an lm-evaluation-harness samples file or "
                                 "Every Eval Ever instance-level JSONL.")
    update = serializers.BooleanField(required=False, default=False,
                                      help_text="Rewrite existing ids (items, predictions).")
    log_format = serializers.ChoiceField(
        choices=["inspect", "lm-eval", "eee"], required=False,
        help_text="eval_log: the log's format (default: told from the file).")
    model = serializers.CharField(
        required=False, allow_blank=True, max_length=150,
        help_text="eval_log: the evaluated model's name (needed for lm-evaluation-harness "
                  "samples files, which do not say it; replaces the log's otherwise).")
    task = serializers.CharField(required=False, allow_blank=True, max_length=150,
                                 help_text="eval_log: the task's name (default: the log's).")


class RoutingDesignInputSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="uniform (every class equally often; the default), "
                                 "targeted (mostly the classes the AI systems picked) or "
                                 "neyman (strata whose answers vary more asked more, from "
                                 "the pilot's per-stratum estimates; classes uniform).")
    epsilon = serializers.FloatField(
        required=False, allow_null=True,
        help_text="Targeted only: the share of items asked as under the uniform design, "
        "0.05 to 1 (every class keeps a probability of at least ε/K).")


class RoutingDesignOutputSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="0: the uniform default before any change.")
    kind = serializers.CharField()
    epsilon = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    created_by = serializers.CharField()
    answered = serializers.IntegerField(help_text="Answered routed queries drawn under it.")
    pending = serializers.IntegerField(help_text="Routed queries drawn under it, waiting or "
                                       "held.")
    allocation = serializers.JSONField(
        allow_null=True, help_text="Neyman only: {rates: {stratum: r}} each stratum's "
        "answering rate relative to the fastest (a share of its items), spreads (S_h, the "
        "pilot's per-answer standard deviation), weights (W_h, its share of the items), "
        "ratio (the share of a uniform design's answers it needs for the same precision) "
        "and pilot (the answers it was estimated from).")
