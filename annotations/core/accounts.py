"""Accounts researchers create for their members: the password they hand out is replaced at
the first sign-in, and an invitation link lets a member choose their password instead.

* ``PasswordChangeRequired`` (middleware): a signed-in person whose ``password_must_change``
  is set reaches only the password-change page (and signing out, and static files) until
  they have chosen their own; every other page redirects there with the reason. The REST
  API is not redirected (a token is not a password).
* ``OwnPasswordChangeView``: Django's password change, which also clears the flag.
* ``InvitationView``: Django's password-reset confirmation at ``/accounts/invitation/…``
  (the token works once, until the password changes, for PASSWORD_RESET_TIMEOUT); the
  chosen password clears the flag and signs the person in.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect
from django.urls import reverse, reverse_lazy

ALLOWED_PREFIXES = ("/accounts/", "/static/", "/api/", "/healthz", "/favicon.ico")


def _clear(user) -> None:
    if user.password_must_change:
        user.password_must_change = False
        user.save(update_fields=["password_must_change"])


class PasswordChangeRequired:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if (user is not None and user.is_authenticated
                and getattr(user, "password_must_change", False)
                and not request.path.startswith(ALLOWED_PREFIXES)):
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
    template_name = "registration/invitation.html"
    post_reset_login = True
    success_url = reverse_lazy("home")

    def form_valid(self, form):
        response = super().form_valid(form)
        _clear(form.user)
        messages.success(self.request, "Your password is set: welcome.")
        return response
