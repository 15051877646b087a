"""One exception handler: every API error is a JSON body with a machine-readable ``code`` and
a ``detail`` for people (domain errors may add ``field`` or ``errors``)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from annotations.core.errors import DomainError

# Where a 403's reason waits for its one log line (oversight_site.log_filters reads it).
FORBIDDEN_REASON = "forbidden_reason"


def exception_handler(exc, context):
    response = _response(exc, context)
    if response is not None and response.status_code == 403 and "request" in context:
        # the reason for the 403's one log line (oversight_site.log_filters)
        detail = response.data.get("detail", "") if isinstance(response.data, dict) else ""
        setattr(context["request"]._request, FORBIDDEN_REASON, str(detail))
    return response


def _response(exc, context):
    if isinstance(exc, DomainError):
        return Response(exc.as_dict(), status=exc.http_status)
    if isinstance(exc, Http404):  # as DRF's handler does, so the code is known here
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    # Field-by-field validation errors keep DRF's shape ({field: [messages]}); a single
    # message (parse error, throttled, not found, not authenticated…) gains its code.
    if response is not None and isinstance(exc, APIException) and isinstance(
        response.data, dict
    ) and set(response.data) == {"detail"}:
        codes = exc.get_codes()
        response.data = {"code": codes if isinstance(codes, str) else "error",
                         "detail": response.data["detail"]}
    return response
