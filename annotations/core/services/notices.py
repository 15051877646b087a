"""Study notices: what happened to a study that systems outside the platform may want to
hear of (signed webhooks, ``annotations.webhooks``), said by the service that made it.

``study_notice(study_id, event, data)`` calls every registered listener after the commit
of the caller's transaction (nothing is said of a change that was rolled back; a
listener's failure is logged, never the caller's). ``data`` holds counts, ids, names and
statuses only — never an item's gold, an answer's content or anything a labeller must not
see: a notice leaves the platform.

Events (``EVENTS``): answers.recorded (a new snapshot counts more answers: batched by the
recompute), study.opened, study.closed, import.finished, import.failed, audit.finished,
evaluation.final_report, flag.raised. (study.target_reached is the listener's own: a
threshold of each webhook, judged on answers.recorded.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

log = logging.getLogger(__name__)

EVENTS = {
    "answers.recorded": "Answers recorded (batched, with each new snapshot)",
    "study.target_reached": "The study reached its target (answers, or an interval's width)",
    "study.opened": "Study opened",
    "study.closed": "Study closed",
    "import.finished": "An import finished",
    "import.failed": "An import failed",
    "audit.finished": "An audit finished",
    "evaluation.final_report": "An evaluation's final report",
    "flag.raised": "A worker flagged an item",
}
_LISTENERS: list[Callable[[int, str, dict], None]] = []
# kind → (the snapshot's payload → {what: width of its interval}), for target widths
_WIDTHS: dict[str, Callable[[dict], dict[str, float]]] = {}


def notice_listener_register(listener: Callable[[int, str, dict], None]) -> None:
    """Call ``listener(study_id, event, data)`` for every notice (idempotent)."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def interval_widths_register(kind: str, widths: Callable[[dict], dict[str, float]]) -> None:
    """How a study type's snapshot gives the width of each figure's interval (per AI system,
    arm or level): what a target width is judged on."""
    _WIDTHS[kind] = widths


def interval_widths(kind: str, payload: dict) -> dict[str, float]:
    """The widths of ``payload``'s intervals (empty for a type without them)."""
    widths = _WIDTHS.get(kind)
    return widths(payload) if widths is not None else {}


def study_notice(study_id: int, event: str, data: dict) -> None:
    """Tell the listeners of ``event`` of study ``study_id`` once the caller's transaction
    commits (at once outside one)."""
    if event not in EVENTS:
        raise ValueError(f"unknown notice '{event}'")
    if not _LISTENERS:
        return

    def tell() -> None:
        for listener in list(_LISTENERS):
            try:
                listener(study_id, event, data)
            except Exception:  # noqa: BLE001 - a listener never fails the change it hears of
                log.exception("notice %s of study %s: listener %r failed", event, study_id,
                              listener)

    transaction.on_commit(tell)
