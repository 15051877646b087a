"""Webhooks: registering them, turning notices into deliveries, and delivering them.

**From a notice to deliveries** (``notice_heard``, a listener of
``core.services.notices``): every active webhook of the study that hears the event gets a
pending ``WebhookDelivery`` whose ``payload`` is the body as it will be sent::

    {"id": "<delivery uuid>", "event": "answers.recorded", "created_at": "…",
     "study": {"id": 12, "name": "…", "kind": "partitioned"}, "data": {…}}

``data`` is the notice's (counts, ids, statuses: never a gold answer or an answer's
content). On answers.recorded a webhook with a target also gets study.target_reached, once
per target: ``{"target": "answers", "answers": n}`` or ``{"target": "width", "system": name,
"width": w}`` (``core.services.notices.interval_widths``, from the new snapshot).

**Delivering** (``delivery_send``): a POST of the body with the headers
``Oversight-Event``, ``Oversight-Delivery`` (the uuid: a receiver drops repeats) and
``Oversight-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body under the
webhook's secret>`` (a receiver refuses a ``t`` outside its replay window:
``oversight_client.webhooks.verify``). Through the egress policy's guarded client
(``services.endpoints``): no redirect followed (3xx is a failure), no environment proxy,
every address checked at connection time; within ``OVERSIGHT_WEBHOOK_TIMEOUT`` seconds in
all (a slow or dripping receiver is cut off: a timer closes the connection), reading the
status line and headers only — never the body. 2xx: delivered. Anything else: attempt
counted, the next one due after 30 s · 2^(attempts − 1) (at most an hour); after
``MAX_ATTEMPTS`` the delivery fails, and a webhook with ``DISABLE_AFTER`` failed deliveries
in a row is switched off with the reason (the study's audit trail says so; its creator is
emailed where mail is set up). A delivery is claimed for ``CLAIM_SECONDS`` before it is
sent, so two workers never send it at once.

**Who sends**: the notice's commit queues ``webhook_deliver_task`` for each delivery (a
Celery worker; without a broker, one background thread of the web process — never the
request that made the change); the beat's ``webhooks_due_task`` (every 15 s) sends what is
due — retries, and deliveries whose task was lost.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx2
from django.conf import settings
from django.core.mail import send_mail
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotations.core.errors import InvalidStudy
from annotations.core.events import study_event_kind_register
from annotations.core.models import Study, User
from annotations.core.queue import task
from annotations.core.services.notices import EVENTS, interval_widths, notice_listener_register
from annotations.core.services.recompute import short_error
from annotations.core.services.studies import study_event_record
from annotations.webhooks.models import Webhook, WebhookDelivery
from annotations.webhooks.services.endpoints import webhook_policy, webhook_url_problem
from assistants.egress import http_client

log = logging.getLogger(__name__)

DELIVER_TASK = "annotations.tasks.webhook_deliver_task"
MAX_ATTEMPTS = 8
DISABLE_AFTER = 3  # deliveries given up in a row
CLAIM_SECONDS = 120
BACKOFF_SECONDS = 30
MAX_BACKOFF_SECONDS = 3600
DUE_BATCH = 50


# --- registering ---------------------------------------------------------------------------
def webhook_check(*, url: str, events: list[str], target_answers: int | None = None,
                  target_width: float | None = None) -> None:
    """Refuse (InvalidStudy naming the field) a URL the egress policy refuses, an unknown
    event, no event, a target width outside (0, 1)."""
    problem = webhook_url_problem(url)
    if problem:
        raise InvalidStudy(f"url: {problem}", field="url")
    unknown = sorted(set(events) - set(EVENTS))
    if unknown or not events:
        raise InvalidStudy(f"events: {', '.join(unknown) or 'none chosen'}; choose among "
                           f"{', '.join(EVENTS)}", field="events")
    if target_width is not None and not 0 < target_width < 1:
        raise InvalidStudy("target_width: a width between 0 and 1 (e.g. 0.1)",
                           field="target_width")
    if "study.target_reached" in events and target_answers is None and target_width is None:
        raise InvalidStudy("target_answers: study.target_reached needs a target (answers "
                           "or a width)", field="target_answers")


def webhook_create(*, study: Study, url: str, events: list[str], by: User | None = None,
                   target_answers: int | None = None,
                   target_width: float | None = None) -> Webhook:
    webhook_check(url=url, events=events, target_answers=target_answers,
                  target_width=target_width)
    return Webhook.objects.create(study=study, url=url.strip(), events=list(events),
                                  target_answers=target_answers, target_width=target_width,
                                  created_by=by)


def webhook_enable(*, webhook: Webhook) -> Webhook:
    """Switch a webhook on again (its failures forgotten); its URL is checked again."""
    webhook_check(url=webhook.url, events=webhook.events, target_answers=webhook.target_answers,
                  target_width=webhook.target_width)
    Webhook.objects.filter(pk=webhook.pk).update(active=True, failures_in_row=0,
                                                 disabled_reason="")
    webhook.refresh_from_db()
    return webhook


# --- notices → deliveries ------------------------------------------------------------------
def _body(study: Study, event: str, data: dict, delivery: WebhookDelivery) -> dict:
    return {"id": str(delivery.delivery_id), "event": event,
            "created_at": timezone.now().isoformat(),
            "study": {"id": study.pk, "name": study.name, "kind": study.kind},
            "data": data}


def _targets_reached(webhook: Webhook, data: dict, widths: Callable[[], dict[str, float]]
                     ) -> list[dict]:
    """The targets of ``webhook`` this answers.recorded reaches for the first time
    (``widths()``: the new snapshot's interval widths)."""
    reached: list[dict] = []
    if webhook.target_answers is not None and "answers" not in webhook.reached \
            and data.get("answers", 0) >= webhook.target_answers:
        reached.append({"target": "answers", "answers": data["answers"],
                        "target_answers": webhook.target_answers})
    if webhook.target_width is not None:
        for name, width in sorted(widths().items()):
            if width <= webhook.target_width and f"width:{name}" not in webhook.reached:
                reached.append({"target": "width", "system": name, "width": width,
                                "target_width": webhook.target_width})
    return reached


def notice_heard(study_id: int, event: str, data: dict) -> list[int]:
    """The deliveries a notice makes (module docstring); returns their ids, queued. A study
    without an active webhook costs one query (every snapshot's notice comes here)."""
    from annotations.core.models import EstimateSnapshot

    made: list[int] = []
    with transaction.atomic():
        webhooks = list(Webhook.objects.select_for_update().select_related("study")
                        .filter(study_id=study_id, active=True))
        if not webhooks:
            return made

        @functools.cache
        def widths() -> dict[str, float]:  # the snapshot read once for every webhook
            payload = (EstimateSnapshot.objects.filter(pk=data.get("snapshot"))
                       .values_list("payload", flat=True).first()) or {}
            return interval_widths(webhooks[0].study.kind, payload)

        for webhook in webhooks:
            study = webhook.study
            sends = [(event, data)] if event in webhook.events else []
            if event == "answers.recorded" and "study.target_reached" in webhook.events:
                targets = _targets_reached(webhook, data, widths)
                for target in targets:
                    sends.append(("study.target_reached", target))
                    webhook.reached.append("answers" if target["target"] == "answers"
                                           else f"width:{target['system']}")
                if targets:
                    Webhook.objects.filter(pk=webhook.pk).update(reached=webhook.reached)
            for name, body_data in sends:
                delivery = WebhookDelivery(webhook=webhook, event=name, payload={},
                                           next_attempt_at=timezone.now())
                delivery.payload = json.loads(json.dumps(_body(study, name, body_data,
                                                               delivery),
                                                         cls=DjangoJSONEncoder))
                delivery.save()
                made.append(delivery.pk)
        transaction.on_commit(lambda: deliveries_enqueue(made))
    return made


def register() -> None:
    """The listener of notices and the audit trail's kind (called from the app's ``ready``)."""
    from django.core import checks

    from annotations.webhooks.services.endpoints import webhook_settings_check

    checks.register(webhook_settings_check, checks.Tags.security)
    study_event_kind_register("webhook_disabled", "Webhook switched off")
    notice_listener_register(notice_heard)


# --- sending -------------------------------------------------------------------------------
_executor_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def deliveries_enqueue(ids: list[int]) -> None:
    """Send these deliveries soon, never in the caller's request: a worker's task each, or
    (no broker) the web process's one webhook thread. A broker that cannot be reached
    leaves them to the beat's sweep."""
    global _executor
    if not ids:
        return
    runner = settings.OVERSIGHT_WEBHOOK_RUNNER
    if runner == "request":  # the test settings: here and now
        for pk in ids:
            delivery_send(delivery_id=pk)
        return
    if runner == "thread":
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhooks")
        for pk in ids:
            _executor.submit(_send_in_thread, pk)
        return
    for pk in ids:
        try:
            task(DELIVER_TASK).apply_async(args=(pk,))
        except Exception as exc:  # noqa: BLE001 - the sweep sends it later
            log.warning("webhook delivery %s not queued (%s): the sweep will send it", pk, exc)


def _send_in_thread(delivery_id: int) -> None:
    from django.db import connections

    try:
        delivery_send(delivery_id=delivery_id)
    except Exception:  # noqa: BLE001 - logged; a thread has no caller
        log.exception("webhook delivery %s", delivery_id)
    finally:
        connections.close_all()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Oversight-Signature`` header of ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def _claim(delivery_id: int) -> bool:
    now = timezone.now()
    return bool(WebhookDelivery.objects.filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=now), pk=delivery_id,
        status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now,
    ).update(claimed_until=now + dt.timedelta(seconds=CLAIM_SECONDS)))


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """(the receiver's status, or None; the error) of one POST within the total timeout."""
    limit = settings.OVERSIGHT_WEBHOOK_TIMEOUT
    client = http_client(webhook_policy(), base_url=url,
                         timeout=httpx2.Timeout(limit, connect=min(limit, 5.0)))
    cut = threading.Timer(limit, client.close)  # a dripping receiver is cut off
    started = time.monotonic()
    cut.start()
    try:
        with client.stream("POST", url, content=body, headers=headers) as response:
            return response.status_code, ""  # the body is never read
    except Exception as exc:  # noqa: BLE001 - every failure is the delivery's outcome
        if time.monotonic() - started >= limit - 0.05:
            return None, f"no answer within {limit:g} s"
        return None, short_error(exc)
    finally:
        cut.cancel()
        client.close()


