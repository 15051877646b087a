"""Every successful import ends on the same summary (issue 27): created, updated, the
import's own rows and what to do next, from one helper (``import_jobs.import_summary``)
through one template (``templates/imports/_summary.html``) — items and predictions (their
job's page), sentences and traces, critique questions (their import page, once), critique
AI outputs (the run on the study's page) and audit files (their job's page). Before, only
the partitioned jobs showed created and updated; the others said one line in a message, or
nothing but a progress line."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotations.core.services.studies import membership_add
from tests.annotations.assisted.helpers import make_assisted_study, marked_trace
from tests.annotations.audit.helpers import (
    commitments_file,
    datapoints_file,
    liar,
    make_audit_study,
    make_rubric,
)
from tests.annotations.critique.helpers import make_critique_study
from tests.factories import UserFactory, make_study, role_user

pytestmark = pytest.mark.django_db


def _summary(html: str) -> dict:
    """The summary block's figures as the page shows them."""
    block = html.split('data-testid="import-summary"')[1].split("</section>")[0]
    cells = dict(re.findall(r'<td data-testid="([\w-]+)">([^<]*)</td>', block))
    nxt = re.search(r'data-testid="import-next"><strong>Next:</strong> ([^<]*)</p>', block)
    return {**cells, "next": nxt.group(1) if nxt else None,
            "title": re.search(r"<strong>(Imported [^<]*)</strong>", block).group(1)}


def _lines(*records: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _post(client, url: str, name: str, data: bytes, **extra):
    return client.post(url, {"file": SimpleUploadedFile(name, data), **extra}, follow=True)


def test_items_and_predictions_end_on_the_summary():
    study = make_study(k=3, n_items=0, open_=False, seed=5)
    from django.test import Client

    client = Client()
    client.force_login(role_user(study, "researcher"))
    items = _lines(*({"id": f"n{i}", "text": f"t{i}", "gold": "C0"} for i in range(3)))
    got = _summary(_post(client, reverse("admin:annotations_study_import_items",
                                         args=[study.pk]), "i.jsonl", items
                         ).content.decode())
    assert got["title"] == "Imported i.jsonl:"
    assert (got["created"], got["updated"], got["unchanged"]) == ("3", "0", "0")
    assert got["next"].startswith("Import the AI predictions of these items")
    predictions = _lines({"item_id": "n0", "system": "m", "prediction": "C0"},
                         {"item_id": "n1", "system": "m", "prediction": "nope"})
    got = _summary(_post(client, reverse("admin:annotations_study_import_predictions",
                                         args=[study.pk]), "p.jsonl", predictions
                         ).content.decode())
    assert (got["created"], got["updated"], got["unparseable"]) == ("2", "0", "m: 1")
    assert got["systems"] == "m" and got["next"].startswith("Open the study")


def test_sentences_and_traces_end_on_the_summary(client):
    study = make_assisted_study(n_sentences=1, traces=False, open_=False)
    client.force_login(role_user(study, "researcher"))
    url = reverse("admin:annotations_assistedstudy_import_sentences", args=[study.pk])
    response = _post(client, url, "s.jsonl", _lines(
        {"id": "n1", "prompt": "P", "response": "R. S.", "sentence": "S."}))
    assert response.redirect_chain[-1][0] == url  # the import page, with the summary
    got = _summary(response.content.decode())
    assert (got["created"], got["updated"], got["routed"]) == ("1", "0", "0")
    assert got["next"].startswith("Import the AI traces of these sentences")
    assert "import-summary" not in client.get(url).content.decode()  # shown once

    url = reverse("admin:annotations_assistedstudy_import_traces", args=[study.pk])
    traces = _lines({"sentence": "n1", "sample": 0, "trace": marked_trace("a", "Accurate")},
                    {"sentence": "n1", "sample": 1, "trace": marked_trace("b", "Accurate")})
    got = _summary(_post(client, url, "t.jsonl", traces).content.decode())
    assert (got["created"], got["updated"], got["sentences"], got["verified"]) == (
        "2", "0", "1", "2")
    assert got["next"].startswith("Check the AI ratings")
    again = _summary(_post(client, url, "t.jsonl", traces).content.decode())
    assert (again["created"], again["updated"]) == ("2", "1")  # its samples replaced


def test_critique_questions_and_ai_outputs_end_on_the_summary(
        client, django_capture_on_commit_callbacks, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the AI run in process, even with a broker
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai_below",
                                   open_=False)
    researcher = UserFactory()
    membership_add(study=study, user=researcher, role="researcher")
    client.force_login(researcher)
    url = reverse("admin:annotations_critiquesettings_import_questions", args=[study.pk])
    got = _summary(_post(client, url, "q.jsonl", _lines(
        {"id": "x", "text": "t", "options": ["a", "b"]})).content.decode())
    assert (got["created"], got["updated"], got["tasks"]) == ("1", "0", "0")

    url = reverse("admin:annotations_critiquesettings_import_outputs", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        _post(client, url, "ai.jsonl", _lines(
            {"id": "r1", "question": "q0", "level": 0, "text": "Answer: B"}))
    page = client.get(reverse("admin:annotations_critiquesettings_change", args=[study.pk]))
    got = _summary(page.content.decode())
    assert got["title"] == "Imported ai.jsonl:"
    assert (got["created"], got["updated"], got["level-0"], got["unparseable"]) == (
        "1", "0", "1", "0")
    assert got["next"]


def test_an_audit_upload_ends_on_the_summary(client):
    study, researcher = make_audit_study()
    client.force_login(researcher)
    response = client.post(reverse("audits", args=[study.pk]), {
        "action": "start", "rubric": make_rubric(study).pk, "dataset": "upload", "rounds": 3,
        "phi": 0.5, "seed": 1,
        "commitments": SimpleUploadedFile("c.jsonl", commitments_file(liar)),
        "datapoints": SimpleUploadedFile("d.jsonl", datapoints_file())}, follow=True)
    got = _summary(response.content.decode())
    assert got["title"] == "Imported d.jsonl + c.jsonl:"
    assert (got["created"], got["updated"]) == ("1", "0")
    assert got["next"].startswith("Follow audit #")
