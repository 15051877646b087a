"""Raw exports of every study type (issue 17): CSV and JSONL from the study's pages and the
API, for its researchers and managers; the assisted ratings with comments, what each rater
was shown and what they opened."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from annotations.assisted.services.exposure import interaction_record
from annotations.core.exports import csv_cell, rows_write
from annotations.core.services.studies import membership_add
from annotations.models import StudyMembership
from tests.annotations.assisted.helpers import make_assisted_study, rater_in_arm
from tests.annotations.critique.helpers import answer_next, make_critique_study
from tests.factories import UserFactory, make_study

pytestmark = pytest.mark.django_db


def _manager(study):
    user = UserFactory()
    membership_add(study=study, user=user, role=StudyMembership.Role.MANAGER)
    return user


def _rated_assisted_study(settings):
    from annotations.assisted.services.rating import rating_lease_next
    from tests.annotations.assisted.test_rating import rate

    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_assisted_study(n_sentences=2, arms={"E": ["search", "evidence"]})
    helped = rater_in_arm(study, "E")
    blind = rater_in_arm(study, "Baseline")
    from annotations.assisted.services.exposure import task_show
    from annotations.models import Exposure

    task = rating_lease_next(study=study, user=helped)
    task_show(task=task, user=helped, via=Exposure.Via.PAGE)
    interaction_record(user=helped, public_id=task.public_id, kind="expand",
                       section="evidence")
    from annotations.assisted.services.rating import RatingInput, rating_submit

    rating_submit(user=helped, public_id=task.public_id, data=RatingInput(
        "accurate", 2, 1, "=cmd|' /C calc'!A0 useful"))
    other = rating_lease_next(study=study, user=blind)
    task_show(task=other, user=blind, via=Exposure.Via.PAGE)
    rate(blind, other, "cant_assess", None)
    return study


def test_the_assisted_export_has_comments_exposures_and_interactions(client, settings):
    study = _rated_assisted_study(settings)
    client.force_login(_manager(study))  # managers download as they read the dashboard
    jsonl = client.get(reverse("study-export", args=[study.pk]) + "?format=jsonl")
    assert jsonl.status_code == 200 and jsonl["Content-Type"] == "application/jsonl"
    assert jsonl.streaming  # sent as it is read, never held whole
    rows = [json.loads(line) for line in jsonl.getvalue().decode().splitlines()]
    by_arm = {r["arm"]: r for r in rows}
    helped, blind = by_arm["E"], by_arm["Baseline"]
    assert helped["comment"].endswith("useful") and helped["shown_components"] == [
        "search", "evidence"]
    assert [i["section"] for i in helped["interactions"]] == ["evidence"]
    assert blind["shown_components"] == [] and blind["confidence"] is None
    table = client.get(reverse("study-export", args=[study.pk]) + "?format=csv")
    parsed = list(csv.DictReader(io.StringIO(table.getvalue().decode())))
    assert {r["arm"] for r in parsed} == {"E", "Baseline"}
    comment = next(r["comment"] for r in parsed if r["arm"] == "E")
    assert comment.startswith("'=")  # a formula is not run by a spreadsheet


@pytest.mark.parametrize("kind", ["partitioned", "critique"])
def test_every_type_exports_from_the_page_and_the_api(client, kind):
    if kind == "partitioned":
        study = make_study(k=3, n_items=3, seed=9)
        whats = ["labels"]
    else:
        study, users = make_critique_study(n_questions=1)
        answer_next(study, users[0])
        whats = ["outputs", "tasks", "metrics"]
    manager = _manager(study)
    client.force_login(manager)
    for what in whats:
        page = client.get(reverse("study-export", args=[study.pk]),
                          {"what": what, "format": "csv"})
        assert page.status_code == 200 and page["Content-Disposition"].endswith(
            f'{what}.csv"')
        api = client.get(reverse("api-export", args=[study.pk]),
                         {"what": what, "format": "jsonl"})
        assert api.status_code == 200 and api["Content-Type"] == "application/jsonl"
    client.force_login(UserFactory())
    assert client.get(reverse("study-export", args=[study.pk])).status_code == 403
    assert client.get(reverse("api-export", args=[study.pk])).status_code == 403


def test_the_dashboards_and_study_pages_link_the_raw_exports(client, settings):
    study = _rated_assisted_study(settings)
    client.force_login(_manager(study))
    html = client.get(reverse("dashboard", args=[study.pk])).content.decode()
    assert 'data-testid="raw-exports"' in html and "what=ratings&amp;format=jsonl" in html


def test_a_csv_cell_defuses_formulas_and_keeps_json():
    assert csv_cell("=1+1") == "'=1+1" and csv_cell("-2") == "'-2" and csv_cell(-2) == -2
    assert csv_cell(None) == "" and csv_cell(["a", "é"]) == '["a", "é"]'
    out = io.StringIO()
    assert rows_write([{"a": 1}, {"b": 2}], out=out) == 2
    assert out.getvalue() == "a,b\n1,\n,2\n"


def test_the_assisted_export_labels_confidence_and_helpfulness_as_the_rating_page(
        client, settings):
    from annotations.assisted.views import CONFIDENCE_CHOICES, HELPFULNESS_CHOICES

    study = _rated_assisted_study(settings)
    client.force_login(_manager(study))
    table = client.get(reverse("study-export", args=[study.pk]) + "?format=csv")
    by_arm = {r["arm"]: r for r in csv.DictReader(io.StringIO(table.getvalue().decode()))}
    helped, blind = by_arm["E"], by_arm["Baseline"]
    # confidence 2 and helpfulness 1 as the page offers them: the words beside the keys 3 and 8
    page_words = {v: label for v, label, _ in CONFIDENCE_CHOICES}
    assert (helped["confidence"], helped["confidence_label"]) == ("2", "Mostly confident")
    assert page_words[2] == "Mostly confident"
    assert (helped["helpfulness"], helped["helpfulness_label"]) == ("1", "Somewhat helpful")
    assert {v: label for v, label, _ in HELPFULNESS_CHOICES}[1] == "Somewhat helpful"
    # "can't confidently assess" asks neither: both empty
    assert (blind["confidence_label"], blind["helpfulness_label"]) == ("", "")


def test_the_critique_export_labels_confidence_as_the_work_page():
    from annotations.critique.services.exports import output_rows
    from annotations.critique.views import CONFIDENCE_LEVELS

    study, users = make_critique_study(n_questions=1)
    answer_next(study, users[0], confidence=1)
    answer_next(study, users[1], confidence=4)
    rows = [r for r in output_rows(study) if r["author_kind"] == "human"]
    assert sorted((r["confidence"], r["confidence_label"]) for r in rows) == [
        (1, "a guess"), (4, "confident")]
    assert (1, "a guess") in CONFIDENCE_LEVELS and (4, "confident") in CONFIDENCE_LEVELS
