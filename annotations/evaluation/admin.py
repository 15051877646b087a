"""Researchers' screens of the evaluation service: tokens (the add form shows the new token
once; revoke), per-token budget spent, the call log (register a candidate as an AI system)
and the study's holdout share."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from annotations.core.admin import ResearcherScopedAdmin
from annotations.core.errors import DomainError
from annotations.core.models import Study
from annotations.evaluation.models import EvaluationCall, EvaluationSettings, EvaluationToken
from annotations.evaluation.selectors import budget_used
from annotations.evaluation.services.candidates import candidate_register
from annotations.evaluation.services.tokens import token_issue, token_revoke


class EvaluationTokenForm(forms.ModelForm):
    class Meta:
        model = EvaluationToken
        fields = ("study", "name", "min_batch", "max_batch", "daily_budget", "ladder",
                  "ladder_margin", "final_reports")

    def clean_study(self):
        study = self.cleaned_data.get("study")
        if study is not None and study.kind != Study.Kind.PARTITIONED:
            raise forms.ValidationError("Evaluation tokens need a partitioned study.")
        return study


@admin.register(EvaluationToken)
class EvaluationTokenAdmin(ResearcherScopedAdmin):
    form = EvaluationTokenForm
    list_display = ("name", "study", "prefix", "ladder", "ladder_margin", "min_batch",
                    "daily_budget", "spent_today", "left_today", "revoked_at", "log_link")
    list_filter = ("study",)
    readonly_fields = ("prefix", "created_by", "created_at", "revoked_at", "ladder_best")
    fields = ("study", "name", "min_batch", "max_batch", "daily_budget", "ladder",
              "ladder_margin", "final_reports", "prefix", "created_by", "created_at",
              "revoked_at", "ladder_best")
    actions = ("revoke",)

    @admin.display(description="spent today")
    def spent_today(self, obj: EvaluationToken) -> int:
        return budget_used(obj)

    @admin.display(description="left today")
    def left_today(self, obj: EvaluationToken) -> int:
        return max(0, obj.daily_budget - budget_used(obj))

    @admin.display(description="calls")
    def log_link(self, obj: EvaluationToken) -> str:
        url = reverse("admin:annotations_evaluationcall_changelist") + f"?token__id__exact={obj.pk}"
        return format_html('<a href="{}">log</a>', url)

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        raw = token_issue(token=obj, created_by=request.user)  # the form checked the study
        self.message_user(request, format_html(
            "The evaluation token, shown this once (only its digest is stored): "
            "<code data-testid=\"evaluation-token\">{}</code>", raw), messages.WARNING)
        return None

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset:
            token_revoke(token=token)
        self.message_user(request, f"{queryset.count()} token(s) revoked.")


@admin.register(EvaluationCall)
class EvaluationCallAdmin(ResearcherScopedAdmin):
    list_display = ("created_at", "study", "token", "kind", "candidate", "n_items", "n_used",
                    "accepted", "score", "released_score", "reason")
    list_filter = ("study", "token", "accepted", "kind")
    search_fields = ("candidate",)
    actions = ("register",)

    @admin.display(description="released score")
    def released_score(self, obj: EvaluationCall):
        return obj.released.get("score")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Register the candidate as an AI system of the study")
    def register(self, request, queryset):
        for call in queryset:
            try:
                registered = candidate_register(call=call)
            except DomainError as exc:
                self.message_user(request, exc.message, messages.ERROR)
                continue
            self.message_user(request, f"'{call.candidate}' is AI system "
                              f"'{registered.name}'; upload its predictions there.")


# The admin's name for the list: Django's default adds an "s" ("evaluation settingss"). Set
# here rather than in Meta, where an options change needs a migration of its own.
EvaluationSettings._meta.verbose_name_plural = "evaluation settings"


@admin.register(EvaluationSettings)
class EvaluationSettingsAdmin(ResearcherScopedAdmin):
    list_display = ("study", "holdout_share", "history_link")
    fields = ("study", "holdout_share")

    @admin.display(description="history")
    def history_link(self, obj: EvaluationSettings) -> str:
        return format_html('<a href="{}">submissions</a>',
                           reverse("evaluations", args=[obj.study_id]))
