"""Researcher screens: the one Studies list (every study of every type, each row with its
type's own pages); partitioned studies with classes, members and AI systems inline;
open/close; item and prediction imports and label exports from the study page; the
Members page every study type shares."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from annotations.core.admin import (
    SHORT_TEXT,
    EvalLogUploadForm,
    MembershipInline,
    ResearcherScopedAdmin,
    StaffCreatesStudiesMixin,
    StudyClassInline,
    StudyInline,
    StudyTypeFilter,
    UploadForm,
    is_researcher,
    staff_may_create_studies,
    study_actions_html,
    study_status_change,
)
from annotations.core.admin_forms import (
    BulkMembersForm,
    MemberFormSet,
    StudyAddForm,
    StudyForm,
    study_help_texts,
)
from annotations.core.errors import DomainError
from annotations.core.exports import export_response, requested_format
from annotations.core.inputs import accepts_upload
from annotations.core.models import (
    ImportJob,
    Item,
    Study,
    StudyMembership,
)
from annotations.core.selectors import (
    import_job_progress,
    study_events,
    study_import_jobs,
)
from annotations.core.services.eval_logs import eval_log_submit
from annotations.core.services.import_jobs import import_job_submit, import_jobs_expire
from annotations.core.services.recompute import study_recompute_any
from annotations.core.services.studies import (
    invitation_path,
    member_password_reset,
    members_add,
    membership_remove,
    researchers_staff_ensure,
    study_insert,
    study_roles,
)
from annotations.core.sqlite_locks import while_sqlite_locked
from annotations.core.views import study_add_links, study_page_url
from annotations.core.words import counted
from annotations.partitioned.models import Query, RoutingDesign
from annotations.partitioned.selectors import study_designs, study_setup_checklist
from annotations.partitioned.services.designs import (
    design_recommendation,
    neyman_allocation,
    routing_design_set,
)
from annotations.partitioned.services.imports import item_create, item_update
from annotations.partitioned.services.predictions import prediction_set, predictions_delete
from annotations.partitioned.services.running import (
    items_answered,
    items_delete,
)
from assistants.models import AISystem, ConfidenceBands, Prediction


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


admin.site.site_header = "Oversight"
admin.site.site_title = "Oversight"
admin.site.index_title = "Studies, members and data"


# The Members page's tables are built here, not in a template loop: a pasted list of 10 000
# names gives 10 000 rows of each, which Django's template engine renders in seconds.
def _created_rows(created) -> str:
    return format_html_join("", (
        '<tr data-username="{}"><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td></tr>'), (
        (m.user.username, m.user.username, m.role_label,
         f" ({m.study_class.name})" if m.study_class_id else "",
         format_html('<code class="password">{}</code>', password) if password
         else "existing account",
         format_html('<code class="invitation">{}</code>', invitation) if invitation else "—")
        for m, password, invitation in created))


def _member_rows(members, *, has_classes: bool) -> str:
    return format_html_join("", '<tr><td>{}</td><td>{}</td>{}<td>{}<button type="submit" '
                            'name="remove" value="{}" class="button" data-testid="remove-{}-{}">'
                            'Remove</button></td></tr>', (
        (m.user.username, m.role_label,
         format_html("<td>{}</td>", m.study_class.name if m.study_class_id else "")
         if has_classes else "",
         format_html('<button type="submit" name="reset" value="{}" class="button">New '
                     'password</button> ', m.pk) if m.role != "researcher" else "",
         m.pk, m.user.username, m.role)
        for m in members))


@admin.register(Study)
class StudyAdmin(StaffCreatesStudiesMixin, ResearcherScopedAdmin):
    study_field = "pk"
    form = StudyForm
    # the one Studies list: every study the researcher may see, of every type, each row
    # with its type's own pages (core.views.study_actions); add buttons for every type
    list_display = ["name", "study_type", "status", "created_at", "links"]
    list_filter = [("kind", StudyTypeFilter), "status"]
    change_list_template = "admin/annotations/studies.html"
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

    def has_add_permission(self, request):
        return (staff_may_create_studies(request) or is_researcher(request)
                or request.user.has_perm("annotations.add_study"))

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = StudyAddForm
        return study_help_texts(super().get_form(request, obj, change=change, **kwargs),
                                worker="specialist", task="query", page="the labelling page")

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

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {**(extra_context or {}),
                                                 "study_adds": study_add_links()})

    def change_view(self, request, object_id, form_url="", extra_context=None):
        study = self.get_object(request, object_id)
        if study is not None and study.kind != Study.Kind.PARTITIONED:
            return redirect(study_page_url(study))  # the page of the study's own type
        context = dict(extra_context or {})
        if study is not None:
            context["setup"] = study_setup_checklist(study=study)
            context["study_events"] = study_events(study=study)
        return super().change_view(request, object_id, form_url, extra_context=context)

    @admin.display(description="Type", ordering="kind")
    def study_type(self, obj: Study) -> str:
        return obj.get_kind_display()

    @admin.display(description="")
    def links(self, obj: Study) -> str:
        return study_actions_html(obj)

    @admin.action(description="Open selected studies (makes their first tasks)")
    def open_studies(self, request, queryset):
        for study in queryset:
            study_status_change(self, request, study, opening=True, one_of_many=True)

    @admin.action(description="Close selected studies")
    def close_studies(self, request, queryset):
        for study in queryset:
            study_status_change(self, request, study, opening=False, one_of_many=True)

    @admin.action(description="Recompute estimates now")
    def recompute_estimates(self, request, queryset):
        for study in queryset:
            study_recompute_any(study_id=study.pk)  # the study type's own analysis
        self.message_user(request, f"Recomputed {counted(queryset.count(), 'study')}.")

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<int:study_id>/import-items/", wrap(self.import_items_view),
                 name="annotations_study_import_items"),
            path("<int:study_id>/import-predictions/", wrap(self.import_predictions_view),
                 name="annotations_study_import_predictions"),
            path("<int:study_id>/import-eval-log/", wrap(self.import_eval_log_view),
                 name="annotations_study_import_eval_log"),
            path("<int:study_id>/import-jobs/<int:job_id>/", wrap(self.import_job_view),
                 name="annotations_study_import_job"),
            path("<int:study_id>/export/", wrap(self.export_view),
                 name="annotations_study_export"),
            path("<int:study_id>/open/", wrap(self.open_view), name="annotations_study_open"),
            path("<int:study_id>/close/", wrap(self.close_view),
                 name="annotations_study_close"),
            path("<int:study_id>/members/", wrap(self.members_view),
                 name="annotations_study_members"),
            path("<int:study_id>/routing-design/", wrap(self.routing_design_view),
                 name="annotations_study_routing_design"),
        ] + super().get_urls()

    def routing_design_view(self, request, study_id: int) -> HttpResponse:
        """The study's routing design: the current one, its history with the answers each
        drew, and the form that changes it (``services.designs.routing_design_set``)."""
        study = self._study_or_403(request, study_id)
        error = ""
        values = {"kind": request.POST.get("kind", ""),
                  "epsilon": request.POST.get("epsilon", "").strip()}
        if request.method == "POST":
            try:
                design = routing_design_set(study=study, kind=values["kind"],
                                            epsilon=values["epsilon"] or None, by=request.user)
            except DomainError as exc:
                error = exc.message
            else:
                self.log_change(request, study, f"Routing design: {design}.")
                self.message_user(request, f"{design} — queries no one was handed yet were "
                                           "drawn again under it.")
                return redirect(request.path)
        designs = study_designs(study=study)
        if request.method != "POST" and designs:  # the form starts from the current design
            values = {"kind": designs[-1].kind,
                      "epsilon": "" if designs[-1].epsilon is None else f"{designs[-1].epsilon:g}"}
        return self._page(request, "admin/annotations/study/routing_design.html", study,
                          f"Routing design of “{study.name}”", designs=designs,
                          current=designs[-1] if designs else None, error=error,
                          plan=design_recommendation(study=study),
                          neyman=_neyman_preview(study),
                          values=values, kinds=RoutingDesign.Kind.choices)

    def _status_view(self, request, study_id: int, *, opening: bool) -> HttpResponse:
        study = self._study_or_403(request, study_id)
        if request.method == "POST":
            study_status_change(self, request, study, opening=opening)
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
        """The Members page of a study of any type (the roles its type uses): a pasted list
        with one role, or one row per person; new accounts get a one-time password and an
        invitation link; existing members, with a new password on request."""
        study = self._study_or_403(request, study_id)
        bulk_posted = request.method == "POST" and "bulk-people" in request.POST
        formset = MemberFormSet(request.POST if request.method == "POST" and not bulk_posted
                                else None, study=study, prefix="members")
        bulk = BulkMembersForm(request.POST if bulk_posted else None, study=study,
                               prefix="bulk")
        created, error = [], ""
        reset = request.POST.get("reset", "")
        remove = request.POST.get("remove", "")
        if request.method == "POST" and remove:
            if not remove.isdigit():
                raise Http404
            try:
                gone = membership_remove(study=study, membership_id=int(remove),
                                         by=request.user)
            except DomainError as exc:
                error = f"Nobody was removed: {exc.message}"
            else:
                self.log_change(request, study, f"Member removed: {gone.user} "
                                                f"({gone.get_role_display()}).")
                self.message_user(request, f"{gone.user} is no longer "
                                           f"{gone.get_role_display().lower()} of this study.")
                return redirect(request.path)
        elif request.method == "POST" and reset:
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
                created = [(member, password,
                            request.build_absolute_uri(invitation_path(member.user)))]
            formset = MemberFormSet(study=study, prefix="members")
        elif request.method == "POST" and (bulk if bulk_posted else formset).is_valid():
            try:
                added = members_add(study=study, by=request.user, members=(
                    bulk.members() if bulk_posted else formset.members()))
            except DomainError as exc:
                error = f"Nobody was added: {exc.message}"
            else:
                names = ", ".join(a.membership.user.username for a in added)
                if added:
                    self.log_change(request, study, f"Members added: {names}.")
                created = [(a.membership, a.password,
                            a.invitation and request.build_absolute_uri(a.invitation))
                           for a in added]
                formset = MemberFormSet(study=study, prefix="members")
                bulk = BulkMembersForm(study=study, prefix="bulk")
        members = list(StudyMembership.objects.filter(study=study)
                       .select_related("user", "study_class").order_by("role", "user__username"))
        names = {role: label.split(" (")[0] for role, label in study_roles(study.kind)}
        for m in members + [c[0] for c in created]:  # the type's word: rater, annotator …
            m.role_label = names.get(m.role, m.get_role_display())
        return self._page(request, "admin/annotations/study/members.html", study,
                          f"Members of “{study.name}”", formset=formset, bulk=bulk,
                          members=members, created=created, error=error,
                          created_rows=_created_rows(created),
                          member_rows=_member_rows(members, has_classes=(
                              StudyMembership.Role.SPECIALIST in names)),
                          roles=study_roles(study.kind), study_url=study_page_url(study),
                          has_classes=StudyMembership.Role.SPECIALIST in names,
                          login_url=request.build_absolute_uri(reverse("login")))

    def _import_view(self, request, study_id: int, kind: str) -> HttpResponse:
        """The upload form; a valid upload becomes an import job (services/import_jobs.py)
        and the browser goes to its page, which follows the job to its end."""
        study = self._study_or_403(request, study_id)
        form = UploadForm.of(request)
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
        return self._page(request, "admin/annotations/study/import.html", study,
                          f"{title} — {study.name}", form=form, errors=errors, kind=kind,
                          action=title, jobs=study_import_jobs(study=study, kind=kind)[:5])

    @accepts_upload
    def import_items_view(self, request, study_id: int):
        return self._import_view(request, study_id, ImportJob.Kind.ITEMS)

    @accepts_upload
    def import_predictions_view(self, request, study_id: int):
        return self._import_view(request, study_id, ImportJob.Kind.PREDICTIONS)

    @accepts_upload
    def import_eval_log_view(self, request, study_id: int) -> HttpResponse:
        """An evaluation log into this study, whatever its type: the upload becomes an
        import job of kind "eval_log" (``core.services.eval_logs``) and the browser goes to
        its page."""
        study = self._study_or_403(request, study_id)
        form = (EvalLogUploadForm(request.POST, request.FILES) if request.method == "POST"
                else EvalLogUploadForm())
        errors: list[str] = []
        if request.method == "POST" and form.is_valid():
            upload, given = form.cleaned_data["file"], form.cleaned_data
            try:
                job, _ = eval_log_submit(study=study, data=upload.read(), name=upload.name,
                                         user=request.user,
                                         log_format_given=given["log_format"] or None,
                                         model=given["model"], task=given["task"])
            except DomainError as exc:
                errors = getattr(exc, "errors", [exc.message])
            else:
                return redirect("admin:annotations_study_import_job", study.pk, job.pk)
        return self._page(request, "admin/annotations/study/import_eval_log.html", study,
                          f"Import an evaluation log — {study.name}", form=form,
                          errors=errors, action="Import an evaluation log",
                          jobs=study_import_jobs(study=study,
                                                 kind=ImportJob.Kind.EVAL_LOG)[:5])

    # the upload page of each kind of job this admin runs: its title, URL and form (a job's
    # page offers the same upload again)
    IMPORT_PAGES = {
        ImportJob.Kind.ITEMS: ("Import items", "admin:annotations_study_import_items",
                               UploadForm),
        ImportJob.Kind.PREDICTIONS: ("Import AI predictions",
                                     "admin:annotations_study_import_predictions", UploadForm),
        ImportJob.Kind.EVAL_LOG: ("Import an evaluation log",
                                  "admin:annotations_study_import_eval_log", EvalLogUploadForm),
    }

    def import_job_view(self, request, study_id: int, job_id: int):
        """A job's page: its progress bar (htmx polls this view for the fragment every
        second until the job ends), then its summary or its errors."""
        study = self._study_or_403(request, study_id)
        job = while_sqlite_locked(lambda: (
            import_jobs_expire(study=study),
            get_object_or_404(ImportJob.objects.select_related("created_by"), pk=job_id,
                              study=study))[1])
        title, url_name, form_class = self.IMPORT_PAGES.get(job.kind,
                                                             self.IMPORT_PAGES["predictions"])
        context = {"job": job, "progress": import_job_progress(job=job), "poll_url": request.path,
                   "errors": job.errors, "form": form_class(),
                   "again_title": title, "again_url": reverse(url_name, args=[study.pk])}
        if getattr(request, "htmx", False):
            return render(request, "admin/annotations/_import_job.html",
                          {**context, "study": study})
        kind = {ImportJob.Kind.ITEMS: "items", ImportJob.Kind.PREDICTIONS: "AI predictions",
                ImportJob.Kind.EVAL_LOG: "an evaluation log"}.get(job.kind, job.kind)
        return self._page(request, "admin/annotations/import_job.html", study,
                          f"Import of {kind} from {job.name}", **context)

    def export_view(self, request, study_id: int):
        study = self._study_or_403(request, study_id)
        return export_response(study, "labels", requested_format(request))


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


# The AI systems, their predictions and confidence bands (the assistants app's models).
@admin.register(AISystem)
class AISystemAdmin(ResearcherScopedAdmin):
    list_display = ["name", "study", "ordinal", "reference_n", "reference_correct",
                    "band_edges"]
    list_filter = ["study"]
    readonly_fields = ["ordinal", "reference_n", "reference_correct", "band_edges",
                       "band_stats", "latest_audit"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="Latest audit")
    def latest_audit(self, obj: AISystem) -> str:
        """The system's latest finished audit (docs/audit.md): success rate with its exact
        95 % interval, κ with people's labels where the audit had them, and a link."""
        from annotations.audit.selectors import latest_audit

        audit = latest_audit(ai_system_id=obj.pk)
        if audit is None:
            return format_html('None yet: <a href="{}">audit it</a>.',
                               reverse("audits", args=[obj.study_id]))
        s = audit.summary or {}
        lo, hi = s.get("interval") or (None, None)
        text = (f"succeeded on {_share(s.get('success_rate'))} (95 % interval {_share(lo)} – "
                f"{_share(hi)}; {audit.successes} of {counted(audit.total, 'datapoint')})")
        kappa = (s.get("kappa") or {})
        if kappa.get("kappa") is not None:
            text += (f"; Cohen's κ with people's labels {kappa['kappa']:.3f} "
                     f"({kappa['lower']:.3f} – {kappa['upper']:.3f}, n = {kappa['n']})")
        return format_html('<a href="{}">Audit #{}</a>, {}: {}.',
                           reverse("audit-detail", args=[obj.study_id, audit.pk]), audit.pk,
                           audit.finished_at.strftime("%Y-%m-%d %H:%M") if audit.finished_at
                           else "", text)


