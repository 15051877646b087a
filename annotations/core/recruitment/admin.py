"""Recruitment links in the admin: a study's researchers make an entry link for Prolific,
MTurk or any platform (its settings checked: ``platforms.link_problems``), copy the URL to
paste into the platform — with the platform's placeholders — and read each participant's
status, progress and times."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from annotations.core.admin import ResearcherScopedAdmin
from annotations.core.inputs import StorableJSONFormField
from annotations.core.recruitment.platforms import link_problems
from annotations.core.recruitment_models import Participant, RecruitmentLink

PLACEHOLDERS = {
    RecruitmentLink.Platform.PROLIFIC:
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}",
    RecruitmentLink.Platform.MTURK: "",
}


class RecruitmentLinkForm(forms.ModelForm):
    quiz = StorableJSONFormField(required=False, initial=list,
                                 help_text=RecruitmentLink._meta.get_field("quiz").help_text)
    completion_url = forms.URLField(
        max_length=500, required=False, assume_scheme="https",
        help_text=RecruitmentLink._meta.get_field("completion_url").help_text)
    screened_out_url = forms.URLField(
        max_length=500, required=False, assume_scheme="https",
        help_text=RecruitmentLink._meta.get_field("screened_out_url").help_text)
    class Meta:
        model = RecruitmentLink
        fields = ["study", "platform", "name", "active", "id_parameter", "completion_code",
                  "screened_out_code", "completion_url", "screened_out_url", "consent",
                  "tutorial", "quiz", "quiz_attempts", "max_participants", "max_tasks",
                  "time_limit_minutes", "currency", "base_pay", "bonus_per_correct",
                  "bonus_min_checks", "bonus_min_accuracy"]

    def clean_quiz(self):
        return self.cleaned_data.get("quiz") or []

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        probe = RecruitmentLink(**{k: v for k, v in data.items() if k != "study"})
        for field, message in link_problems(probe).items():
            self.add_error(field, message)
        return data


class ParticipantInline(admin.TabularInline):
    model = Participant
    extra = 0
    can_delete = False
    fields = ["external_id", "status", "joined_at", "consented_at", "finished_at",
              "quiz_attempts"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(RecruitmentLink)
class RecruitmentLinkAdmin(ResearcherScopedAdmin):
    form = RecruitmentLinkForm
    list_display = ["name", "study", "platform", "active", "participant_count", "max_tasks"]
    list_filter = ["study", "platform", "active"]
    readonly_fields = ["entry_url"]
    inlines = [ParticipantInline]

    @admin.display(description="participants")
    def participant_count(self, obj: RecruitmentLink) -> int:
        return obj.participants.count()

    @admin.display(description="entry link")
    def entry_url(self, obj: RecruitmentLink) -> str:
        if obj.pk is None:
            return "made when the link is saved"
        url = self.request.build_absolute_uri(reverse("join", args=[obj.token]))
        if obj.platform == RecruitmentLink.Platform.GENERIC:
            tail = f"?{obj.id_parameter or 'participant'}=<the participant's id>"
        else:
            tail = PLACEHOLDERS.get(obj.platform, "")
        note = {"prolific": "Paste it as the study URL on Prolific (its placeholders fill the "
                            "ids); the completion code goes back there.",
                "mturk": "Use it as an ExternalQuestion's URL: MTurk adds assignmentId, "
                         "hitId, workerId and turkSubmitTo.",
                "generic": "Give each participant this address with their id."}[obj.platform]
        return format_html('<code data-testid="entry-url">{}{}</code><br><span class="help">{}'
                           "</span>", url, tail, note)

    def get_form(self, request, obj=None, **kwargs):
        self.request = request
        return super().get_form(request, obj, **kwargs)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)
