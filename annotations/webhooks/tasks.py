"""Celery tasks of webhooks (gathered by ``annotations.tasks``): take ids, call one service;
safe to run twice (a delivery is claimed before it is sent)."""

from __future__ import annotations

from celery import shared_task

from annotations.webhooks.services.deliveries import DELIVER_TASK

DUE_TASK = "annotations.tasks.webhooks_due_task"


@shared_task(name=DELIVER_TASK, acks_late=True)
def webhook_deliver_task(delivery_id: int) -> None:
    """Send one delivery (``services.deliveries.delivery_send``)."""
    from annotations.webhooks.services.deliveries import delivery_send

    delivery_send(delivery_id=delivery_id)


@shared_task(name=DUE_TASK)
def webhooks_due_task() -> int:
    """Beat: send the deliveries that are due — retries, and those whose task was lost."""
    from annotations.webhooks.services.deliveries import deliveries_due

    return deliveries_due()
