"""Services start Celery tasks by their registered names, so that a tasks module (which
calls services) is never imported by a service: no import circle. Every task's name is fixed
in its decorator from one of the constants here or in its study type's services, and
``annotations/tasks.py`` (imported when the app is ready, and by Celery's autodiscovery)
registers them all."""

from __future__ import annotations

from celery import current_app

RECOMPUTE_TASK = "annotations.tasks.study_recompute_task"
RECOMPUTES_CATCH_UP_TASK = "annotations.tasks.recomputes_catch_up_task"
LEASES_RECLAIM_TASK = "annotations.tasks.leases_reclaim_task"
IMPORT_JOB_TASK = "annotations.tasks.import_job_task"
EXCLUSION_APPLY_TASK = "annotations.tasks.exclusion_apply_task"
EXCLUSIONS_CATCH_UP_TASK = "annotations.tasks.exclusions_catch_up_task"


def task(name: str):
    """The Celery task registered as ``name`` (``.apply``, ``.delay``, ``.apply_async`` as
    on the decorated function; eager settings apply the same)."""
    return current_app.tasks[name]
