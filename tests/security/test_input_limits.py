"""The probe's input holes, each fixed with its test: a raw NUL byte in a critique AI-outputs
upload (a psycopg DataError at the run's start), critique uploads past the 100 MB limit and
the whole file kept in the run's row, 100 000-deep JSON on the rating page's interaction
endpoint (a RecursionError), and texts of items, sentences, questions and AI outputs without
an upper length (3 000 000 characters were accepted).

Run on PostgreSQL too: NUL characters only fail there."""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.test import Client
from django.urls import reverse

from annotations.core.inputs import AI_TEXT_MAX, LONG_TEXT_MAX, OPTION_MAX, SENTENCE_MAX
from annotations.core.services.studies import membership_add
from annotations.critique.services.ai_runs import critique_import_run
from annotations.models import (
    CritiqueOutput,
    CritiqueQuestion,
    CritiqueRun,
    Interaction,
    Item,
    Sentence,
)
from tests.annotations.assisted.helpers import make_assisted_study, rater_in_arm
from tests.annotations.critique.helpers import make_critique_study
from tests.factories import UserFactory, admin_form_data, role_user

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000
NUL = "contains a NUL character (\\u0000), which cannot be stored"


def _researcher_client(study) -> Client:
    user = UserFactory(is_staff=True)
    membership_add(study=study, user=user, role="researcher")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _ai_study():
    study, _ = make_critique_study(n_questions=2, top_level=2, counts=[3, 2, 2],
                                   mode="ai_below", open_=False)
    return study


def _critique_snapshot(study) -> tuple:
    return (CritiqueRun.objects.filter(study=study).count(),
            CritiqueOutput.objects.filter(study=study).count(),
            list(CritiqueQuestion.objects.filter(study=study).values_list("pk", "text")))


def _upload(client, study, action: str, name: str, content: bytes):
    """An upload to the study's admin import page of ``action`` (questions, outputs)."""
    return client.post(reverse(f"admin:annotations_critiquesettings_import_{action}",
                               args=[study.pk]), {"file": SimpleUploadedFile(name, content)})


def _line(**fields) -> bytes:
    return json.dumps({"id": "r1", "question": "q0", "level": 0, "text": "Answer: B",
                       **fields}).encode()


# --- a raw NUL byte in an AI-outputs upload ------------------------------------------------

@pytest.mark.parametrize("content", [
    _line() + b"\n" + b'{"id": "r2", "question": "q0", "level": 0, "text": "a\x00b"}\n',
    _line() + b"\n" + _line(id="r2", text="a\\u0000b").replace(b"\\\\", b"\\") + b"\n",
], ids=["raw-byte", "escaped"])
def test_a_nul_in_an_ai_outputs_upload_is_refused_naming_file_line_and_field(content):
    """It was a 500 on PostgreSQL (DataError storing the file in the run's row)."""
    study = _ai_study()
    before = _critique_snapshot(study)

    response = _upload(_researcher_client(study), study, "outputs", "ai.jsonl", content)

    assert response.status_code == 200
    assert response.context["errors"] == [f"ai.jsonl:2: text: {NUL}"]
    assert _critique_snapshot(study) == before


def test_a_raw_nul_byte_in_a_questions_upload_names_the_field():
    study = _ai_study()
    before = _critique_snapshot(study)
    content = b'{"id": "n1", "text": "Which\x00one?", "options": ["a", "b"]}\n'

    response = _upload(_researcher_client(study), study, "questions", "q.jsonl", content)

    assert response.context["errors"] == [f"q.jsonl:1: text: {NUL}"]
    assert _critique_snapshot(study) == before


# --- critique uploads: the import size limit, and no file in the run's row -----------------

@pytest.mark.parametrize("action", ["outputs", "questions"])
def test_critique_uploads_keep_to_the_import_size_limit(settings, action):
    settings.OVERSIGHT_IMPORT_MAX_BYTES = 1000
    study = _ai_study()
    before = _critique_snapshot(study)
    content = b"\n".join(_line(id=f"r{i}", text="x" * 40) for i in range(20))

    response = _upload(_researcher_client(study), study, action, "big.jsonl", content)

    assert response.status_code == 413
    assert (f"big.jsonl: {len(content):,} bytes; at most 1,000 per file "
            f"(OVERSIGHT_IMPORT_MAX_BYTES): split the file") in response.content.decode()
    assert _critique_snapshot(study) == before


def test_the_run_of_an_ai_outputs_upload_does_not_hold_the_file_in_its_row(
        django_capture_on_commit_callbacks):
    study = _ai_study()
    content = _line(text="A distinctive output text.\nAnswer: B") + b"\n"

    with django_capture_on_commit_callbacks(execute=False):  # the run is queued, not run
        response = _upload(_researcher_client(study), study, "outputs", "ai.jsonl", content)

    assert response.status_code == 302
    row = CritiqueRun.objects.filter(study=study).values().get()
    assert row["status"] == "queued"
    assert not any("distinctive" in str(value) for value in row.values())


