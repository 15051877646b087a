"""Researcher screens of critique studies: create one with its settings; its page (settings
and prompt templates) with open/close, the question and AI-output imports, the run that
writes the missing AI outputs and the live list of runs, in the same places and words as
the other study types' pages; and read its questions, outputs, tasks and AI runs. Scoped
like every researcher screen (``ResearcherScopedAdmin``)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.html import format_html

from annotations.core.admin import (
    OneStudyListMixin,
    ResearcherScopedAdmin,
    StaffCreatesStudiesMixin,
    UploadForm,
    import_done,
    import_done_pop,
    staff_may_create_studies,
    study_status_change,
)
from annotations.core.admin_forms import StudyNameForm
from annotations.core.errors import DomainError, InvalidStudy
from annotations.core.inputs import accepts_upload
from annotations.core.models import Study
from annotations.critique.models import (
    CritiqueOutput,
    CritiqueQuestion,
    CritiqueRun,
    CritiqueSettings,
    CritiqueTask,
)
from annotations.critique.selectors import study_overview
from annotations.critique.services.ai_runs import (
    critique_ai_run_start,
    critique_import_run_start,
)
from annotations.critique.services.questions import critique_questions_import
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
class CritiqueStudyAdmin(OneStudyListMixin, StaffCreatesStudiesMixin,
                         ResearcherScopedAdmin):
    study_kind = Study.Kind.CRITIQUE
    form = CritiqueSettingsForm
    list_display = ["study", "status", "mode", "top_level", "counts_list", "time_limit_minutes",
                    "links"]
    list_filter = ["mode"]
    search_fields = ["study__name"]
    fixed_fields = ()
    change_form_template = "admin/annotations/critiquesettings/change_form.html"

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
        return redirect("admin:annotations_critiquesettings_change", obj.study_id)

    @admin.display(description="Status")
    def status(self, obj: CritiqueSettings) -> str:
        return obj.study.get_status_display()

    @admin.display(description="Counts")
    def counts_list(self, obj: CritiqueSettings) -> str:
        return _counts_text(obj.counts)

    @admin.display(description="")
    def links(self, obj: CritiqueSettings) -> str:
        return format_html('<a href="{}">Dashboard</a> · <a href="{}">Import questions</a> · '
                           '<a href="{}">Import AI outputs</a>',
                           reverse("dashboard", args=[obj.study_id]),
                           reverse("admin:annotations_critiquesettings_import_questions",
                                   args=[obj.study_id]),
                           reverse("admin:annotations_critiquesettings_import_outputs",
                                   args=[obj.study_id]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if obj is not None:
            context["overview"] = study_overview(study=obj.study)
        return super().change_view(request, object_id, form_url, extra_context=context)

    # ------------------------------------------------------------ the study's own pages

    def get_urls(self):
        wrap = self.admin_site.admin_view
        name = "annotations_critiquesettings_"
        return [
            path("<int:study_id>/import-questions/", wrap(self.import_questions_view),
                 name=name + "import_questions"),
            path("<int:study_id>/import-outputs/", wrap(self.import_outputs_view),
                 name=name + "import_outputs"),
            path("<int:study_id>/ai-run/", wrap(self.ai_run_view), name=name + "ai_run"),
            path("<int:study_id>/runs/", wrap(self.runs_view), name=name + "runs"),
            path("<int:study_id>/status/<str:action>/", wrap(self.status_view),
                 name=name + "status"),
        ] + super().get_urls()

    def _critique_study(self, request, study_id: int) -> Study:
        """The study (not its settings row) if the user may change it; 404 / 403 otherwise."""
        return self._study_or_403(request, study_id).study

    def _back(self, study: Study):
        return redirect("admin:annotations_critiquesettings_change", study.pk)

    def _import(self, request, study_id: int, *, title: str, kind: str, start):
        """An import page (``admin/annotations/import.html``): every problem of the file in
        one pass with its line and field, or the study's page with what was done."""
        study = self._critique_study(request, study_id)
        form = UploadForm.of(request, updates=False)
        errors: list[str] = []
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                note, result = start(study, upload)
            except DomainError as exc:
                errors = getattr(exc, "errors", [exc.message])
            else:
                self.log_change(request, study, note)
                if result is None:  # a run: the study's page follows it
                    self.message_user(request, note, messages.SUCCESS)
                    return self._back(study)
                import_done(request, name=upload.name, result=result)
                return redirect(request.path)  # the page shows the summary once
        back = reverse("admin:annotations_critiquesettings_change", args=[study.pk])
        return self._page(request, "admin/annotations/critiquesettings/import.html", study,
                          f"{title} — {study.name}", form=form, errors=errors, kind=kind,
                          action=title, overview=study_overview(study=study),
                          done=import_done_pop(request), links=[("Back to the study", back)])

    @accepts_upload
    def import_questions_view(self, request, study_id: int):
        def start(study, upload):
            result = critique_questions_import(study=study, source=upload.file,
                                               name=upload.name)
            return f"Imported {upload.name}: {result.summary()}.", result

        return self._import(request, study_id, title="Import questions", kind="questions",
                            start=start)

    @accepts_upload
    def import_outputs_view(self, request, study_id: int):
        def start(study, upload):
            run = critique_import_run_start(study=study, data=upload.read(), name=upload.name,
                                            by=request.user)
            return (f"Import of {upload.name} started (run #{run.pk}): its progress is "
                    f"below."), None

        return self._import(request, study_id, title="Import AI outputs", kind="outputs",
                            start=start)

    def ai_run_view(self, request, study_id: int):
        """POST: start the run that writes the missing AI outputs from the endpoint."""
        study = self._critique_study(request, study_id)
        if request.method != "POST":
            raise Http404
        try:
            run = critique_ai_run_start(study=study, by=request.user)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.log_change(request, study, f"AI run #{run.pk} started.")
            self.message_user(request, f"AI run #{run.pk} started: its progress is below.")
        return self._back(study)

    def runs_view(self, request, study_id: int):
        """The runs list alone (htmx polls it every 2 s while a run is under way)."""
        study = self._critique_study(request, study_id)
        return render(request, "admin/annotations/critiquesettings/_runs.html",
                      {"original": study, "overview": study_overview(study=study)})

    def status_view(self, request, study_id: int, action: str):
        study = self._critique_study(request, study_id)
        if action not in ("open", "close"):
            raise Http404
        if request.method == "POST":
            study_status_change(self, request, study, opening=action == "open")
            return self._back(study)
        return self._page(request, "admin/annotations/critiquesettings/status_confirm.html",
                          study, f"{action.capitalize()} “{study.name}”?", action=action,
                          overview=study_overview(study=study))


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
