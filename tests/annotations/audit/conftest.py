"""Audits run in process in these tests, whatever the environment: CI's second pass sets a
broker (CELERY_TASK_ALWAYS_EAGER is then False and a run would wait in the queue for a
worker these tests do not start); the task the worker would run is the same ``audit_run``."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _audits_in_process(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
