"""Researchers' screens: a new token shown once and stored hashed, revoking, the call log,
registering a candidate as an AI system, and the evaluations page (budget per token, the
candidate's history as a table and CSV; 404 for anyone else)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.test import Client

from annotations.evaluation.models import EvaluationCall, EvaluationSettings, EvaluationToken
from annotations.evaluation.services.tokens import token_create, token_digest
from annotations.partitioned.services.simulation import study_simulate
from assistants.models import AISystem
from tests.annotations.evaluation.test_evaluate import post, predictions_of
from tests.factories import built_once, make_study, role_user, specialist

pytestmark = pytest.mark.django_db


def _simulated():
    s = make_study(k=4, n_items=120, systems={"cand": 0.7})
    study_simulate(study=s)
    EvaluationSettings.objects.update_or_create(study=s, defaults={"holdout_share": 0.0})
    return s


@pytest.fixture(scope="module")
def study(django_db_setup, django_db_blocker):
    with built_once(django_db_blocker, _simulated) as s:
        yield s


def researcher_client(study) -> Client:
    client = Client()
    client.force_login(role_user(study, "researcher"))
    return client


def test_adding_a_token_shows_it_once_and_stores_its_digest(study):
    client = researcher_client(study)
    response = client.post("/admin/annotations/evaluationtoken/add/", {
        "study": study.pk, "name": "ADAS run", "min_batch": 100, "max_batch": 20000,
        "daily_budget": 20, "ladder": "on", "ladder_margin": 0.02, "final_reports": 1},
        follow=True)
    raw = re.search(r'data-testid="evaluation-token">(ev_[^<]+)<', response.content.decode())
    assert raw, response.content.decode()[:2000]
    token = EvaluationToken.objects.get(name="ADAS run")
    assert token.digest == token_digest(raw.group(1)) and token.created_by is not None
    assert raw.group(1) not in client.get(
        f"/admin/annotations/evaluationtoken/{token.pk}/change/").content.decode()


def test_revoking_from_the_admin(study):
    token, raw = token_create(study=study, name="t", min_batch=1)
    researcher_client(study).post("/admin/annotations/evaluationtoken/", {
        "action": "revoke", "_selected_action": [token.pk]})
    token.refresh_from_db()
    assert token.revoked
    assert post(study.pk, raw, {"candidate": "c", "predictions": predictions_of(study)}
                ).status_code == 403


def test_the_log_the_page_and_registering_a_candidate(study):
    token, raw = token_create(study=study, name="loop", min_batch=1, ladder=False)
    for _ in range(3):
        post(study.pk, raw, {"candidate": "cot-v3", "predictions": predictions_of(study)})
    post(study.pk, raw, {"candidate": "cot-v3", "predictions": []})  # rejected
    client = researcher_client(study)
    log = client.get("/admin/annotations/evaluationcall/").content.decode()
    assert log.count("cot-v3") >= 4 and "empty" in log
    page = client.get(f"/studies/{study.pk}/evaluations/")
    assert page.status_code == 200
    usage = page.context["usage"][0]
    assert (usage["today"], usage["left"], usage["rejected"]) == (3, 17, 1)
    rows = list(csv.DictReader(io.StringIO(
        client.get(f"/studies/{study.pk}/evaluations/?format=csv").content.decode())))
    scores = list(EvaluationCall.objects.filter(accepted=True).order_by("id")
                  .values_list("score", flat=True))
    assert [r["n"] for r in rows] == ["1", "2", "3"]
    assert [float(r["score"]) for r in rows] == pytest.approx(scores)
    call = EvaluationCall.objects.filter(accepted=True).first()
    client.post("/admin/annotations/evaluationcall/", {
        "action": "register", "_selected_action": [call.pk]})
    assert AISystem.objects.filter(study=study, name="cot-v3").exists()
    # the registered candidate's history on the dashboard, for researchers only
    dashboard = client.get(f"/studies/{study.pk}/dashboard/").content.decode()
    panel = dashboard[dashboard.index('data-testid="evaluation-panel"'):]
    panel = panel[:panel.index("</section>")]
    assert "cot-v3" in panel and panel.count("<tr><td>") == 3
    assert f"{scores[0]:.3f}" in panel
    manager = Client()
    manager.force_login(role_user(study, "manager"))
    assert "evaluation-panel" not in manager.get(f"/studies/{study.pk}/dashboard/"
                                                ).content.decode()


def test_the_page_is_for_researchers_only(study):
    client = Client()
    client.force_login(specialist(study, 0))
    assert client.get(f"/studies/{study.pk}/evaluations/").status_code == 404


def test_a_token_needs_a_partitioned_study():
    from annotations.core.models import Study, StudyMembership
    from annotations.core.services.studies import membership_add, study_create

    study = make_study(k=2, n_items=3)
    assisted = study_create(name="assisted-for-token", classes=["a", "b"])
    Study.objects.filter(pk=assisted.pk).update(kind=Study.Kind.ASSISTED)
    researcher = role_user(study, "researcher")
    membership_add(study=assisted, user=researcher, role=StudyMembership.Role.RESEARCHER)
    client = Client()
    client.force_login(researcher)
    response = client.post("/admin/annotations/evaluationtoken/add/", {
        "study": assisted.pk, "name": "x", "min_batch": 100, "max_batch": 20000,
        "daily_budget": 20, "ladder": "on", "ladder_margin": 0.02, "final_reports": 1})
    assert response.status_code == 200
    assert "need a partitioned study" in response.content.decode()
    assert not EvaluationToken.objects.exists()