def _share(x) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


@admin.register(Prediction)
class PredictionAdmin(ResearcherScopedAdmin):
    study_field = "system__study"
    fixed_fields = ("system", "item")
    list_display = ["item", "system", "option", "position", "raw", "confidence"]
    list_filter = ["system__study", "system"]
    raw_id_fields = ["item"]
    list_select_related = ["item", "system"]
    fields = ["system", "item", "option", "position", "raw", "confidence"]
    readonly_fields = ["position", "raw", "confidence"]

    def save_model(self, request, obj, form, change):
        # through the service: position from the item's shuffle, masks and accuracy refreshed
        try:
            saved = prediction_set(system=obj.system, item=obj.item, option=obj.option)
        except DomainError as exc:
            raise ValidationError(exc.message) from exc
        obj.pk = saved.pk

    def delete_model(self, request, obj):
        predictions_delete(predictions=Prediction.objects.filter(pk=obj.pk))

    def delete_queryset(self, request, queryset):
        n = predictions_delete(predictions=queryset)
        self.message_user(request, f"{counted(n, 'prediction')} deleted; masks refreshed.",
                          messages.SUCCESS)


@admin.register(ConfidenceBands)
class ConfidenceBandsAdmin(ResearcherScopedAdmin):
    """How a partitioned study bands its AI systems' confidences (the dashboard's accuracy
    per band). Saved through the service: every system and answered query is re-banded and
    the estimates recomputed."""

    list_display = ["study", "scheme", "n_bands", "edges"]
    fields = ["study", "scheme", "n_bands", "edges"]

    def save_model(self, request, obj, form, change):
        from annotations.partitioned.services.predictions import confidence_bands_set

        try:
            confidence_bands_set(study=obj.study, scheme=obj.scheme, n_bands=obj.n_bands,
                                 edges=obj.edges)
        except DomainError as exc:
            raise ValidationError(exc.message) from exc


def _neyman_preview(study) -> dict:
    """What a Neyman allocation chosen now would be (its rates and ratio), or why it cannot
    be chosen yet (``{"refused": message}``) — the Routing design page's advice."""
    try:
        return neyman_allocation(study)
    except DomainError as exc:
        return {"refused": exc.message.removeprefix("kind: ")}
