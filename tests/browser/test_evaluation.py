"""The evaluation service in Chromium: a researcher creates an evaluation token in the admin
(shown once), a loop evaluates candidates with it through the client, and the study's
Evaluations page shows the budget spent and each candidate's history; no sideways scroll at
390 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.evaluation.models import EvaluationSettings
from annotations.partitioned.services.simulation import study_simulate
from assistants.models import Prediction
from oversight_client import Evaluator
from tests.browser.conftest import login
from tests.factories import make_study, role_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)


def test_a_researcher_creates_a_token_and_reads_the_history(page, live_server):
    study = make_study(k=4, n_items=120, systems={"cand": 0.7}, name="browser-evaluation")
    study_simulate(study=study)
    EvaluationSettings.objects.update_or_create(study=study, defaults={"holdout_share": 0.0})
    researcher = role_user(study, "researcher")
    login(page, live_server, researcher.username)
    page.locator(f'a[href="/studies/{study.pk}/evaluations/"]').click()
    expect(page.get_by_role("heading", name=f"Evaluation service · {study.name}")).to_be_visible()

    page.goto(f"{live_server.url}/admin/annotations/evaluationtoken/add/")
    page.select_option("select[name=study]", str(study.pk))
    page.fill("input[name=name]", "ADAS run")
    page.fill("input[name=min_batch]", "50")
    page.get_by_role("button", name="Save", exact=True).click()
    raw = page.get_by_test_id("evaluation-token").inner_text()
    assert raw.startswith("ev_")

    preds = {p.item.external_id: p.option
             for p in Prediction.objects.filter(system__study=study).select_related("item")}
    ev = Evaluator(live_server.url, study.pk, raw)
    released = [ev.evaluate(preds, candidate="agent-1").score for _ in range(3)]

    page.goto(f"{live_server.url}/studies/{study.pk}/evaluations/")
    tokens = page.get_by_test_id("tokens")
    expect(tokens).to_contain_text("ADAS run")
    expect(tokens.locator("tbody tr").first).to_contain_text("17")  # 20 − 3 left today
    candidate = page.get_by_test_id("candidate")
    expect(candidate.get_by_role("heading", name="agent-1")).to_be_visible()
    expect(candidate.locator("tbody tr")).to_have_count(3)
    expect(candidate.locator("tbody tr").first).to_contain_text(f"{released[0]:.3f}")
    expect(candidate.locator("svg polyline")).to_have_count(1)
    page.set_viewport_size({"width": 390, "height": 800})
    page.reload()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
