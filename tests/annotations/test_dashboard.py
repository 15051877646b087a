"""Every estimator, its corrections and the assumption flags reach the snapshot, the API
and the dashboard; the manager picks the estimator."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import Query
from annotations.services.estimates import METHODS, study_recompute
from annotations.services.simulation import study_simulate
from tests.factories import make_study, role_user

pytestmark = pytest.mark.django_db
FIELDS = {"accuracy", "accuracy_clipped", "se", "ci_low", "ci_high", "bound", "weight",
          "bound_valid"}


@pytest.fixture
def study():
    study = make_study(k=4, n_items=600, systems={"good": 0.85, "poor": 0.4}, seed=71,
                       strata=2)
    study_simulate(study=study, unsure_rate=0.02)
    return study


def test_snapshot_carries_every_estimator_and_correction(study):
    payload = study_recompute(study_id=study.pk).payload
    system = payload["systems"][0]
    assert set(system["estimates"]) == set(METHODS)
    for est in system["estimates"].values():
        assert set(est) == FIELDS
    assert system["estimates"]["ivw_fixed"]["weight"] == 0.5
    assert set(system["ipw"]) == {"accuracy", "se", "ci_low", "ci_high"}
    stratified = system["stratified"]
    assert stratified["ci_low"] <= stratified["accuracy"] <= stratified["ci_high"]
    assert sum(stratified["weights"].values()) == pytest.approx(1)
    for stratum in system["strata"].values():
        assert set(stratum["estimates"]) == set(METHODS)
    assert payload["plan"]["routed_queries"] > 0
    assert system["design_effect"] is None  # one query per item: no clustering


def test_api_exposes_the_same_fields(study):
    study_recompute(study_id=study.pk)
    client = Client()
    client.force_login(role_user(study, "manager"))
    data = client.get(reverse("api-estimates", args=[study.pk])).json()
    est = data["payload"]["systems"][0]["estimates"]["ivw"]
    assert set(est) == FIELDS


def test_manager_picks_the_estimator_and_sees_bounds_and_strata(study):
    study_recompute(study_id=study.pk)
    client = Client()
    client.force_login(role_user(study, "manager"))
    page = client.get(reverse("dashboard", args=[study.pk]) + "?method=ivw_fixed")
    html = page.content.decode()
    assert 'data-method="ivw_fixed"' in html and "By stratum (IVW (w = 0.5))" in html
    assert 'option value="ivw_fixed" selected' in html
    assert "All estimators side by side" in html
    fallback = client.get(reverse("dashboard", args=[study.pk]) + "?method=nonsense")
    assert 'data-method="ml"' in fallback.content.decode()
    live = client.get(reverse("dashboard", args=[study.pk]) + "?method=comp",
                      HTTP_HX_REQUEST="true")
    assert 'data-method="comp"' in live.content.decode() and "&amp;method=comp" in (
        live.content.decode())


def test_completion_imbalance_and_abstention_are_flagged():
    study = make_study(k=3, n_items=900, systems={"m": 0.7}, seed=72)
    study_simulate(study=study)
    # class 0 answered everything 'not sure' and class 2 left half its queries unanswered
    Query.objects.filter(study=study, k=0).update(answer="unsure")
    answered = Query.objects.filter(study=study, k=2, status="answered").order_by("pk")
    half = list(answered.values_list("pk", flat=True)[: answered.count() // 2])
    Query.objects.filter(pk__in=half).update(status="pending", answer="", answered_at=None,
                                             answered_by=None)
    payload = study_recompute(study_id=study.pk).payload
    codes = {f["code"] for f in payload["assumptions"]}
    assert codes == {"completion_imbalance", "abstention_differs"}


def test_several_queries_per_item_use_the_clustered_variance():
    study = make_study(k=5, n_items=400, queries_per_item=3, systems={"m": 0.5}, seed=73)
    study_simulate(study=study)
    system = study_recompute(study_id=study.pk).payload["systems"][0]
    assert system["design_effect"] is not None and system["design_effect"] > 1
    # the counts are the labels themselves; the clustering acts on the SE and interval
    raw_n_comp = Query.objects.filter(study=study, answer="no").count()
    assert system["counts"]["n_comp"] == raw_n_comp


def test_few_labels_are_flagged_for_the_guarantee():
    study = make_study(k=4, n_items=30, systems={"m": 0.7}, seed=74)
    study_simulate(study=study)
    system = study_recompute(study_id=study.pk).payload["systems"][0]
    assert system["flags"] == ["few_labels_for_guarantee"]


def test_planning_calculator_answers_and_names_bad_fields(study):
    from estimators.planning import plan_labels

    client = Client()
    client.force_login(role_user(study, "manager"))
    url = reverse("plan", args=[study.pk])
    html = client.get(url, {"width": "0.05", "pilot": "0.8"}).content.decode()
    expected = plan_labels(0.05, 0.8, 4)
    assert f"{expected.routed_queries:,.0f}" in html
    assert "width: must lie" in client.get(url, {"width": "2", "pilot": "0.8"}).content.decode()
    assert "enter numbers" in client.get(url, {"width": "x", "pilot": "0.8"}).content.decode()
    specialist_client = Client()
    from tests.factories import specialist

    specialist_client.force_login(specialist(study, 0))
    assert specialist_client.get(url, {"width": "0.05", "pilot": "0.8"}).status_code == 403
