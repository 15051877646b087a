"""Throttling of failed log-ins and API tokens, and the API's request rates.

Failed log-ins are counted in the cache per username and per client address over
``OVERSIGHT_LOGIN_WINDOW_SECONDS``. Past ``…_FREE_FAILURES`` each further failure makes the
next attempt wait twice as long (2, 4, 8 … s, at most ``…_MAX_DELAY_SECONDS``); at
``…_LOCK_AFTER`` failures the username (or address) is locked for ``…_LOCK_SECONDS``. A
refused attempt never checks the password, so guessing gains nothing while it waits. A
successful log-in clears the username's count, not the address's (one valid account must not
reset an attacker's address). Invalid API tokens count per address the same way (scope
"token") and answer 429 with ``Retry-After``.

The cache being down must not take log-ins or the API down with it: every cache error is
logged and the request allowed (fail open).

The client address is DRF's ``get_ident``: REMOTE_ADDR, or behind ``NUM_PROXIES`` trusted
proxies the matching X-Forwarded-For entry (settings: DJANGO_BEHIND_PROXY).
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest
from rest_framework import exceptions, throttling
from rest_framework.authentication import TokenAuthentication
from rest_framework.settings import api_settings

from annotations.core.accounts import OneTimePasswordLoginMixin
from annotations.core.words import counted

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    free_failures: int
    lock_after: int
    lock_seconds: int
    max_delay_seconds: int
    window_seconds: int


def limits(scope: str) -> Limits:
    """Per-scope limits from settings (``OVERSIGHT_<SCOPE>_THROTTLE``: login_user,
    login_ip, token_ip)."""
    return Limits(**settings.OVERSIGHT_THROTTLES[scope])


def client_ident(request: HttpRequest) -> str:
    return throttling.BaseThrottle().get_ident(request) or "unknown"


def _key(scope: str, ident: str, kind: str) -> str:
    digest = hashlib.sha256(ident.strip().lower().encode()).hexdigest()[:32]
    return f"throttle:{scope}:{kind}:{digest}"


def wait_seconds(scope: str, ident: str) -> int:
    """Seconds before ``ident`` may try again in ``scope`` (0: now)."""
    try:
        until = cache.get(_key(scope, ident, "until"))
    except Exception:  # fail open, see the module docstring
        logger.warning("throttle cache unavailable; %s not checked", scope, exc_info=True)
        return 0
    return max(0, math.ceil(until - time.time())) if until else 0


def failure_record(scope: str, ident: str) -> int:
    """Count one failure; returns the wait it imposes on the next attempt (seconds)."""
    lim = limits(scope)
    count_key = _key(scope, ident, "count")
    try:
        cache.add(count_key, 0, lim.window_seconds)
        count = cache.incr(count_key)
        if count >= lim.lock_after:
            wait = lim.lock_seconds
        elif count > lim.free_failures:
            wait = min(2 ** (count - lim.free_failures), lim.max_delay_seconds)
        else:
            return 0
        cache.set(_key(scope, ident, "until"), time.time() + wait, wait)
    except ValueError:  # the count expired between add and incr: start again
        return 0
    except Exception:
        logger.warning("throttle cache unavailable; %s failure not counted", scope,
                       exc_info=True)
        return 0
    return wait


def failures_clear(scope: str, ident: str) -> None:
    try:
        cache.delete_many([_key(scope, ident, "count"), _key(scope, ident, "until")])
    except Exception:
        logger.warning("throttle cache unavailable; %s not cleared", scope, exc_info=True)


def _in_words(seconds: int) -> str:
    if seconds < 90:
        return counted(seconds, "second")
    return counted(math.ceil(seconds / 60), "minute")


# --- Log-in forms (the site's and the admin's) -----------------------------------------

class ThrottledLoginMixin:
    """``clean`` refuses while the username or the address must wait, and counts failures."""

    request: HttpRequest | None
    error_messages: dict

    def clean(self):
        username = (self.cleaned_data.get("username") or "").strip()
        ip = client_ident(self.request) if self.request is not None else "unknown"
        waits = [(wait_seconds("login_user", username), "this account"),
                 (wait_seconds("login_ip", ip), "your network address")]
        wait, whom = max(waits)
        if wait:
            raise forms.ValidationError(
                "Too many failed log-ins for %(whom)s. Try again in %(wait)s.",
                code="throttled", params={"whom": whom, "wait": _in_words(wait)})
        try:
            cleaned = super().clean()
        except forms.ValidationError as exc:
            if getattr(exc, "code", None) == "invalid_login":
                wait = max(failure_record("login_user", username),
                           failure_record("login_ip", ip))
                if wait:
                    raise forms.ValidationError([
                        exc,
                        forms.ValidationError(
                            "Too many failed log-ins: wait %(wait)s before the next try.",
                            code="throttled", params={"wait": _in_words(wait)}),
                    ]) from None
            raise
        failures_clear("login_user", username)
        return cleaned


class ThrottledAuthenticationForm(ThrottledLoginMixin, OneTimePasswordLoginMixin,
                                  AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, OneTimePasswordLoginMixin,
                                       AdminAuthenticationForm):
    pass


class ThrottledLoginView(auth_views.LoginView):
    """The site's log-in page: a refused attempt answers 429 with Retry-After."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if any(e.code == "throttled" for e in form.non_field_errors().as_data()):
            response.status_code = 429
        return response


# --- API -----------------------------------------------------------------------------------

class ThrottledTokenAuthentication(TokenAuthentication):
    """Token auth that counts invalid tokens per address and refuses (429) while it waits."""

    def authenticate(self, request):
        if not request.META.get("HTTP_AUTHORIZATION"):
            return None
        ip = client_ident(request)
        wait = wait_seconds("token_ip", ip)
        if wait:
            refused = exceptions.Throttled(wait)
            refused.detail = exceptions.ErrorDetail(
                f"Too many invalid API tokens from your address. Try again in "
                f"{_in_words(wait)}.", code="throttled")
            raise refused
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            failure_record("token_ip", ip)
            raise


class _FailOpen:
    """DRF rate throttles that read their rate at request time (settings can change) and
    let requests through when the cache is down."""

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def allow_request(self, request, view):
        try:
            return super().allow_request(request, view)
        except Exception:
            logger.warning("throttle cache unavailable; rate not checked", exc_info=True)
            return True


class UserRateThrottle(_FailOpen, throttling.UserRateThrottle):
    pass


class AnonRateThrottle(_FailOpen, throttling.AnonRateThrottle):
    pass
