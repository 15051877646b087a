"""Researcher screens of assisted studies: the study with its settings and arms inline, a
preview of exactly what a rater of each arm sees, sentence and trace imports, sampling the
AI rater from an endpoint (with a progress bar), live routing, open and close."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from annotations.assisted.models import (
    Arm,
    AssistedSettings,
    AssistedStudy,
    RoutingChange,
    Sentence,
)
from annotations.assisted.selectors import (
    SentenceForRater,
    rater_bonuses,
    study_overview,
)
from annotations.assisted.services.ai import sampling_progress, sampling_start
from annotations.assisted.services.design import (
    arm_save,
    assisted_study_insert,
    settings_check,
)
from annotations.assisted.services.exposure import panel_for
from annotations.assisted.services.imports import sentences_import, traces_import
from annotations.assisted.services.routing import ROUTING_FIELDS, routing_update, tasks_sync
from annotations.assisted.views import (
    CONFIDENCE_CHOICES,
    HELPFULNESS_CHOICES,
    LABEL_CHOICES,
    SECTION_KEYS,
)
from annotations.core.admin import (
    OneStudyListMixin,
    ResearcherScopedAdmin,
    StaffCreatesStudiesMixin,
    StudyInline,
    UploadForm,
    import_done,
    import_done_pop,
    is_researcher,
    staff_may_create_studies,
    study_status_change,
)
from annotations.core.admin_forms import StudyForm, StudyNameForm, study_help_texts
from annotations.core.errors import DomainError
from annotations.core.inputs import StorableJSONFormField, accepts_upload
from annotations.core.models import Study
from annotations.core.words import counted
from assistants.forms import AI_ENDPOINT_LABELS, WriteOnlyApiKeyForm
from assistants.models import AISystem, SamplingRun
from assistants.panels import panel_html
from assistants.prompts import PromptTemplate, TemplateError, validate_template

SAMPLE_SENTENCE = Sentence(
    external_id="preview", prompt="Are strawberries a good source of vitamin C?",
    response="Yes. Strawberries are rich in vitamin C. A cup covers a day's needs.",
    target="Strawberries are rich in vitamin C.")


class AssistedSettingsForm(WriteOnlyApiKeyForm, forms.ModelForm):
    class Meta:
        model = AssistedSettings
        fields = [f.name for f in AssistedSettings._meta.get_fields()
                  if f.editable and f.name != "study"]
        labels = AI_ENDPOINT_LABELS
        # JSON that cannot be stored (deep nesting, NUL, NaN) is a form error, not a 500
        field_classes = {f.name: StorableJSONFormField for f in AssistedSettings._meta.fields
                         if f.get_internal_type() == "JSONField"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "gate_system" in self.fields:  # the trust gate reads an AI system of this study
            self.fields["gate_system"].queryset = AISystem.objects.filter(
                study_id=self.instance.study_id)

    def clean(self):
        data = super().clean()
        if self.instance.study_id is None:
            return data
        for name, value in data.items():
            setattr(self.instance, name, value)
        names = list(Arm.objects.filter(study_id=self.instance.study_id)
                     .values_list("name", flat=True))
        try:
            settings_check(self.instance, arm_names=names)
        except DomainError as exc:
            raise forms.ValidationError({exc.field if exc.field in self.fields else None:
                                         exc.message}) from None
        if (data.get("prompt_user") or "").strip() or (data.get("prompt_system") or "").strip():
            template = PromptTemplate(kind="factuality", user=data.get("prompt_user") or "",
                                      system=data.get("prompt_system") or "")
            try:
                validate_template(template)
            except TemplateError as exc:
                raise forms.ValidationError({"prompt_user": exc.problems}) from None
        return data


class AssistedSettingsInline(StudyInline, admin.StackedInline):
    model = AssistedSettings
    form = AssistedSettingsForm
    can_delete = False
    min_num = 1
    max_num = 1
    fieldsets = [
        ("Ratings", {"fields": ["ratings_per_item", "item_order"]}),
        ("Routing by AI confidence", {"fields": ["routing", "threshold", "band_edges",
                                                 "band_targets"]}),
        ("Trust gate: an audit of the AI rater before routing by its confidence",
         {"fields": ["gate_system", "gate_min_success"]}),
        ("Tutorial, quiz and bonus", {"classes": ["collapse"], "fields": [
            "tutorial", "assisted_warning", "quiz", "bonus_enabled", "bonus_min_ratings",
            "bonus_min_accuracy", "bonus_text"]}),
        ("The AI rater", {"classes": ["collapse"], "fields": [
            "n_samples", "scorer", "band_cutoffs", "ai_base_url", "ai_model", "ai_api_key",
            "ai_temperature", "ai_max_tokens", "prompt_system", "prompt_user"]}),
    ]

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.status != Study.Status.DRAFT:
            return list(ROUTING_FIELDS)  # changed on the routing page: it re-routes
        return []


class ArmInline(StudyInline, admin.TabularInline):
    model = Arm
    extra = 0
    fields = ["name", "position", "show_search", "show_evidence", "show_reasoning",
              "show_judgments", "show_confidence", "show_debate", "is_active", "version",
              "preview"]
    readonly_fields = ["version", "preview"]

    @admin.display(description="What raters see")
    def preview(self, obj: Arm) -> str:
        if obj.pk is None:
            return "—"
        return format_html('<a href="{}">Preview</a>',
                           reverse("admin:annotations_assistedstudy_preview",
                                   args=[obj.study_id, obj.pk]))

    def has_delete_permission(self, request, obj=None):
        return False  # raters are assigned to arms: deactivate instead


class AssistedStudyAddForm(StudyNameForm, forms.ModelForm):
    class Meta:
        model = AssistedStudy
        fields = ["name", "description", "lease_minutes"]


@admin.register(AssistedStudy)
class AssistedStudyAdmin(OneStudyListMixin, StaffCreatesStudiesMixin,
                         ResearcherScopedAdmin):
    study_kind = Study.Kind.ASSISTED
    study_field = "pk"
    form = StudyForm
    list_display = ["name", "status", "sentence_count", "arm_list", "created_at", "links"]
    list_filter = ["status"]
    search_fields = ["name"]
    readonly_fields = ["status", "seed", "opened_at", "closed_at", "created_at"]
    inlines = [AssistedSettingsInline, ArmInline]
    fieldsets = [(None, {"fields": ["name", "description", "guidelines", "status",
                                    "lease_minutes", "seed"]}),
                 ("Dates", {"classes": ["collapse"],
                            "fields": ["created_at", "opened_at", "closed_at"]})]
    change_form_template = "admin/annotations/assistedstudy/change_form.html"

    def has_add_permission(self, request):
        return staff_may_create_studies(request) or is_researcher(request)

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = AssistedStudyAddForm
            kwargs["fields"] = AssistedStudyAddForm.Meta.fields
        return study_help_texts(super().get_form(request, obj, change=change, **kwargs),
                                worker="rater", task="sentence",
                                page="the rating page, under the tutorial")

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [(None, {"fields": AssistedStudyAddForm.Meta.fields})]
        return self.fieldsets

    def get_inlines(self, request, obj):
        return [] if obj is None else self.inlines

    def save_model(self, request, obj, form, change):
        self._study_save(request, obj, form, change, lambda: assisted_study_insert(study=obj))

    def save_formset(self, request, form, formset, change):
        """Arms through ``arm_save`` (checks, version bumps); an open study then gets the
        tasks new arms or more ratings per sentence imply."""
        study = form.instance
        if formset.model is Arm:
            for instance in formset.save(commit=False):
                instance.study = study
                try:
                    arm_save(arm=instance)
                except DomainError as exc:
                    self.message_user(request, f"Arm '{instance.name}': {exc.message}",
                                      messages.ERROR)
            formset.save_m2m()
        else:
            formset.save()
        if study.status == Study.Status.OPEN and formset.has_changed():
            created = tasks_sync(study=study)
            if created:
                self.message_user(request, f"{created} new rating tasks.")

    def response_add(self, request, obj, post_url_continue=None):
        self.message_user(request, format_html(
            "Assisted study “{}” created with a baseline arm. Next: add assistance arms, "
            "import sentences and traces (or sample them), add raters, then open it.",
            obj.name), messages.SUCCESS)
        return redirect("admin:annotations_assistedstudy_change", obj.pk)

    @admin.display(description="Sentences")
    def sentence_count(self, obj: Study) -> int:
        return Sentence.objects.filter(study=obj).count()

    @admin.display(description="Arms")
    def arm_list(self, obj: Study) -> str:
        return ", ".join(a.name for a in Arm.objects.filter(study=obj))

    @admin.display(description="")
    def links(self, obj: Study) -> str:
        return format_html('<a href="{}">Import sentences</a> · <a href="{}">Import traces</a>',
                           reverse("admin:annotations_assistedstudy_import_sentences",
                                   args=[obj.pk]),
                           reverse("admin:annotations_assistedstudy_import_traces",
                                   args=[obj.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        study = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if study is not None:
            context["overview"] = study_overview(study=study)
            run = context["overview"]["run"]
            context["progress"] = sampling_progress(run) if run is not None else None
            settings = context["overview"]["settings"]
            if settings is not None and settings.bonus_enabled:
                context["bonuses"] = rater_bonuses(study=study)
        return super().change_view(request, object_id, form_url, extra_context=context)

    # ------------------------------------------------------------ extra pages

    def get_urls(self):
        wrap = self.admin_site.admin_view
        name = "annotations_assistedstudy_"
        return [
            path("<int:study_id>/import-sentences/", wrap(self.import_sentences_view),
                 name=name + "import_sentences"),
            path("<int:study_id>/import-traces/", wrap(self.import_traces_view),
                 name=name + "import_traces"),
            path("<int:study_id>/sample/", wrap(self.sample_view), name=name + "sample"),
            path("<int:study_id>/progress/", wrap(self.progress_view), name=name + "progress"),
            path("<int:study_id>/routing/", wrap(self.routing_view), name=name + "routing"),
            path("<int:study_id>/status/<str:action>/", wrap(self.status_view),
                 name=name + "status"),
            path("<int:study_id>/arms/<int:arm_id>/preview/", wrap(self.preview_view),
                 name=name + "preview"),
        ] + super().get_urls()

    def _import(self, request, study_id: int, title: str, service, kind: str):
        study = self._study_or_403(request, study_id)
        form = UploadForm.of(request, updates=False)
        errors: list[str] = []
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                result = service(study=study, source=upload.file, name=upload.name)
            except DomainError as exc:
                errors = getattr(exc, "errors", [exc.message])
            else:
                self.log_change(request, study, f"Imported {upload.name}.")
                import_done(request, name=upload.name, result=result)
                return redirect(request.path)  # the page shows the summary once
        back = reverse("admin:annotations_assistedstudy_change", args=[study.pk])
        return self._page(request, "admin/annotations/assistedstudy/import.html", study,
                          f"{title} — {study.name}", form=form, errors=errors, kind=kind,
                          action=title, done=import_done_pop(request),
                          links=[("Back to the study", back)])

    @accepts_upload
    def import_sentences_view(self, request, study_id: int):
        return self._import(request, study_id, "Import sentences", sentences_import,
                            "sentences")

    @accepts_upload
    def import_traces_view(self, request, study_id: int):
        return self._import(request, study_id, "Import AI traces", traces_import, "traces")

    def sample_view(self, request, study_id: int):
        study = self._study_or_403(request, study_id)
        if request.method != "POST":
            raise Http404
        try:
            run = sampling_start(study=study, user=request.user)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.log_change(request, study, f"Sampling run {run.pk} started.")
            sentences = counted(run.sentences.count(), "sentence")
            traces = counted(run.n_samples, "trace")
            self.message_user(request, f"Sampling {sentences} × {traces} from "
                                       f"{run.config['endpoint']}.")
        return redirect("admin:annotations_assistedstudy_change", study.pk)

    def progress_view(self, request, study_id: int):
        study = self._study_or_403(request, study_id)
        run = SamplingRun.objects.filter(study=study).first()
        return render(request, "admin/annotations/assistedstudy/_progress.html",
                      {"progress": sampling_progress(run) if run else None,
                       "original": study})

    def routing_view(self, request, study_id: int):
        study = self._study_or_403(request, study_id)
        settings = AssistedSettings.objects.get(study=study)
        form = RoutingForm(request.POST or None, instance=settings)
        if request.method == "POST" and form.is_valid():
            changes = {f: form.cleaned_data[f] for f in ROUTING_FIELDS}
            try:
                change = routing_update(study=study, actor=request.user, **changes)
            except DomainError as exc:
                form.add_error(None, exc.message)
            else:
                self.log_change(request, study, f"Routing changed: {change.after}.")
                self.message_user(request, f"Routing changed: "
                                           f"{counted(change.to_humans, 'sentence')} "
                                           f"to raters, {change.to_ai} to the AI; "
                                           f"{change.kept} kept (a rater already had them).")
                return redirect("admin:annotations_assistedstudy_change", study.pk)
        changes = RoutingChange.objects.filter(study=study).order_by("-at")[:20]
        return self._page(request, "admin/annotations/assistedstudy/routing.html", study,
                          f"Routing — {study.name}", form=form, changes=changes)

    def status_view(self, request, study_id: int, action: str):
        study = self._study_or_403(request, study_id)
        if action not in ("open", "close"):
            raise Http404
        if request.method == "POST":
            study_status_change(self, request, study, opening=action == "open")
            return redirect("admin:annotations_assistedstudy_change", study.pk)
        return self._page(request, "admin/annotations/assistedstudy/status_confirm.html",
                          study, f"{action.capitalize()} “{study.name}”?", action=action,
                          overview=study_overview(study=study))

    def preview_view(self, request, study_id: int, arm_id: int):
        """Exactly what a rater of the arm sees: the real panel and rating form, for one of
        the study's sentences with an AI rating (``?sentence=<id>`` picks it) or a sample."""
        study = self._study_or_403(request, study_id)
        arm = get_object_or_404(Arm, pk=arm_id, study=study)
        settings = AssistedSettings.objects.get(study=study)
        candidates = Sentence.objects.filter(study=study).exclude(ai_source="")
        wanted = request.GET.get("sentence")
        sentence = (candidates.filter(external_id=wanted).first() if wanted
                    else candidates.order_by("rank").first()) or SAMPLE_SENTENCE
        panel = None if sentence.pk is None else panel_for(
            sentence=sentence, components=arm.components, settings=settings)
        at = sentence.response.find(sentence.target)
        view = SentenceForRater(
            id="preview", prompt=sentence.prompt, response=sentence.response,
            target=sentence.target, before=sentence.response[:max(at, 0)] if at >= 0 else "",
            after=sentence.response[at + len(sentence.target):] if at >= 0 else "",
            found=at >= 0, lease_expires_at=None, issued_at=None)
        return self._page(
            request, "admin/annotations/assistedstudy/preview.html", study,
            f"Preview of arm “{arm.name}” (version {arm.version})", arm=arm, t=view,
            sentence=sentence, preview=True,
            panel_html=mark_safe(panel_html(panel)),  # noqa: S308 - our own template
            assisted=not arm.is_baseline, progress={"rated": 0, "skipped": 0, "remaining": 0},
            label_choices=LABEL_CHOICES, confidence_choices=CONFIDENCE_CHOICES,
            helpfulness_choices=HELPFULNESS_CHOICES,
            section_keys=[k for k in SECTION_KEYS if k[1] in arm.components],
            sentences=list(candidates.order_by("rank").values_list("external_id",
                                                                   flat=True)[:50]))


class RoutingForm(forms.ModelForm):
    class Meta:
        model = AssistedSettings
        fields = list(ROUTING_FIELDS)
        # JSON that cannot be stored (deep nesting, NUL, NaN) is a form error, not a 500
        field_classes = {"band_edges": StorableJSONFormField,
                         "band_targets": StorableJSONFormField}
