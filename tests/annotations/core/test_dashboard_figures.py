"""Every dashboard offers the CSV of each figure and table it draws (issue 17), through one
mechanism (``core.exports`` figures, ``core.views.figure_csv``), to those who may read the
dashboard; and every dashboard leads with one headline figure per AI system, arm or level
with its interval (``core.charts.headline``, ``templates/annotations/_headline.html``)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse

from annotations.assisted.services.analysis import assisted_recompute
from annotations.assisted.services.demo import assisted_study_from_simulation
from annotations.core.exports import figures_of
from annotations.core.services.studies import membership_add
from annotations.critique.services.analysis import critique_recompute
from annotations.models import StudyMembership
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.simulation import study_simulate
from estimators.assisted.simulation import AssistedDesign, simulate_assisted
from tests.annotations.critique.helpers import answer_next, make_critique_study
from tests.factories import UserFactory, make_study

pytestmark = pytest.mark.django_db
CSV_LINK = re.compile(r'href="(/studies/\d+/(?:assisted/)?dashboard/([\w-]+)\.csv)"')


def _member(study, role):
    user = UserFactory()
    membership_add(study=study, user=user, role=role)
    return user


def _partitioned():
    study = make_study(k=4, n_items=300, seed=81, strata=2,
                       systems={"=HYPERLINK(evil)": 0.8, "plain": 0.5})
    study_simulate(study=study)
    return study, study_recompute(study_id=study.pk)


def _critique():
    study, users = make_critique_study(n_questions=2, top_level=1, counts=[3, 2])
    for _ in range(6):
        for user in users:
            answer_next(study, user, final=0)
    return study, critique_recompute(study_id=study.pk)


def _assisted():
    seeded = assisted_study_from_simulation(
        name="figures", sim=simulate_assisted(AssistedDesign(
            n_items=40, n_samples=5, raters_per_arm=3, items_per_rater=15), seed=8), seed=8)
    return seeded.study, assisted_recompute(study_id=seeded.study.pk)


BUILDERS = {"partitioned": _partitioned, "assisted": _assisted, "critique": _critique}


@pytest.fixture(autouse=True)
def _no_minimum(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0


@pytest.mark.parametrize("kind", ["partitioned", "critique", "assisted"])
def test_every_figure_on_the_dashboard_links_its_csv_and_the_csv_downloads(client, kind):
    study, snapshot = BUILDERS[kind]()
    client.force_login(_member(study, StudyMembership.Role.MANAGER))
    html = client.get(reverse("dashboard", args=[study.pk])).content.decode()
    linked = {name: url for url, name in CSV_LINK.findall(html)}
    offered = dict(figures_of(study.kind))
    # every chart and table of the page sits above a CSV link, each a registered figure
    assert linked and set(linked) <= set(offered)
    n_tables = html.count("<table")
    n_links = len(CSV_LINK.findall(html))
    assert n_links >= n_tables // 2, (n_links, n_tables)  # bands: 2 tables per system, 1 CSV
    for name, url in linked.items():
        response = client.get(url)
        assert response.status_code == 200, url
        assert response["Content-Type"].startswith("text/csv")
        assert f"snapshot-{snapshot.pk}.csv" in response["Content-Disposition"]
        assert response.content.decode().splitlines()[0], name  # a header at least


def test_the_partitioned_estimates_csv_holds_the_drawn_numbers_spreadsheet_safe(client):
    study, snapshot = _partitioned()
    client.force_login(_member(study, StudyMembership.Role.RESEARCHER))
    body = client.get(reverse("figure-csv", args=[study.pk, "estimates"])).content.decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    ml = {r["system"]: r for r in rows if r["estimator"] == "Maximum likelihood"}
    assert set(ml) == {"'=HYPERLINK(evil)", "plain"}  # a formula name is defused
    for system in snapshot.payload["systems"]:
        name = ("'" + system["name"]) if system["name"].startswith("=") else system["name"]
        est = system["estimates"]["ml"]
        assert float(ml[name]["accuracy"]) == pytest.approx(est["accuracy"])
        assert float(ml[name]["ci_low"]) == pytest.approx(est["ci_low"])
        assert float(ml[name]["ci_high"]) == pytest.approx(est["ci_high"])
    convergence = client.get(reverse("figure-csv", args=[study.pk, "convergence"]))
    assert convergence.status_code == 200


def test_the_critique_levels_csv_holds_every_level_row(client):
    study, snapshot = _critique()
    client.force_login(_member(study, StudyMembership.Role.MANAGER))
    body = client.get(reverse("figure-csv", args=[study.pk, "levels"])).content.decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    levels = snapshot.payload["levels"]
    assert len(rows) == len(levels)
    for row, level in zip(rows, levels, strict=True):
        assert int(row["level"]) == level["level"]
        assert row["accuracy"] == ("" if level["accuracy"] is None else str(level["accuracy"]))


@pytest.mark.parametrize(("role", "status"), [
    (None, 302), ("outsider", 403), ("specialist", 403), ("manager", 200),
    ("researcher", 200)])
def test_figure_csvs_are_for_those_who_read_the_dashboard(client, role, status):
    study = make_study(k=3, n_items=30, seed=83)
    study_simulate(study=study)
    study_recompute(study_id=study.pk)
    if role == "outsider":
        client.force_login(UserFactory())
    elif role == "specialist":
        client.force_login(study.memberships.filter(role="specialist").first().user)
    elif role:
        client.force_login(_member(study, role))
    response = client.get(reverse("figure-csv", args=[study.pk, "estimates"]))
    assert response.status_code == status


def test_an_unknown_figure_or_no_snapshot_is_404(client):
    study = make_study(k=3, n_items=30, seed=84)
    client.force_login(_member(study, StudyMembership.Role.MANAGER))
    assert client.get(reverse("figure-csv", args=[study.pk, "estimates"])).status_code == 404
    study_simulate(study=study)
    study_recompute(study_id=study.pk)
    assert client.get(reverse("figure-csv", args=[study.pk, "nope"])).status_code == 404
    assert client.get(reverse("figure-csv", args=[study.pk, "estimates"])).status_code == 200


@pytest.mark.parametrize("kind", ["partitioned", "critique", "assisted"])
def test_each_dashboard_leads_with_one_headline_figure_per_system_arm_or_level(client, kind):
    study, snapshot = BUILDERS[kind]()
    client.force_login(_member(study, StudyMembership.Role.MANAGER))
    html = client.get(reverse("dashboard", args=[study.pk])).content.decode()
    live = html[html.index('id="live"'):]
    assert live.index('data-testid="headline"') < live.index("<table")  # it leads
    figures = re.findall(r'data-testid="headline-figure" data-name="([^"]*)">.*?'
                         r'<strong class="headline-value[^"]*">([^<]*)</strong>\s*'
                         r'<span class="headline-interval"[^>]*>([^<]*)</span>', live, re.S)
    payload = snapshot.payload
    if kind == "partitioned":
        expected = {s["name"]: s["estimates"]["ml"] for s in payload["systems"]}
        keys = ("accuracy", "ci_low", "ci_high")
    elif kind == "assisted":
        expected = {r["arm"]: r for r in payload["reliance"]["rows"]}
        keys = ("accuracy", "accuracy_lower", "accuracy_upper")
    else:
        expected = {f"{r['level']} · ": r for r in payload["levels"]
                    if r["domain"] is None and r["author"] == "all"}
        keys = ("accuracy", "accuracy_lower", "accuracy_upper")
    assert len(figures) == len(expected)
    for name, value, interval in figures:
        key = next(k for k in expected if name.replace("&#x27;", "'").startswith(k))
        row = expected[key]
        assert float(value) == pytest.approx(row[keys[0]], abs=5e-4)
        low, high = (float(x) for x in re.findall(r"[-\d.]+", interval.split("[")[1]))
        assert low == pytest.approx(row[keys[1]], abs=5e-4)
        assert high == pytest.approx(row[keys[2]], abs=5e-4)
