"""The AI endpoint a study names, checked when its settings are saved (``assistants.egress``
holds the rules, and ``egress.key_after_change`` the key's)."""

from __future__ import annotations

from annotations.core.errors import InvalidStudy


def ai_endpoint_check(base_url: str, *, resolve_names: bool = True) -> None:
    """InvalidStudy on ``ai_base_url`` when the server may not call ``base_url`` (not http(s),
    a host the operator has not allowed, or an internal address); empty is fine (the site's
    endpoint)."""
    from assistants.egress import EndpointRefused, endpoint_check

    if not (base_url or "").strip():
        return
    try:
        endpoint_check(base_url, resolve_names=resolve_names)
    except EndpointRefused as exc:
        raise InvalidStudy(f"ai_base_url: {exc}.", field="ai_base_url") from None

