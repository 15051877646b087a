"""Imports and exports: atomic, errors name file, line and field; nothing half-done."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.core.errors import ImportFailed, InvalidStudy
from annotations.core.services.studies import study_create
from annotations.models import Item, Query
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.predictions import predictions_import
from assistants.models import AISystem, Prediction
from tests.factories import jsonl, make_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft():
    return study_create(name="draft", classes=["A", "B", "C"])


def _csv(text: str) -> io.StringIO:
    return io.StringIO(text)


def test_csv_items_import_with_json_cells(draft):
    src = _csv('id,text,options,gold,gold_index,stratum,metadata\n'
               'x1,What?,"[""a"",""b"",""c""]",b,,s1,"{""src"": 1}"\n'
               'x2,Why?,"[""d"",""e"",""f""]",,2,s2,\n')
    result = items_import(study=draft, source=src, name="items.csv")
    assert (result.created, result.updated) == (2, 0)
    x1 = Item.objects.get(study=draft, external_id="x1")
    assert (x1.gold_option, x1.stratum, x1.metadata) == (1, "s1", {"src": 1})
    assert Item.objects.get(study=draft, external_id="x2").gold_option == 2
    assert sorted(x1.option_order) == [0, 1, 2]


@pytest.mark.parametrize(("content", "expected"), [
    ('{"id": "a", "text": "t", "options": ["x", "y"]}', "items.jsonl:1: options: 2 options but the study has K=3"),
    ('{"id": "a", "text": "t"}\n{"id": "a", "text": "u"}', "items.jsonl:2: id: 'a' repeats line 1"),
    ('{"id": "a"}', "items.jsonl:1: text: missing"),
    ('{"id": "a", "text": "t", "gold": 7}', "items.jsonl:1: gold: '7' is not one of the options"),
    ('{"id": "a", "text": "t", "gold_index": 7}', "items.jsonl:1: gold_index: 7 is outside 0..2"),
    ('{"id": "a", "text": "t", "colour": 1}', "items.jsonl:1: colour: unknown field"),
    ('{"id": "a", "text": "t", "quality_check": true}', "items.jsonl:1: gold: a quality-check item needs a gold answer"),
    ('{"id": "a", "text": "t"}\n{not json', "items.jsonl:2: invalid JSON"),
])
def test_bad_item_files_name_the_place_and_write_nothing(draft, content, expected):
    with pytest.raises(ImportFailed) as info:
        items_import(study=draft, source=io.StringIO(content), name="items.jsonl")
    assert expected in str(info.value)
    assert Item.objects.filter(study=draft).count() == 0


def test_reimport_same_ids_is_rejected_unless_update(draft):
    items_import(study=draft, source=jsonl([{"id": "a", "text": "old"}]), name="i.jsonl")
    with pytest.raises(ImportFailed, match="i.jsonl:1: id: 'a' is already in the study"):
        items_import(study=draft, source=jsonl([{"id": "a", "text": "new"}]), name="i.jsonl")
    assert Item.objects.get(study=draft, external_id="a").text == "old"
    result = items_import(study=draft, source=jsonl([{"id": "a", "text": "new"}]),
                          name="i.jsonl", update=True)
    assert (result.created, result.updated) == (0, 1)
    assert Item.objects.get(study=draft, external_id="a").text == "new"


def test_an_existing_item_id_is_said_in_the_words_of_every_other_import(draft):
    # issue 17: items said "already exists (rewriting existing ids is off)" where every
    # other reader (records.KeysSeen: sentences, critique questions …) says "is already in
    # the study"; items still say that the update option rewrites
    from annotations.core.services.records import KeysSeen

    items_import(study=draft, source=jsonl([{"id": "a", "text": "old"}]), name="i.jsonl")
    with pytest.raises(ImportFailed) as info:
        items_import(study=draft, source=jsonl([{"id": "a", "text": "new"}]), name="i.jsonl")
    others = "i.jsonl:1: " + KeysSeen(existing={"a"}).problem("a", 1)
    assert info.value.errors == [others + " (import it with the update option to rewrite "
                                          "existing ids)"]


def test_items_imported_into_an_open_study_are_routed():
    study = make_study(k=3, n_items=5)
    before = Query.objects.filter(study=study).count()
    items_import(study=study, source=jsonl([{"id": "late", "text": "t"}]), name="late.jsonl")
    assert Query.objects.filter(study=study).count() == before + 1


def test_items_routed_by_one_import_get_distinct_public_ids():
    """The bulk insert called a callable default once: every routed query of one import got
    the same public id (a unique-constraint error from the second item on)."""
    study = make_study(k=3, n_items=2)
    items_import(study=study, source=jsonl([{"id": f"late{i}", "text": "t"} for i in range(4)]),
                 name="late.jsonl")
    ids = list(Query.objects.filter(study=study).values_list("public_id", flat=True))
    assert len(ids) == 6 and len(set(ids)) == 6


def test_k_below_two_is_refused():
    with pytest.raises(InvalidStudy, match="at least 2 classes"):
        study_create(name="tiny", classes=["only"])


def test_unknown_interval_method_is_refused_and_named():
    with pytest.raises(InvalidStudy, match="interval_method must be one of auto, conservative"):
        study_create(name="odd", classes=["A", "B"], interval_method="wald")
    assert study_create(name="careful", classes=["A", "B"],
                        interval_method="conservative").interval_method == "conservative"


def test_predictions_import_unknown_item_names_line_and_writes_nothing():
    study = make_study(k=3, n_items=4)
    rows = [{"item_id": "i0", "system": "m", "prediction": 1},
            {"item_id": "nope", "system": "m", "prediction": 1}]
    with pytest.raises(ImportFailed, match="p.jsonl:2: item_id: 'nope' is not an item of this study"):
        predictions_import(study=study, source=jsonl(rows), name="p.jsonl")
    assert Prediction.objects.count() == 0
    assert AISystem.objects.filter(study=study).count() == 0


def test_predictions_parse_index_text_and_garbage():
    study = make_study(k=3, n_items=3)
    item = Item.objects.get(study=study, external_id="i0")
    rows = [{"item_id": "i0", "system": "idx", "prediction_index": 2},
            {"item_id": "i0", "system": "txt", "prediction": item.options[1]},
            {"item_id": "i0", "system": "bad", "prediction": "no idea"}]
    predictions_import(study=study, source=jsonl(rows), name="p.jsonl")
    got = {p.system.name: (p.option, p.position) for p in Prediction.objects.filter(item=item)}
    assert got["idx"] == (2, item.option_order.index(2))
    assert got["txt"] == (1, item.option_order.index(1))
    assert got["bad"] == (None, None)


def test_prediction_reimport_rejected_then_updated_refreshes_masks():
    study = make_study(k=3, n_items=6, systems={"m": 0.5})
    from annotations.partitioned.services.labels import label_submit
    from annotations.partitioned.services.routing import query_lease_next
    from tests.factories import specialist

    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    label_submit(query_id=q.pk, user=user, answer="no")
    original = q.item.option_order[0]  # the option shown at position 0 = class 0
    rows = [{"item_id": q.item.external_id, "system": "m", "prediction_index": original}]
    with pytest.raises(ImportFailed, match="already has a prediction"):
        predictions_import(study=study, source=jsonl(rows), name="p.jsonl")
    predictions_import(study=study, source=jsonl(rows), name="p.jsonl", update=True)
    q.refresh_from_db()
    assert q.match_mask == 1 and q.present_mask == 1


def test_import_commands_report_errors_and_export_round_trip(tmp_path, draft):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,text\n,t\n")
    with pytest.raises(CommandError, match=r"bad.csv:2: id: missing"):
        call_command("import_items", str(draft.pk), str(bad))
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps({"id": f"g{i}", "text": "t", "gold_index": i % 3})
                              for i in range(6)))
    call_command("import_items", str(draft.pk), str(good), stdout=io.StringIO())
    preds = tmp_path / "p.csv"
    preds.write_text("item_id,system,prediction_index\n" + "".join(f"g{i},sys,{i % 3}\n"
                                                             for i in range(6)))
    call_command("import_predictions", draft.name, str(preds), stdout=io.StringIO())
    assert AISystem.objects.get(study=draft).reference_correct == 6
    from annotations.core.services.studies import membership_add, study_open
    from tests.factories import UserFactory

    study_open(study=draft)
    membership_add(study=draft, user=UserFactory(username="s"), role="specialist", class_index=0)
    call_command("simulate_study", str(draft.pk), stdout=io.StringIO(), stderr=io.StringIO())
    out = tmp_path / "labels.csv"
    call_command("export_labels", str(draft.pk), "-o", str(out), stderr=io.StringIO())
    lines = out.read_text().strip().splitlines()
    assert lines[0].startswith("query_id,item_id,stratum,k,class_name")
    assert len(lines) - 1 == Query.objects.filter(study=draft, status="answered").count()


def test_api_imports_are_atomic_and_name_the_bad_record():
    from django.test import Client
    from django.urls import reverse

    from annotations.models import Item
    from assistants.models import Prediction
    from tests.factories import make_study, role_user

    study = make_study(k=3, n_items=0, open_=False, seed=81)
    client = Client()
    client.force_login(role_user(study, "researcher"))
    url = reverse("api-items", args=[study.pk]) + "?wait=true"  # the synchronous form
    ok = client.post(url, [{"id": "a", "text": "first"}, {"id": "b", "text": "second"}],
                     content_type="application/json")
    assert ok.status_code == 201
    assert ok.json() == {"created": 2, "updated": 0, "unchanged": 0, "routed": 0}
    bad = client.post(url, [{"id": "c", "text": "x"}, {"id": "a", "text": "again"}],
                      content_type="application/json")
    assert bad.status_code == 400 and "request:2" in bad.content.decode()
    assert sorted(Item.objects.filter(study=study).values_list("external_id", flat=True)) == [
        "a", "b"]
    preds = client.post(reverse("api-predictions", args=[study.pk]) + "?wait=true",
                        [{"item_id": "a", "system": "m1", "prediction_index": 1},
                         {"item_id": "zzz", "system": "m1", "prediction_index": 0}],
                        content_type="application/json")
    assert preds.status_code == 400 and "zzz" in preds.content.decode()
    assert not Prediction.objects.filter(item__study=study).exists()


def test_stratum_sizes_follow_imports_and_deletions():
    from django.test import Client

    from annotations.models import Item
    from tests.factories import jsonl, make_study, role_user

    study = make_study(k=3, n_items=0, open_=False, seed=82)
    items_import(study=study, name="a.jsonl", fmt="jsonl", source=jsonl(
        [{"id": f"i{i}", "text": "t", "stratum": "easy" if i < 3 else "hard"}
         for i in range(5)]))
    study.refresh_from_db()
    assert study.stratum_sizes == {"easy": 3, "hard": 2}
    items_import(study=study, name="b.jsonl", fmt="jsonl", update=True,
                 source=jsonl([{"id": "i0", "text": "t", "stratum": "hard"}]))
    study.refresh_from_db()
    assert study.stratum_sizes == {"easy": 2, "hard": 3}
    client = Client()
    client.force_login(role_user(study, "researcher"))
    item = Item.objects.get(study=study, external_id="i1")
    client.post(f"/admin/annotations/item/{item.pk}/delete/", {"post": "yes"})
    study.refresh_from_db()
    assert study.stratum_sizes == {"easy": 1, "hard": 3}


# --- the prediction rule (issue 8): by option text, or by index in prediction_index ----------

@pytest.fixture
def numeric():
    """Items whose option texts are numbers: the case an index guess gets wrong."""
    study = study_create(name="numeric", classes=["A", "B", "C", "D"], shuffle_options=False)
    items_import(study=study, name="n.jsonl", source=jsonl(
        [{"id": f"n{i}", "text": "How many?", "options": ["4", "3", "0", "2"]}
         for i in range(8)]))
    return study


def _options(study) -> dict[tuple[str, str], int | None]:
    return {(p.system.name, p.item.external_id): p.option
            for p in Prediction.objects.filter(system__study=study).select_related("system",
                                                                                   "item")}


def test_a_numeric_prediction_is_read_as_option_text_never_as_an_index(numeric):
    rows = [{"item_id": "n0", "system": "m", "prediction": "2"},     # the option "2" = index 3
            {"item_id": "n1", "system": "m", "prediction": 3.0},     # JSON 3.0 → "3" = index 1
            {"item_id": "n2", "system": "m", "prediction": 0},       # JSON 0 → "0" = index 2
            {"item_id": "n3", "system": "m", "prediction": "7"},     # names no option
            {"item_id": "n4", "system": "m", "prediction": ""},      # missing
            {"item_id": "n5", "system": "m", "prediction": " 4 "}]   # spaces trimmed
    result = predictions_import(study=numeric, source=jsonl(rows), name="p.jsonl")
    got = _options(numeric)
    assert [got[("m", f"n{i}")] for i in range(6)] == [3, 1, 2, None, None, 0]
    assert (result.unparseable, result.missing) == ({"m": 1}, {"m": 1})
    assert Prediction.objects.get(item__external_id="n3").raw == "7"


def test_prediction_index_reads_indexes_including_integral_floats(numeric):
    rows = [{"item_id": "n0", "system": "i", "prediction_index": 2},
            {"item_id": "n1", "system": "i", "prediction_index": 3.0},
            {"item_id": "n2", "system": "i", "prediction_index": "1"},
            {"item_id": "n3", "system": "i", "prediction_index": "0.0"},
            {"item_id": "n4", "system": "i", "prediction_index": None}]
    result = predictions_import(study=numeric, source=jsonl(rows), name="p.jsonl")
    got = _options(numeric)
    assert [got[("i", f"n{i}")] for i in range(5)] == [2, 3, 1, 0, None]
    assert (result.unparseable, result.missing) == ({}, {"i": 1})


@pytest.mark.parametrize(("row", "expected"), [
    ({"prediction_index": 4}, "p.jsonl:1: prediction_index: 4 is outside 0..3"),
    ({"prediction_index": 2.5}, "p.jsonl:1: prediction_index: '2.5' is not a whole number"),
    ({"prediction_index": "two"}, "p.jsonl:1: prediction_index: 'two' is not a whole number"),
    ({"prediction_index": True}, "p.jsonl:1: prediction_index: 'True' is not an option index"),
    ({"prediction_index": 1, "prediction": "3"},
     "p.jsonl:1: prediction_index: give prediction (option text) or prediction_index"),
])
def test_bad_prediction_indexes_are_errors_naming_the_place(numeric, row, expected):
    with pytest.raises(ImportFailed) as info:
        predictions_import(study=numeric, name="p.jsonl",
                           source=jsonl([{"item_id": "n0", "system": "m", **row}]))
    assert expected in str(info.value)
    assert not Prediction.objects.exists() and not AISystem.objects.exists()


def test_csv_predictions_follow_the_same_rule(numeric):
    src = io.StringIO("item_id,system,prediction,prediction_index\n"
                      "n0,a,2,\nn1,a,,2\nn2,a,3.0,\nn3,b,zero,\n")
    result = predictions_import(study=numeric, source=src, name="p.csv")
    got = _options(numeric)
    # CSV has no numbers: "3.0" is a text, and no option reads "3.0"
    assert (got[("a", "n0")], got[("a", "n1")], got[("a", "n2")], got[("b", "n3")]) == (
        3, 2, None, None)
    assert result.unparseable == {"a": 1, "b": 1} and result.missing == {}


def test_the_summary_reaches_the_command_the_api_and_the_admin(numeric, tmp_path):
    from django.test import Client
    from django.urls import reverse

    from annotations.core.services.studies import membership_add
    from annotations.models import StudyMembership
    from tests.factories import UserFactory

    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"item_id": "n0", "system": "m", "prediction": "nine"},
        {"item_id": "n1", "system": "m", "prediction": "2"},
        {"item_id": "n2", "system": "k", "prediction": ""}]))
    out = io.StringIO()
    call_command("import_predictions", str(numeric.pk), str(path), stdout=out)
    assert out.getvalue().strip() == (
        "3 predictions created, 0 updated. New systems: k, m. Unparseable (no option has "
        "that text), scored as wrong answers: m 1. Missing, scored as wrong answers: k 1.")
    researcher = UserFactory(username="r", is_staff=True)
    membership_add(study=numeric, user=researcher, role=StudyMembership.Role.RESEARCHER)
    client = Client()
    client.force_login(researcher)
    api = client.post(reverse("api-predictions", args=[numeric.pk]) + "?wait=true",
                      [{"item_id": "n3", "system": "m", "prediction": 7.0},
                       {"item_id": "n4", "system": "m", "prediction": 2.0}],
                      content_type="application/json")
    assert api.status_code == 201
    assert api.json() == {"created": 2, "updated": 0, "systems_created": [],
                          "unparseable": {"m": 1}, "missing": {}}
    upload = io.BytesIO(b'{"item_id": "n5", "system": "m", "prediction": "x"}')
    upload.name = "more.jsonl"
    page = client.post(reverse("admin:annotations_study_import_predictions",
                               args=[numeric.pk]), {"file": upload}, follow=True)
    assert ("imported more.jsonl:</strong> 1 prediction created, 0 updated. unparseable (no "
            "option has that text), scored as wrong answers: m 1.") in page.content.decode().lower()
    assert '<td data-testid="unparseable">m: 1</td>' in page.content.decode()


# --- a running study keeps its meaning (issue 8) ---------------------------------------------

def _answer_one(study) -> Query:
    from annotations.partitioned.services.labels import label_submit
    from annotations.partitioned.services.routing import query_lease_next
    from tests.factories import specialist

    k = Query.objects.filter(study=study, status="pending").order_by("pk").first().k
    user = specialist(study, k)
    query = query_lease_next(study=study, user=user)
    label_submit(query_id=query.pk, user=user, answer="no")
    return query


def test_update_refuses_to_rewrite_answered_items_and_says_why():
    study = make_study(k=3, n_items=4, seed=31)
    answered = _answer_one(study).item
    other = Item.objects.filter(study=study).exclude(pk=answered.pk).first()
    texts = (answered.text, other.text)
    rows = [{"id": answered.external_id, "text": "a different question",
             "options": answered.options},
            {"id": other.external_id, "text": "reworded", "options": other.options}]
    with pytest.raises(ImportFailed) as info:
        items_import(study=study, source=jsonl(rows), name="u.jsonl", update=True)
    assert str(info.value) == (
        f"u.jsonl:1: id: item '{answered.external_id}' has answered queries; an answered "
        "item cannot be rewritten (its labels answer the stored question)")
    answered.refresh_from_db()
    other.refresh_from_db()
    assert (answered.text, other.text) == texts


def test_the_text_of_an_item_a_specialist_is_reading_does_not_change_under_them():
    """Rewriting an item while its query is leased changed the question under the
    specialist reading it: their answer would have been stored against a text they never
    saw. The text waits for the answer (or the lease's end); its gold, stratum and
    metadata, which specialists do not see, may still change."""
    from django.core.exceptions import ValidationError

    from annotations.partitioned.services.routing import query_lease_next
    from tests.factories import specialist

    study = make_study(k=3, n_items=4, seed=35)
    k = Query.objects.filter(study=study).order_by("pk").first().k
    held = query_lease_next(study=study, user=specialist(study, k)).item
    rows = [{"id": held.external_id, "text": "a different question", "options": held.options}]
    with pytest.raises(ImportFailed) as info:
        items_import(study=study, source=jsonl(rows), name="u.jsonl", update=True)
    assert str(info.value) == (
        f"u.jsonl:1: text: item '{held.external_id}': a specialist is answering it right "
        "now: its text can change once they have answered or their lease has ended")
    held.text = "a different question"
    with pytest.raises(ValidationError, match="A specialist is answering it right now"):
        held.full_clean()
    held.refresh_from_db()
    rows = [{"id": held.external_id, "text": held.text, "options": held.options,
             "stratum": "moved", "gold_index": held.gold_option}]
    result = items_import(study=study, source=jsonl(rows), name="u.jsonl", update=True)
    assert result.updated == 1
    held.refresh_from_db()
    assert held.stratum == "moved" and held.text != "a different question"


def test_update_with_identical_answered_items_is_a_no_op():
    study = make_study(k=3, n_items=4, seed=32)
    answered = _answer_one(study).item
    row = {"id": answered.external_id, "text": answered.text, "options": answered.options,
           "gold_index": answered.gold_option, "stratum": answered.stratum}
    result = items_import(study=study, source=jsonl([row]), name="u.jsonl", update=True)
    assert (result.created, result.updated, result.unchanged) == (0, 0, 1)


def test_api_update_of_answered_items_is_refused_with_the_reason():
    from django.test import Client
    from django.urls import reverse

    from tests.factories import role_user

    study = make_study(k=3, n_items=4, seed=33)
    answered = _answer_one(study).item
    text = answered.text
    client = Client()
    client.force_login(role_user(study, "researcher"))
    response = client.post(reverse("api-items", args=[study.pk]) + "?update=true&wait=true",
                           [{"id": answered.external_id, "text": "changed",
                             "options": answered.options}], content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        f"request:1: id: item '{answered.external_id}' has answered queries; an answered "
        "item cannot be rewritten (its labels answer the stored question)"]
    answered.refresh_from_db()
    assert answered.text == text


def test_admin_refuses_new_options_for_a_routed_item():
    from django.test import Client

    from tests.factories import role_user

    study = make_study(k=3, n_items=2, seed=34)
    item = Item.objects.filter(study=study).first()
    client = Client()
    client.force_login(role_user(study, "researcher"))
    response = client.post(f"/admin/annotations/item/{item.pk}/change/", {
        "external_id": item.external_id, "text": item.text,
        "options": json.dumps(["x", "y", "z"]), "metadata": "{}", "stratum": item.stratum})
    assert response.status_code == 200
    assert ("The item has routed queries: its options (and K) are fixed once it is routed."
            in response.content.decode())
    item.refresh_from_db()
    assert item.options == ["opt 0.0", "opt 0.1", "opt 0.2"]


def test_admin_item_add_draws_the_shuffle_and_routes_in_an_open_study():
    from django.test import Client

    from tests.factories import role_user

    study = make_study(k=3, n_items=2, seed=35)
    client = Client()
    client.force_login(role_user(study, "researcher"))
    response = client.post("/admin/annotations/item/add/", {
        "study": study.pk, "external_id": "late", "text": "Late?",
        "options": json.dumps(["x", "y", "z"]), "metadata": "{}", "stratum": ""})
    assert response.status_code == 302
    item = Item.objects.get(study=study, external_id="late")
    assert sorted(item.option_order) == [0, 1, 2] and item.routed_at is not None
    assert Query.objects.filter(item=item).count() == 1


def _class_formset_post(study) -> dict:
    """The study change form as the browser posts it (classes, members, systems)."""
    from django.test import Client

    from tests.factories import role_user

    client = Client()
    client.force_login(role_user(study, "researcher"))
    page = client.get(f"/admin/annotations/study/{study.pk}/change/")
    data = {}
    form = page.context["adminform"].form
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is not None and value is not False:
            data[name] = value
    for formset in page.context["inline_admin_formsets"]:
        fs = formset.formset
        for key, value in fs.management_form.initial.items():
            data[f"{fs.prefix}-{key}"] = value
        for form in fs.forms:
            for name in form.fields:
                value = form.initial.get(name)
                if hasattr(value, "pk"):
                    value = value.pk
                if value is not None:
                    data[f"{form.prefix}-{name}"] = value
            data[f"{form.prefix}-id"] = form.instance.pk
    return client, data


@pytest.mark.parametrize("change", [{"classes-2-DELETE": "on"},
                                    {"classes-0-index": 1, "classes-1-index": 0},
                                    {"classes-TOTAL_FORMS": 4, "classes-3-index": 3,
                                     "classes-3-name": "C3"}])
def test_changing_the_classes_of_an_open_study_is_refused_with_the_reason(change):
    from annotations.models import StudyClass

    study = make_study(k=3, n_items=2, seed=36)
    before = list(StudyClass.objects.filter(study=study).values_list("pk", "index", "name"))
    client, data = _class_formset_post(study)
    data.update(change)
    response = client.post(f"/admin/annotations/study/{study.pk}/change/", data)
    assert response.status_code == 200
    assert ("The study is open: its classes are fixed (K = 3 is part of every routed "
            "query). Close it and start a new study to change the classes."
            in response.content.decode())
    assert list(StudyClass.objects.filter(study=study).values_list("pk", "index", "name")
                ) == before


def test_deleting_a_class_of_a_draft_study_is_allowed():
    from annotations.models import StudyClass

    study = make_study(k=3, n_items=0, seed=37, open_=False)
    StudyClass.objects.filter(study=study, index=2).first().specialists.all().delete()
    client, data = _class_formset_post(study)
    data = {k: v for k, v in data.items() if not k.startswith("memberships-")}
    data.update({"memberships-TOTAL_FORMS": 0, "memberships-INITIAL_FORMS": 0})
    data["classes-2-DELETE"] = "on"
    response = client.post(f"/admin/annotations/study/{study.pk}/change/", data)
    assert response.status_code == 302
    assert StudyClass.objects.filter(study=study).count() == 2


def test_the_service_refuses_deleting_a_class_of_an_open_study():
    from annotations.core.services.studies import study_class_delete
    from annotations.models import StudyClass

    study = make_study(k=3, n_items=2, seed=38)
    with pytest.raises(InvalidStudy, match="The study is open: its classes are fixed"):
        study_class_delete(study_class=StudyClass.objects.get(study=study, index=1))
    assert StudyClass.objects.filter(study=study).count() == 3


def test_large_imports_take_the_bulk_path_atomically_and_route_every_item():
    from annotations.partitioned.services.imports import IN_LIST_MAX
    from annotations.partitioned.services.routing import items_route

    n = IN_LIST_MAX + 200  # past the IN-list limit: the study's rows are read whole
    study = make_study(k=3, n_items=0, seed=39)
    rows = [{"id": f"b{i}", "text": f"q{i}", "options": ["x", "y", "z"]} for i in range(n)]
    bad = [*rows[:-1], {"id": "b-last", "text": "", "options": ["x", "y", "z"]}]
    with pytest.raises(ImportFailed, match=f"big.jsonl:{n}: text: missing"):
        items_import(study=study, source=jsonl(bad), name="big.jsonl")
    assert not Item.objects.filter(study=study).exists()
    result = items_import(study=study, source=jsonl(rows), name="big.jsonl")
    assert (result.created, result.routed) == (n, n)
    assert Query.objects.filter(study=study, sequence=0).count() == n
    assert not Item.objects.filter(study=study, routed_at__isnull=True).exists()
    assert items_route(study=study) == 0
    preds = [{"item_id": f"b{i}", "system": "big", "prediction": "y" if i % 7 else "?"}
             for i in range(n)]
    presult = predictions_import(study=study, source=jsonl(preds), name="p.jsonl")
    assert presult.created == n
    assert presult.unparseable == {"big": len([i for i in range(n) if i % 7 == 0])}
    again = predictions_import(study=study, source=jsonl(preds), name="p.jsonl", update=True)
    assert (again.created, again.updated) == (0, n)


def test_routing_an_import_draws_what_items_route_draws():
    """Items routed as they are inserted get the draws items_route would have made."""
    def routed(open_first: bool) -> list[tuple[str, list[int], int]]:
        from annotations.core.services.studies import study_open

        study = study_create(name=f"same-{open_first}", classes=["A", "B", "C"], seed=5,
                             queries_per_item=2)
        rows = [{"id": f"s{i}", "text": "t", "options": ["x", "y", "z"]} for i in range(30)]
        if open_first:
            study_open(study=study)
            items_import(study=study, source=jsonl(rows), name="s.jsonl")
        else:
            items_import(study=study, source=jsonl(rows), name="s.jsonl")
            study_open(study=study)
        return sorted((q.item.external_id, q.item.class_order, q.rank)
                      for q in Query.objects.filter(study=study).select_related("item"))

    assert routed(True) == routed(False)


# --- the gold rule (issue 8): gold is the option's text, gold_index its index -----------------

@pytest.fixture
def numeric_draft():
    """A draft whose items will have numeric option texts: where an index guess misreads."""
    return study_create(name="numeric-gold", classes=["A", "B", "C", "D"], shuffle_options=False)


def _golds(study) -> dict[str, int | None]:
    return dict(Item.objects.filter(study=study).values_list("external_id", "gold_option"))


def test_a_numeric_gold_is_read_as_option_text_never_as_an_index(numeric_draft):
    options = ["4", "3", "0", "2"]
    rows = [{"id": "g0", "gold": "2"},       # the option "2" = index 3 (an index guess: 2)
            {"id": "g1", "gold": 3.0},       # JSON 3.0 → "3" = index 1
            {"id": "g2", "gold": 0},         # JSON 0 → "0" = index 2
            {"id": "g3", "gold": " 4 "},     # spaces trimmed → index 0
            {"id": "g4", "gold_index": 2},   # by index: the option "0"
            {"id": "g5", "gold_index": 3.0},
            {"id": "g6", "gold_index": "1"},
            {"id": "g7"}]                    # no gold
    items_import(study=numeric_draft, name="g.jsonl", source=jsonl(
        [{"text": "How many?", "options": options, **row} for row in rows]))
    assert _golds(numeric_draft) == {"g0": 3, "g1": 1, "g2": 2, "g3": 0, "g4": 2, "g5": 3,
                                     "g6": 1, "g7": None}


def test_gold_of_items_without_options_is_the_class_name_or_its_index(numeric_draft):
    items_import(study=numeric_draft, name="g.jsonl", source=jsonl(
        [{"id": "c0", "text": "t", "gold": "C"}, {"id": "c1", "text": "t", "gold_index": 1}]))
    assert _golds(numeric_draft) == {"c0": 2, "c1": 1}


@pytest.mark.parametrize(("row", "expected"), [
    ({"gold": "7"}, "g.jsonl:1: gold: '7' is not one of the options"),
    ({"options": ["a", "b", "c", "d"], "gold": 1},
     "g.jsonl:1: gold: '1' is not one of the options (an index from 0 goes in gold_index)"),
    ({"gold_index": 4}, "g.jsonl:1: gold_index: 4 is outside 0..3"),
    ({"gold_index": 2.5}, "g.jsonl:1: gold_index: '2.5' is not a whole number"),
    ({"gold_index": "two"}, "g.jsonl:1: gold_index: 'two' is not a whole number"),
    ({"gold_index": True}, "g.jsonl:1: gold_index: 'True' is not an option index"),
    ({"gold": "3", "gold_index": 1},
     "g.jsonl:1: gold_index: give gold (the option's text) or gold_index (its index from 0), "
     "not both"),
    ({"gold_index": 1.5, "quality_check": True}, "g.jsonl:1: gold_index: '1.5'"),
])
def test_bad_golds_are_errors_naming_the_place_and_write_nothing(numeric_draft, row, expected):
    record = {"id": "g0", "text": "How many?", "options": ["4", "3", "0", "2"], **row}
    with pytest.raises(ImportFailed) as info:
        items_import(study=numeric_draft, name="g.jsonl", source=jsonl([record]))
    assert expected in str(info.value)
    assert not Item.objects.filter(study=numeric_draft).exists()


def test_csv_gold_follows_the_same_rule(numeric_draft):
    cell = json.dumps(["4", "3", "0", "2"]).replace('"', '""')
    src = io.StringIO("id,text,options,gold,gold_index\n"
                      f'a,t,"{cell}",2,\nb,t,"{cell}",,2\n')
    items_import(study=numeric_draft, source=src, name="g.csv")
    assert _golds(numeric_draft) == {"a": 3, "b": 2}
    # CSV has no numbers: "3.0" is a text, and no option reads "3.0"
    with pytest.raises(ImportFailed, match=r"g2.csv:2: gold: '3.0' is not one of the options"):
        items_import(study=numeric_draft, name="g2.csv",
                     source=io.StringIO(f'id,text,options,gold\nc,t,"{cell}",3.0\n'))


def test_the_api_reads_and_returns_gold_by_the_same_rule(numeric_draft):
    from django.test import Client
    from django.urls import reverse

    from annotations.core.services.studies import membership_add
    from annotations.models import StudyMembership
    from tests.factories import UserFactory

    researcher = UserFactory(username="r-gold", is_staff=True)
    membership_add(study=numeric_draft, user=researcher, role=StudyMembership.Role.RESEARCHER)
    client = Client()
    client.force_login(researcher)
    url = reverse("api-items", args=[numeric_draft.pk])
    created = client.post(url + "?wait=true", [
        {"id": "a", "text": "t", "options": ["4", "3", "0", "2"], "gold": 2.0},
        {"id": "b", "text": "t", "options": ["4", "3", "0", "2"], "gold_index": 2},
        {"id": "c", "text": "t", "gold": "D"}], content_type="application/json")
    assert created.status_code == 201, created.content
    listed = {r["id"]: (r["gold"], r["gold_index"]) for r in client.get(url).json()["results"]}
    assert listed == {"a": ("2", 3), "b": ("0", 2), "c": ("D", 3)}


def test_every_problem_of_a_line_is_named():
    # issue 17: a line's first problem hid the others
    study = make_study(k=3, n_items=1, open_=False)
    bad_item = {"id": "z", "quality_check": "maybe", "metadata": "[1]", "options": "x"}
    with pytest.raises(ImportFailed) as failed:
        items_import(study=study, source=jsonl([bad_item]), name="items.jsonl")
    assert [e.split(": ")[1] for e in failed.value.errors] == [
        "text", "options", "quality_check", "metadata"]
    bad_prediction = {"prediction": "a", "prediction_index": 1, "confidence": 7}
    with pytest.raises(ImportFailed) as failed:
        predictions_import(study=study, source=jsonl([bad_prediction]), name="p.jsonl")
    assert [e.split(": ")[1] for e in failed.value.errors] == [
        "item_id", "system", "prediction_index", "confidence"]