def delivery_send(*, delivery_id: int) -> WebhookDelivery | None:
    """Send one due delivery (module docstring); returns it as it ended this attempt (None:
    not due, or another worker holds it)."""
    if not _claim(delivery_id):
        return None
    delivery = WebhookDelivery.objects.select_related("webhook", "webhook__study").get(
        pk=delivery_id)
    webhook = delivery.webhook
    status, error = None, ""
    if not webhook.active:
        error = "the webhook is switched off"
    elif problem := webhook_url_problem(webhook.url, resolve_names=False):
        error = problem  # the operator's list changed since it was saved
    else:
        body = json.dumps(delivery.payload, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "Oversight-Webhooks/1",
                   "Oversight-Event": delivery.event,
                   "Oversight-Delivery": str(delivery.delivery_id),
                   "Oversight-Signature": signature(webhook.secret, int(time.time()), body)}
        status, error = _post(webhook.url, body, headers)
        if status is not None and not 200 <= status < 300:
            error = (f"answered {status}" + (" (a redirect: not followed)"
                                             if 300 <= status < 400 else ""))
    return _outcome(delivery, status, error, final=not webhook.active)


def _outcome(delivery: WebhookDelivery, status: int | None, error: str, *,
             final: bool) -> WebhookDelivery:
    now = timezone.now()
    attempts = delivery.attempts + 1
    fields = {"attempts": attempts, "last_status": status, "last_error": error[:500],
              "claimed_until": None}
    if not error:
        fields.update(status=WebhookDelivery.Status.DELIVERED, delivered_at=now)
        Webhook.objects.filter(pk=delivery.webhook_id).update(failures_in_row=0)
    elif final or attempts >= MAX_ATTEMPTS:
        fields.update(status=WebhookDelivery.Status.FAILED, next_attempt_at=None)
    else:
        wait = min(MAX_BACKOFF_SECONDS, BACKOFF_SECONDS * 2 ** (attempts - 1))
        fields.update(next_attempt_at=now + dt.timedelta(seconds=wait))
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields)
    if fields.get("status") == WebhookDelivery.Status.FAILED and not final:
        _failed_once_more(delivery.webhook, error)
    delivery.refresh_from_db()
    return delivery


