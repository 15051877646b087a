"""Imports and exports: atomic, errors name file, line and field; nothing half-done."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.errors import ImportFailed, InvalidStudy
from annotations.models import Item, Query
from annotations.services.imports import items_import
from annotations.services.studies import study_create
from assistants.models import AISystem, Prediction
from assistants.services import predictions_import
from tests.factories import jsonl, make_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft():
    return study_create(name="draft", classes=["A", "B", "C"])


def _csv(text: str) -> io.StringIO:
    return io.StringIO(text)


def test_csv_items_import_with_json_cells(draft):
    src = _csv('id,text,options,gold,stratum,metadata\n'
               'x1,What?,"[""a"",""b"",""c""]",b,s1,"{""src"": 1}"\n'
               'x2,Why?,"[""d"",""e"",""f""]",0,s2,\n')
    result = items_import(study=draft, source=src, name="items.csv")
    assert (result.created, result.updated) == (2, 0)
    x1 = Item.objects.get(study=draft, external_id="x1")
    assert (x1.gold_option, x1.stratum, x1.metadata) == (1, "s1", {"src": 1})
    assert sorted(x1.option_order) == [0, 1, 2]


@pytest.mark.parametrize(("content", "expected"), [
    ('{"id": "a", "text": "t", "options": ["x", "y"]}', "items.jsonl:1: options: 2 options but the study has K=3"),
    ('{"id": "a", "text": "t"}\n{"id": "a", "text": "u"}', "items.jsonl:2: id: 'a' repeats line 1"),
    ('{"id": "a"}', "items.jsonl:1: text: missing"),
    ('{"id": "a", "text": "t", "gold": 7}', "items.jsonl:1: gold: gold index 7 is outside 0..2"),
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
    with pytest.raises(ImportFailed, match="i.jsonl:1: id: 'a' already exists"):
        items_import(study=draft, source=jsonl([{"id": "a", "text": "new"}]), name="i.jsonl")
    assert Item.objects.get(study=draft, external_id="a").text == "old"
    result = items_import(study=draft, source=jsonl([{"id": "a", "text": "new"}]),
                          name="i.jsonl", update=True)
    assert (result.created, result.updated) == (0, 1)
    assert Item.objects.get(study=draft, external_id="a").text == "new"


def test_items_imported_into_an_open_study_are_routed():
    study = make_study(k=3, n_items=5)
    before = Query.objects.filter(study=study).count()
    items_import(study=study, source=jsonl([{"id": "late", "text": "t"}]), name="late.jsonl")
    assert Query.objects.filter(study=study).count() == before + 1


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
    with pytest.raises(ImportFailed, match="p.jsonl:2: item_id: unknown item 'nope'"):
        predictions_import(study=study, source=jsonl(rows), name="p.jsonl")
    assert Prediction.objects.count() == 0
    assert AISystem.objects.filter(study=study).count() == 0


def test_predictions_parse_index_text_and_garbage():
    study = make_study(k=3, n_items=3)
    item = Item.objects.get(study=study, external_id="i0")
    rows = [{"item_id": "i0", "system": "idx", "prediction": 2},
            {"item_id": "i0", "system": "txt", "prediction": item.options[1]},
            {"item_id": "i0", "system": "bad", "prediction": "no idea"}]
    predictions_import(study=study, source=jsonl(rows), name="p.jsonl")
    got = {p.system.name: (p.option, p.position) for p in Prediction.objects.filter(item=item)}
    assert got["idx"] == (2, item.option_order.index(2))
    assert got["txt"] == (1, item.option_order.index(1))
    assert got["bad"] == (None, None)


def test_prediction_reimport_rejected_then_updated_refreshes_masks():
    study = make_study(k=3, n_items=6, systems={"m": 0.5})
    from annotations.services.labels import label_submit
    from annotations.services.routing import query_lease_next
    from tests.factories import specialist

    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    label_submit(query_id=q.pk, user=user, answer="no")
    original = q.item.option_order[0]  # the option shown at position 0 = class 0
    rows = [{"item_id": q.item.external_id, "system": "m", "prediction": original}]
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
    good.write_text("\n".join(json.dumps({"id": f"g{i}", "text": "t", "gold": i % 3})
                              for i in range(6)))
    call_command("import_items", str(draft.pk), str(good), stdout=io.StringIO())
    preds = tmp_path / "p.csv"
    preds.write_text("item_id,system,prediction\n" + "".join(f"g{i},sys,{i % 3}\n"
                                                             for i in range(6)))
    call_command("import_predictions", draft.name, str(preds), stdout=io.StringIO())
    assert AISystem.objects.get(study=draft).reference_correct == 6
    from annotations.services.studies import membership_add, study_open
    from tests.factories import UserFactory

    study_open(study=draft)
    membership_add(study=draft, user=UserFactory(username="s"), role="specialist", class_index=0)
    call_command("simulate_study", str(draft.pk), stdout=io.StringIO(), stderr=io.StringIO())
    out = tmp_path / "labels.csv"
    call_command("export_labels", str(draft.pk), "-o", str(out), stderr=io.StringIO())
    lines = out.read_text().strip().splitlines()
    assert lines[0].startswith("query_id,item_id,stratum,k,class_name")
    assert len(lines) - 1 == Query.objects.filter(study=draft, status="answered").count()


def test_validate_estimators_command_prints_the_table_and_writes_the_figure(tmp_path):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    figure = tmp_path / "fig2.svg"
    call_command("validate_estimators", "--reps", "500", "--k", "4", "--accuracy", "0.8",
                 "--n-ord", "50", "--n-comp", "150", "--figure", str(figure),
                 "--ratios", "1,4", stdout=out, stderr=StringIO())
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("K=4 A=0.8 n_o=50 n_c=150 reps=500")
    assert [line.split()[0] for line in lines[2:]] == ["Ord", "Comp-n_o", "Comp-(K-1)",
                                                       "Comp-Var", "IVW-0.5", "IVW", "ML"]
    svg = figure.read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 5


def test_api_imports_are_atomic_and_name_the_bad_record():
    from django.test import Client
    from django.urls import reverse

    from annotations.models import Item
    from assistants.models import Prediction
    from tests.factories import make_study, role_user

    study = make_study(k=3, n_items=0, open_=False, seed=81)
    client = Client()
    client.force_login(role_user(study, "researcher"))
    url = reverse("api-items", args=[study.pk])
    ok = client.post(url, [{"id": "a", "text": "first"}, {"id": "b", "text": "second"}],
                     content_type="application/json")
    assert ok.status_code == 201 and ok.json() == {"created": 2, "updated": 0}
    bad = client.post(url, [{"id": "c", "text": "x"}, {"id": "a", "text": "again"}],
                      content_type="application/json")
    assert bad.status_code == 400 and "request:2" in bad.content.decode()
    assert sorted(Item.objects.filter(study=study).values_list("external_id", flat=True)) == [
        "a", "b"]
    preds = client.post(reverse("api-predictions", args=[study.pk]),
                        [{"item_id": "a", "system": "m1", "prediction": 1},
                         {"item_id": "zzz", "system": "m1", "prediction": 0}],
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
