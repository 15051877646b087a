"""The annotator's critique pages through the client: the task shown (inputs in the
recorded order, the chain, no author or gold), answering, incomplete answers kept,
expired and foreign leases refused, permissions."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from annotations.models import CritiqueOutput, CritiqueTask
from tests.annotations.critique.helpers import answer_next, make_critique_study

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_minimum(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0


def _fill_level(study, users, level):
    """Answer every task up to ``level`` (cycling through the annotators)."""
    progress = True
    while progress:
        progress = False
        for user in users:
            task = CritiqueTask.objects.filter(study=study, level__lt=level + 1,
                                               status="pending").exists()
            if not task:
                return
            t, _ = answer_next(study, user, final=1, choice="second")
            progress = progress or t is not None


def test_work_page_shows_a_critique_task_without_authors_or_gold(client):
    study, users = make_critique_study(n_questions=1, top_level=2, counts=[2, 2, 1],
                                       n_annotators=6)
    _fill_level(study, users, 1)
    outputs = CritiqueOutput.objects.filter(study=study)
    assert outputs.filter(level=1).count() == 2
    writer_ids = set(outputs.values_list("author_id", flat=True))
    free = [u for u in users if u.pk not in writer_ids]
    client.force_login(free[0])
    response = client.post(reverse("critique-next", args=[study.pk]), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    task = CritiqueTask.objects.get(holder=free[0])
    assert task.level == 2
    assert 'data-testid="chain-level"' in html  # the responses below the two critiques
    first = re.search(r'data-testid="input-first".*?data-name="([^"]+)"', html, re.S).group(1)
    assert first == ("Critique A" if task.first.slot == 0 else "Critique B")
    for user in users:
        assert user.username not in html
    assert "gold" not in html.lower()


def _login_next(client, study, user):
    client.force_login(user)
    return client.post(reverse("critique-next", args=[study.pk]), HTTP_HX_REQUEST="true")


def test_an_answer_through_the_page_is_stored_and_the_next_task_follows(client):
    study, users = make_critique_study(n_questions=2, top_level=1, counts=[2, 1])
    _login_next(client, study, users[0])
    task = CritiqueTask.objects.get(holder=users[0], status="leased")
    response = client.post(reverse("critique-submit", args=[study.pk, task.public_id]),
                           {"reasoning": "B because.", "final": "1", "confidence": "4"},
                           HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert 'data-testid="recorded"' in html and "final answer B" in html
    output = CritiqueOutput.objects.get(task=task)
    assert (output.final, output.confidence, output.reasoning) == (1, 4, "B because.")
    assert CritiqueTask.objects.filter(holder=users[0], status="leased").exists()  # the next


def test_an_incomplete_answer_keeps_what_was_typed_and_says_what_is_missing(client):
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    _login_next(client, study, users[0])
    task = CritiqueTask.objects.get(holder=users[0])
    response = client.post(reverse("critique-submit", args=[study.pk, task.public_id]),
                           {"reasoning": "A long thought I must not lose.", "final": "2"},
                           HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert "A long thought I must not lose." in html
    assert "Rate your confidence from 1 to 5." in html
    assert 'value="2" data-key-final="c" checked' in html
    assert not CritiqueOutput.objects.exists()


def test_an_expired_lease_says_so_and_records_nothing(client):
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    _login_next(client, study, users[0])
    task = CritiqueTask.objects.get(holder=users[0])
    CritiqueTask.objects.filter(pk=task.pk).update(
        lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
    response = client.post(reverse("critique-submit", args=[study.pk, task.public_id]),
                           {"reasoning": "late", "final": "0", "confidence": "3"},
                           HTTP_HX_REQUEST="true")
    assert "Your time on this task ran out" in response.content.decode()
    assert not CritiqueOutput.objects.exists()


def test_a_task_leased_to_someone_else_cannot_be_answered_through_the_page(client):
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    _login_next(client, study, users[0])
    task = CritiqueTask.objects.get(holder=users[0])
    client.force_login(users[1])
    response = client.post(reverse("critique-submit", args=[study.pk, task.public_id]),
                           {"reasoning": "stolen", "final": "0", "confidence": "3"},
                           HTTP_HX_REQUEST="true")
    assert "not leased to you" in response.content.decode()
    assert not CritiqueOutput.objects.exists()
    task.refresh_from_db()
    assert task.holder_id == users[0].pk


def test_the_lease_line_never_extends_the_time_limit(client):
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    _login_next(client, study, users[0])
    task = CritiqueTask.objects.get(holder=users[0])
    response = client.post(reverse("critique-lease", args=[study.pk, task.public_id]),
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    before = task.lease_expires_at
    task.refresh_from_db()
    assert task.lease_expires_at == before
    client.force_login(users[1])
    assert client.post(reverse("critique-lease", args=[study.pk, task.public_id])
                       ).status_code == 409


@pytest.mark.parametrize(("role", "work", "dashboard", "manage"), [
    (None, 403, 403, 302), ("annotator", 200, 403, 302), ("manager", 403, 200, 302),
    ("researcher", 403, 200, 200)])
def test_page_permissions(client, role, work, dashboard, manage):
    from annotations.core.services.studies import membership_add
    from tests.factories import UserFactory

    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    user = UserFactory()
    if role:
        membership_add(study=study, user=user, role=role)
    client.force_login(user)
    assert client.get(reverse("critique-work", args=[study.pk])).status_code == work
    assert client.get(reverse("critique-dashboard", args=[study.pk])).status_code == dashboard
    # the study's admin page (the others: to the admin's sign-in, as they are not staff)
    assert client.get(reverse("admin:annotations_critiquesettings_change",
                              args=[study.pk])).status_code == manage
    # issue 17: managers download the raw exports as they read the dashboard
    assert client.get(reverse("critique-export", args=[study.pk])).status_code == dashboard


def test_the_dashboard_shows_every_table_and_polls_with_204(client):
    from annotations.core.services.studies import membership_add
    from annotations.critique.services.analysis import critique_recompute
    from tests.factories import UserFactory

    study, users = make_critique_study(n_questions=2, top_level=1, counts=[3, 2])
    for _ in range(6):
        for user in users:
            answer_next(study, user, final=0)
    snapshot = critique_recompute(study_id=study.pk)
    manager = UserFactory()
    membership_add(study=study, user=manager, role="manager")
    client.force_login(manager)
    html = client.get(reverse("critique-dashboard", args=[study.pk])).content.decode()
    for testid in ("progress", "level-table", "effort-table", "input-pair-table",
                   "choice-table"):
        assert f'data-testid="{testid}"' in html
    assert 'data-testid="downloads"' not in html  # exports are the researchers'
    for user in users:
        assert user.username not in html
    url = reverse("critique-dashboard", args=[study.pk])
    from annotations.core.selectors import study_recompute_health

    token = study_recompute_health(study=study).token
    poll = client.get(url, {"since": snapshot.pk, "health": token}, HTTP_HX_REQUEST="true")
    assert poll.status_code == 204
    critique_recompute(study_id=study.pk)
    poll = client.get(url, {"since": snapshot.pk, "health": token}, HTTP_HX_REQUEST="true")
    assert poll.status_code == 200 and 'id="live"' in poll.content.decode()



def test_the_api_leases_and_answers(client):
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    client.force_login(users[0])
    response = client.post(reverse("api-critique-next", args=[study.pk]))
    assert response.status_code == 200
    data = response.json()
    assert data["level"] == 0 and data["first"] is None and len(data["options"]) == 4
    bad = client.post(reverse("api-critique-answer", args=[data["id"]]),
                      {"reasoning": "x", "final": 9, "confidence": 3},
                      content_type="application/json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_answer"
    ok = client.post(reverse("api-critique-answer", args=[data["id"]]),
                     {"reasoning": "x", "final": 1, "confidence": 3},
                     content_type="application/json")
    assert ok.status_code == 201 and ok.json()["final"] == 1
    # a retried request (its response lost) gets the stored answer: 200, nothing new
    again = client.post(reverse("api-critique-answer", args=[data["id"]]),
                        {"reasoning": "x", "final": 1, "confidence": 3},
                        content_type="application/json")
    assert again.status_code == 200 and again.json()["final"] == 1
    assert CritiqueOutput.objects.filter(task__public_id=data["id"]).count() == 1
    other = client.post(reverse("api-critique-answer", args=[data["id"]]),
                        {"reasoning": "x", "final": 2, "confidence": 3},
                        content_type="application/json")
    assert other.status_code == 409 and other.json()["code"] == "already_answered"
    client.force_login(users[1])  # not theirs: refused whatever they send
    theirs = client.post(reverse("api-critique-answer", args=[data["id"]]),
                         {"reasoning": "x", "final": 1, "confidence": 3},
                         content_type="application/json")
    assert theirs.status_code == 403


def test_skipping_on_the_page_and_through_the_api(client):
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1],
                                       n_annotators=2)
    client.force_login(users[0])
    page = client.get(reverse("critique-work", args=[study.pk]))
    client.post(reverse("critique-next", args=[study.pk]), HTTP_HX_REQUEST="true")
    task = CritiqueTask.objects.get(holder=users[0])
    html = client.get(reverse("critique-work", args=[study.pk])).content.decode()
    assert reverse("critique-skip", args=[study.pk, task.public_id]) in html
    assert 'hx-confirm="Skip this task?' in html and page.status_code == 200
    # the page: skipped, and the next task (the other response slot) in the same answer
    swapped = client.post(reverse("critique-skip", args=[study.pk, task.public_id]),
                          HTTP_HX_REQUEST="true").content.decode()
    assert "Skipped: the task went back to the pool for someone else" in swapped
    assert 'data-testid="skipped-count">1<' in swapped
    following = CritiqueTask.objects.get(holder=users[0], status="leased")
    assert following.pk != task.pk and following.public_id in swapped
    # skipping a task that is not yours says why, and keeps your own lease on the page
    refused = client.post(reverse("critique-skip", args=[study.pk, task.public_id]),
                          HTTP_HX_REQUEST="true").content.decode()
    assert "This task is not leased to you." in refused
    assert following.public_id in refused
    # the API: 204, then the task is back in the pool and no longer the caller's
    api = client.post(reverse("api-critique-skip", args=[following.public_id]))
    assert api.status_code == 204
    again = client.post(reverse("api-critique-skip", args=[following.public_id]))
    assert (again.status_code, again.json()["code"]) == (403, "not_lease_holder")
    client.force_login(users[1])
    data = client.post(reverse("api-critique-next", args=[study.pk])).json()
    assert data["id"] in {task.public_id, following.public_id}


def test_the_api_next_task_in_bounded_statements(client, django_assert_max_num_queries):
    """Settings, study and membership in one read; current lease; the level state; the
    lease with both audit rows in one INSERT (rendered with it: no separate stamp); the
    question — plus the session's user and the lease's SAVEPOINT and RELEASE."""
    study, users = make_critique_study(n_questions=2, top_level=1, counts=[2, 1])
    client.force_login(users[0])
    with django_assert_max_num_queries(10):
        data = client.post(reverse("api-critique-next", args=[study.pk])).json()
    task = CritiqueTask.objects.get(public_id=data["id"])
    assert task.rendered_at == task.issued_at
    assert list(task.events.values_list("kind", flat=True).order_by("pk"))[-2:] == [
        "issued", "rendered"]


def test_researchers_add_annotators_on_the_members_page(client):
    from annotations.models import StudyMembership

    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], open_=False)
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("boss", password="pw")
    client.force_login(admin)
    url = reverse("admin:annotations_study_members", args=[study.pk])
    page = client.get(url).content.decode()
    assert 'value="annotator"' in page and 'value="specialist"' not in page
    data = {"members-TOTAL_FORMS": "1", "members-INITIAL_FORMS": "0",
            "members-0-username": "newcritic", "members-0-role": "annotator"}
    assert client.post(url, data).status_code == 200
    assert StudyMembership.objects.filter(study=study, user__username="newcritic",
                                          role="annotator").exists()


def test_the_study_list_actions_open_a_critique_study_too():
    from annotations.core.services.studies import study_close, study_open

    study, _ = make_critique_study(n_questions=2, top_level=1, counts=[3, 1], open_=False)
    assert study_open(study=study) == 6
    study_close(study=study)
    study.refresh_from_db()
    assert study.status == "closed"


def test_annotators_never_see_authors_models_raw_text_or_gold(client):
    from annotations.critique.services.ai_outputs import critique_ai_outputs_import
    from tests.annotations.critique.helpers import jsonl

    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1],
                                       mode="ai_below")
    critique_ai_outputs_import(study=study, name="ai.jsonl", source=jsonl([
        {"id": "ai-output-one", "question": "q0", "level": 0, "model": "secret-model-x",
         "text": "Reasoning one.\nAnswer: B"},
        {"id": "ai-output-two", "question": "q0", "level": 0, "model": "secret-model-x",
         "text": "Reasoning two.\nFinal answer: (C)"}]))
    client.force_login(users[0])
    html = _login_next(client, study, users[0]).content.decode()
    api = client.post(reverse("api-critique-next", args=[study.pk])).content.decode()
    for text in (html, api):
        assert "Reasoning one." in text and "Reasoning two." in text
        for hidden in ("secret-model-x", "Final answer: (C)", "ai-output-one", "gold"):
            assert hidden not in text, hidden
    gold = CritiqueOutput.objects.get(external_id="ai-output-one").question.gold
    assert f'"gold": {gold}' not in api


def test_researchers_create_a_critique_study_in_the_admin(client):
    from django.contrib.auth import get_user_model

    from annotations.models import CritiqueSettings, Study

    staff = get_user_model().objects.create_user("res", password="pw", is_staff=True)
    client.force_login(staff)
    url = reverse("admin:annotations_critiquesettings_add")
    form = {"name": "From the admin", "description": "", "guidelines": "",
            "top_level": "2", "counts": "", "mode": "humans", "time_limit_minutes": "15",
            "response_system": "", "response_template": "Q {{question}} {{options}}",
            "critique_system": "", "critique_template": "{{question}} {{options}} "
            "{{first}} {{wrong}}", "ai_base_url": "http://127.0.0.1:8000/v1",
            "ai_model": "qwen-72b", "ai_api_key": "sk-typed-once"}
    page = client.post(url, form).content.decode()
    assert "unknown placeholder" in page and not Study.objects.filter(
        name="From the admin").exists()
    form["critique_template"] = "{{question}} {{options}} {{first}} {{second}}"
    response = client.post(url, form)
    study = Study.objects.get(name="From the admin")
    assert response.status_code == 302 and study.kind == "critique"
    settings = CritiqueSettings.objects.get(study=study)
    assert (settings.counts, settings.time_limit_minutes) == ([7, 5, 3], 15)
    # the endpoint typed in when creating is kept (it used to be dropped)
    assert (settings.ai_base_url, settings.ai_model, settings.ai_api_key) == (
        "http://127.0.0.1:8000/v1", "qwen-72b", "sk-typed-once")
    assert study.memberships.filter(user=staff, role="researcher").exists()
    change = reverse("admin:annotations_critiquesettings_change", args=[study.pk])
    page = client.get(change)
    assert page.status_code == 200
    # the key is write-only: never on the page; left empty it stays, typed it changes
    html = page.content.decode()
    assert "sk-typed-once" not in html and 'name="ai_api_key"' in html
    edit = {k: v for k, v in form.items() if k not in ("name", "description", "guidelines")}
    edit["critique_template"] = "{{question}} {{options}} {{first}} {{second}}"
    for typed, kept in (("", "sk-typed-once"), ("sk-rotated", "sk-rotated")):
        assert client.post(change, {**edit, "ai_api_key": typed, "ai_model": "qwen-110b"}) \
            .status_code == 302
        settings.refresh_from_db()
        assert (settings.ai_api_key, settings.ai_model) == (kept, "qwen-110b")


def test_undo_on_the_page_and_through_the_api(client, settings):
    # issue 17: annotators had no undo of their last answer
    settings.OVERSIGHT_UNDO_SECONDS = 30
    study, users = make_critique_study(n_questions=2, top_level=1, counts=[3, 1])
    client.force_login(users[0])
    data = client.post(reverse("api-critique-next", args=[study.pk])).json()
    client.post(reverse("api-critique-answer", args=[data["id"]]),
                {"reasoning": "x", "final": 1, "confidence": 3},
                content_type="application/json")
    page = client.get(reverse("critique-work", args=[study.pk])).content.decode()
    assert "Undo last answer" in page
    back = client.post(reverse("critique-undo", args=[study.pk]),
                       HTTP_HX_REQUEST="true").content.decode()
    assert "Undone: your last answer was taken back" in back and data["id"] in back
    assert ">x</textarea>" in back  # the reasoning taken back is in the form again
    refused = client.post(reverse("api-critique-undo", args=[study.pk]))
    assert refused.status_code == 409 and refused.json()["code"] == "undo_refused"
    client.post(reverse("api-critique-answer", args=[data["id"]]),
                {"reasoning": "y", "final": 2, "confidence": 3},
                content_type="application/json")
    again = client.post(reverse("api-critique-undo", args=[study.pk]))
    assert again.status_code == 200 and again.json()["id"] == data["id"]
