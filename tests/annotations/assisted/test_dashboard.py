"""The assisted dashboard: who may see it, what it shows, live polling, and the CSV of
every figure (the snapshot's numbers, spreadsheet-safe)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.test import Client
from django.urls import reverse

from annotations.assisted.dashboard import (
    FIGURES,
    GLOSSARY,
    few_raters,
    figure_csv,
    reliance_unreliable,
)
from annotations.assisted.services.analysis import assisted_recompute
from annotations.assisted.services.demo import assisted_study_from_simulation
from annotations.core.services.studies import membership_add
from annotations.models import EstimateSnapshot, StudyMembership
from estimators.assisted.agreement import MIN_ALPHA_MINORITY
from estimators.assisted.reliance import MIN_RELIABLE_RATERS
from estimators.assisted.simulation import AssistedDesign, simulate_assisted
from tests.factories import UserFactory, make_study

pytestmark = pytest.mark.django_db
DESIGN = AssistedDesign(n_items=60, n_samples=5, raters_per_arm=4, items_per_rater=20)


@pytest.fixture(scope="module")
def seeded(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        seeded = assisted_study_from_simulation(name="dashboard", sim=simulate_assisted(
            DESIGN, seed=5), seed=5)
        study = seeded.study
        users = {}
        for role in ("manager", "researcher", "annotator"):
            users[role] = UserFactory(username=f"dash-{role}")
            membership_add(study=study, user=users[role], role=role)
        users["outsider"] = UserFactory(username="dash-outsider")
        assisted_recompute(study_id=study.pk)
        yield study, users
        study.delete()
        for user in users.values():
            user.delete()


def _client(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.mark.parametrize(("role", "status"), [
    (None, 302), ("outsider", 403), ("annotator", 403), ("manager", 200), ("researcher", 200)])
def test_only_managers_and_researchers_see_the_page_and_the_csv(seeded, role, status):
    study, users = seeded
    client = _client(users.get(role))
    for url in (reverse("assisted-dashboard", args=[study.pk]),
                reverse("dashboard", args=[study.pk]),
                reverse("assisted-figure-csv", args=[study.pk, "reliance"])):
        response = client.get(url)
        assert response.status_code == status, (url, role)
        if status == 302:
            assert "/accounts/login/" in response["Location"]


def test_the_page_shows_every_figure_with_its_csv(seeded):
    study, users = seeded
    html = _client(users["manager"]).get(
        reverse("dashboard", args=[study.pk])).content.decode()
    for testid in ("curves-chart", "reliance-chart", "calibration-chart", "best-threshold",
                   "held-out", "reliance", "regression", "results", "agreement", "arms"):
        assert f'data-testid="{testid}"' in html, testid
    for name in FIGURES:
        if name != "bands":
            assert reverse("assisted-figure-csv", args=[study.pk, name]) in html, name
    assert reverse("help-page", args=["manager-assisted"]) in html
    # two bars per arm (AI right / AI wrong), each carrying its value
    assert html.count('<rect x=') == 2 * len(DESIGN.arms)


def test_the_rule_is_chosen_in_the_url(seeded):
    study, users = seeded
    client = _client(users["manager"])
    url = reverse("assisted-dashboard", args=[study.pk])
    html = client.get(url + "?rule=majority").content.decode()
    assert '<option value="majority" selected>' in html
    assert "Accuracy against the threshold (Majority vote" in html
    fallback = client.get(url + "?rule=nonsense").content.decode()
    assert '<option value="individual" selected>' in fallback


def test_live_region_answers_204_until_a_newer_snapshot(seeded):
    study, users = seeded
    client = _client(users["manager"])
    url = reverse("assisted-dashboard", args=[study.pk])
    first = client.get(url, HTTP_HX_REQUEST="true")
    latest = EstimateSnapshot.objects.filter(study=study).latest("computed_at")
    token = first.content.decode().split('data-health="')[1].split('"')[0]
    same = client.get(url, {"since": latest.pk, "health": token}, HTTP_HX_REQUEST="true")
    assert same.status_code == 204
    newer = assisted_recompute(study_id=study.pk)
    swapped = client.get(url, {"since": latest.pk, "health": token}, HTTP_HX_REQUEST="true")
    assert swapped.status_code == 200
    assert f'data-snapshot="{newer.pk}"' in swapped.content.decode()


@pytest.mark.parametrize("name", list(FIGURES))
def test_every_csv_holds_the_snapshots_numbers(seeded, name):
    study, users = seeded
    response = _client(users["researcher"]).get(
        reverse("assisted-figure-csv", args=[study.pk, name]))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert f"study-{study.pk}-{name}-" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    payload = EstimateSnapshot.objects.filter(study=study).latest("computed_at").payload
    expected = FIGURES[name][1](payload)
    assert len(rows) == len(expected) > 0
    for got, want in zip(rows, expected, strict=True):
        for key, value in want.items():
            if isinstance(value, float):
                assert float(got[key]) == pytest.approx(value), (name, key)
            elif value is None:
                assert got[key] == ""


def test_csv_cells_never_run_as_spreadsheet_formulas():
    payload = {"arms": [{"key": "=HYPERLINK(\"http://x\")", "name": "-2+3", "components": [],
                         "n_ratings": 1}]}
    rows = list(csv.DictReader(io.StringIO(figure_csv(payload, "arms"))))
    assert rows[0]["key"].startswith("'=") and rows[0]["name"] == "'-2+3"
    assert rows[0]["n_ratings"] == "1"


def test_unknown_figures_and_studies_without_analysis_are_404(seeded):
    study, users = seeded
    client = _client(users["manager"])
    assert client.get(reverse("assisted-figure-csv", args=[study.pk, "nope"])).status_code == 404
    partitioned = make_study(k=3, n_items=3, seed=91)
    membership_add(study=partitioned, user=users["manager"],
                   role=StudyMembership.Role.MANAGER)
    assert client.get(reverse("assisted-dashboard",
                              args=[partitioned.pk])).status_code == 404


def test_the_guide_explains_every_term():
    from annotations.core.guides import guide_html

    _, html = guide_html("manager-assisted")
    for label, _ in GLOSSARY.values():
        assert label.replace("'", "&#x27;") in html or label in html, label


def test_the_page_reads_a_bounded_number_of_queries(seeded, django_assert_max_num_queries):
    study, users = seeded
    client = _client(users["manager"])
    url = reverse("assisted-dashboard", args=[study.pk])
    client.get(url)  # session, caches
    with django_assert_max_num_queries(12):
        assert client.get(url).status_code == 200


def test_the_page_says_the_reliance_intervals_are_unreliable_with_few_raters(seeded):
    # given a study of 4 raters per arm, fewer than MIN_RELIABLE_RATERS (5)
    study, users = seeded
    assert DESIGN.raters_per_arm < MIN_RELIABLE_RATERS
    html = _client(users["manager"]).get(
        reverse("dashboard", args=[study.pk])).content.decode()
    # then the reliance table says so, naming every arm and the baseline's comparisons
    note = html.split('data-testid="reliance-unreliable">', 1)[1].split("</p>", 1)[0]
    table = html.split('data-testid="reliance"', 1)[1].split("</table>", 1)[0]
    arms = re.findall(r'<tr data-arm="([^"]+)">', table)
    assert len(arms) == len(DESIGN.arms)
    for arm in arms:
        assert arm in note
    assert "fewer than 5 raters" in note and "every over- and under-reliance" in note


def test_the_unreliable_note_names_only_the_arms_with_few_raters():
    rows = [{"arm": "Baseline", "n_raters": 12}, {"arm": "Evidence", "n_raters": 5},
            {"arm": "Judgments", "n_raters": 4}]
    note = reliance_unreliable({"rows": rows, "baseline": "Baseline"})
    assert note == {"arms": ["Judgments"], "min_raters": MIN_RELIABLE_RATERS,
                    "baseline": False}
    assert reliance_unreliable({"rows": rows[:2], "baseline": "Baseline"}) is None
    assert reliance_unreliable(None) is None


@pytest.mark.parametrize("unreliable", [set(), {"All arms"}])
def test_the_page_says_where_alphas_interval_is_unreliable(seeded, unreliable):
    # given the latest analysis with α's rows marked as the estimator marks them
    study, users = seeded
    latest = EstimateSnapshot.objects.filter(study=study).latest("computed_at")
    payload = dict(latest.payload)
    payload["agreement"] = [{**row, "interval_reliable": row["source"] not in unreliable,
                             "n_minority": 12 if row["source"] in unreliable else 80}
                            for row in payload["agreement"]]
    EstimateSnapshot.objects.create(study=study, n_answered=latest.n_answered,
                                    duration_ms=1.0, payload=payload)
    # when the dashboard is read
    html = _client(users["manager"]).get(
        reverse("dashboard", args=[study.pk])).content.decode()
    # then the agreement table says so only for the sources with too few disagreements
    if not unreliable:
        assert 'data-testid="agreement-unreliable"' not in html
    else:
        note = html.split('data-testid="agreement-unreliable">', 1)[1].split("</p>", 1)[0]
        assert "All arms" in note and f"fewer than {MIN_ALPHA_MINORITY} ratings" in note
        others = {row["source"] for row in payload["agreement"]} - unreliable
        assert others and not any(f"for {s}" in note or f", {s}" in note for s in others)
    # and the time column says its interval is approximate
    assert "is approximate: a few raters rarely include the slowest" in html


def _manager_page(seeded) -> str:
    study, users = seeded
    return _client(users["manager"]).get(reverse("dashboard", args=[study.pk])).content.decode()


def _between(html: str, start: str, end: str) -> str:
    return html.split(start, 1)[1].split(end, 1)[0]


def test_the_page_says_the_sentence_intervals_speak_for_these_few_raters_only(seeded):
    # given a study of 4 raters per arm (fewer than MIN_RELIABLE_RATERS): every arm listed
    html = _manager_page(seeded)
    listed = re.findall(r'<tr data-arm="([^"]+)">', _between(html, 'data-testid="arms"',
                                                             "</table>"))
    # then Figure 1 says its intervals hold these raters fixed, naming every arm
    note = _between(html, 'data-testid="few-raters-hybrid">', "</p>")
    assert len(listed) == len(DESIGN.arms) and all(arm in note for arm in listed)
    assert "fewer than 5 raters" in note and "hold the raters fixed" in note
    # and so do the results rows
    results = _between(html, 'data-testid="few-raters-results">', "</p>")
    assert all(arm in results for arm in listed) and "raters held fixed" in results


def test_the_few_raters_note_names_only_the_arms_with_few_raters():
    payload = {"arms": [{"key": "Baseline", "n_raters": 12, "n_ratings": 300},
                        {"key": "Evidence", "n_raters": 4, "n_ratings": 80},
                        {"key": "Unused", "n_raters": 0, "n_ratings": 0}]}
    assert few_raters(payload) == ["Evidence"]
    assert few_raters({"arms": payload["arms"][:1]}) == []


def test_the_page_says_the_ece_is_biased_and_its_interval_conservative(seeded):
    note = _between(_manager_page(seeded), 'data-testid="ece-note">', "</p>")
    assert "biased upwards" in note and "at least 95 %" in note


def test_no_few_raters_note_with_enough_raters(seeded):
    # given the same snapshot with every arm at 5 raters
    from annotations.assisted.dashboard import assisted_dashboard_context

    study, _ = seeded
    snapshot = study.snapshots.order_by("-pk").first()
    payload = snapshot.payload
    arms = [{**a, "n_raters": MIN_RELIABLE_RATERS} for a in payload["arms"]]
    snapshot.payload = {**payload, "arms": arms}
    snapshot.save(update_fields=["payload"])
    try:
        assert assisted_dashboard_context(study)["few_raters"] == []
    finally:
        snapshot.payload = payload
        snapshot.save(update_fields=["payload"])
