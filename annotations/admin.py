"""Researcher screens: studies with classes, members and AI systems inline; open/close actions;
item and prediction imports and label exports from the study page."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils.html import format_html

from annotations.errors import DomainError
from annotations.models import (
    EstimateSnapshot,
    Item,
    Query,
    Study,
    StudyClass,
    StudyMembership,
    User,
)
from annotations.services.estimates import study_recompute
from annotations.services.exports import labels_export
from annotations.services.imports import items_import
from annotations.services.studies import study_close, study_open
from assistants.models import AISystem


def researcher_study_ids(request: HttpRequest) -> set[int] | None:
    """Studies a staff user may configure; None means all (superuser)."""
    if request.user.is_superuser:
        return None
    return set(
        StudyMembership.objects.filter(
            user=request.user, role=StudyMembership.Role.RESEARCHER
        ).values_list("study_id", flat=True)
    )


class ResearcherScopedAdmin(admin.ModelAdmin):
    """Per-study object permissions: staff see and change only studies they research."""

    study_field = "study"

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        ids = researcher_study_ids(request)
        return qs if ids is None else qs.filter(**{f"{self.study_field}__in": ids})

    def _allowed(self, request, obj) -> bool:
        ids = researcher_study_ids(request)
        if obj is None or ids is None:
            return True
        study_id = obj.pk if isinstance(obj, Study) else getattr(obj, f"{self.study_field}_id")
        return study_id in ids

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) and self._allowed(request, obj)

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and self._allowed(request, obj)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and self._allowed(request, obj)


class StudyClassInline(admin.TabularInline):
    model = StudyClass
    extra = 0
    fields = ["index", "name", "description"]


class MembershipInline(admin.TabularInline):
    model = StudyMembership
    extra = 0
    fields = ["user", "role", "study_class"]
    autocomplete_fields = ["user"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "study_class":
            study_id = request.resolver_match.kwargs.get("object_id")
            kwargs["queryset"] = StudyClass.objects.filter(study_id=study_id or 0)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class AISystemInline(admin.TabularInline):
    model = AISystem
    extra = 0
    fields = ["name", "description", "ordinal", "reference_accuracy"]
    readonly_fields = ["ordinal", "reference_accuracy"]

    @admin.display(description="Gold-subset accuracy")
    def reference_accuracy(self, obj: AISystem) -> str:
        if not obj.reference_n:
            return "—"
        return f"{obj.reference_correct / obj.reference_n:.3f} (n={obj.reference_n})"

    def has_add_permission(self, request, obj=None):
        return False  # systems are created by prediction imports (or the API)


class UploadForm(forms.Form):
    file = forms.FileField(help_text="CSV (with a header row) or JSONL, UTF-8.")
    update = forms.BooleanField(required=False,
                                help_text="Rewrite rows whose ids already exist.")


@admin.register(Study)
class StudyAdmin(ResearcherScopedAdmin):
    list_display = ["name", "status", "k_classes", "queries_per_item", "gold_rate",
                    "created_at", "links"]
    list_filter = ["status"]
    search_fields = ["name"]
    readonly_fields = ["seed", "opened_at", "closed_at", "created_at"]
    inlines = [StudyClassInline, MembershipInline, AISystemInline]
    actions = ["open_studies", "close_studies", "recompute_estimates"]
    fieldsets = [
        (None, {"fields": ["name", "description", "status"]}),
        ("Routing", {"fields": ["queries_per_item", "lease_minutes", "shuffle_options",
                                "gold_rate", "seed"]}),
        ("Dashboard", {"fields": ["target_ci_width"]}),
        ("Dates", {"fields": ["created_at", "opened_at", "closed_at"]}),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("classes")

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and obj.status != Study.Status.DRAFT:
            fields += ["status", "queries_per_item", "shuffle_options"]
        return fields

    @admin.display(description="K")
    def k_classes(self, obj: Study) -> int:
        return len(obj.classes.all())

    @admin.display(description="")
    def links(self, obj: Study) -> str:
        return format_html(
            '<a href="{}">Dashboard</a> · <a href="{}">Import items</a> · '
            '<a href="{}">Import predictions</a> · <a href="{}">Export labels</a>',
            reverse("dashboard", args=[obj.pk]),
            reverse("admin:annotations_study_import_items", args=[obj.pk]),
            reverse("admin:annotations_study_import_predictions", args=[obj.pk]),
            reverse("admin:annotations_study_export", args=[obj.pk]),
        )

    @admin.action(description="Open selected studies (routes their items)")
    def open_studies(self, request, queryset):
        for study in queryset:
            try:
                routed = study_open(study=study)
            except DomainError as exc:
                self.message_user(request, f"{study}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"{study}: opened, {routed} items routed.")

    @admin.action(description="Close selected studies")
    def close_studies(self, request, queryset):
        for study in queryset:
            study_close(study=study)
        self.message_user(request, f"Closed {queryset.count()} studies.")

    @admin.action(description="Recompute estimates now")
    def recompute_estimates(self, request, queryset):
        for study in queryset:
            study_recompute(study_id=study.pk)
        self.message_user(request, f"Recomputed {queryset.count()} studies.")

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<int:study_id>/import-items/", wrap(self.import_items_view),
                 name="annotations_study_import_items"),
            path("<int:study_id>/import-predictions/", wrap(self.import_predictions_view),
                 name="annotations_study_import_predictions"),
            path("<int:study_id>/export/", wrap(self.export_view),
                 name="annotations_study_export"),
        ] + super().get_urls()

    def _study_or_403(self, request, study_id: int) -> Study:
        study = get_object_or_404(Study, pk=study_id)
        if not self.has_change_permission(request, study):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        return study

    def _import_view(self, request, study_id: int, title: str, service) -> HttpResponse:
        study = self._study_or_403(request, study_id)
        form = UploadForm(request.POST or None, request.FILES or None)
        errors: list[str] = []
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                result = service(study=study, source=upload.file, name=upload.name,
                                 update=form.cleaned_data["update"])
            except DomainError as exc:
                errors = getattr(exc, "errors", [exc.message])
            else:
                self.message_user(request, f"{upload.name}: {result.created} created, "
                                           f"{result.updated} updated.")
                return redirect("admin:annotations_study_change", study.pk)
        return render(request, "admin/annotations/import.html", {
            **self.admin_site.each_context(request), "title": title, "study": study,
            "form": form, "errors": errors, "opts": self.model._meta,
        })

    def import_items_view(self, request, study_id: int):
        return self._import_view(request, study_id, "Import items", items_import)

    def import_predictions_view(self, request, study_id: int):
        from assistants.services import predictions_import

        return self._import_view(request, study_id, "Import AI predictions", predictions_import)

    def export_view(self, request, study_id: int):
        study = self._study_or_403(request, study_id)
        fmt = request.GET.get("format", "csv")
        if fmt not in ("csv", "jsonl"):
            fmt = "csv"
        response = HttpResponse(content_type="text/csv" if fmt == "csv" else "application/jsonl")
        response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-labels.{fmt}"'
        labels_export(study=study, out=response, fmt=fmt)
        return response


@admin.register(Item)
class ItemAdmin(ResearcherScopedAdmin):
    list_display = ["external_id", "study", "stratum", "is_quality_check", "routed_at"]
    list_filter = ["study", "is_quality_check"]
    search_fields = ["external_id", "text"]
    readonly_fields = ["option_order", "class_order", "routed_at"]


@admin.register(Query)
class QueryAdmin(ResearcherScopedAdmin):
    list_display = ["id", "study", "item", "k", "sequence", "status", "answer", "holder",
                    "answered_by", "answered_at", "is_quality_check"]
    list_filter = ["study", "status", "answer", "is_quality_check", "k"]
    list_select_related = ["study", "item", "holder", "answered_by"]
    raw_id_fields = ["item", "holder", "answered_by"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # routing owns queries; researchers read them


@admin.register(EstimateSnapshot)
class EstimateSnapshotAdmin(ResearcherScopedAdmin):
    list_display = ["study", "computed_at", "n_answered", "duration_ms"]
    list_filter = ["study"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(User)
class PlatformUserAdmin(UserAdmin):
    list_display = ["username", "email", "is_staff", "is_superuser", "last_login"]
