"""Confidence bands: the band rule, quantile edges, bit planes, the import's confidence
column, and the stored bits against the rule applied row by row."""

from __future__ import annotations

import io

import numpy as np
import pytest

from annotations.core.errors import DomainError, ImportFailed
from annotations.models import Query
from annotations.partitioned.services.banding import (
    BAND_FIELDS,
    band_bits,
    band_index,
    quantile_edges,
    systems_bands_refresh,
)
from annotations.partitioned.services.labels import label_submit, label_undo, query_bit_fields
from annotations.partitioned.services.predictions import (
    confidence_bands_set,
    predictions_import,
    query_masks_refresh,
)
from annotations.partitioned.services.routing import query_lease_next
from assistants.band_edges import edges_problem
from assistants.models import AISystem, ConfidenceBands, Prediction
from estimators.assisted.hybridization import band_of
from tests.factories import jsonl, specialist

pytestmark = pytest.mark.django_db


def test_band_index_is_the_hybridization_band_rule_plus_one():
    rng = np.random.default_rng(3)
    for _ in range(50):
        edges = sorted(set(np.round(rng.uniform(0.01, 0.99, rng.integers(1, 7)), 2)))
        # confidences on the edges themselves, and between
        conf = np.concatenate([edges, np.round(rng.uniform(0, 1, 40), 2), [0.0, 1.0]])
        expected = band_of(conf, edges) + 1
        assert [band_index(float(c), edges) for c in conf] == expected.tolist()
    assert band_index(None, [0.5]) == 0
    assert band_index(0.3, []) == 0


def test_quantile_edges_give_equal_shares_and_keep_ties_together():
    values = np.arange(300) / 300
    edges = quantile_edges(values, 3)
    bands = band_of(values, edges)
    assert np.bincount(bands).tolist() == [100, 100, 100]
    # ties never straddle an edge: two values, three bands asked → two bands
    tied = [0.8] * 50 + [1.0] * 50
    assert quantile_edges(tied, 3) == [0.8]
    assert quantile_edges([0.9] * 10, 4) == []
    assert quantile_edges([], 3) == []


def test_quantile_edges_match_an_inverted_cdf():
    rng = np.random.default_rng(5)
    for n_bands in (2, 3, 4, 7):
        values = np.round(rng.beta(5, 1.5, 997), 3)
        expected = sorted({float(q) for q in np.quantile(
            values, [j / n_bands for j in range(1, n_bands)], method="inverted_cdf")
            if q < values.max()})
        assert quantile_edges(values, n_bands) == expected


def test_band_bits_store_each_systems_band_in_three_planes():
    bands = {0: 3, 1: 0, 2: 7, 5: 1, 62: 6}
    bits = band_bits(bands)
    decoded = {o: sum(((bits[f] >> o) & 1) << plane for plane, f in enumerate(BAND_FIELDS))
               for o in bands}
    assert decoded == bands
    assert band_bits({0: 0, 3: 0}) == dict.fromkeys(BAND_FIELDS)


@pytest.mark.parametrize(("edges", "problem"), [
    ([], "at least one edge"),
    ([0.5, 0.5], "must increase"),
    ([0.0, 0.5], "strictly between 0 and 1"),
    ([0.5, 1.0], "strictly between 0 and 1"),
    (["a"], "not a number"),
    ([True], "not a number"),
    ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], "at most 6 edges"),
])
def test_fixed_edges_are_checked(edges, problem):
    assert problem in edges_problem(edges)


def test_good_fixed_edges_pass():
    assert edges_problem([0.5, 0.8]) is None


# --- the import's confidence column ------------------------------------------------------
def _csv(rows: list[str]) -> io.StringIO:
    return io.StringIO("\n".join(["item_id,system,prediction_index,confidence", *rows]))


