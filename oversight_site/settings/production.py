"""Production: refuses to start without a real secret key and allowed hosts; HTTPS settings
on by default (``DJANGO_HTTPS=false`` for a trial over plain HTTP, which ``check --deploy``
then rightly flags). Every variable is described in docs/operations.md."""

import os

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import env_bool

PLACEHOLDER_SECRETS = {"change-me-to-a-long-random-string",
                       "insecure-local-development-key-change-me"}

if not os.environ.get("DJANGO_SECRET_KEY"):
    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set in production.")
if os.environ["DJANGO_SECRET_KEY"] in PLACEHOLDER_SECRETS:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY is the example value: set a long random one "
                               "(python -c \"import secrets; print(secrets.token_urlsafe(50))\").")
if not os.environ.get("DJANGO_ALLOWED_HOSTS"):
    raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must be set in production.")

DEBUG = False
# Demo accounts have known passwords: seed_demo refuses to run here.
OVERSIGHT_DEMO_ALLOWED = False

HTTPS = env_bool("DJANGO_HTTPS", True)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SSL_REDIRECT", HTTPS)
# The container's health check calls http://127.0.0.1:8000/healthz from inside.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "31536000" if HTTPS else "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", False)
if not SECURE_HSTS_PRELOAD:
    # Preloading commits the whole registrable domain to HTTPS in every browser, for months:
    # the operator opts in with DJANGO_HSTS_PRELOAD=true; until then the reminder is noise.
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
