"""Bad input never reaches the database as a 500: every endpoint answers a 400 (the API) or
re-renders the import form with the errors (the admin), naming the field, and writes nothing.

Run against PostgreSQL too: NUL characters and over-long strings only fail there."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from annotations.models import Item, Query
from assistants.models import AISystem, Prediction
from tests.factories import admin_form_data, role_user, specialist

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000


def api_client(user) -> Client:
    token, _ = Token.objects.get_or_create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token.key}", raise_request_exception=False)


def item(**fields) -> dict:
    return {"id": "new-1", "text": "A question", **fields}


def snapshot(study) -> tuple:
    return (
        list(Item.objects.filter(study=study).order_by("pk").values_list("pk", "external_id",
                                                                         "text", "metadata")),
        Prediction.objects.filter(system__study=study).count(),
        list(AISystem.objects.filter(study=study).values_list("name", flat=True)),
        Query.objects.filter(study=study, status=Query.Status.ANSWERED).count(),
    )


# --- API: deep nesting ---------------------------------------------------------------------

@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT], ids=["array", "object"])
@pytest.mark.parametrize("endpoint", ["items", "predictions", "answer"])
def test_api_deeply_nested_json_is_a_400(make_study, endpoint, body):
    study = make_study(k=2, n_items=4)
    query = Query.objects.filter(study=study, k=0).first()
    user = specialist(study, 0) if endpoint == "answer" else role_user(study, "researcher")
    url = {"items": f"/api/studies/{study.pk}/items/",
           "predictions": f"/api/studies/{study.pk}/predictions/",
           "answer": f"/api/queries/{query.public_id}/answer/"}[endpoint]
    before = snapshot(study)

    response = api_client(user).post(url, body, content_type="application/json")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "parse_error"
    assert "nested deeper than 64 levels" in response.json()["detail"]
    assert snapshot(study) == before


# --- API: NUL characters -------------------------------------------------------------------

@pytest.mark.parametrize(("records", "path"), [
    ([item(text="a\x00b")], "[0].text"),
    ([item(metadata={"note": "a\x00b"})], "[0].metadata.note"),
    ([item(metadata={"k\x00": 1})], "[0].metadata"),
    ([item(), item(id="new-2", metadata={"deep": [{"x": "\x00"}]})],
     "[1].metadata.deep[0].x"),
    ([item(options=["a", "b\x00"])], "[0].options[1]"),
    ([item(stratum="s\x00")], "[0].stratum"),
], ids=["text", "metadata-value", "metadata-key", "nested", "options", "stratum"])
def test_api_items_with_nul_characters_are_a_400(make_study, records, path):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)

    response = api_client(role_user(study, "researcher")).post(
        f"/api/studies/{study.pk}/items/", records, content_type="application/json")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "parse_error"
    assert body["detail"] == (f"{path}: contains a NUL character (\\u0000), which cannot be "
                              f"stored")
    assert snapshot(study) == before


def test_api_prediction_with_nul_character_is_a_400(make_study):
    study = make_study(k=2, n_items=4, systems={"sys": 0.8})
    before = snapshot(study)

    response = api_client(role_user(study, "researcher")).post(
        f"/api/studies/{study.pk}/predictions/",
        [{"item_id": "i0", "system": "sys", "prediction": "0\x00"}], content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"].startswith("[0].prediction: contains a NUL character")
    assert snapshot(study) == before


def test_api_answer_with_nul_character_is_a_400(make_study):
    study = make_study(k=2, n_items=4)
    user = specialist(study, 0)
    client = api_client(user)
    query_id = client.post(f"/api/studies/{study.pk}/queries/next/").json()["id"]

    response = client.post(f"/api/queries/{query_id}/answer/", {"answer": "yes\x00"},
                           content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"].startswith("answer: contains a NUL character")
    assert Query.objects.get(public_id=query_id).status == Query.Status.LEASED


# --- API: strings longer than their columns, wrong types -----------------------------------

@pytest.mark.parametrize(("records", "message"), [
    ([item(id="x" * 201)], "request:1: id: 201 characters; at most 200 fit"),
    ([item(), item(id="new-2", stratum="s" * 121)],
     "request:2: stratum: 121 characters; at most 120 fit"),
], ids=["external_id", "stratum"])
def test_api_items_longer_than_their_columns_are_a_400(make_study, records, message):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)

    response = api_client(role_user(study, "researcher")).post(  # the synchronous form
        f"/api/studies/{study.pk}/items/?wait=true", records, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "import_failed"
    assert response.json()["errors"] == [message]
    assert snapshot(study) == before


def test_api_system_name_longer_than_its_column_is_a_400(make_study):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)

    response = api_client(role_user(study, "researcher")).post(  # the synchronous form
        f"/api/studies/{study.pk}/predictions/?wait=true",
        [{"item_id": "i0", "system": "S" * 201, "prediction": "0"}],
        content_type="application/json")

    assert response.status_code == 400
    assert response.json()["errors"] == ["request:1: system: 201 characters; at most 200 fit"]
    assert snapshot(study) == before


@pytest.mark.parametrize("value", [{"a": 1}, ["i0"], True], ids=["object", "array", "bool"])
@pytest.mark.parametrize("endpoint", ["items", "predictions"])
def test_api_ids_of_the_wrong_type_are_a_400(make_study, endpoint, value):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)
    records = ([item(id=value)] if endpoint == "items"
               else [{"item_id": value, "system": "s", "prediction": "0"}])

    response = api_client(role_user(study, "researcher")).post(
        f"/api/studies/{study.pk}/{endpoint}/", records, content_type="application/json")

    assert response.status_code == 400
    field = "id" if endpoint == "items" else "item_id"
    assert response.json() == {"0": {field: ["Not a valid string."]}}
    assert snapshot(study) == before


# --- API: request size ---------------------------------------------------------------------

@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
@pytest.mark.parametrize("content_type", ["application/json", "application/x-www-form-urlencoded"])
def test_api_request_over_the_size_limit_answers_json(make_study, content_type):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)
    records = [item(id=f"big-{i}", text="x" * 100) for i in range(40)]
    body = json.dumps(records) if content_type == "application/json" else "a=" + "x" * 5000

    response = api_client(role_user(study, "researcher")).post(
        f"/api/studies/{study.pk}/items/", body, content_type=content_type)

    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "code": "request_too_large",
        "detail": "The request body is larger than 2000 bytes (DATA_UPLOAD_MAX_MEMORY_SIZE): "
                  "send fewer records per request or upload a file on the study's import page."}
    assert snapshot(study) == before


# --- Admin imports (files) -----------------------------------------------------------------

def admin_import(study, kind: str, name: str, content: bytes):
    client = Client(raise_request_exception=False)
    client.force_login(role_user(study, "researcher"))
    url = f"/admin/annotations/study/{study.pk}/import-{kind}/"
    # the upload becomes an import job; its page lists the errors
    return client.post(url, {"file": SimpleUploadedFile(name, content)}, follow=True)


def jsonl_bytes(*lines: str) -> bytes:
    return "\n".join(lines).encode()


OK_LINE = json.dumps(item(id="ok-1"))


@pytest.mark.parametrize(("content", "error"), [
    (jsonl_bytes(OK_LINE, '{"id": "n", "text": "t", "metadata": ' + DEEP + "}"),
     "items.jsonl:2: JSON nested deeper than 64 levels"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id="n", text="a\x00b"))),
     "items.jsonl:2: text: contains a NUL character (\\u0000), which cannot be stored"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id="n", metadata={"a": ["\x00"]}))),
     "items.jsonl:2: metadata.a[0]: contains a NUL character (\\u0000), which cannot be stored"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id="n", options=["a\x00", "b"]))),
     "items.jsonl:2: options[0]: contains a NUL character (\\u0000), which cannot be stored"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id="y" * 201))),
     "items.jsonl:2: id: 201 characters; at most 200 fit"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id="n", stratum="s" * 121))),
     "items.jsonl:2: stratum: 121 characters; at most 120 fit"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id={"a": 1}))),
     "items.jsonl:2: id: must be text or a number, not an object"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id=["a"]))),
     "items.jsonl:2: id: must be text or a number, not an array"),
    # a list or object field of another JSON kind was a Python message ("the JSON object
    # must be str, bytes or bytearray, not dict"); an object among the options was stored
    # as its Python repr
    (jsonl_bytes(OK_LINE, json.dumps(item(id="n", options={"a": 1}))),
     "items.jsonl:2: options: expected a JSON array, not an object"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id="n", options=5))),
     "items.jsonl:2: options: expected a JSON array, not a number"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id="n", options=["a", {"x": 2}]))),
     "items.jsonl:2: options[1]: must be text or a number, not an object"),
    (jsonl_bytes(OK_LINE, json.dumps(item(id="n", metadata=[1]))),
     "items.jsonl:2: metadata: expected a JSON object, not an array"),
    (b'id,text,metadata\nok-1,fine,{}\nn,t,5\n',
     "items.csv:3: metadata: expected a JSON object, not a number"),
], ids=["deep", "nul-text", "nul-metadata", "nul-options", "long-id", "long-stratum",
        "id-object", "id-array", "options-object", "options-number", "option-object",
        "metadata-array", "csv-metadata-number"])
def test_admin_items_import_reports_bad_input(make_study, content, error):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)

    name = "items.csv" if content.startswith(b"id,") else "items.jsonl"
    response = admin_import(study, "items", name, content)

    assert response.status_code == 200
    assert [str(e) for e in response.context["errors"]] == [error]
    assert snapshot(study) == before


def test_admin_items_csv_with_a_nul_character_is_reported(make_study):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)
    content = b"id,text\nok-1,fine\nn,bad\x00text\n"

    response = admin_import(study, "items", "items.csv", content)

    assert response.status_code == 200
    assert list(response.context["errors"]) == [
        "items.csv:3: text: contains a NUL character (\\u0000), which cannot be stored"]
    assert snapshot(study) == before


@pytest.mark.parametrize(("line", "error"), [
    (json.dumps({"item_id": "i0", "system": "s", "prediction": "a\x00"}),
     "preds.jsonl:2: prediction: contains a NUL character (\\u0000), which cannot be stored"),
    (json.dumps({"item_id": "i0", "system": "S" * 201, "prediction": "0"}),
     "preds.jsonl:2: system: 201 characters; at most 200 fit"),
    (json.dumps({"item_id": {"x": 1}, "system": "s", "prediction": "0"}),
     "preds.jsonl:2: item_id: must be text or a number, not an object"),
    ('{"item_id": "i0", "system": "s", "prediction": ' + DEEP + "}",
     "preds.jsonl:2: JSON nested deeper than 64 levels"),
], ids=["nul-raw", "long-system", "item-id-object", "deep"])
def test_admin_predictions_import_reports_bad_input(make_study, line, error):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)
    content = jsonl_bytes(json.dumps({"item_id": "i1", "system": "t", "prediction": "0"}), line)

    response = admin_import(study, "predictions", "preds.jsonl", content)

    assert response.status_code == 200
    assert list(response.context["errors"]) == [error]
    assert snapshot(study) == before


@pytest.mark.parametrize(("content", "error"), [
    (b'id,text,metadata\nok-1,fine,{}\nn,t,"{""a"": ""\\u0000""}"\n',
     "items.csv:3: metadata: a: contains a NUL character (\\u0000), which cannot be stored"),
    (b'id,text,metadata\nok-1,fine,{}\nn,t,"' + (b'{""a"":' * 100) + b"1" + b"}" * 100 + b'"\n',
     "items.csv:3: metadata: JSON nested deeper than 64 levels"),
], ids=["nul-in-json-cell", "deep-json-cell"])
def test_admin_items_csv_json_cells_are_guarded(make_study, content, error):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)

    response = admin_import(study, "items", "items.csv", content)

    assert list(response.context["errors"]) == [error]
    assert snapshot(study) == before


def test_admin_items_jsonl_with_nan_is_reported(make_study):
    study = make_study(k=2, n_items=4)
    before = snapshot(study)
    content = jsonl_bytes(OK_LINE, '{"id": "n", "text": "t", "metadata": {"score": NaN}}')

    response = admin_import(study, "items", "items.jsonl", content)

    assert list(response.context["errors"]) == ["items.jsonl:2: invalid JSON (NaN is not valid JSON)"]
    assert snapshot(study) == before


def test_json_parser_limits_what_it_reads_from_the_stream():
    """Under gunicorn DRF hands the parser the WSGI stream itself, past Django's own size
    check: the parser reads at most the limit."""
    import io

    from annotations.core.inputs import GuardedJSONParser, RequestTooLarge

    body = json.dumps([{"id": str(i), "text": "x" * 50} for i in range(100)]).encode()
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=len(body) - 1), pytest.raises(
            RequestTooLarge):
        GuardedJSONParser().parse(io.BytesIO(body))
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=len(body)):
        assert len(GuardedJSONParser().parse(io.BytesIO(body))) == 100


@pytest.mark.parametrize(("metadata", "error"), [
    ('{"a": "\\u0000"}', "a: contains a NUL character (\\u0000), which cannot be stored"),
    ("[" * 5000 + "]" * 5000, "Not storable JSON: JSON nested deeper than 64 levels"),
    ('{"a": NaN}', "Not storable JSON: NaN is not valid JSON"),
], ids=["nul", "deep", "nan"])
def test_admin_item_form_refuses_unstorable_json(make_study, metadata, error):
    study = make_study(k=2, n_items=4, open_=False)
    target = Item.objects.filter(study=study).order_by("pk").first()
    before = snapshot(study)
    client = Client(raise_request_exception=False)
    client.force_login(role_user(study, "researcher"))
    url = f"/admin/annotations/item/{target.pk}/change/"
    data = admin_form_data(client, url)

    response = client.post(url, {**data, "metadata": metadata})

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["metadata"] == [error]
    assert snapshot(study) == before


def test_integers_too_long_to_convert_are_a_400(make_study):
    """Python refuses to convert integers of more than 4300 digits (a ValueError while
    parsing): a 400 too, not a 500."""
    study = make_study(k=2, n_items=4)
    before = snapshot(study)
    huge = "9" * 5000

    api = api_client(role_user(study, "researcher")).post(
        f"/api/studies/{study.pk}/items/", f'[{{"id": {huge}, "text": "t"}}]',
        content_type="application/json")
    page = admin_import(study, "items", "items.jsonl",
                        jsonl_bytes(OK_LINE, f'{{"id": {huge}, "text": "t"}}'))

    assert api.status_code == 400
    assert api.json()["code"] == "parse_error"
    assert "Exceeds the limit (4300 digits)" in api.json()["detail"]
    assert list(page.context["errors"])[0].startswith("items.jsonl:2: invalid JSON (Exceeds")
    assert snapshot(study) == before


def test_a_study_id_beyond_64_bits_in_the_next_query_url_is_a_404_not_a_500():
    """Found by the fuzz test after the next-query call began reading the membership by the
    URL's study id: SQLite raised OverflowError (a 500) for ids ≥ 2**63."""
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from tests.factories import make_study, specialist

    study = make_study(k=3, n_items=6, name="big-ids")
    token = Token.objects.get_or_create(user=specialist(study, 0))[0]
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}", raise_request_exception=False)
    for study_id in (2**63, 2**64, 2**70):
        response = client.post(f"/api/studies/{study_id}/queries/next/", "{}",
                               content_type="application/json")
        assert response.status_code in (403, 404), (study_id, response.content[:200])


@pytest.mark.parametrize(("typed", "read"), [(None, None), ("", None), ("2", 2), (" 3 ", 3),
                                             ("-1", -1), ("²", None), ("1.5", None),
                                             ("x", None), ("9" * 5000, None)])
def test_a_form_field_number_is_read_or_none_never_an_exception(typed, read):
    """The rating and critique pages read their optional numbers with one helper. The
    rating page's own copy let a superscript digit through its isdigit() check into int():
    a 500."""
    from annotations.core.inputs import int_or_none

    assert int_or_none(typed) == read
