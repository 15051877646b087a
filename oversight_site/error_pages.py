"""Error responses (urls.py ``handler400``…``handler500``): pages in the site's layout with
the reason and a way home, JSON under /api/. Django's debug pages (URL lists, settings)
appear only where DEBUG is explicitly on (settings.local). A page's words are in the
reader's language; an API's ``detail`` stays English (scripts match on it)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.utils.translation import gettext, gettext_noop

from annotations.core.inputs import too_large_message

API_PREFIX = "/api/"
MALFORMED = gettext_noop("The request could not be understood (malformed or not allowed).")
NO_ACCESS = gettext_noop("You do not have access to this page.")
SERVER_ERROR = gettext_noop("Something went wrong on the server; the error has been logged. "
                            "Try again in a moment, and tell the operators if it persists.")


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def _page(template: str, status: int, context: dict, request: HttpRequest | None = None):
    # 400 and 500 render without the request: the request (its host, session or user) may
    # be what failed.
    return HttpResponse(loader.render_to_string(template, context, request), status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        detail = too_large_message()
        if _is_api(request):
            return JsonResponse({"code": "request_too_large", "detail": detail}, status=413)
        return _page("400.html", 413, {"title": gettext("Too much data"), "reason": detail})
    if _is_api(request):
        return JsonResponse({"code": "bad_request", "detail": MALFORMED}, status=400)
    return _page("400.html", 400, {"title": gettext("Bad request"),
                                   "reason": gettext(MALFORMED)})


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    # Our PermissionDenied messages are written for the person refused ("You are not a
    # specialist in this study."); Django's own carry none.
    own = str(exception) if isinstance(exception, PermissionDenied) else ""
    if _is_api(request):
        return JsonResponse({"code": "permission_denied", "detail": own or NO_ACCESS},
                            status=403)
    return _page("403.html", 403, {"reason": own or gettext(NO_ACCESS)}, request)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"code": "not_found", "detail": (
            f"No API endpoint or object at {request.path}; the endpoints are listed at "
            f"/api/docs/.")}, status=404)
    return _page("404.html", 404, {"path": request.path}, request)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"code": "server_error", "detail": SERVER_ERROR}, status=500)
    return _page("500.html", 500, {"reason": gettext(SERVER_ERROR)})
