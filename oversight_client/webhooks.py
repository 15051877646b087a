"""For the receivers of the platform's webhooks (standard library only): check that a
delivery was signed by the platform with the webhook's secret, and recently::

    from oversight_client.webhooks import verify
    verify(secret, request.body, request.headers["Oversight-Signature"])  # or raises

The signature is ``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>``; a delivery
older (or newer) than ``tolerance`` seconds is refused, so a recorded delivery cannot be
replayed later. Drop a repeat by its ``Oversight-Delivery`` header (the delivery's id:
retries and manual redeliveries send the same id)."""

from __future__ import annotations

import hashlib
import hmac
import time


class SignatureError(ValueError):
    """A delivery whose signature is missing, malformed, wrong or outside the window."""


def verify(secret: str, body: bytes, header: str | None, *, tolerance: float = 300.0,
           now: float | None = None) -> None:
    """Raise :class:`SignatureError` unless ``header`` signs ``body`` under ``secret``
    within ``tolerance`` seconds of ``now``."""
    if not header:
        raise SignatureError("no Oversight-Signature header")
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        stamp = int(parts["t"])
        given = parts["v1"]
    except (KeyError, ValueError):
        raise SignatureError("a malformed Oversight-Signature header") from None
    if abs((time.time() if now is None else now) - stamp) > tolerance:
        raise SignatureError(f"signed at {stamp}: outside the {tolerance:g} s window")
    expected = hmac.new(secret.encode(), f"{stamp}.".encode() + body,
                        hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given):
        raise SignatureError("the signature does not match the body and secret")