def test_import_stores_confidences_and_bands_the_systems(make_study):
    study = make_study(k=3, n_items=9, open_=False)
    rows = [f"i{i},sys,0,{i / 10}" for i in range(9)] + ["i0,other,1,"]
    predictions_import(study=study, source=_csv(rows), name="p.csv", fmt="csv")
    stored = dict(Prediction.objects.filter(system__name="sys")
                  .values_list("item__external_id", "confidence"))
    assert stored == {f"i{i}": i / 10 for i in range(9)}
    assert Prediction.objects.get(system__name="other").confidence is None
    sys_ = AISystem.objects.get(study=study, name="sys")
    assert sys_.band_edges == [0.2, 0.5]  # tertiles of 0.0 … 0.8
    assert [b["n"] for b in sys_.band_stats] == [3, 3, 3]
    assert sys_.band_stats[1]["mean_confidence"] == pytest.approx(0.4)
    assert AISystem.objects.get(study=study, name="other").band_edges == []


@pytest.mark.parametrize(("value", "problem"), [
    ("85", "85 is outside 0..1 (a share, not a percentage)"),
    ("-0.1", "-0.1 is outside 0..1 (a share, not a percentage)"),
    ("high", "'high' is not a number"),
    ("nan", "'nan' is not a finite number"),
])
def test_bad_confidences_name_file_line_and_field_and_change_nothing(make_study, value,
                                                                       problem):
    study = make_study(k=3, n_items=3, open_=False)
    rows = ["i0,sys,0,0.5", f"i1,sys,1,{value}", "i2,sys,2,0.9"]
    with pytest.raises(ImportFailed) as exc:
        predictions_import(study=study, source=_csv(rows), name="p.csv", fmt="csv")
    assert exc.value.errors == [f"p.csv:3: confidence: {problem}"]
    assert not Prediction.objects.filter(system__study=study).exists()
    assert not AISystem.objects.filter(study=study).exists()


def test_a_json_boolean_is_not_a_confidence(make_study):
    study = make_study(k=3, n_items=2, open_=False)
    source = jsonl([{"item_id": "i0", "system": "s", "prediction_index": 0,
                     "confidence": True}])
    with pytest.raises(ImportFailed) as exc:
        predictions_import(study=study, source=source, name="p.jsonl", fmt="jsonl")
    assert exc.value.errors == ["p.jsonl:1: confidence: 'True' is not a number"]


# --- stored bits against the rule ---------------------------------------------------------
def _answer_some(study, n: int) -> None:
    k = study.classes.count()
    done = 0
    for c in range(k):
        user = specialist(study, c)
        while done < n:
            query = query_lease_next(study=study, user=user)
            if query is None:
                break
            Query.objects.filter(pk=query.pk).update(rendered_at=None)
            label_submit(query_id=query.pk, user=user, answer="no")
            done += 1


def _bits(query: Query) -> dict:
    return {f: getattr(query, f) for f in BAND_FIELDS}


