"""Celery application: configured from Django settings (``CELERY_`` namespace)."""

import os

from celery import Celery

# Servers and workers default to production settings (they refuse to start without a
# secret); manage.py sets the local ones first for development.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oversight_site.settings.production")

app = Celery("oversight_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
