"""Celery application: configured from Django settings (``CELERY_`` namespace)."""

import os

from celery import Celery
from celery.signals import worker_ready

# Servers and workers default to production settings (they refuse to start without a
# secret); manage.py sets the local ones first for development.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oversight_site.settings.production")

app = Celery("oversight_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def catch_up_on_start(**kwargs) -> None:
    """A worker that starts queues the catch-up sweeper at once
    (``annotations.core.services.recompute.recomputes_catch_up``): a recompute that a dead
    worker held — Redis gives a delayed task to one worker, which keeps it until it is due
    and dies with it — runs as soon as its replacement is up, not at the next beat."""
    from annotations.core.queue import RECOMPUTES_CATCH_UP_TASK

    app.send_task(RECOMPUTES_CATCH_UP_TASK)
