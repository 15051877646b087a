"""Researcher screens: studies with classes, members and AI systems inline; open/close actions;
item and prediction imports and label exports from the study page."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils.html import format_html

from annotations.admin_forms import MemberFormSet, StudyAddForm, StudyForm, StudyNameForm
from annotations.errors import DomainError
from annotations.inputs import StorableJSONFormField, accepts_upload, file_too_large_message
from annotations.models import (
    EstimateSnapshot,
    ImportJob,
    Item,
    Query,
    Study,
    StudyClass,
    StudyMembership,
    User,
)
from annotations.selectors import (
    import_job_progress,
    researched_study_ids,
    study_events,
    study_has_answers,
    study_import_jobs,
    study_setup_checklist,
)
from annotations.services.estimates import study_recompute
from annotations.services.exports import labels_export
from annotations.services.import_jobs import import_job_submit, import_jobs_expire
from annotations.services.imports import item_create, item_update
from annotations.services.running import items_answered, items_delete, study_classes_change_check
from annotations.services.studies import (
    member_password_reset,
    members_add,
    membership_add,
    researchers_staff_ensure,
    study_close,
    study_insert,
    study_open,
)
from annotations.sqlite_locks import while_sqlite_locked
from assistants.models import AISystem


def researcher_study_ids(request: HttpRequest) -> set[int] | None:
    """Studies a staff user may configure; None means all (superuser)."""
    return researched_study_ids(user=request.user)


def is_researcher(request: HttpRequest) -> bool:
    """Staff users who research at least one study (or superusers) use the admin."""
    user = request.user
    if not (user.is_active and user.is_staff):
        return False
    return user.is_superuser or bool(researcher_study_ids(request))


def study_allowed(request: HttpRequest, study_id: int | None) -> bool:
    ids = researcher_study_ids(request)
    return study_id is None or ids is None or study_id in ids


def study_path(model) -> str | None:
    """The lookup from ``model`` to the study a row belongs to (None: no study, hence not
    shown to researchers). Users belong to the studies they are members of."""
    if model is Study:
        return "pk"
    if model is User:
        return "memberships__study"
    names = {f.name for f in model._meta.get_fields()}
    if "study" in names:
        return "study"
    if "system" in names:  # predictions: through their AI system
        return "system__study"
    return None


def scope_to_studies(queryset, study_ids: set[int] | None):
    """Rows of ``queryset`` that belong to the given studies (None: all, superusers)."""
    if study_ids is None:
        return queryset
    model = queryset.model
    path = study_path(model)
    if path is None:
        return queryset.none()
    if "__" not in path:
        return queryset.filter(**{f"{path}__in": study_ids})
    # through a to-many relation: a subquery, not a join (no duplicates, no DISTINCT)
    return queryset.filter(
        pk__in=model._default_manager.filter(**{f"{path}__in": study_ids}).values("pk"))


class ScopedChoicesMixin:
    """One place for every foreign-key choice, raw-id field (its form field validates
    against the same queryset; the lookup popup is the related admin's scoped change list),
    autocomplete (the related admin's scoped queryset) and list filter of a researcher's
    admin pages: only rows of the researcher's own studies."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        ids = researcher_study_ids(request)
        if ids is not None and "queryset" not in kwargs:
            related = db_field.remote_field.model
            kwargs["queryset"] = scope_to_studies(related._default_manager.all(), ids)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        ids = researcher_study_ids(request)
        if ids is not None and "queryset" not in kwargs:
            related = db_field.remote_field.model
            kwargs["queryset"] = scope_to_studies(related._default_manager.all(), ids)
        return super().formfield_for_manytomany(db_field, request, **kwargs)


class ResearcherScopedAdmin(ScopedChoicesMixin, admin.ModelAdmin):
    """Per-study object permissions: a staff user who is a researcher of a study sees and
    changes that study's rows without any Django model permission; superusers see all.
    A row never moves to another study: the study (for predictions: system and item) is
    read-only once the row exists (the database refuses it too)."""

    study_field = "study"
    # JSON that cannot be stored (NUL, NaN, deep nesting) is a form error, not a 500.
    formfield_overrides = {models.JSONField: {"form_class": StorableJSONFormField}}
    fixed_fields: tuple[str, ...] = ("study",)

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        ids = researcher_study_ids(request)
        return qs if ids is None else qs.filter(**{f"{self.study_field}__in": ids})

    def get_list_filter(self, request):
        filters = []
        for entry in super().get_list_filter(request):
            if isinstance(entry, str) and self._is_relation(entry):
                # only the related rows present in the scoped change list
                entry = (entry, admin.RelatedOnlyFieldListFilter)
            filters.append(entry)
        return filters

    def _is_relation(self, lookup: str) -> bool:
        model = self.model
        field = None
        for part in lookup.split("__"):
            field = model._meta.get_field(part)
            if not field.is_relation:
                return False
            model = field.related_model
        return field is not None

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            names = {f.name for f in self.model._meta.get_fields()}
            fields += [f for f in self.fixed_fields if f in names and f not in fields]
        return fields

    def study_id_of(self, obj) -> int | None:
        if obj is None:
            return None
        if isinstance(obj, Study):
            return obj.pk
        value = obj
        for part in self.study_field.split("__"):
            value = getattr(value, part)
        return value.pk

    def _granted(self, request, obj, perm: str) -> bool:
        allowed = is_researcher(request) or getattr(super(), perm)(request, obj)
        return allowed and study_allowed(request, self.study_id_of(obj))

    def has_module_permission(self, request):
        return is_researcher(request) or super().has_module_permission(request)

    def has_add_permission(self, request):
        return is_researcher(request) or super().has_add_permission(request)

    def has_view_permission(self, request, obj=None):
        return self._granted(request, obj, "has_view_permission")

    def has_change_permission(self, request, obj=None):
        return self._granted(request, obj, "has_change_permission")

    def has_delete_permission(self, request, obj=None):
        return self._granted(request, obj, "has_delete_permission")


class StudyInline(ScopedChoicesMixin):
    """Inline rows of a study: whoever may change the study may edit them."""

    # JSON that cannot be stored (NUL, NaN, deep nesting) is a form error, not a 500.
    formfield_overrides = {models.JSONField: {"form_class": StorableJSONFormField}}

    def _parent_allowed(self, request, obj) -> bool:
        return is_researcher(request) and study_allowed(request, obj.pk if obj else None)

    def has_view_permission(self, request, obj=None):
        return self._parent_allowed(request, obj)

    def has_add_permission(self, request, obj=None):
        return self._parent_allowed(request, obj)

    def has_change_permission(self, request, obj=None):
        return self._parent_allowed(request, obj)

    def has_delete_permission(self, request, obj=None):
        return self._parent_allowed(request, obj)


SHORT_TEXT = {models.TextField: {"widget": forms.Textarea(attrs={"rows": 2, "cols": 36})}}


class StudyClassFormSet(forms.BaseInlineFormSet):
    def clean(self):
        super().clean()
        deleting = sum(1 for f in self.forms if f.cleaned_data.get("DELETE") and f.instance.pk)
        adding = sum(1 for f in self.forms if not f.instance.pk and f.has_changed()
                     and not f.cleaned_data.get("DELETE"))
        reindexing = sum(1 for f in self.forms if f.instance.pk and "index" in f.changed_data)
        try:
            study_classes_change_check(study=self.instance, deleting=deleting, adding=adding,
                                       reindexing=reindexing)
        except DomainError as exc:
            raise forms.ValidationError(exc.message) from exc


class StudyClassInline(StudyInline, admin.TabularInline):
    model = StudyClass
    formset = StudyClassFormSet
    extra = 0
    verbose_name, verbose_name_plural = "class", "Classes"
    fields = ["index", "name", "description", "guidelines"]
    formfield_overrides = SHORT_TEXT


class MembershipInline(StudyInline, admin.TabularInline):
    model = StudyMembership
    extra = 0
    verbose_name, verbose_name_plural = "member", "Members"
    fields = ["user", "role", "study_class"]
    autocomplete_fields = ["user"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "study_class":
            study_id = request.resolver_match.kwargs.get("object_id")
            kwargs["queryset"] = StudyClass.objects.filter(study_id=study_id or 0)
        # "user" is scoped by ScopedChoicesMixin to members of the researcher's studies:
        # people from outside are added on the Members page (members_add), which never
        # shows whether a name exists elsewhere.
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class AISystemInline(StudyInline, admin.TabularInline):
    model = AISystem
    extra = 0
    fields = ["name", "description", "ordinal", "reference_accuracy"]
    readonly_fields = ["ordinal", "reference_accuracy"]
    formfield_overrides = SHORT_TEXT

    @admin.display(description="Gold-subset accuracy")
    def reference_accuracy(self, obj: AISystem) -> str:
        if not obj.reference_n:
            return "—"
        return f"{obj.reference_correct / obj.reference_n:.3f} (n={obj.reference_n})"

    def has_add_permission(self, request, obj=None):
        return False  # systems are created by prediction imports (or the API)


class UploadForm(forms.Form):
    file = forms.FileField(help_text="CSV (with a header row) or JSONL, UTF-8; the file name "
                           "ends in .csv or .jsonl.")
    update = forms.BooleanField(
        required=False, label="Rewrite existing ids",
        help_text="Rows whose ids already exist replace the stored ones.")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if not upload.name.lower().endswith((".csv", ".jsonl", ".ndjson")):
            raise forms.ValidationError(f"“{upload.name}” is neither a .csv nor a .jsonl file; "
                                        f"rename it to say which it is.")
        if upload.size > settings.OVERSIGHT_IMPORT_MAX_BYTES:
            raise forms.ValidationError(file_too_large_message(upload.name, upload.size))
        return upload


admin.site.site_header = "Oversight"
admin.site.site_title = "Oversight"
admin.site.index_title = "Studies, members and data"


def staff_may_create_studies(request: HttpRequest) -> bool:
    """Any active staff account may create a study (and becomes its researcher): the way a
    new researcher starts from an empty database. Other studies stay invisible to them."""
    return request.user.is_active and request.user.is_staff


class StaffCreatesStudiesMixin:
    """For the admins of a study type: any active staff account sees the module, the list
    (empty until they create a study) and the Add button; rows are still checked one by one
    (``obj`` given) by the researcher scoping. Also the admin's own study pages (imports,
    open/close, members): the study checked, the page in the admin's frame."""

    def has_module_permission(self, request):
        return staff_may_create_studies(request) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None):
        if obj is None and staff_may_create_studies(request):
            return True
        return super().has_view_permission(request, obj)

    def has_change_permission(self, request, obj=None):
        if obj is None and staff_may_create_studies(request):
            return True
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        # a study's answers are its record (and deleting one would sweep up every item
        # and label behind a slow confirmation page): close it instead
        if obj is not None and self._answered(obj):
            return False
        return super().has_delete_permission(request, obj)

    @staticmethod
    def _answered(obj) -> bool:
        return study_has_answers(study=obj if isinstance(obj, Study) else obj.study)

    def delete_view(self, request, object_id, extra_context=None):
        """A study with answers: back to its page with the reason, not a bare 403."""
        obj = self.get_object(request, object_id)
        if obj is not None and self.has_view_permission(request, obj) and self._answered(obj):
            self.message_user(request, f"“{obj}” has answers, which are the study's record, "
                              "so it cannot be deleted. Close it instead.", messages.ERROR)
            return redirect(reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}"
                                    "_change", args=[obj.pk]))
        return super().delete_view(request, object_id, extra_context)

    def get_readonly_fields(self, request, obj=None):
        """Only a study's creator (or a superuser) renames it: a co-researcher refused a
        name would learn that the creator has another study of that name."""
        fields = list(super().get_readonly_fields(request, obj))
        if (isinstance(obj, Study) and obj.created_by_id is not None
                and obj.created_by_id != request.user.pk and not request.user.is_superuser):
            fields.append("name")
        return fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        """The form knows whose studies its name must differ from (StudyNameForm)."""
        form = super().get_form(request, obj, change=change, **kwargs)
        if issubclass(form, StudyNameForm):
            study = obj if obj is None or isinstance(obj, Study) else obj.study
            creator = request.user if study is None else study.created_by
            form.study_creator = creator
            form.creator_is_user = creator == request.user
        return form

    def _study_save(self, request, obj, form, change, insert: Callable[[], object]) -> None:
        """``save_model`` of a study type's admin: a new study through its service
        (``insert``), its creator (not a superuser) becoming its researcher; a changed one
        saves only the fields the form changed — never status (the services own it), and a
        concurrent open/close is not overwritten by a stale copy."""
        if not change:
            obj.created_by = request.user
            insert()
            if not request.user.is_superuser:
                membership_add(study=obj, user=request.user,
                               role=StudyMembership.Role.RESEARCHER)
            return
        concrete = {f.name for f in obj._meta.concrete_fields}
        fields = [f for f in form.changed_data if f in concrete]
        if fields:
            obj.save(update_fields=fields)

    def _study_or_403(self, request, study_id: int) -> Study:
        """The admin's study (its model: ``Study`` or a study type's proxy) if the user may
        change it; 404 / 403 otherwise. For the admins' own study pages."""
        study = get_object_or_404(self.model, pk=study_id)
        if not self.has_change_permission(request, study):
            raise PermissionDenied
        return study

    def _page(self, request, template: str, study: Study, title: str, **context):
        """One of the admin's own study pages, in the admin's frame."""
        return render(request, template, {
            **self.admin_site.each_context(request), "title": title, "study": study,
            "opts": self.model._meta, "original": study, **context})


