"""Logging filters (LOGGING in settings/base.py)."""

from __future__ import annotations

import json
import logging

# set on the request by the API's exception handler (annotations.core.api_errors)
FORBIDDEN_REASON = "forbidden_reason"


class ForbiddenOneLine(logging.Filter):
    """A 403 — PermissionDenied in a view, the API's refusals, a CSRF failure — as one line:
    ``Forbidden: GET /path user=12 reason="…"``. A refusal is the site working, not a
    fault: Django logs PermissionDenied with its traceback, which buried real errors in the
    logs (and CSRF failures and the API's refusals named neither the user nor the method)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) != 403:
            return True
        request = getattr(record, "request", None)
        exc = record.exc_info[1] if record.exc_info else None
        reason = (getattr(request, FORBIDDEN_REASON, None) or (str(exc) if exc else "")
                  or _csrf_reason(record) or "forbidden")
        user = getattr(request, "user", None)
        who = user.pk if user is not None and user.is_authenticated else "anonymous"
        record.msg = "Forbidden: %s %s user=%s reason=%s"
        # the path as JSON too: a %0A in it must not start a forged log line
        record.args = (getattr(request, "method", "?"),
                       json.dumps(getattr(request, "path", "?"), ensure_ascii=False), who,
                       json.dumps(reason, ensure_ascii=False))
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _csrf_reason(record: logging.LogRecord) -> str:
    # django.middleware.csrf logs "Forbidden (%s): %s" with (reason, path)
    if record.msg == "Forbidden (%s): %s" and isinstance(record.args, tuple) and record.args:
        return str(record.args[0])
    return ""
