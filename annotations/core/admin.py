"""The admin's pieces every study type's pages share: researcher scoping (a researcher sees
and changes only their own studies), the study inlines (classes, members), the upload form,
staff-created studies, and the admin pages of what the core owns (snapshots, users, the
queue of flagged items). Each
study type's admin (``annotations/<type>/admin.py``) builds its study pages from these."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import Q
from django.http import HttpRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from annotations.core.admin_forms import StudyNameForm
from annotations.core.errors import DomainError
from annotations.core.inputs import StorableJSONFormField, file_too_large_message
from annotations.core.models import (
    EstimateSnapshot,
    ItemFlag,
    Study,
    StudyClass,
    StudyMembership,
    User,
)
from annotations.core.selectors import (
    researched_study_ids,
    study_has_answers,
)
from annotations.core.services.flags import flag_resolve, flaggable
from annotations.core.services.import_jobs import import_summary
from annotations.core.services.studies import (
    membership_add,
    study_classes_change_check,
)
from annotations.core.views import study_actions
from annotations.core.words import counted


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


IMPORT_DONE = "import_done"  # the session key of an import's summary, shown once


def import_done(request: HttpRequest, *, name: str, result) -> None:
    """Keep an import's summary (``import_jobs.import_summary``) for the page the browser
    is sent to next, which shows it once (``import_done_pop``): every import page ends on
    the same summary, whether the import ran in the request or as a job."""
    request.session[IMPORT_DONE] = {"name": name, "summary": import_summary(result)}


def import_done_pop(request: HttpRequest) -> dict | None:
    """The summary ``import_done`` kept (None when there is none), forgotten once read."""
    return request.session.pop(IMPORT_DONE, None)


class UploadForm(forms.Form):
    """The upload of every import page. ``updates=False`` for an import that never rewrites
    existing ids (no "Rewrite existing ids" box). Its errors read as the import's own:
    "file: …" (``admin/annotations/import.html`` lists them with the file's problems)."""

    file = forms.FileField(
        help_text="CSV (with a header row) or JSONL, UTF-8; the file name ends in .csv or "
                  ".jsonl.",
        error_messages={"required": "file: choose a file to import (CSV or JSONL).",
                        "empty": "file: the file is empty."})
    update = forms.BooleanField(
        required=False, label="Rewrite existing ids",
        help_text="Rows whose ids already exist replace the stored ones.")

    def __init__(self, *args, updates: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        if not updates:
            del self.fields["update"]

    @classmethod
    def of(cls, request: HttpRequest, *, updates: bool = True) -> UploadForm:
        """The form of this request: bound on every POST (an empty one too, so that "no
        file" is said rather than a blank form shown again), unbound otherwise."""
        if request.method == "POST":
            return cls(request.POST, request.FILES, updates=updates)
        return cls(updates=updates)

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if not upload.name.lower().endswith((".csv", ".jsonl", ".ndjson")):
            raise forms.ValidationError(f"“{upload.name}” is neither a .csv nor a .jsonl file; "
                                        f"rename it to say which it is.")
        if upload.size > settings.OVERSIGHT_IMPORT_MAX_BYTES:
            raise forms.ValidationError(file_too_large_message(upload.name, upload.size))
        return upload


class EvalLogUploadForm(forms.Form):
    """The upload of an evaluation log (``core.services.eval_logs``), into any study type."""

    file = forms.FileField(
        help_text="An Inspect log (.eval or .json), an lm-evaluation-harness samples file "
                  "(samples_TASK_TIME.jsonl) or Every Eval Ever instance-level JSONL.",
        error_messages={"required": "file: choose an evaluation log to import.",
                        "empty": "file: the file is empty."})
    log_format = forms.ChoiceField(
        label="Format", required=False,
        choices=[("", "Told from the file"), ("inspect", "Inspect"),
                 ("lm-eval", "lm-evaluation-harness"), ("eee", "Every Eval Ever")])
    model = forms.CharField(
        required=False, max_length=150, label="Model",
        help_text="The evaluated model's name: needed for lm-evaluation-harness samples "
                  "files (they do not say it); replaces the log's own otherwise.")
    task = forms.CharField(required=False, max_length=150, label="Task",
                           help_text="Default: the log's task.")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > settings.OVERSIGHT_IMPORT_MAX_BYTES:
            raise forms.ValidationError(file_too_large_message(upload.name, upload.size))
        return upload


def study_actions_html(study: Study) -> str:
    """A row of the Studies list: what the researcher does with ``study``, each link its
    type's own page (``core.views.study_actions``)."""
    return format_html_join(" · ", '<a href="{}">{}</a>',
                            ((url, label) for label, url in study_actions(study)))


class StudyTypeFilter(admin.ChoicesFieldListFilter):
    """The Studies list's filter by ``Study.kind``, named as the list's column: "type"."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.title = "type"


class OneStudyListMixin:
    """For the admin of one study type: its list is the one Studies list, showing that
    type's studies (a lookup popup keeps the type's own list)."""

    study_kind: str = ""

    def changelist_view(self, request, extra_context=None):
        if any(key in request.GET for key in ("_popup", "_to_field")):
            return super().changelist_view(request, extra_context)
        return redirect(reverse("admin:annotations_study_changelist")
                        + f"?kind__exact={self.study_kind}")


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


@admin.register(EstimateSnapshot)
class EstimateSnapshotAdmin(ResearcherScopedAdmin):
    list_display = ["study", "computed_at", "n_answered", "duration_ms"]
    list_filter = ["study"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class FlagsWhat(admin.SimpleListFilter):
    """Open flags first by default; resolved ones on request."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("open", "Open"), ("resolved", "Resolved")]

    def queryset(self, request, queryset):
        if self.value() == "open":
            return queryset.filter(resolution=ItemFlag.Resolution.OPEN)
        if self.value() == "resolved":
            return queryset.exclude(resolution=ItemFlag.Resolution.OPEN)
        return queryset


@admin.register(ItemFlag)
class ItemFlagAdmin(ResearcherScopedAdmin):
    """The researchers' queue of flagged items (``core.services.flags``): open flags first,
    each row two columns that wrap — the flag (reason, note, who, when, state) and the item
    (study, text, how many people flagged it, its page in context) — so that it fits 390 px
    as well as 1 280 (no column of its own per field); actions resolve the selected flags'
    items: fixed (after correcting the item through its link), withdrawn (no longer handed
    out, left out of the estimates) or dismissed. Each item opens in context on the Review
    page (``core.reviews``: its answers, who flagged it, fix / withdraw / dismiss there)."""

    list_display = ["flag", "item"]

    class Media:
        css = {"all": ["css/flag-queue.css"]}
    list_filter = [FlagsWhat, "study", "reason"]
    list_display_links = None
    search_fields = ["note"]
    actions = ["mark_fixed", "withdraw_items", "dismiss"]
    readonly_fields = ["study", "item_id", "user", "reason", "note", "created_at",
                       "updated_at", "resolution", "resolved_at", "resolved_by"]

    def get_queryset(self, request):
        same_item = (ItemFlag.objects.filter(study=models.OuterRef("study"),
                                             item_id=models.OuterRef("item_id"))
                     .values("item_id").annotate(n=models.Count("pk")).values("n"))
        return (super().get_queryset(request).select_related("study", "user")
                .annotate(n_on_item=models.Subquery(same_item)))

    def get_changelist_instance(self, request):
        """Each row's item read once per page, per study type (not one query a row)."""
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)
        wanted: dict[str, set[int]] = {}
        for flag in rows:
            wanted.setdefault(flag.study.kind, set()).add(flag.item_id)
        found = {kind: flaggable(kind).item_model.objects.in_bulk(ids)
                 for kind, ids in wanted.items()}
        for flag in rows:
            flag.item_obj = found[flag.study.kind].get(flag.item_id)
        return changelist

    @admin.display(description="flag", ordering="resolution")
    def flag(self, flag):
        note = format_html("<br><q class=\"flag-note\">{}</q>", flag.note) if flag.note else ""
        return format_html(
            '<div class="flag-cell"><strong>{}</strong> · {}{}<br><span class="help">by {}, {}'
            "</span></div>", flag.get_reason_display().split(" (")[0],
            flag.get_resolution_display().lower(), note, flag.user.username,
            date_format(timezone.localtime(flag.updated_at), "SHORT_DATETIME_FORMAT"))

    @admin.display(description="item", ordering="n_on_item")
    def item(self, flag):
        kind = flaggable(flag.study.kind)
        context = format_html('<a href="{}" data-testid="flag-in-context">open in context</a>',
                              reverse("review-item", args=[flag.study_id, flag.item_id]))
        flagged = format_html('<span class="help">{} · flagged by {}</span>', flag.study.name,
                              counted(flag.n_on_item, "person"))
        item = getattr(flag, "item_obj", None)
        if item is None:
            return format_html('<div class="flag-cell">({} {} no longer exists)<br>{}</div>',
                               kind.noun, flag.item_id, flagged)
        text = Truncator(f"{item}: {kind.text(item)}").chars(160)
        url = kind.edit_url(item)
        edit = (format_html(' · <a href="{}">edit this {}</a>', url, kind.noun) if url
                else format_html(' <span class="help">(a {} is not edited here: withdraw it '
                                 "and import a corrected copy under a new id)</span>",
                                 kind.noun))
        return format_html('<div class="flag-cell">{}<br>{} · {}{}</div>', text, flagged,
                           context, edit)

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def _resolve(self, request, queryset, resolution: str, done: str) -> None:
        items = {(flag.study, flag.item_id) for flag in queryset.select_related("study")}
        changed = 0
        for study, item_id in sorted(items, key=lambda pair: (pair[0].pk, pair[1])):
            try:
                changed += flag_resolve(study=study, item_id=item_id, resolution=resolution,
                                        user=request.user)
            except DomainError as exc:
                self.message_user(request, exc.message, messages.ERROR)
                return
        self.message_user(request, f"{len(items)} item{'s' if len(items) != 1 else ''} "
                                   f"{done} ({changed} flag{'s' if changed != 1 else ''}).")

    @admin.action(description="Mark the selected flags' items fixed")
    def mark_fixed(self, request, queryset):
        self._resolve(request, queryset, ItemFlag.Resolution.FIXED, "marked fixed")

    @admin.action(description="Withdraw the selected flags' items (no longer handed out, "
                              "left out of the estimates)")
    def withdraw_items(self, request, queryset):
        self._resolve(request, queryset, ItemFlag.Resolution.WITHDRAWN, "withdrawn")

    @admin.action(description="Dismiss the selected flags (nothing to change)")
    def dismiss(self, request, queryset):
        self._resolve(request, queryset, ItemFlag.Resolution.DISMISSED, "dismissed")


