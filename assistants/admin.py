from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from annotations.admin import ResearcherScopedAdmin
from annotations.errors import DomainError
from assistants.models import AISystem, Prediction
from assistants.services import prediction_set, predictions_delete


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
    fixed_fields = ("system", "item")
    list_display = ["item", "system", "option", "position", "raw"]
    list_filter = ["system__study", "system"]
    raw_id_fields = ["item"]
    list_select_related = ["item", "system"]
    fields = ["system", "item", "option", "position", "raw"]
    readonly_fields = ["position", "raw"]

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
