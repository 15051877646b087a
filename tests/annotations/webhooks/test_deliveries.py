"""Signed webhooks end to end (annotations/webhooks/services/deliveries.py) against local
receivers on the loopback (listed in OVERSIGHT_WEBHOOK_ALLOWED_HOSTS for these tests): a
receiver that checks the signature with the client's ``verify``; retries with backoff, the
delivery log, redelivery, switching off after repeated failures; the egress policy at save
and at delivery; redirects not followed; a slow receiver cut off at the timeout; a huge
answer never read; and what the bodies may not hold."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from annotations.core.errors import InvalidStudy
from annotations.core.events import StudyEvent
from annotations.core.services.recompute import study_recompute_any
from annotations.core.services.studies import study_close
from annotations.partitioned.services.simulation import study_simulate
from annotations.webhooks.models import Webhook, WebhookDelivery
from annotations.webhooks.services.deliveries import (
    BACKOFF_SECONDS,
    DISABLE_AFTER,
    MAX_ATTEMPTS,
    deliveries_due,
    delivery_redeliver,
    webhook_create,
)
from oversight_client.webhooks import SignatureError, verify
from tests.factories import make_study

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """A local HTTP receiver: answers each POST with the next of ``answers`` (then the
    last), after ``delay`` seconds, and keeps what it received."""

    def __init__(self, answers=(200,), delay: float = 0.0, body: bytes = b"ok",
                 location: str = ""):
        self.answers, self.delay, self.body, self.location = list(answers), delay, body, location
        self.received: list[tuple[dict, bytes]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server name
                data = self.rfile.read(int(self.headers["Content-Length"]))
                owner.received.append((dict(self.headers), data))
                time.sleep(owner.delay)
                status = owner.answers[min(len(owner.received), len(owner.answers)) - 1]
                self.send_response(status)
                if owner.location:
                    self.send_header("Location", owner.location)
                self.send_header("Content-Length", str(len(owner.body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the platform closed: it reads no body
                    self.wfile.write(owner.body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings):
    settings.OVERSIGHT_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1/32"]
    made: list[Receiver] = []

    def make(**kw) -> Receiver:
        made.append(Receiver(**kw))
        return made[-1]

    yield make
    for r in made:
        r.close()


def _due_now(webhook: Webhook) -> None:
    """Make the webhook's pending deliveries due (time passes)."""
    WebhookDelivery.objects.filter(webhook=webhook, status="pending").update(
        next_attempt_at=timezone.now() - dt.timedelta(seconds=1))


def test_a_study_tells_its_endpoint_signed_notices_that_hold_no_hidden_answer(receiver):
    hook = receiver()
    study = make_study(k=3, n_items=30, systems={"model-a": 0.8}, open_=False, seed=91)
    webhook = webhook_create(study=study, url=hook.url, target_answers=20,
                             events=["study.opened", "answers.recorded",
                                     "study.target_reached", "study.closed"])
    from annotations.core.services.studies import study_open

    study_open(study=study)
    study_simulate(study=study, answers=25)
    study_recompute_any(study_id=study.pk)
    study_close(study=study)
    events = [json.loads(body)["event"] for _, body in hook.received]
    assert events[0] == "study.opened" and events[-1] == "study.closed"
    assert "answers.recorded" in events and events.count("study.target_reached") == 1
    for headers, body in hook.received:  # every body signed with the webhook's secret
        verify(webhook.secret, body, headers["Oversight-Signature"])
        sent = json.loads(body)
        assert headers["Oversight-Event"] == sent["event"]
        assert headers["Oversight-Delivery"] == sent["id"]
        assert sent["study"] == {"id": study.pk, "name": study.name, "kind": "partitioned"}
        text = body.decode()
        assert "gold" not in text and "answer\"" not in text and '"yes"' not in text
    with pytest.raises(SignatureError, match="does not match"):
        verify("whsec_other", hook.received[0][1], hook.received[0][0]["Oversight-Signature"])
    with pytest.raises(SignatureError, match="outside the 300 s window"):
        verify(webhook.secret, hook.received[0][1], hook.received[0][0]["Oversight-Signature"],
               now=time.time() + 3600)
    reached = next(json.loads(b) for _, b in hook.received
                   if json.loads(b)["event"] == "study.target_reached")
    assert reached["data"]["target"] == "answers" and reached["data"]["answers"] >= 20
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}


