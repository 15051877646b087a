"""One exception handler: domain errors become machine-readable 4xx bodies."""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from annotations.errors import DomainError


def exception_handler(exc, context):
    if isinstance(exc, DomainError):
        return Response(exc.as_dict(), status=exc.http_status)
    return drf_exception_handler(exc, context)