def test_answer_time_bits_equal_the_sql_refresh_and_follow_the_scheme(make_study, settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_study(k=3, n_items=30, open_=True)
    rng = np.random.default_rng(2)
    rows = [f"i{i},a,{rng.integers(0, 3)},{rng.uniform():.3f}" for i in range(30)]
    rows += [f"i{i},b,{rng.integers(0, 3)},{'' if i % 4 == 0 else f'{rng.uniform():.2f}'}"
             for i in range(30)]
    predictions_import(study=study, source=_csv(rows), name="p.csv", fmt="csv")
    _answer_some(study, 24)
    answered = list(Query.objects.filter(study=study, status="answered"))
    assert len(answered) == 24
    written = {q.pk: _bits(q) for q in answered}
    assert any(v["band_bit0"] for v in written.values())
    # the Python rule at answer time = the SQL refresh
    query_masks_refresh(study=study)
    for q in Query.objects.filter(study=study, status="answered"):
        assert _bits(q) == written[q.pk]
        assert {f: v for f, v in query_bit_fields(q).items() if f in BAND_FIELDS} == _bits(q)
    # a fixed scheme re-bands every answered query
    confidence_bands_set(study=study, scheme="fixed", edges=[0.25, 0.5, 0.75])
    preds = {(p.item_id, p.system.ordinal): p.confidence
             for p in Prediction.objects.filter(system__study=study).select_related("system")}
    for q in Query.objects.filter(study=study, status="answered"):
        for ordinal in (0, 1):
            band = sum((((getattr(q, f) or 0) >> ordinal) & 1) << plane
                       for plane, f in enumerate(BAND_FIELDS))
            assert band == band_index(preds.get((q.item_id, ordinal)), [0.25, 0.5, 0.75])


def test_undo_clears_the_band_bits(make_study, settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_study(k=3, n_items=6, open_=True)
    predictions_import(study=study, source=_csv([f"i{i},a,0,{i / 6:.3f}" for i in range(6)]),
                       name="p.csv", fmt="csv")
    user = specialist(study, 0)
    query = query_lease_next(study=study, user=user)
    label_submit(query_id=query.pk, user=user, answer="yes")
    label_undo(study=study, user=user)
    assert _bits(Query.objects.get(pk=query.pk)) == dict.fromkeys(BAND_FIELDS)


def test_bad_scheme_changes_nothing(make_study):
    study = make_study(k=3, n_items=6, open_=False)
    predictions_import(study=study, source=_csv([f"i{i},a,0,{i / 6:.3f}" for i in range(6)]),
                       name="p.csv", fmt="csv")
    before = AISystem.objects.get(study=study).band_edges
    with pytest.raises(DomainError, match="edges: must increase"):
        confidence_bands_set(study=study, scheme="fixed", edges=[0.6, 0.4])
    with pytest.raises(DomainError, match="n_bands"):
        confidence_bands_set(study=study, scheme="quantile", n_bands=9)
    assert not ConfidenceBands.objects.filter(study=study).exists()
    assert AISystem.objects.get(study=study).band_edges == before


def test_removing_confidences_unbands_the_system(make_study):
    study = make_study(k=3, n_items=6, open_=False)
    predictions_import(study=study, source=_csv([f"i{i},a,0,{i / 6:.3f}" for i in range(6)]),
                       name="p.csv", fmt="csv")
    assert AISystem.objects.get(study=study).band_edges
    predictions_import(study=study, source=_csv([f"i{i},a,0," for i in range(6)]),
                       name="p.csv", fmt="csv", update=True)
    system = AISystem.objects.get(study=study)
    assert (system.band_edges, system.band_stats) == ([], [])
    assert not systems_bands_refresh(study=study)  # nothing left to change


@pytest.mark.postgres
def test_postgres_quantiles_equal_the_python_rule(make_study):
    study = make_study(k=3, n_items=400, open_=False)
    rng = np.random.default_rng(9)
    conf = np.round(rng.beta(4, 1.5, 400), 3)
    predictions_import(study=study, source=_csv([f"i{i},a,0,{c}" for i, c in enumerate(conf)]),
                       name="p.csv", fmt="csv")
    for n_bands in (2, 3, 5):
        confidence_bands_set(study=study, scheme="quantile", n_bands=n_bands)
        assert AISystem.objects.get(study=study).band_edges == quantile_edges(conf, n_bands)


def test_the_api_takes_and_returns_confidences(make_study):
    from django.test import Client
    from django.urls import reverse

    from tests.factories import role_user

    study = make_study(k=3, n_items=3, open_=False)
    client = Client()
    client.force_login(role_user(study, "researcher"))
    url = reverse("api-predictions", args=[study.pk]) + "?wait=true"
    bad = client.post(url, [{"item_id": "i0", "system": "s", "prediction_index": 0,
                             "confidence": 0.2},
                            {"item_id": "i1", "system": "s", "prediction_index": 1,
                             "confidence": "1.5"}], content_type="application/json")
    assert bad.status_code == 400
    assert bad.json()["errors"] == [
        "request:2: confidence: 1.5 is outside 0..1 (a share, not a percentage)"]
    assert not Prediction.objects.filter(system__study=study).exists()
    good = client.post(url, [{"item_id": "i0", "system": "s", "prediction_index": 0,
                              "confidence": 0.25}], content_type="application/json")
    assert good.status_code == 201
    listed = client.get(reverse("api-predictions", args=[study.pk])).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [(r["item_id"], r["confidence"]) for r in rows] == [("i0", 0.25)]