def test_a_queued_upload_is_imported_and_its_file_then_deleted(
        django_capture_on_commit_callbacks):
    from annotations.models import CritiqueRunFile

    study = _ai_study()
    content = _line() + b"\n"

    with django_capture_on_commit_callbacks(execute=False):
        response = _upload(_researcher_client(study), study, "outputs", "ai.jsonl", content)
    critique_import_run(run_id=CritiqueRun.objects.get(study=study).pk)  # as the worker does

    assert response.status_code == 302
    run = CritiqueRun.objects.get(study=study)
    assert (run.status, run.stored) == ("succeeded", 1)
    assert not CritiqueRunFile.objects.filter(run=run).exists()


# --- deep JSON on the rating page's interaction endpoint ------------------------------------

def test_deep_json_posted_to_the_rating_pages_interaction_endpoint_is_a_400():
    """The page view parsed the body with a plain json.loads: a RecursionError, a 500."""
    from annotations.assisted.services.rating import rating_lease_next

    study = make_assisted_study(n_sentences=2, arms={"E": ["search", "evidence"]})
    rater = rater_in_arm(study, "E")
    task = rating_lease_next(study=study, user=rater)
    client = Client(raise_request_exception=False)
    client.force_login(rater)
    url = reverse("rate-event", args=[study.pk, task.public_id])

    response = client.post(url, DEEP, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"code": "parse_error",
                               "detail": "JSON nested deeper than 64 levels"}
    assert not Interaction.objects.exists()


# --- upper lengths of free texts ------------------------------------------------------------

@pytest.mark.parametrize(("field", "limit"), [("prompt", LONG_TEXT_MAX),
                                              ("response", LONG_TEXT_MAX),
                                              ("sentence", SENTENCE_MAX)])
def test_an_over_long_sentence_text_is_refused_by_the_import_naming_file_line_and_field(
        field, limit):
    """The shared reader stops at the first text that cannot be stored, as at a NUL."""
    from annotations.assisted.services.imports import sentences_import
    from annotations.core.errors import ImportFailed
    from tests.annotations.assisted.helpers import jsonl, sentence_records

    study = make_assisted_study(n_sentences=0, open_=False)
    records = sentence_records(3)
    records[1][field] = "x" * (limit + 1)

    with pytest.raises(ImportFailed) as caught:
        sentences_import(study=study, source=jsonl(records), name="sentences.jsonl")

    assert caught.value.errors == [
        f"sentences.jsonl:2: {field}: {limit + 1} characters; at most {limit} fit"]
    assert not Sentence.objects.filter(study=study).exists()


@pytest.mark.parametrize(("record", "error"), [
    ({"id": "n1", "text": "q" * (LONG_TEXT_MAX + 1), "options": ["a", "b"]},
     f"q.jsonl:2: text: {LONG_TEXT_MAX + 1} characters; at most {LONG_TEXT_MAX} fit"),
    ({"id": "n1", "text": "fine", "options": ["a", "o" * (OPTION_MAX + 1)]},
     f"q.jsonl:2: options: option 1: {OPTION_MAX + 1} characters; at most {OPTION_MAX}"),
], ids=["text", "option"])
def test_an_over_long_question_text_or_option_is_refused_on_the_researchers_page(record,
                                                                                  error):
    study = _ai_study()
    before = _critique_snapshot(study)
    content = b"\n".join([
        json.dumps({"id": "n0", "text": "fine", "options": ["a", "b"]}).encode(),
        json.dumps(record).encode()])

    response = _upload(_researcher_client(study), study, "questions", "q.jsonl", content)

    assert response.context["errors"] == [error]
    assert _critique_snapshot(study) == before


@pytest.mark.parametrize(("options", "error"), [
    ('["a", "' + "o" * (OPTION_MAX + 1) + '"]',
     f"items.jsonl:2: options[1]: {OPTION_MAX + 1} characters; at most {OPTION_MAX} fit"),
    ('["a", "b"], "metadata": {"note": "' + "n" * 100_001 + '"}',
     "items.jsonl:2: metadata.note: 100001 characters; at most 100000 fit"),
], ids=["option", "any-text"])
def test_over_long_item_options_and_texts_are_refused_by_the_import(make_study, options,
                                                                    error):
    from annotations.core.errors import ImportFailed
    from annotations.partitioned.services.imports import items_import

    study = make_study(k=2, n_items=2, open_=False)
    before = list(Item.objects.filter(study=study).values_list("pk", "text"))
    text = ('{"id": "n0", "text": "fine"}\n'
            '{"id": "n1", "text": "t", "options": ' + options + "}\n")

    with pytest.raises(ImportFailed) as caught:
        items_import(study=study, source=io.StringIO(text), name="items.jsonl")

    assert caught.value.errors == [error]
    assert list(Item.objects.filter(study=study).values_list("pk", "text")) == before