def test_a_target_width_is_told_once_per_ai_system(receiver):
    hook = receiver()
    study = make_study(k=3, n_items=200, systems={"wide": 0.7, "also": 0.9}, seed=92)
    webhook_create(study=study, url=hook.url, target_width=0.6,
                   events=["study.target_reached"])
    study_simulate(study=study, answers=150)
    study_recompute_any(study_id=study.pk)
    study_simulate(study=study, answers=40)
    study_recompute_any(study_id=study.pk)
    told = [json.loads(b)["data"] for _, b in hook.received]
    assert sorted(d["system"] for d in told) == ["also", "wide"]  # once each, not twice
    assert all(d["width"] <= 0.6 and d["target"] == "width" for d in told)


def test_failures_are_retried_with_backoff_then_delivered_and_logged(receiver):
    hook = receiver(answers=(500, 503, 200))
    study = make_study(k=3, n_items=9, open_=False, seed=93)
    webhook = webhook_create(study=study, url=hook.url, events=["study.closed"])
    study_close(study=study)
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert (delivery.status, delivery.attempts, delivery.last_status) == ("pending", 1, 500)
    first_wait = (delivery.next_attempt_at - timezone.now()).total_seconds()
    assert BACKOFF_SECONDS - 2 < first_wait <= BACKOFF_SECONDS
    assert deliveries_due() == 0  # not due yet
    _due_now(webhook)
    deliveries_due()
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.last_status) == (2, 503)
    second_wait = (delivery.next_attempt_at - timezone.now()).total_seconds()
    assert 2 * BACKOFF_SECONDS - 2 < second_wait <= 2 * BACKOFF_SECONDS
    _due_now(webhook)
    deliveries_due()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status) == ("delivered", 3, 200)
    ids = {h["Oversight-Delivery"] for h, _ in hook.received}
    assert len(hook.received) == 3 and len(ids) == 1  # one delivery id: receivers dedupe
    delivery_redeliver(delivery=delivery)
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and len(hook.received) == 4


def test_an_endpoint_that_keeps_failing_is_switched_off_with_the_reason(receiver):
    hook = receiver(answers=(500,))
    study = make_study(k=3, n_items=9, open_=False, seed=94)
    webhook = webhook_create(study=study, url=hook.url, events=["flag.raised",
                                                                "study.closed"])
    from annotations.core.services.notices import study_notice

    for _ in range(DISABLE_AFTER):
        study_notice(study.pk, "flag.raised", {"item": "i1", "reason": "broken"})
    for _ in range(MAX_ATTEMPTS):
        _due_now(webhook)
        deliveries_due()
    webhook.refresh_from_db()
    assert not webhook.active and webhook.failures_in_row == DISABLE_AFTER
    assert "3 deliveries failed in a row" in webhook.disabled_reason
    assert "answered 500" in webhook.disabled_reason
    assert StudyEvent.objects.filter(study=study, kind="webhook_disabled").count() == 1
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"failed"}
    sent = len(hook.received)
    study_close(study=study)  # a switched-off webhook hears nothing
    assert len(hook.received) == sent == DISABLE_AFTER * MAX_ATTEMPTS


