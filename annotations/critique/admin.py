"""Researcher screens of critique studies: create one with its settings, edit its settings
and prompt templates, and read its questions, outputs, tasks and AI runs. Imports, runs,
open/close and exports are on the study's page in the site (``critique-manage``). Scoped
like every researcher screen (``ResearcherScopedAdmin``)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html

from annotations.core.admin import (
    ResearcherScopedAdmin,
    StaffCreatesStudiesMixin,
    staff_may_create_studies,
)
from annotations.core.admin_forms import StudyNameForm
from annotations.core.errors import InvalidStudy
from annotations.core.models import Study
from annotations.critique.models import (
    CritiqueOutput,
    CritiqueQuestion,
    CritiqueRun,
    CritiqueSettings,
    CritiqueTask,
)
from annotations.critique.services.studies import (
    ENDPOINT_FIELDS,
    TEMPLATE_FIELDS,
    counts_check,
    critique_settings_update,
    critique_study_create,
    templates_check,
)
from assistants.forms import AI_ENDPOINT_LABELS, WriteOnlyApiKeyForm

TEXTAREA = forms.Textarea(attrs={"rows": 14, "cols": 90, "class": "vLargeTextField"})


def _counts_text(value) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, list) else str(value or "")


class CritiqueSettingsForm(WriteOnlyApiKeyForm, forms.ModelForm):
    counts = forms.CharField(
        help_text="Outputs per question at each level 0…L, comma-separated (the paper's tree: "
        "7, 5, 3, 1 for L = 3). Empty: the paper's tree cut at L.", required=False)

    class Meta:
        model = CritiqueSettings
        fields = ["top_level", "counts", "mode", "time_limit_minutes", "response_system",
                  "response_template", "critique_system", "critique_template", "ai_base_url",
                  "ai_model", "ai_api_key"]
        widgets = dict.fromkeys(TEMPLATE_FIELDS, TEXTAREA)
        labels = AI_ENDPOINT_LABELS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "counts" in self.initial:
            self.initial["counts"] = _counts_text(self.initial["counts"])

    def clean(self):
        data = super().clean()
        top = data.get("top_level") or self.instance.top_level
        text = (data.get("counts") or "").strip()
        try:
            if text:
                parts = [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]
                if not all(p.isdigit() for p in parts):
                    raise InvalidStudy("Whole numbers separated by commas, e.g. 7, 5, 3.",
                                       field="counts")
                data["counts"] = counts_check([int(p) for p in parts], top)
            else:
                from annotations.critique.services.studies import default_counts_for

                data["counts"] = default_counts_for(top)
            if all(name in data for name in TEMPLATE_FIELDS):
                templates_check({name: data[name] for name in TEMPLATE_FIELDS})
        except InvalidStudy as exc:
            self.add_error(exc.field if exc.field in self.fields else None, exc.message)
        return data


class CritiqueStudyAddForm(StudyNameForm, CritiqueSettingsForm):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    guidelines = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False,
                                 help_text="Shown to annotators on every task (Markdown).")


@admin.register(CritiqueSettings)
class CritiqueStudyAdmin(StaffCreatesStudiesMixin, ResearcherScopedAdmin):
    form = CritiqueSettingsForm
    list_display = ["study", "status", "mode", "top_level", "counts_list", "time_limit_minutes",
                    "links"]
    list_filter = ["mode"]
    search_fields = ["study__name"]
    fixed_fields = ()

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("study")

    def has_add_permission(self, request):
        return staff_may_create_studies(request)

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = CritiqueStudyAddForm
            kwargs["fields"] = ["name", "description", "guidelines", *CritiqueSettingsForm
                                ._meta.fields]
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fieldsets(self, request, obj=None):
        study = [] if obj is not None else [(None, {"fields": ["name", "description",
                                                              "guidelines"]})]
        return [*study,
                ("The tree", {"fields": ["top_level", "counts", "mode", "time_limit_minutes"]}),
                ("AI outputs: prompt templates and endpoint", {
                    "fields": ["response_system", "response_template", "critique_system",
                               "critique_template", *ENDPOINT_FIELDS],
                    "description": "Placeholders: response — {{question}}, {{options}}, "
                    "{{letters}}; critique — also {{level}}, {{first}}, {{second}}, "
                    "{{chain}}. A reply must end with 'Answer: X' (critiques: 'Better: 1|2|"
                    "neither' on the line before); anything else is stored as unparseable."})]

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.study.status != Study.Status.DRAFT:
            return ["top_level", "counts", "mode"]
        return []

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        if not change:
            study = critique_study_create(
                name=data["name"], description=data.get("description", ""),
                guidelines=data.get("guidelines", ""), top_level=data["top_level"],
                counts=data["counts"], mode=data["mode"],
                time_limit_minutes=data["time_limit_minutes"],
                created_by=request.user,
                **{name: data[name] for name in (*TEMPLATE_FIELDS, *ENDPOINT_FIELDS)})
            saved = CritiqueSettings.objects.get(study=study)
            obj.__dict__.update({k: v for k, v in saved.__dict__.items() if k != "_state"})
            obj._state.adding, obj._state.db = False, saved._state.db
            return
        changed = {name: data[name] for name in form.changed_data if name in data
                   and name not in self.get_readonly_fields(request, obj)}
        critique_settings_update(study=obj.study, **changed)

    def response_add(self, request, obj, post_url_continue=None):
        self.message_user(request, format_html(
            "Critique study “{}” created. Next: import its questions, add annotators, then "
            "open it.", obj.study.name), messages.SUCCESS)
        return redirect("critique-manage", study_id=obj.study_id)

    @admin.display(description="Status")
    def status(self, obj: CritiqueSettings) -> str:
        return obj.study.get_status_display()

    @admin.display(description="Counts")
    def counts_list(self, obj: CritiqueSettings) -> str:
        return _counts_text(obj.counts)

    @admin.display(description="")
    def links(self, obj: CritiqueSettings) -> str:
        return format_html('<a href="{}">Manage</a> · <a href="{}">Dashboard</a>',
                           reverse("critique-manage", args=[obj.study_id]),
                           reverse("critique-dashboard", args=[obj.study_id]))


class ReadOnlyCritiqueAdmin(ResearcherScopedAdmin):
    """Rows written by the services only: listed and read, never edited here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_module_permission(self, request):
        from annotations.core.admin import is_researcher

        return is_researcher(request)


@admin.register(CritiqueQuestion)
class CritiqueQuestionAdmin(ReadOnlyCritiqueAdmin):
    list_display = ["external_id", "study", "domain", "generated_level"]
    list_filter = ["domain"]
    search_fields = ["external_id", "text"]


@admin.register(CritiqueOutput)
class CritiqueOutputAdmin(ReadOnlyCritiqueAdmin):
    list_display = ["pk", "study", "question", "level", "slot", "author_kind", "final",
                    "choice", "confidence", "time_ms", "source"]
    list_filter = ["level", "author_kind", "source"]
    list_select_related = ["study", "question"]


@admin.register(CritiqueTask)
class CritiqueTaskAdmin(ReadOnlyCritiqueAdmin):
    list_display = ["public_id", "study", "question", "level", "slot", "status", "holder",
                    "answered_by", "time_on_task_ms", "times_issued"]
    list_filter = ["level", "status"]
    list_select_related = ["study", "question", "holder", "answered_by"]


@admin.register(CritiqueRun)
class CritiqueRunAdmin(ReadOnlyCritiqueAdmin):
    list_display = ["pk", "study", "kind", "status", "done", "total", "stored", "unparseable",
                    "created_at", "finished_at"]
    list_filter = ["kind", "status"]