def test_an_over_long_ai_output_text_is_refused_naming_file_line_and_field(
        django_capture_on_commit_callbacks):
    study = _ai_study()
    before = CritiqueOutput.objects.filter(study=study).count()
    content = _line() + b"\n" + _line(id="r2", text="t" * (AI_TEXT_MAX + 1))

    with django_capture_on_commit_callbacks(execute=False):
        response = _upload(_researcher_client(study), study, "outputs", "ai.jsonl", content)
    critique_import_run(run_id=CritiqueRun.objects.get(study=study).pk)  # as the worker does

    assert response.status_code == 302
    run = CritiqueRun.objects.get(study=study)
    assert (run.status, run.errors) == ("failed", [
        f"ai.jsonl:2: text: {AI_TEXT_MAX + 1} characters; at most {AI_TEXT_MAX} fit"])
    assert CritiqueOutput.objects.filter(study=study).count() == before


def test_an_over_long_item_text_is_refused_by_the_api_and_the_admin_form(make_study):
    from rest_framework.authtoken.models import Token

    study = make_study(k=2, n_items=2, open_=False)
    researcher = role_user(study, "researcher")
    token = Token.objects.create(user=researcher)
    api = Client(HTTP_AUTHORIZATION=f"Token {token.key}", raise_request_exception=False)
    before = list(Item.objects.filter(study=study).values_list("pk", "text"))
    long_text = "t" * (LONG_TEXT_MAX + 1)

    posted = api.post(f"/api/studies/{study.pk}/items/?wait=true",
                      [{"id": "long", "text": long_text}], content_type="application/json")
    item = Item.objects.filter(study=study).order_by("pk").first()
    admin = Client(raise_request_exception=False)
    admin.force_login(researcher)
    url = f"/admin/annotations/item/{item.pk}/change/"
    data = admin_form_data(admin, url)
    changed = admin.post(url, {**data, "text": long_text})

    assert posted.status_code == 400
    assert posted.json()["0"]["text"] == [
        f"Ensure this field has no more than {LONG_TEXT_MAX} characters."]
    assert changed.status_code == 200
    assert changed.context["adminform"].form.errors["text"] == [
        f"Ensure this value has at most {LONG_TEXT_MAX} characters (it has "
        f"{LONG_TEXT_MAX + 1})."]
    assert list(Item.objects.filter(study=study).values_list("pk", "text")) == before


class CountingUploadHandler(FileUploadHandler):
    """Counts the upload bytes Django reads (the test below installs it)."""

    received: list[int] = []

    def receive_data_chunk(self, raw_data, start):
        self.received.append(len(raw_data))
        return raw_data

    def file_complete(self, file_size):
        return None


def test_an_oversized_upload_is_refused_before_anything_reads_it(settings):
    """The CSRF check reads the form (multipart: every file) for its token: an anonymous
    client with a made-up cookie used to have its whole upload parsed before the 403."""
    settings.OVERSIGHT_IMPORT_MAX_BYTES = 1_000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    settings.FILE_UPLOAD_HANDLERS = [f"{__name__}.CountingUploadHandler"]
    CountingUploadHandler.received.clear()
    client = Client(enforce_csrf_checks=True)
    client.cookies["csrftoken"] = "x" * 32
    response = client.post("/accounts/login/", {
        "username": "u", "file": SimpleUploadedFile("big.jsonl", b"x" * 200_000)})
    assert response.status_code == 413
    assert CountingUploadHandler.received == []


@pytest.mark.parametrize("where", ["routing page", "settings inline"])
def test_deep_json_in_an_assisted_studys_json_fields_is_a_form_error(where):
    from tests.annotations.assisted.test_admin import change_url, posted

    study = make_assisted_study(n_sentences=1, open_=False)
    client = Client(raise_request_exception=False)
    client.force_login(role_user(study, "researcher"))
    from django.forms.models import model_to_dict

    before = model_to_dict(study.assisted)
    deep = "[" * 20_000 + "]" * 20_000
    if where == "routing page":
        url = reverse("admin:annotations_assistedstudy_routing", args=[study.pk])
        data = {"routing": "bands", "threshold": "", "band_edges": deep, "band_targets": "[]"}
    else:
        url = change_url(study)
        data = posted(client.get(url), **{"assisted-0-quiz": deep})
    response = client.post(url, data)
    assert response.status_code == 200  # the form again, with the error (was a 500)
    assert "nested deeper than" in response.content.decode()
    study.assisted.refresh_from_db()
    assert model_to_dict(study.assisted) == before
