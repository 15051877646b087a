"""The app's Celery tasks, gathered where Celery's autodiscovery looks (``<app>.tasks``): the
core's (recompute, catch-up, lease sweeper, import jobs) and each study type's. Task names
are fixed in the decorators, so queued messages survive moves between modules."""

from annotations.assisted.tasks import sample_sentence_task
from annotations.audit.tasks import audit_run_task, audits_sweep_task
from annotations.core.tasks import (
    exclusion_apply_task,
    exclusions_catch_up_task,
    import_job_task,
    leases_reclaim_task,
    recomputes_catch_up_task,
    study_recompute_task,
)
from annotations.critique.tasks import critique_run_task
from annotations.partitioned.tasks import tallies_check_task
from annotations.webhooks.tasks import webhook_deliver_task, webhooks_due_task

__all__ = [
    "audit_run_task", "audits_sweep_task", "critique_run_task", "exclusion_apply_task",
    "exclusions_catch_up_task", "import_job_task", "leases_reclaim_task",
    "recomputes_catch_up_task", "sample_sentence_task", "study_recompute_task",
    "tallies_check_task", "webhook_deliver_task", "webhooks_due_task",
]
