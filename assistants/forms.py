"""The AI endpoint's settings in the admin's forms (assisted and critique studies): labels, the
endpoint checked against the operator's rules, and the write-only key."""

from __future__ import annotations

from django import forms

from annotations.core.errors import InvalidStudy
from assistants.egress import key_after_change
from assistants.endpoints import ai_endpoint_check

# Labels of the AI endpoint's settings in both study types' forms ("Ai base url" otherwise).
AI_ENDPOINT_LABELS = {"ai_base_url": "AI endpoint (base URL)", "ai_model": "AI model",
                      "ai_temperature": "AI temperature", "ai_max_tokens": "AI max tokens"}


class WriteOnlyApiKeyForm(forms.Form):
    """Mixed into a settings ModelForm whose model has ``ai_base_url`` and ``ai_api_key``: the
    endpoint is checked against the operator's rules (``services.ai_endpoints``); the key is
    typed in a password box that is never filled in (the saved key never reaches a page);
    left empty it keeps the saved key while the endpoint stays the same, and drops it when
    the endpoint changes (a key belongs to its endpoint)."""

    ai_api_key = forms.CharField(
        label="AI key", required=False, max_length=500,
        widget=forms.PasswordInput(render_value=False),
        help_text="The endpoint's key. Empty with no endpoint of the study's own: the server's "
                  "key, sent to the server's endpoint only; a study naming its own endpoint "
                  "sends its own key or none. Never shown again once saved; leave the box "
                  "empty to keep the saved key — changing the endpoint drops it.")

    def clean_ai_base_url(self) -> str:
        url = (self.cleaned_data.get("ai_base_url") or "").strip()
        if "ai_base_url" in self.changed_data:
            try:
                ai_endpoint_check(url)
            except InvalidStudy as exc:
                raise forms.ValidationError(exc.message.removeprefix("ai_base_url: ")) from None
        return url

    def clean_ai_api_key(self) -> str:
        typed = self.cleaned_data.get("ai_api_key", "")
        if not self.instance.pk:
            return typed
        saved = type(self.instance).objects.filter(pk=self.instance.pk).values(
            "ai_base_url", "ai_api_key").first() or {"ai_base_url": "", "ai_api_key": ""}
        new_url = self.cleaned_data.get("ai_base_url", saved["ai_base_url"])
        return key_after_change(old_url=saved["ai_base_url"], new_url=new_url or "",
                                   saved_key=saved["ai_api_key"], typed_key=typed)
