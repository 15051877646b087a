"""The researchers' admin screens of audits: rubrics with their criteria (a registered check
and its parameters per criterion — never code), and the audits, listed and read. An audit is
started, followed (progress, cancel) and read on its page, ``/studies/<id>/audits/``, which
the rubric and audit screens link to."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from annotations.audit.models import Audit, Criterion, Rubric
from annotations.audit.services.checks import criterion_problems
from annotations.core.admin import ResearcherScopedAdmin, is_researcher, study_allowed
from annotations.core.inputs import StorableJSONFormField

FORM_FIELD = {"check": "kind"}  # the problems' field names → the form's


class CriterionForm(forms.ModelForm):
    # JSON that cannot be stored (NUL, NaN, deep nesting) is a form error, not a 500
    value = StorableJSONFormField(required=False,
                                  help_text="The value the field must equal (JSON).")

    class Meta:
        model = Criterion
        fields = ["position", "name", "kind", "text", "number", "field", "value"]

    def clean(self):
        data = super().clean()
        if self.cleaned_data.get("DELETE"):
            return data
        for field, message in criterion_problems(
                name=data.get("name") or "", kind=data.get("kind") or "",
                text=data.get("text") or "", number=data.get("number"),
                field=data.get("field") or "", value=data.get("value")):
            name = FORM_FIELD.get(field, field)
            if name in self.fields and name not in self._errors:
                self.add_error(name, message)
            elif name not in self.fields:
                self.add_error(None, f"{field}: {message}")
        return data


class CriterionInline(admin.TabularInline):
    model = Criterion
    form = CriterionForm
    extra = 2
    min_num = 1
    fields = ["position", "name", "kind", "text", "number", "field", "value"]

    def _allowed(self, request, obj) -> bool:
        return is_researcher(request) and study_allowed(request, obj.study_id if obj else None)

    def has_view_permission(self, request, obj=None):
        return self._allowed(request, obj)

    def has_add_permission(self, request, obj=None):
        return self._allowed(request, obj)

    def has_change_permission(self, request, obj=None):
        return self._allowed(request, obj)

    def has_delete_permission(self, request, obj=None):
        return self._allowed(request, obj)


@admin.register(Rubric)
class RubricAdmin(ResearcherScopedAdmin):
    list_display = ["name", "study", "aggregator", "n_criteria", "audits_link"]
    list_select_related = ["study"]
    fields = ["study", "name", "aggregator", "description"]
    readonly_fields = ["audits_link"]

    def get_fields(self, request, obj=None):
        return [*self.fields, "audits_link"] if obj is not None else list(self.fields)
    inlines = [CriterionInline]
    search_fields = ["name"]

    @admin.display(description="criteria")
    def n_criteria(self, obj: Rubric) -> int:
        return obj.criteria.count()

    @admin.display(description="audits")
    def audits_link(self, obj: Rubric) -> str:
        return format_html('<a href="{}?rubric={}">Start an audit with it</a>',
                           reverse("audits", args=[obj.study_id]), obj.pk)

    def response_add(self, request, obj, post_url_continue=None):
        if "_addanother" in request.POST or "_continue" in request.POST:
            return super().response_add(request, obj, post_url_continue)
        messages.success(request, f"Rubric {obj.name} saved: start an audit with it here.")
        return HttpResponseRedirect(f"{reverse('audits', args=[obj.study_id])}?rubric={obj.pk}")


@admin.register(Audit)
class AuditAdmin(ResearcherScopedAdmin):
    """Audits are started and read on their page; here they are listed."""

    list_display = ["pk", "study", "rubric", "ai_system", "evaluator", "status", "done",
                    "total", "successes", "flips", "created_at", "page"]
    list_filter = ["status"]
    list_select_related = ["study", "rubric", "ai_system"]
    exclude = ["rubric_snapshot"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="page")
    def page(self, obj: Audit) -> str:
        return format_html('<a href="{}">Progress and result</a>',
                           reverse("audit-detail", args=[obj.study_id, obj.pk]))
