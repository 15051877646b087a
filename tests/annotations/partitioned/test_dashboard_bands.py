"""The partitioned dashboard's "accuracy by the AI's own confidence" section: shown for
systems with confidences only, following the chosen estimator, with the curve chart."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from annotations.partitioned.dashboard import band_context
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.predictions import predictions_import
from annotations.partitioned.services.simulation import study_simulate
from tests.factories import make_study, role_user

pytestmark = pytest.mark.django_db


def _with_confidences(study, n_items: int) -> None:
    rng = np.random.default_rng(4)
    rows = ["item_id,system,prediction_index,confidence"]
    rows += [f"i{i},confident,{rng.integers(0, 3)},{rng.uniform():.3f}" for i in range(n_items)]
    rows += [f"i{i},silent,{rng.integers(0, 3)}," for i in range(n_items)]
    predictions_import(study=study, source=io.StringIO("\n".join(rows)), name="p.csv",
                       fmt="csv")


@pytest.fixture
def banded():
    study = make_study(k=3, n_items=240, seed=81, open_=False)
    _with_confidences(study, 240)
    from annotations.core.services.studies import study_open

    study_open(study=study)
    study_simulate(study=study)
    study_recompute(study_id=study.pk)
    return study


def _page(study, method: str = "ml") -> str:
    client = Client()
    client.force_login(role_user(study, "manager"))
    response = client.get(reverse("dashboard", args=[study.pk]) + f"?method={method}")
    assert response.status_code == 200
    return response.content.decode()


def test_dashboard_shows_bands_and_curve_for_systems_with_confidences(banded):
    html = _page(banded)
    assert "Accuracy by the AI's own confidence (Maximum likelihood)" in html
    assert 'data-testid="band-chart"' in html
    assert 'class="band-table" data-system="confident"' in html
    assert 'data-system="silent"' not in html.split('data-testid="bands"')[1]
    section = html.split('data-testid="bands"')[1]
    assert len(re.findall(r'<tr data-band="\d">', section)) == 3
    assert "nothing (all to the AI)" in section
    # the glossary explains the new columns (tooltip text)
    assert "AI accuracy on the rest" in section and "Share to humans" in section


def test_band_cells_follow_the_chosen_estimator(banded):
    payload = study_recompute(study_id=banded.pk).payload
    systems = payload["systems"]
    for method in ("ml", "ord", "ivw"):
        ctx = band_context(systems, method, payload["k"])
        rows = ctx["tables"][0]["rows"]
        source = next(s for s in systems if s["name"] == "confident")["bands"]["rows"]
        assert [r["cell"]["accuracy"] for r in rows] == [
            r["estimates"][method]["accuracy"] for r in source]
    html = _page(banded, "ord")
    assert "Accuracy by the AI's own confidence (Ordinary only)" in html


def test_no_band_section_without_confidences():
    study = make_study(k=3, n_items=30, systems={"a": 0.7}, seed=83)
    study_simulate(study=study)
    study_recompute(study_id=study.pk)
    html = _page(study)
    assert 'data-testid="bands"' not in html
    assert study_recompute(study_id=study.pk).payload["confidence_bands"] is None
