"""Recruitment links (``core.recruitment``): Prolific, MTurk and generic arrivals, the same id
reaching the same account, consent, screening, limits, completion only when the work is
done, returning and timing out (leases back at once), the gate on a participant's session,
framing for MTurk only, and every bad arrival refused with a page that changes nothing."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

import pytest
from django.urls import reverse
from django.utils import timezone

from annotations.core.recruitment.platforms import link_problems
from annotations.core.recruitment.services import participants_time_out
from annotations.models import Participant, Query, RecruitmentLink, StudyMembership, User
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.factories import make_study

pytestmark = pytest.mark.django_db

PID, PID2 = "5f0c" + "a" * 20, "5f0c" + "b" * 20
SESSION, SESSION2 = "6a1d" + "c" * 20, "6a1d" + "d" * 20
STUDY_ID = "7b2e" + "e" * 20


def _link(study, platform="prolific", **kwargs) -> RecruitmentLink:
    defaults = {"name": "pilot", "completion_code": "C0MPL3TE", "max_tasks": 3}
    if platform == "generic":
        defaults.update(id_parameter="pid", completion_url="https://panel.example/done?c={code}"
                                                          "&who={participant}")
    return RecruitmentLink.objects.create(study=study, platform=platform,
                                          **{**defaults, **kwargs})


def _prolific(link, pid=PID, session=SESSION, **extra) -> str:
    query = {"PROLIFIC_PID": pid, "STUDY_ID": STUDY_ID, "SESSION_ID": session, **extra}
    return reverse("join", args=[link.token]) + "?" + urlencode(query)


def _arrive(client, link, **kwargs):
    return client.get(_prolific(link, **kwargs))


def _work(participant: Participant, n: int) -> None:
    user = participant.user
    for _ in range(n):
        q = query_lease_next(study=participant.study, user=user)
        label_submit(query_id=q.pk, user=user, answer="no")


@pytest.fixture
def study():
    return make_study(k=2, n_items=20, systems={"sys": 0.75})


def test_a_prolific_participant_walks_from_the_link_to_the_completion_url(client, study):
    link = _link(study)
    response = _arrive(client, link)
    assert response.status_code == 302 and response["Location"].endswith("/step/")
    participant = Participant.objects.get()
    assert (participant.external_id, participant.session_id, participant.platform_study) == (
        PID, SESSION, STUDY_ID)
    membership = StudyMembership.objects.get(user=participant.user)
    assert membership.role == "specialist" and membership.study_class is not None
    assert not participant.user.has_usable_password()
    page = client.get(reverse("join-step", args=[link.token]))
    assert b'data-testid="consent"' in page.content
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    participant.refresh_from_db()
    assert participant.status == "working" and participant.deadline is None
    step = client.get(reverse("join-step", args=[link.token]))
    assert step["Location"] == reverse("label", args=[study.pk])
    early = client.get(reverse("join-complete", args=[link.token]))
    assert early.status_code == 409 and b"0 of 3" in early.content
    assert b"C0MPL3TE" not in early.content
    _work(participant, 3)
    done = client.get(reverse("join-step", args=[link.token]))
    assert b'data-testid="complete"' in done.content
    assert not Query.objects.filter(holder=participant.user, status="leased").exists()
    back = client.get(reverse("join-complete", args=[link.token]))
    assert back["Location"] == "https://app.prolific.com/submissions/complete?cc=C0MPL3TE"
    participant.refresh_from_db()
    assert participant.status == "completed"


def test_the_same_id_reaches_the_same_account_never_a_second(client, study):
    link = _link(study)
    _arrive(client, link)
    _arrive(client, link)  # a second tab, or the link opened again
    client.logout()
    _arrive(client, link, session=SESSION2)  # a new Prolific session of the same person
    assert Participant.objects.count() == 1 and User.objects.filter(
        username__startswith="prolific-").count() == 1
    assert Participant.objects.get().session_id == SESSION2


@pytest.mark.parametrize(("query", "problems"), [
    ({}, ["PROLIFIC_PID", "STUDY_ID", "SESSION_ID"]),
    ({"PROLIFIC_PID": PID, "STUDY_ID": STUDY_ID}, ["SESSION_ID"]),
    ({"PROLIFIC_PID": "<script>alert(1)</script>", "STUDY_ID": STUDY_ID,
      "SESSION_ID": SESSION}, ["PROLIFIC_PID"]),
    ({"PROLIFIC_PID": "a" * 65, "STUDY_ID": "x;drop", "SESSION_ID": SESSION},
     ["PROLIFIC_PID", "STUDY_ID"]),
])
def test_forged_or_missing_parameters_get_a_page_naming_each_and_change_nothing(
        client, study, query, problems):
    link = _link(study)
    response = client.get(reverse("join", args=[link.token]) + "?" + urlencode(query))
    assert response.status_code == 400
    page = response.content.decode()
    for name in problems:
        assert name in page
    assert "<script>alert" not in page
    assert not Participant.objects.exists() and not User.objects.filter(
        username__startswith="prolific").exists()


def test_a_session_id_another_participant_used_is_refused(client, study):
    link = _link(study)
    _arrive(client, link)
    client.logout()
    response = _arrive(client, link, pid=PID2)
    assert response.status_code == 409 and b"already used" in response.content
    assert Participant.objects.count() == 1


def test_a_full_link_or_a_closed_study_turns_new_people_away(client, study):
    link = _link(study, max_participants=1)
    _arrive(client, link)
    client.logout()
    full = _arrive(client, link, pid=PID2, session=SESSION2)
    assert full.status_code == 409 and b"full" in full.content
    assert Participant.objects.count() == 1
    link.active = False
    link.save()
    client.logout()
    closed = _arrive(client, link, pid="9" * 24, session="8" * 24)
    assert closed.status_code == 410 and Participant.objects.count() == 1
    unknown = client.get(reverse("join", args=["nope"]))
    assert unknown.status_code == 404


def test_the_screening_quiz_screens_out_with_the_platforms_code(client, study):
    link = _link(study, screened_out_code="SCR33N", quiz=[
        {"question": "Is 2 even?", "options": ["yes", "no"], "answer": 0}], quiz_attempts=2)
    _arrive(client, link)
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    assert b'data-testid="screening"' in client.get(
        reverse("join-step", args=[link.token])).content
    client.post(reverse("join-quiz", args=[link.token]), {"q0": "1"})
    again = client.get(reverse("join-step", args=[link.token]))
    assert b'data-testid="quiz-wrong"' in again.content  # one attempt left
    client.post(reverse("join-quiz", args=[link.token]), {"q0": "1"})
    out = client.get(reverse("join-step", args=[link.token]))
    assert b"https://app.prolific.com/submissions/complete?cc=SCR33N" in out.content
    assert Participant.objects.get().status == "screened_out"
    # nothing of the study is reachable now
    assert client.get(reverse("label", args=[study.pk]))["Location"].endswith("/step/")


def test_returning_and_timing_out_release_the_leases_at_once(client, study):
    link = _link(study, time_limit_minutes=5)
    _arrive(client, link)
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    participant = Participant.objects.get()
    assert participant.deadline is not None
    held = query_lease_next(study=study, user=participant.user)
    Participant.objects.filter(pk=participant.pk).update(
        deadline=timezone.now() - dt.timedelta(seconds=1))
    assert participants_time_out() == 1
    held.refresh_from_db()
    assert held.status == "pending" and Participant.objects.get().status == "timed_out"

    client.logout()
    _arrive(client, link, pid=PID2, session=SESSION2)
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    second = Participant.objects.get(external_id=PID2)
    held = query_lease_next(study=study, user=second.user)
    client.post(reverse("join-return", args=[link.token]))
    held.refresh_from_db()
    assert held.status == "pending" and Participant.objects.get(pk=second.pk).status == "returned"


def test_a_participant_session_reaches_only_its_study_while_working(client, study):
    other = make_study(k=2, n_items=4)
    link = _link(study)
    _arrive(client, link)
    step = reverse("join-step", args=[link.token])
    assert client.get(reverse("label", args=[study.pk]))["Location"] == step  # not consented
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    assert client.get(reverse("label", args=[study.pk])).status_code == 200
    for path in (reverse("home"), reverse("label", args=[other.pk]), "/admin/"):
        assert client.get(path)["Location"] == step
    # the study's other pages answer as to any specialist
    assert client.get(reverse("dashboard", args=[study.pk])).status_code == 403
    htmx = client.get(reverse("home"), HTTP_HX_REQUEST="true")
    assert htmx["HX-Redirect"] == step


def test_mturk_preview_has_no_account_and_only_mturk_may_frame_its_pages(client, study):
    link = _link(study, platform="mturk", completion_code="")
    url = reverse("join", args=[link.token])
    preview = client.get(url + "?" + urlencode({"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE",
                                                "hitId": "3HIT"}))
    assert preview.status_code == 200 and b'data-testid="mturk-preview"' in preview.content
    assert not Participant.objects.exists()
    csp = preview["Content-Security-Policy"]
    assert "frame-ancestors https://www.mturk.com https://workersandbox.mturk.com" in csp
    assert "X-Frame-Options" not in preview
    forged = client.get(url + "?" + urlencode({
        "assignmentId": "3ASSIGN", "hitId": "3HIT", "workerId": "A1WORKER",
        "turkSubmitTo": "https://evil.example"}))
    assert forged.status_code == 400 and b"turkSubmitTo" in forged.content
    arrived = client.get(url + "?" + urlencode({
        "assignmentId": "3ASSIGN", "hitId": "3HIT", "workerId": "A1WORKER",
        "turkSubmitTo": "https://workersandbox.mturk.com"}))
    assert arrived.status_code == 302
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    work = client.get(reverse("label", args=[study.pk]))
    assert "frame-ancestors https://www.mturk.com" in work["Content-Security-Policy"]
    _work(Participant.objects.get(), 3)
    done = client.get(reverse("join-complete", args=[link.token]))
    assert b'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in done.content
    assert "https://workersandbox.mturk.com" in done["Content-Security-Policy"].split(
        "form-action")[1]
    # a page of anyone else keeps frame-ancestors 'none'
    client.logout()
    assert "frame-ancestors 'none'" in client.get(reverse("login"))["Content-Security-Policy"]


def test_a_generic_link_reads_its_own_parameter_and_fills_the_completion_url(client, study):
    link = _link(study, platform="generic")
    url = reverse("join", args=[link.token])
    assert client.get(url + "?participant=someone").status_code == 400  # not its parameter
    assert client.get(url + "?pid=ann%40panel").status_code == 302
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    _work(Participant.objects.get(), 3)
    back = client.get(reverse("join-complete", args=[link.token]))
    assert back["Location"] == "https://panel.example/done?c=C0MPL3TE&who=ann%40panel"


def test_declining_consent_ends_the_session_without_work(client, study):
    link = _link(study)
    _arrive(client, link)
    client.post(reverse("join-consent", args=[link.token]), {"agree": "no"})
    assert Participant.objects.get().status == "declined"
    assert client.get(reverse("join-complete", args=[link.token])).status_code == 409


def test_a_links_settings_are_checked_by_field(study):
    assert link_problems(RecruitmentLink(study=study, platform="prolific")) == {
        "completion_code": "Prolific needs the study's completion code."}
    problems = link_problems(RecruitmentLink(
        study=study, platform="generic", id_parameter="a b", completion_url="http://x.example",
        completion_code="no spaces", quiz=[{"question": "q", "options": ["a"], "answer": 0}]))
    assert set(problems) == {"id_parameter", "completion_url", "completion_code", "quiz"}


def test_a_researcher_makes_a_link_in_the_admin_and_reads_its_entry_url(client, study):
    from tests.annotations.core.review_helpers import researcher_of

    client.force_login(researcher_of(study))
    url = reverse("admin:annotations_recruitmentlink_add")
    base = {"study": study.pk, "platform": "prolific", "name": "pilot", "active": "on",
            "quiz": "", "quiz_attempts": 1, "max_tasks": 5, "currency": "GBP",
            "base_pay": "0", "bonus_per_correct": "0", "bonus_min_checks": 0,
            "bonus_min_accuracy": 0,
            "participants-TOTAL_FORMS": 0, "participants-INITIAL_FORMS": 0}
    refused = client.post(url, base)
    assert refused.status_code == 200
    assert "Prolific needs the study&#x27;s completion code." in refused.content.decode()
    assert not RecruitmentLink.objects.exists()
    saved = client.post(url, {**base, "completion_code": "C0DE"})
    assert saved.status_code == 302
    link = RecruitmentLink.objects.get()
    assert link.quiz == [] and link.created_by is not None
    page = client.get(reverse("admin:annotations_recruitmentlink_change", args=[link.pk]))
    assert (f"/join/{link.token}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
            in page.content.decode())


def _completed(client, link, pid, session, answers=("no", "no", "no")):
    """A participant of ``link`` (partitioned study) who answered and completed; an answer
    "truth" is the right one (a quality check's gold)."""
    client.logout()
    client.get(_prolific(link, pid=pid, session=session))
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    participant = Participant.objects.get(external_id=pid)
    for answer in answers:
        q = query_lease_next(study=participant.study, user=participant.user)
        if answer == "truth":
            answer = "yes" if q.item.position_of(q.item.gold_option) == q.k else "no"
        label_submit(query_id=q.pk, user=participant.user, answer=answer)
    client.get(reverse("join-complete", args=[link.token]))
    participant.refresh_from_db()
    return participant


def test_the_ledger_records_each_payment_once_and_exports_prolifics_bulk_bonus(client):
    from decimal import Decimal

    from annotations.core.recruitment.payments import (
        NothingOwed,
        payments_owed,
        payments_record,
        prolific_bonus_lines,
    )
    from tests.annotations.core.review_helpers import researcher_of

    study = make_study(k=2, n_items=40, checks=30, gold_rate=0.5, seed=3)
    link = _link(study, base_pay=Decimal("2.50"), bonus_per_correct=Decimal("0.10"),
                 max_tasks=6)
    one = _completed(client, link, PID, SESSION, answers=("truth",) * 6)
    researcher = researcher_of(study)
    owed = {o.participant.pk: o for o in payments_owed(link)}[one.pk]
    checks = Query.objects.filter(answered_by=one.user, is_quality_check=True).exclude(
        qc_correct=None)
    assert owed.checked == checks.count()
    assert owed.bonus == Decimal("0.10") * checks.filter(qc_correct=True).count()
    assert owed.base == Decimal("2.50")
    batch = payments_record(link=link, by=researcher)
    first = prolific_bonus_lines(batch)
    assert owed.bonus > 0 and first == f"{PID},{owed.bonus:.2f}\n"
    with pytest.raises(NothingOwed):  # the same payments twice: nothing new
        payments_record(link=link, by=researcher)
    assert prolific_bonus_lines(batch) == first  # the same export twice: the same rows
    # a second participant completes: the next batch holds only them
    two = _completed(client, link, PID2, SESSION2, answers=("no",) * 6)
    second = payments_record(link=link, by=researcher)
    assert set(second.payments.values_list("participant", flat=True)) == {two.pk}
    client.force_login(researcher)
    page = client.get(reverse("payments", args=[study.pk]))
    assert page.status_code == 200 and page.content.count(b'data-testid="owed-row"') == 2
    csv_body = client.get(reverse("payments-batch", args=[study.pk, batch.pk, "csv"]))
    assert csv_body.content.decode() == first
    again = client.post(reverse("payments-record", args=[study.pk, link.pk]), follow=True)
    assert b"Nothing is owed" in again.content


def test_an_excluded_worker_earns_no_bonus(client):
    from decimal import Decimal

    from annotations.core.recruitment.payments import payments_owed
    from annotations.core.reviews.exclusions import exclusion_add
    from tests.annotations.core.review_helpers import researcher_of

    study = make_study(k=2, n_items=40, checks=30, gold_rate=0.5, seed=3)
    link = _link(study, bonus_per_correct=Decimal("1.00"), max_tasks=6)
    one = _completed(client, link, PID, SESSION, answers=("truth",) * 6)
    assert payments_owed(link)[0].bonus > 0
    exclusion_add(study=study, by=researcher_of(study), kind="worker", worker_id=one.user_id,
                  reason="copied answers")
    assert payments_owed(link)[0].bonus == Decimal("0.00")


def test_sending_goes_only_to_the_operators_prolific_url_and_only_once(client, settings):
    import http.server
    import json
    import threading
    from decimal import Decimal

    from annotations.core.recruitment.payments import (
        NotSendable,
        batch_send,
        payments_record,
    )
    from tests.annotations.core.review_helpers import researcher_of

    seen = []

    class Prolific(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, self.headers["Authorization"], body))
            answer = json.dumps({"id": "bb42"}).encode()
            self.send_response(201)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Prolific)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.OVERSIGHT_PROLIFIC_API_URL = f"http://127.0.0.1:{server.server_port}"
    study = make_study(k=2, n_items=40, checks=30, gold_rate=0.5, seed=3)
    link = _link(study, bonus_per_correct=Decimal("1.00"), max_tasks=6)
    _completed(client, link, PID, SESSION, answers=("truth",) * 6)
    batch = payments_record(link=link, by=researcher_of(study))
    assert batch.payments.filter(kind="bonus").exists()  # right answers to checks
    settings.OVERSIGHT_PROLIFIC_TOKEN = ""
    with pytest.raises(NotSendable, match="OVERSIGHT_PROLIFIC_TOKEN"):
        batch_send(batch=batch)
    settings.OVERSIGHT_PROLIFIC_TOKEN = "operator-key"
    try:
        batch_send(batch=batch)
        assert [p for p, _, _ in seen] == ["/api/v1/submissions/bonus-payments/",
                                           "/api/v1/bulk-bonus-payments/bb42/pay/"]
        assert seen[0][1] == "Token operator-key"
        body = json.loads(seen[0][2])
        assert body["study_id"] == STUDY_ID and body["csv_bonuses"].startswith(PID)
        with pytest.raises(NotSendable, match="already sent"):
            batch_send(batch=batch)
        assert len(seen) == 2
    finally:
        server.shutdown()
