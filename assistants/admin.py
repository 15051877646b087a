from django.contrib import admin

from annotations.admin import ResearcherScopedAdmin
from assistants.models import AISystem, Prediction


@admin.register(AISystem)
class AISystemAdmin(ResearcherScopedAdmin):
    list_display = ["name", "study", "ordinal", "reference_n", "reference_correct"]
    list_filter = ["study"]
    readonly_fields = ["ordinal", "reference_n", "reference_correct"]

    def has_add_permission(self, request):
        return False


@admin.register(Prediction)
class PredictionAdmin(ResearcherScopedAdmin):
    study_field = "system__study"
    list_display = ["item", "system", "option", "position", "raw"]
    list_filter = ["system__study", "system"]
    raw_id_fields = ["item"]
    list_select_related = ["item", "system"]