class LookAlikeNameRefused:
    """Admin user forms: a user name a reader cannot tell from another account's
    (``usernames.username_key``) is refused, as the Members page refuses it."""

    def clean_username(self):
        from annotations.core.selectors import username_look_alikes

        username = super().clean_username() if hasattr(super(), "clean_username") else (
            self.cleaned_data["username"])
        pk = self.instance.pk if self.instance else None
        if username_look_alikes(names=[username], exclude_pk=pk):
            raise forms.ValidationError(
                "This user name looks like one that is taken (letters of another script "
                "or another width that read the same); choose another one.",
                code="look_alike")
        return username


class PlatformUserCreationForm(LookAlikeNameRefused, AdminUserCreationForm):
    pass


class PlatformUserChangeForm(LookAlikeNameRefused, UserChangeForm):
    pass


@admin.register(User)
class PlatformUserAdmin(UserAdmin):
    add_form = PlatformUserCreationForm
    form = PlatformUserChangeForm
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


def study_status_change(model_admin: admin.ModelAdmin, request: HttpRequest, study: Study, *,
                        opening: bool, one_of_many: bool = False) -> bool:
    """Open (``study_open``: the type's own opener) or close ``study`` for the admin of any
    study type — its Open…/Close… confirmation and the Studies list's bulk actions — then
    log it and say so: "<study>: opened, 3 items routed." ("3 tasks made" for critique:
    ``study_opened_words``) or "<study>: closed."; a refusal is the error message (named
    by study when ``one_of_many``). Returns whether the status changed."""
    from annotations.core.services.studies import study_close, study_open, study_opened_words

    try:
        if opening:
            words = study_opened_words(study.kind, study_open(study=study, by=request.user))
            note, said = f"Opened: {words}.", f"opened, {words}."
        else:
            study_close(study=study, by=request.user)
            note, said = "Closed.", "closed."
    except DomainError as exc:
        model_admin.message_user(request, f"{study}: {exc.message}" if one_of_many
                                 else exc.message, messages.ERROR)
        return False
    model_admin.log_change(request, study, note)
    model_admin.message_user(request, f"{study.name}: {said}", messages.SUCCESS)
    return True
