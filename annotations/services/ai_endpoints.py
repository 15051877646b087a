"""The AI endpoint a study names: checked when its settings are saved (``assistants.egress``
holds the rules), and its saved key kept only while the endpoint stays the same."""

from __future__ import annotations

from annotations.errors import InvalidStudy


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


def ai_key_after_change(*, old_url: str, new_url: str, saved_key: str, typed_key: str) -> str:
    """The key to store: the one typed, else the saved one while the endpoint is unchanged,
    else none (``egress.key_after_change``)."""
    from assistants.egress import key_after_change

    return key_after_change(old_url=old_url, new_url=new_url, saved_key=saved_key,
                            typed_key=typed_key)
