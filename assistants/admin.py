from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from annotations.admin import ResearcherScopedAdmin
from annotations.errors import DomainError
from assistants.models import AISystem, ConfidenceBands, Prediction
from assistants.services import prediction_set, predictions_delete


@admin.register(AISystem)
class AISystemAdmin(ResearcherScopedAdmin):
    list_display = ["name", "study", "ordinal", "reference_n", "reference_correct",
                    "band_edges"]
    list_filter = ["study"]
    readonly_fields = ["ordinal", "reference_n", "reference_correct", "band_edges",
                       "band_stats"]

    def has_add_permission(self, request):
        return False


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
        self.message_user(request, f"{n} predictions deleted; masks refreshed.",
                          messages.SUCCESS)


@admin.register(ConfidenceBands)
class ConfidenceBandsAdmin(ResearcherScopedAdmin):
    """How a partitioned study bands its AI systems' confidences (the dashboard's accuracy
    per band). Saved through the service: every system and answered query is re-banded and
    the estimates recomputed."""

    list_display = ["study", "scheme", "n_bands", "edges"]
    fields = ["study", "scheme", "n_bands", "edges"]

    def save_model(self, request, obj, form, change):
        from assistants.banding import confidence_bands_set

        try:
            confidence_bands_set(study=obj.study, scheme=obj.scheme, n_bands=obj.n_bands,
                                 edges=obj.edges)
        except DomainError as exc:
            raise ValidationError(exc.message) from exc