def _failed_once_more(webhook: Webhook, error: str) -> None:
    """A delivery given up: switch the webhook off after ``DISABLE_AFTER`` in a row."""
    with transaction.atomic():
        webhook = Webhook.objects.select_for_update().get(pk=webhook.pk)
        webhook.failures_in_row += 1
        fields = ["failures_in_row"]
        if webhook.active and webhook.failures_in_row >= DISABLE_AFTER:
            webhook.active = False
            webhook.disabled_reason = (
                f"Switched off after {webhook.failures_in_row} deliveries failed in a row "
                f"({MAX_ATTEMPTS} attempts each); the last: {error}")[:500]
            fields += ["active", "disabled_reason"]
            study_event_record(study=webhook.study, kind="webhook_disabled", detail={
                "webhook": webhook.pk, "url": webhook.url, "reason": webhook.disabled_reason})
            transaction.on_commit(lambda: _tell_creator(webhook))
        webhook.save(update_fields=fields)


def _tell_creator(webhook: Webhook) -> None:
    user = webhook.created_by
    if user is None or not user.email:
        return
    send_mail(f"Webhook switched off: {webhook.study.name}",
              f"{webhook.disabled_reason}\n\nURL: {webhook.url}\nSwitch it on again in the "
              f"admin (Webhooks) once the endpoint answers.",
              None, [user.email], fail_silently=True)


def deliveries_due(*, limit: int = DUE_BATCH) -> int:
    """Send the deliveries that are due (the beat's sweep); returns how many were tried."""
    now = timezone.now()
    ids = list(WebhookDelivery.objects.filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=now),
        status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now,
    ).order_by("next_attempt_at").values_list("pk", flat=True)[:limit])
    for pk in ids:
        delivery_send(delivery_id=pk)
    return len(ids)


def delivery_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Send a delivery again (the admin's action): the same body and id, due now, its
    attempts counted afresh."""
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status=WebhookDelivery.Status.PENDING, attempts=0, next_attempt_at=timezone.now(),
        claimed_until=None, delivered_at=None)
    transaction.on_commit(lambda: deliveries_enqueue([delivery.pk]))
    delivery.refresh_from_db()
    return delivery
