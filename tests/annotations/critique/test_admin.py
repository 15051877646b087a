"""The critique study's admin page (``annotations/critique/admin.py``): configured where
every study type is, with open/close, the question and AI-output imports (the shared upload
page), the run that writes the missing AI outputs and its runs list."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotations.core.services.studies import membership_add
from annotations.critique.services.studies import critique_settings_update
from annotations.models import CritiqueRun, CritiqueTask, Study
from tests.annotations.critique.helpers import make_critique_study
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _researcher(client, study):
    researcher = UserFactory()
    membership_add(study=study, user=researcher, role="researcher")  # staff with the role
    client.force_login(researcher)
    return researcher


def _admin(name: str, study: Study, *args) -> str:
    return reverse(f"admin:annotations_critiquesettings_{name}", args=[study.pk, *args])


def test_the_old_manage_page_leads_to_the_studys_admin_page(client):
    # issue 17: critique studies were configured on a page of the site, the others in the
    # admin; the old address now leads there
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], open_=False)
    _researcher(client, study)
    response = client.get(f"/studies/{study.pk}/critique/manage/")
    assert response.status_code == 301
    assert response["Location"] == _admin("change", study)


def test_the_studys_admin_page_offers_every_step_of_the_old_manage_page(client):
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai_below",
                                   open_=False)
    critique_settings_update(study=study, ai_base_url="http://127.0.0.1:9/v1", ai_model="m")
    _researcher(client, study)
    html = client.get(_admin("change", study)).content.decode()
    for link in (_admin("import_questions", study), _admin("import_outputs", study),
                 _admin("ai_run", study), _admin("status", study, "open"),
                 reverse("admin:annotations_study_members", args=[study.pk]),
                 reverse("dashboard", args=[study.pk]), reverse("study-export", args=[study.pk])):
        assert f'"{link}' in html, link
    for words in ("Import questions", "Import AI outputs", "Write the missing AI outputs",
                  "Open the study…", "No AI runs yet.", "m at http://127.0.0.1:9/v1"):
        assert words in html, words


def test_a_questions_file_reports_every_problem_in_one_pass_then_imports(client):
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], open_=False)
    _researcher(client, study)
    url = _admin("import_questions", study)
    page = client.get(url).content.decode()
    assert "Rewrite existing ids" not in page  # questions are never rewritten
    bad = SimpleUploadedFile("q.jsonl", b'{"id": "x", "text": "t", "options": ["a"]}\n'
                             b'{"id": "q0", "text": "t", "options": ["a", "b"]}\n'
                             b'{"id": "y", "options": ["a", "b"], "colour": 1}\n')
    response = client.post(url, {"file": bad})
    assert response.status_code == 200
    assert sorted(response.context["errors"]) == [  # every line, every field of a line
        "q.jsonl:1: options: 1 option; a question needs 2 to 26",
        "q.jsonl:2: id: 'q0' is already in the study",
        "q.jsonl:3: colour: unknown field (expected one of domain, gold, id, options, text)",
        "q.jsonl:3: text: missing"]
    assert 'data-testid="import-errors"' in response.content.decode()
    nothing = client.post(url, {})
    assert "file: choose a file to import (CSV or JSONL)." in nothing.content.decode()
    good = SimpleUploadedFile("q.jsonl", b'{"id": "x", "text": "t", "options": ["a", "b"]}\n')
    response = client.post(url, {"file": good}, follow=True)
    # the import page ends on the summary every import shows (issue 27), once
    assert response.redirect_chain[-1][0] == url
    html = response.content.decode()
    assert "Imported q.jsonl:</strong> 1 question added, 0 tasks made" in html
    assert '<td data-testid="created">1</td>' in html
    assert '<td data-testid="updated">0</td>' in html
    assert '<td data-testid="tasks">0</td>' in html
    assert 'data-testid="import-next"' in html and "Back to the study" in html
    assert "import-summary" not in client.get(url).content.decode()


def test_opening_and_closing_ask_first_then_change_the_status(client):
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], open_=False)
    _researcher(client, study)
    confirm = client.get(_admin("status", study, "open")).content.decode()
    assert "Open the study" in confirm and "Back to the study" in confirm
    assert Study.objects.get(pk=study.pk).status == "draft"  # asking changes nothing
    response = client.post(_admin("status", study, "open"), follow=True)
    assert "opened, 2 tasks made." in response.content.decode()
    assert Study.objects.get(pk=study.pk).status == "open"
    assert CritiqueTask.objects.filter(study=study).count() == 2
    client.post(_admin("status", study, "close"))
    assert Study.objects.get(pk=study.pk).status == "closed"
    assert client.get(_admin("status", study, "reopen")).status_code == 404


def test_an_ai_outputs_upload_becomes_a_run_listed_on_the_page(
        client, django_capture_on_commit_callbacks):
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai_below",
                                   open_=False)
    _researcher(client, study)
    upload = SimpleUploadedFile("ai.jsonl", b'{"id": "r1", "question": "q0", "level": 0, '
                                b'"text": "Answer: B"}\n')
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(_admin("import_outputs", study), {"file": upload}, follow=True)
    run = CritiqueRun.objects.get(study=study)
    assert f"Import of ai.jsonl started (run #{run.pk})" in response.content.decode()
    runs = client.get(_admin("runs", study), HTTP_HX_REQUEST="true").content.decode()
    assert f'data-run="{run.pk}"' in runs


def test_other_researchers_and_staff_may_not_use_the_pages(client):
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], open_=False)
    other, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], open_=False,
                                   name="other")
    _researcher(client, other)
    for name, args in (("change", ()), ("import_questions", ()), ("import_outputs", ()),
                       ("runs", ()), ("status", ("open",))):
        assert client.get(_admin(name, study, *args)).status_code in (302, 403, 404), name
    assert client.post(_admin("status", study, "open")).status_code == 403
    assert Study.objects.get(pk=study.pk).status == "draft"
