"""Webhooks in the admin: a study's researchers register endpoints (the URL checked against
the operator's allow-list, the events chosen), see each one's secret, switch it on again;
and read the delivery log — status, attempts, the receiver's last answer — with "Deliver
again"."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from annotations.core.admin import ResearcherScopedAdmin
from annotations.core.errors import DomainError
from annotations.core.services.notices import EVENTS
from annotations.webhooks.models import Webhook, WebhookDelivery
from annotations.webhooks.services.deliveries import (
    delivery_redeliver,
    webhook_check,
    webhook_enable,
)


class WebhookForm(forms.ModelForm):
    url = forms.URLField(max_length=500, assume_scheme="https",
                         help_text=Webhook._meta.get_field("url").help_text)
    events = forms.MultipleChoiceField(choices=list(EVENTS.items()),
                                       widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = Webhook
        fields = ["study", "url", "events", "target_answers", "target_width", "active"]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            webhook_check(url=data.get("url") or "", events=data.get("events") or [],
                          target_answers=data.get("target_answers"),
                          target_width=data.get("target_width"))
        except DomainError as exc:
            field = getattr(exc, "field", None)
            if field in self.fields:  # the message under its field, without its name
                self.add_error(field, exc.message.removeprefix(f"{field}: "))
            else:
                self.add_error(None, exc.message)
        return data


@admin.register(Webhook)
class WebhookAdmin(ResearcherScopedAdmin):
    form = WebhookForm
    list_display = ["url", "study", "event_list", "active", "disabled_reason"]
    list_filter = ["study", "active"]
    readonly_fields = ["signing_secret", "failures_in_row", "disabled_reason", "reached"]
    actions = ["switch_on"]

    @admin.display(description="events")
    def event_list(self, obj: Webhook) -> str:
        return ", ".join(obj.events)

    @admin.display(description="secret")
    def signing_secret(self, obj: Webhook) -> str:
        if obj.pk is None:
            return "made when the webhook is saved"
        return format_html("<code>{}</code> — deliveries carry <code>Oversight-Signature: "
                           "t=…,v1=HMAC-SHA256(secret, t + '.' + body)</code>", obj.secret)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        if change and "active" in form.changed_data and obj.active:
            obj.failures_in_row, obj.disabled_reason = 0, ""
        super().save_model(request, obj, form, change)

    @admin.action(description="Switch on again (the URL is checked again)")
    def switch_on(self, request, queryset):
        for webhook in queryset:
            try:
                webhook_enable(webhook=webhook)
            except DomainError as exc:
                self.message_user(request, f"{webhook.url}: {exc.message}", messages.ERROR)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ResearcherScopedAdmin):
    study_field = "webhook__study"
    list_display = ["created_at", "event", "status", "attempts", "last_status", "last_error",
                    "next_attempt_at", "webhook_url"]
    list_filter = ["status", "event"]
    readonly_fields = ["webhook", "event", "delivery_id", "payload", "status", "attempts",
                       "next_attempt_at", "last_status", "last_error", "created_at",
                       "delivered_at"]
    fields = readonly_fields
    actions = ["deliver_again"]

    @admin.display(description="webhook")
    def webhook_url(self, obj: WebhookDelivery) -> str:
        return obj.webhook.url

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("webhook")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Deliver again (the same body and id, due now)")
    def deliver_again(self, request, queryset):
        for delivery in queryset:
            delivery_redeliver(delivery=delivery)
        self.message_user(request, f"{queryset.count()} deliveries queued again.")