@admin.register(Study)
class StudyAdmin(StaffCreatesStudiesMixin, ResearcherScopedAdmin):
    study_field = "pk"
    form = StudyForm
    list_display = ["name", "status", "k_classes", "queries_per_item", "gold_rate",
                    "created_at", "links"]
    list_filter = ["status"]
    search_fields = ["name"]
    # Status changes only through study_open / study_close (the buttons and list actions):
    # a form that saved "open" would leave the study open with nothing routed.
    readonly_fields = ["status", "seed", "opened_at", "closed_at", "created_at"]
    inlines = [StudyClassInline, MembershipInline, AISystemInline]
    actions = ["open_studies", "close_studies", "recompute_estimates"]
    fieldsets = [
        (None, {"fields": ["name", "description", "guidelines", "status"]}),
        ("Routing", {"fields": ["queries_per_item", "lease_minutes", "shuffle_options",
                                "gold_rate", "seed"]}),
        ("Dashboard", {"fields": ["target_ci_width", "interval_method"]}),
        ("Dates", {"fields": ["created_at", "opened_at", "closed_at"]}),
    ]
    add_fieldsets = [
        (None, {"fields": ["name", "description", "classes"]}),
        ("Routing", {"fields": ["queries_per_item", "lease_minutes", "shuffle_options",
                                "gold_rate"]}),
        ("Dashboard", {"fields": ["target_ci_width", "interval_method"]}),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("classes")

    def has_add_permission(self, request):
        return (staff_may_create_studies(request) or is_researcher(request)
                or request.user.has_perm("annotations.add_study"))

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = StudyAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fieldsets(self, request, obj=None):
        return self.add_fieldsets if obj is None else self.fieldsets

    def get_inlines(self, request, obj):
        # Members need the classes (a specialist's menu), so they come after the first save.
        return [] if obj is None else self.inlines

    def save_model(self, request, obj, form, change):
        self._study_save(request, obj, form, change, lambda: study_insert(
            study=obj, classes=form.cleaned_data["classes"]))

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        researchers_staff_ensure(study=form.instance)

    def response_add(self, request, obj, post_url_continue=None):
        if "_addanother" in request.POST or "_popup" in request.POST:
            return super().response_add(request, obj, post_url_continue)
        self.message_user(request, format_html(
            "Study “{}” created with {} classes. Next: add its members, import items and AI "
            "predictions, then open it.", obj.name, obj.classes.count()), messages.SUCCESS)
        return redirect("admin:annotations_study_change", obj.pk)

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and obj.status != Study.Status.DRAFT:
            fields += ["queries_per_item", "shuffle_options", "interval_method"]
        return fields

    def change_view(self, request, object_id, form_url="", extra_context=None):
        study = self.get_object(request, object_id)
        if study is not None and study.kind == Study.Kind.ASSISTED:
            return redirect("admin:annotations_assistedstudy_change", study.pk)
        context = dict(extra_context or {})
        if study is not None:
            context["setup"] = study_setup_checklist(study=study)
            context["study_events"] = study_events(study=study)
        return super().change_view(request, object_id, form_url, extra_context=context)

    @admin.display(description="K")
    def k_classes(self, obj: Study) -> int:
        return len(obj.classes.all())

    @admin.display(description="")
    def links(self, obj: Study) -> str:
        return format_html(
            '<a href="{}">Dashboard</a> · <a href="{}">Import items</a> · '
            '<a href="{}">Import predictions</a> · Export labels: <a href="{}">CSV</a> '
            '<a href="{}">JSONL</a>',
            reverse("dashboard", args=[obj.pk]),
            reverse("admin:annotations_study_import_items", args=[obj.pk]),
            reverse("admin:annotations_study_import_predictions", args=[obj.pk]),
            reverse("admin:annotations_study_export", args=[obj.pk]) + "?format=csv",
            reverse("admin:annotations_study_export", args=[obj.pk]) + "?format=jsonl",
        )

    @admin.action(description="Open selected studies (routes their items)")
    def open_studies(self, request, queryset):
        for study in queryset:
            try:
                routed = study_open(study=study, by=request.user)
            except DomainError as exc:
                self.message_user(request, f"{study}: {exc.message}", messages.ERROR)
            else:
                self.log_change(request, study, f"Opened: {routed} items routed.")
                self.message_user(request, f"{study}: opened, {routed} items routed.")

    @admin.action(description="Close selected studies")
    def close_studies(self, request, queryset):
        for study in queryset:
            try:
                study_close(study=study, by=request.user)
            except DomainError as exc:
                self.message_user(request, f"{study}: {exc.message}", messages.ERROR)
            else:
                self.log_change(request, study, "Closed.")
                self.message_user(request, f"{study}: closed.")

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
            path("<int:study_id>/import-jobs/<int:job_id>/", wrap(self.import_job_view),
                 name="annotations_study_import_job"),
            path("<int:study_id>/export/", wrap(self.export_view),
                 name="annotations_study_export"),
            path("<int:study_id>/open/", wrap(self.open_view), name="annotations_study_open"),
            path("<int:study_id>/close/", wrap(self.close_view),
                 name="annotations_study_close"),
            path("<int:study_id>/members/", wrap(self.members_view),
                 name="annotations_study_members"),
        ] + super().get_urls()

    def _status_view(self, request, study_id: int, *, opening: bool) -> HttpResponse:
        study = self._study_or_403(request, study_id)
        if request.method == "POST":
            try:
                if opening:
                    routed = study_open(study=study, by=request.user)
                    note = f"Opened: {routed} items routed."
                else:
                    study_close(study=study, by=request.user)
                    note = "Closed."
            except DomainError as exc:
                self.message_user(request, exc.message, messages.ERROR)
            else:
                self.log_change(request, study, note)
                self.message_user(request, f"{study.name}: {note[0].lower()}{note[1:]}",
                                  messages.SUCCESS)
            return redirect("admin:annotations_study_change", study.pk)
        verb = "Open" if opening else "Close"
        return self._page(request, "admin/annotations/study/status_confirm.html", study,
                          f"{verb} “{study.name}”?", opening=opening,
                          setup=study_setup_checklist(study=study))

    def open_view(self, request, study_id: int):
        return self._status_view(request, study_id, opening=True)

    def close_view(self, request, study_id: int):
        return self._status_view(request, study_id, opening=False)

    def members_view(self, request, study_id: int):
        study = self._study_or_403(request, study_id)
        formset = MemberFormSet(request.POST or None, study=study, prefix="members")
        created, error = [], ""
        reset = request.POST.get("reset", "")
        if request.method == "POST" and reset:
            if not reset.isdigit():
                raise Http404
            member = get_object_or_404(StudyMembership, study=study, pk=int(reset))
            try:
                password = member_password_reset(study=study, user=member.user,
                                                 by=request.user)
            except DomainError as exc:
                error = exc.message
            else:
                self.log_change(request, study, f"New password for {member.user}.")
                created = [(member, password)]
            formset = MemberFormSet(study=study, prefix="members")
        elif request.method == "POST" and formset.is_valid():
            try:
                added = members_add(study=study, members=formset.members(), by=request.user)
            except DomainError as exc:
                error = exc.message
            else:
                names = ", ".join(a.membership.user.username for a in added)
                if added:
                    self.log_change(request, study, f"Members added: {names}.")
                created = [(a.membership, a.password) for a in added]
                formset = MemberFormSet(study=study, prefix="members")
        members = (StudyMembership.objects.filter(study=study)
                   .select_related("user", "study_class").order_by("role", "user__username"))
        return self._page(request, "admin/annotations/study/members.html", study,
                          f"Members of “{study.name}”", formset=formset, members=members,
                          created=created, error=error,
                          login_url=request.build_absolute_uri(reverse("login")))

    def _import_view(self, request, study_id: int, kind: str) -> HttpResponse:
        """The upload form; a valid upload becomes an import job (services/import_jobs.py)
        and the browser goes to its page, which follows the job to its end."""
        study = self._study_or_403(request, study_id)
        form = UploadForm(request.POST or None, request.FILES or None)
        errors: list[str] = []
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                job, _ = import_job_submit(study=study, kind=kind, data=upload.read(),
                                           name=upload.name, user=request.user,
                                           update=form.cleaned_data["update"])
            except DomainError as exc:
                errors = getattr(exc, "errors", [exc.message])
            else:
                return redirect("admin:annotations_study_import_job", study.pk, job.pk)
        title = "Import items" if kind == ImportJob.Kind.ITEMS else "Import AI predictions"
        return self._page(request, "admin/annotations/import.html", study,
                          f"{title} — {study.name}", form=form, errors=errors, kind=kind,
                          jobs=study_import_jobs(study=study, kind=kind)[:5])

    @accepts_upload
    def import_items_view(self, request, study_id: int):
        return self._import_view(request, study_id, ImportJob.Kind.ITEMS)

    @accepts_upload
    def import_predictions_view(self, request, study_id: int):
        return self._import_view(request, study_id, ImportJob.Kind.PREDICTIONS)

    def import_job_view(self, request, study_id: int, job_id: int):
        """A job's page: its progress bar (htmx polls this view for the fragment every
        second until the job ends), then its summary or its errors."""
        study = self._study_or_403(request, study_id)
        job = while_sqlite_locked(lambda: (
            import_jobs_expire(study=study),
            get_object_or_404(ImportJob.objects.select_related("created_by"), pk=job_id,
                              study=study))[1])
        context = {"job": job, "progress": import_job_progress(job=job), "poll_url": request.path,
                   "errors": job.errors, "form": UploadForm()}
        if getattr(request, "htmx", False):
            return render(request, "admin/annotations/_import_job.html",
                          {**context, "study": study})
        kind = "items" if job.kind == ImportJob.Kind.ITEMS else "AI predictions"
        return self._page(request, "admin/annotations/import_job.html", study,
                          f"Import of {kind} from {job.name}", **context)

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

    def has_delete_permission(self, request, obj=None):
        # an item whose answers the estimates count is never deleted (items_delete)
        if obj is not None and items_answered(Item.objects.filter(pk=obj.pk)):
            return False
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request, queryset):
        try:
            items_delete(items=queryset)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)

    def delete_model(self, request, obj):
        items_delete(items=Item.objects.filter(pk=obj.pk))

    def save_model(self, request, obj, form, change):
        # through the services: the shuffle drawn and routing on add; the running-study
        # rules (Item.clean) and the queries' strata on change
        if change:
            item_update(item=obj)
        else:
            obj.pk = item_create(item=obj).pk


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
    add_fieldsets = (*UserAdmin.add_fieldsets, (
        "Researcher", {"fields": ("is_staff",), "description":
                       "Tick Staff status for a researcher: they may then create studies here "
                       "and add their members. Specialists and managers are added by "
                       "researchers on each study's Members page."}))

    def has_view_permission(self, request, obj=None):
        # researchers pick members by name (autocomplete); only superusers edit accounts
        return is_researcher(request) or super().has_view_permission(request, obj)

    def get_queryset(self, request):
        """Researchers see the members of their own studies (and themselves), no one else."""
        qs = super().get_queryset(request)
        ids = researcher_study_ids(request)
        if ids is None:
            return qs
        members = StudyMembership.objects.filter(study_id__in=ids).values("user_id")
        return qs.filter(Q(pk__in=members) | Q(pk=request.user.pk))


# The study types' admin screens register themselves.
from annotations import admin_assisted, admin_critique  # noqa: E402, F401