@pytest.mark.parametrize(("url", "message"), [
    ("http://127.0.0.1:9/x", "is not among the webhook endpoint hosts"),
    ("http://10.1.2.3/x", "is not among the webhook endpoint hosts"),
    ("http://user:pw@hooks.example.org/x", "carries a user name or password"),
    ("ftp://hooks.example.org/x", "is not an http:// or https:// URL"),
])
def test_a_webhook_to_an_address_the_operator_did_not_allow_is_refused_at_save(
        settings, url, message):
    settings.OVERSIGHT_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.org"]
    study = make_study(k=3, n_items=9, open_=False, seed=95)
    with pytest.raises(InvalidStudy, match=message):
        webhook_create(study=study, url=url, events=["study.closed"])
    assert not Webhook.objects.exists()


def test_at_delivery_the_policy_is_checked_again_and_redirects_are_not_followed(
        receiver, settings):
    target = receiver()
    hook = receiver(answers=(302,), location=target.url)
    study = make_study(k=3, n_items=9, open_=False, seed=96)
    webhook = webhook_create(study=study, url=hook.url, events=["study.closed",
                                                                "flag.raised"])
    study_close(study=study)
    delivery = WebhookDelivery.objects.get(webhook=webhook, event="study.closed")
    assert delivery.last_error == "answered 302 (a redirect: not followed)"
    assert target.received == []
    settings.OVERSIGHT_WEBHOOK_ALLOWED_HOSTS = []  # the operator closes the loopback
    from annotations.core.services.notices import study_notice

    study_notice(study.pk, "flag.raised", {"item": "i1", "reason": "broken"})
    refused = WebhookDelivery.objects.get(webhook=webhook, event="flag.raised")
    assert "not among the webhook endpoint hosts" in refused.last_error
    assert len(hook.received) == 1  # nothing sent


def test_a_slow_receiver_is_cut_off_and_a_huge_answer_is_never_read(receiver, settings):
    settings.OVERSIGHT_WEBHOOK_TIMEOUT = 1.0
    slow = receiver(delay=5.0)
    huge = receiver(body=b"x" * 50_000_000)
    study = make_study(k=3, n_items=9, open_=False, seed=97)
    slow_hook = webhook_create(study=study, url=slow.url, events=["study.closed"])
    huge_hook = webhook_create(study=study, url=huge.url, events=["study.closed"])
    started = time.monotonic()
    study_close(study=study)
    elapsed = time.monotonic() - started
    assert elapsed < 3.5, elapsed  # 1 s for the slow one, the huge one at once
    cut = WebhookDelivery.objects.get(webhook=slow_hook)
    assert cut.status == "pending" and cut.last_error == "no answer within 1 s"
    assert WebhookDelivery.objects.get(webhook=huge_hook).status == "delivered"


def test_imports_flags_audits_and_final_reports_are_told_without_their_contents(receiver):
    from django.test import Client

    from annotations.audit.services.demo import audit_demo_seed
    from annotations.core.services.flags import flag_item
    from annotations.core.services.import_jobs import import_job_submit
    from annotations.evaluation.models import EvaluationSettings
    from annotations.evaluation.services.tokens import token_create
    from annotations.partitioned.services.routing import query_lease_next
    from tests.factories import specialist

    hook = receiver()
    study = make_study(k=4, n_items=60, systems={"cand": 0.7}, seed=98)
    webhook_create(study=study, url=hook.url, events=[
        "import.finished", "import.failed", "flag.raised", "audit.finished",
        "evaluation.final_report"])
    good = b'{"id": "new1", "text": "Which?", "gold_index": 2}\n'
    bad = b'{"id": "new2", "text": "Which?", "gold": "SECRET-GOLD"}\n'
    import_job_submit(study=study, kind="items", data=good, name="good.jsonl")
    import_job_submit(study=study, kind="items", data=bad, name="bad.jsonl")
    user = specialist(study, 0)
    query = query_lease_next(study=study, user=user)
    flag_item(study=study, user=user, public_id=query.public_id, reason="ambiguous",
              note="PRIVATE NOTE")
    study_simulate(study=study)
    EvaluationSettings.objects.update_or_create(study=study, defaults={"holdout_share": 0.5})
    _, raw = token_create(study=study, name="loop", ladder=False, min_batch=1)
    from assistants.models import Prediction

    predictions = [{"item": p.item.external_id, "index": p.option} for p in
                   Prediction.objects.filter(system__study=study).select_related("item")
                   if p.option is not None]
    response = Client(HTTP_AUTHORIZATION=f"Evaluation {raw}").post(
        f"/api/studies/{study.pk}/evaluations/final/",
        {"candidate": "best", "predictions": predictions}, content_type="application/json")
    assert response.status_code == 201, response.content
    audit_demo_seed(study)
    told = {}
    for _, body in hook.received:
        sent = json.loads(body)
        told.setdefault(sent["event"], []).append(sent["data"])
    assert told["import.finished"][0]["name"] == "good.jsonl"
    assert told["import.finished"][0]["created"] == 1
    assert told["import.failed"] == [{"job": told["import.failed"][0]["job"], "kind": "items",
                                      "name": "bad.jsonl", "problems": 1}]
    assert told["flag.raised"] == [{"item": query.item.external_id, "reason": "ambiguous",
                                    "open_flags": 1}]
    assert told["evaluation.final_report"][0]["candidate"] == "best"
    assert {a["status"] for a in told["audit.finished"]} == {"succeeded"}
    text = b"".join(body for _, body in hook.received).decode()
    assert "SECRET-GOLD" not in text and "PRIVATE NOTE" not in text


