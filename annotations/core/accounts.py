"""Accounts researchers create for their members: the password they hand out signs in once
and is replaced at that sign-in, and an invitation link lets a member choose their password
instead.

* ``PasswordChangeRequired`` (middleware): a signed-in person whose ``password_must_change``
  is set reaches only the password change (and signing out or in, the invitation link,
  static files) until they have chosen their own; every other page redirects there with the
  reason, and the API answers 403 ``password_change_required`` to that session (a script's
  API token is not a session: token requests carry no signed-in session user here).
* ``one_time_password_spend`` (on ``user_logged_in``): the handed-out password's sign-in is
  noted; ``OneTimePasswordLoginMixin`` refuses it the next time, with the reason.
* ``OneTimePasswordHasher``: how a handed-out password is stored. It is 14 random
  characters of 55 (81 bits), signs in once and is replaced then, so a slow hash protects
  nothing a salted SHA-256 does not (as for API tokens); a pasted list of 10 000 names is
  stored in well under a second instead of hours (docs/architecture.md, "Member accounts").
* ``OwnPasswordChangeView``: Django's password change, which also clears the flag.
* ``InvitationView``: Django's password-reset confirmation at ``/accounts/invitation/…``
  (the token works once, until the password changes, for PASSWORD_RESET_TIMEOUT); the
  chosen password clears the flag and signs the person in. Opened while someone else is
  signed in, it first asks whether to sign them out (``invitation_switch.html``).
"""

from __future__ import annotations

import hashlib
import secrets

from django import forms
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.hashers import BasePasswordHasher, mask_hash
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.crypto import constant_time_compare

ALLOWED_PATHS = ("/accounts/password/", "/accounts/password/done/", "/accounts/logout/",
                 "/accounts/login/", "/healthz", "/favicon.ico")
ALLOWED_PREFIXES = ("/static/", "/accounts/invitation/", "/i18n/", "/jsi18n/")
SPENT = ("The password you were given has already signed in once; it does not work again. "
         "Ask the researcher who added you for a new one.")


class OneTimePasswordHasher(BasePasswordHasher):
    """Salted SHA-256 for the random passwords researchers hand out (never for a chosen
    one: Django's default hasher stays the first of ``PASSWORD_HASHERS``; a successful sign-in
    re-stores the password with it)."""

    algorithm = "onetime_sha256"

    def encode(self, password, salt):
        self._check_encode_args(password, salt)
        digest = hashlib.sha256(f"{salt}${password}".encode()).hexdigest()
        return f"{self.algorithm}${salt}${digest}"

    def decode(self, encoded):
        algorithm, salt, digest = encoded.split("$", 2)
        assert algorithm == self.algorithm
        return {"algorithm": algorithm, "hash": digest, "salt": salt}

    def verify(self, password, encoded):
        salt = self.decode(encoded)["salt"]
        return constant_time_compare(encoded, self.encode(password, salt))

    def safe_summary(self, encoded):
        decoded = self.decode(encoded)
        return {"algorithm": decoded["algorithm"], "salt": mask_hash(decoded["salt"]),
                "hash": mask_hash(decoded["hash"])}

    def harden_runtime(self, password, encoded):
        pass


def one_time_password_encode(password: str) -> str:
    """The stored form of a handed-out password (``OneTimePasswordHasher``, 96-bit salt)."""
    return OneTimePasswordHasher().encode(password, secrets.token_urlsafe(12))


def one_time_password_spend(sender=None, *, user, request=None, **kwargs) -> None:
    """``user_logged_in``: a handed-out password has now signed in; it does not again."""
    if getattr(user, "password_must_change", False) and user.one_time_password_used_at is None:
        user.one_time_password_used_at = timezone.now()
        user.save(update_fields=["one_time_password_used_at"])


class OneTimePasswordLoginMixin:
    """For log-in forms: a correct handed-out password that has signed in before is
    refused with the reason (the wrong-password message would send the person hunting)."""

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)  # type: ignore[misc]
        if user.password_must_change and user.one_time_password_used_at is not None:
            raise forms.ValidationError(SPENT, code="one_time_spent")


def _clear(user) -> None:
    if user.password_must_change or user.one_time_password_used_at is not None:
        user.password_must_change = False
        user.one_time_password_used_at = None
        user.save(update_fields=["password_must_change", "one_time_password_used_at"])


def _allowed(path: str) -> bool:
    return path in ALLOWED_PATHS or path.startswith(ALLOWED_PREFIXES)


class PasswordChangeRequired:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if (user is not None and user.is_authenticated
                and getattr(user, "password_must_change", False)
                and not _allowed(request.path)):
            if request.path.startswith("/api/"):
                return JsonResponse(
                    {"code": "password_change_required",
                     "detail": "Choose your own password first (/accounts/password/): the one "
                               "you were given works only to sign in once."}, status=403)
            messages.info(request, "Choose your own password first: the one you were given "
                                   "works only to sign in once.")
            return redirect(reverse("password_change"))
        return self.get_response(request)


class OwnPasswordChangeView(auth_views.PasswordChangeView):
    def form_valid(self, form):
        response = super().form_valid(form)
        _clear(form.user)
        return response


class InvitationView(auth_views.PasswordResetConfirmView):
    """Someone else signed in on this browser is asked first (``?switch=1`` after their
    yes): the link never signs them out silently."""

    template_name = "registration/invitation.html"
    post_reset_login = True
    success_url = reverse_lazy("home")

    def dispatch(self, *args, **kwargs):
        request = self.request
        if request.user.is_authenticated:
            invited = self.get_user(kwargs["uidb64"])
            if invited is None or invited.pk != request.user.pk:
                if request.method == "POST" and request.POST.get("switch") == "yes":
                    logout(request)
                    return redirect(request.path)
                return render(request, "registration/invitation_switch.html",
                              {"signed_in": request.user})
        return super().dispatch(*args, **kwargs)

    def form_valid(self, form):
        response = super().form_valid(form)
        _clear(form.user)
        messages.success(self.request, "Your password is set: welcome.")
        return response
