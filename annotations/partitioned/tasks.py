"""Celery tasks of partitioned studies (names fixed in the decorators, so queued messages
survive moves; re-exported by ``annotations/tasks.py``)."""

from __future__ import annotations

from celery import shared_task

TALLIES_CHECK_TASK = "annotations.tasks.tallies_check_task"


@shared_task(name=TALLIES_CHECK_TASK)
def tallies_check_task() -> dict:
    """Beat: hold every partitioned study's maintained statistics to the full recompute
    (``services.consistency``), and drop log entries of deleted studies. Returns the
    studies checked and those that differed."""
    from annotations.partitioned.services.consistency import tallies_check_all
    from annotations.partitioned.services.tallies import orphan_entries_drop

    orphan_entries_drop()
    checks = tallies_check_all()
    return {"checked": len(checks), "differed": [c.study_id for c in checks if not c.ok]}