def test_a_researcher_registers_a_webhook_in_the_admin_and_reads_its_delivery_log(
        receiver, settings):
    from django.test import Client

    from annotations.core.models import StudyMembership, User
    from annotations.core.services.studies import membership_add

    hook = receiver()
    study = make_study(k=3, n_items=9, open_=False, seed=99)
    researcher = User.objects.create_user("hooks-researcher", password="pw", is_staff=True)
    membership_add(study=study, user=researcher, role=StudyMembership.Role.RESEARCHER)
    client = Client()
    client.force_login(researcher)
    form = {"study": study.pk, "url": "http://10.0.0.8/hook", "events": ["study.closed"],
            "active": "on"}
    refused = client.post("/admin/annotations/webhook/add/", form)
    assert refused.status_code == 200
    assert "is not among the webhook endpoint hosts" in refused.content.decode()
    assert not Webhook.objects.exists()
    saved = client.post("/admin/annotations/webhook/add/", {**form, "url": hook.url})
    assert saved.status_code == 302, saved.content.decode()[:2000]
    webhook = Webhook.objects.get()
    assert webhook.created_by == researcher and webhook.secret.startswith("whsec_")
    page = client.get(f"/admin/annotations/webhook/{webhook.pk}/change/").content.decode()
    assert webhook.secret in page
    study_close(study=study)
    log = client.get("/admin/annotations/webhookdelivery/").content.decode()
    assert "study.closed" in log and "delivered" in log.lower()
    delivery = WebhookDelivery.objects.get()
    client.post("/admin/annotations/webhookdelivery/", {
        "action": "deliver_again", "_selected_action": [delivery.pk]})
    assert len(hook.received) == 2
    stranger = User.objects.create_user("hooks-stranger", password="pw", is_staff=True)
    client.force_login(stranger)
    assert client.get(f"/admin/annotations/webhook/{webhook.pk}/change/").status_code in (
        302, 403, 404)


def test_a_typo_in_the_webhook_hosts_stops_the_server_at_its_checks(settings):
    from annotations.webhooks.services.endpoints import webhook_settings_check

    settings.OVERSIGHT_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.org", "10.0.0.0/33"]
    [error] = webhook_settings_check()
    assert error.id == "oversight.E002" and "'10.0.0.0/33'" in error.msg
    assert "OVERSIGHT_WEBHOOK_ALLOWED_HOSTS" in error.msg
    settings.OVERSIGHT_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.org", "10.0.0.0/8"]
    assert webhook_settings_check() == []
