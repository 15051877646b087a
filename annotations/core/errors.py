"""Domain errors: every service raises these; views and the API turn them into messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class DomainError(Exception):
    """A request the domain refuses. ``code`` is machine-readable; ``http_status`` is what the
    API answers with."""

    code = "invalid"
    http_status = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def as_dict(self) -> dict[str, str]:
        body = {"code": self.code, "detail": self.message}
        if self.field:
            body["field"] = self.field
        return body


class NotPermitted(DomainError):
    code = "not_permitted"
    http_status = 403


class StudyNotOpen(DomainError):
    code = "study_not_open"
    http_status = 409


class LeaseExpired(DomainError):
    code = "lease_expired"
    http_status = 409


class NotLeaseHolder(DomainError):
    code = "not_lease_holder"
    http_status = 403


class AlreadyAnswered(DomainError):
    code = "already_answered"
    http_status = 409


class AnsweredTooSoon(DomainError):
    """The answer came before the query had been on screen for OVERSIGHT_MIN_ANSWER_MS."""

    code = "answered_too_soon"
    http_status = 409


class UndoRefused(DomainError):
    code = "undo_refused"
    http_status = 409


class InvalidStudy(DomainError):
    code = "invalid_study"


class ImportFailed(DomainError):
    """A file could not be imported; nothing was written. ``errors`` lists every problem found
    as 'file:line: field: message' (at most 50)."""

    code = "import_failed"

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        more = "" if len(errors) <= 50 else f"\n… and {len(errors) - 50} more"
        super().__init__("\n".join(errors[:50]) + more)

    def as_dict(self) -> dict[str, object]:  # type: ignore[override]
        return {"code": self.code, "detail": "import failed; nothing was written",
                "errors": self.errors[:50]}


def leased_or_message(lease: Callable[[], T | None], none_left: str) -> tuple[T | None, str]:
    """For the labelling pages: call a "lease the next task" service and return (task, "")
    when one was leased, (None, ``none_left``) when none is left for the user, and
    (None, the refusal's message) when the domain refused."""
    try:
        task = lease()
    except DomainError as exc:
        return None, exc.message
    return task, "" if task is not None else none_left
