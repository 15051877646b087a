"""Celery application: configured from Django settings (``CELERY_`` namespace)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oversight_site.settings.local")

app = Celery("oversight_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
