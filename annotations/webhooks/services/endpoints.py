"""Where webhooks may point: the operator's allow-list ``OVERSIGHT_WEBHOOK_ALLOWED_HOSTS``
(host names, ``.domain``, IP addresses and networks, ``*``; empty by default: no webhook
until the operator says where they may go) under the same egress rules as AI endpoints
(``assistants.egress``): http(s) only, no user or password in the URL, no internal address
unless its network is listed, checked when the webhook is saved and again on the very
addresses each delivery connects to; redirects are never followed."""

from __future__ import annotations

from django.conf import settings

from assistants.egress import EgressPolicy, EndpointRefused, allow_list_errors, endpoint_check

SETTING = "OVERSIGHT_WEBHOOK_ALLOWED_HOSTS"


def webhook_policy(**kwargs) -> EgressPolicy:
    """The policy of ``OVERSIGHT_WEBHOOK_ALLOWED_HOSTS`` (no site endpoint: none is
    trusted)."""
    return EgressPolicy.parse(list(getattr(settings, SETTING, None) or []), setting=SETTING,
                              noun="webhook endpoint", **kwargs)


def webhook_url_problem(url: str, *, resolve_names: bool = True) -> str | None:
    """Why ``url`` may not receive webhooks (None: it may)."""
    try:
        endpoint_check(url, policy=webhook_policy(), resolve_names=resolve_names)
    except EndpointRefused as exc:
        return str(exc)
    return None


def webhook_settings_check(app_configs=None, **kwargs) -> list:
    """OVERSIGHT_WEBHOOK_ALLOWED_HOSTS parses."""
    return allow_list_errors(webhook_policy, "oversight.E002", "docs/operations.md, Webhooks")


__all__ = ["EndpointRefused", "SETTING", "webhook_policy", "webhook_settings_check",
           "webhook_url_problem"]
