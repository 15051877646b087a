"""Audit pages through the client: who may start and read audits (another study's researcher
and the study's manager get 404), a bad file through the page changes nothing, the result
page, the downloads (CSV and JSONL through core.exports), the rubric admin."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotations.audit.models import Audit, AuditFile, AuditOutcome, Criterion, Rubric
from annotations.core.models import ImportJob, ImportJobFile, StudyMembership
from estimators.nodata.kappa import MIN_KAPPA_MINORITY
from tests.annotations.audit.helpers import (
    DATA,
    commitments_file,
    datapoints_file,
    expected_successes,
    liar,
    make_audit_study,
    make_rubric,
)

pytestmark = pytest.mark.django_db


def _post_start(client, study, rubric, commitments: bytes, **extra):
    return client.post(reverse("audits", args=[study.pk]), {
        "action": "start", "rubric": rubric.pk, "dataset": "upload", "rounds": 3, "phi": 0.5,
        "seed": 4,
        "commitments": SimpleUploadedFile("c.jsonl", commitments),
        "datapoints": SimpleUploadedFile("d.jsonl", datapoints_file()), **extra})


@pytest.fixture
def finished(client, django_capture_on_commit_callbacks, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the run in process, even with a broker
    study, researcher = make_audit_study()
    rubric = make_rubric(study)
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):  # the task runs in process
        response = _post_start(client, study, rubric, commitments_file(liar))
    # the files go to an import job (run by the submitting request in the tests), whose
    # page names the audit it started
    job = ImportJob.objects.get(study=study, kind=ImportJob.Kind.AUDIT)
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    audit = Audit.objects.get(study=study)
    assert response.status_code == 302
    assert response["Location"] == reverse("audit-upload", args=[study.pk, job.pk])
    assert job.summary["audit_id"] == audit.pk
    return study, researcher, audit


def test_a_researcher_starts_an_audit_and_reads_its_result(client, finished):
    study, _, audit = finished
    audit.refresh_from_db()
    assert audit.status == Audit.Status.SUCCEEDED
    html = client.get(reverse("audit-detail", args=[study.pk, audit.pk])).content.decode()
    n, k = len(DATA), sum(expected_successes(liar))
    assert f"{k} of {n} datapoints" in html
    assert f"{100 * k / n:.1f} %" in html
    assert "Clopper–Pearson" in html and "Theorem 1" in html
    assert 'data-testid="failed"' in html
    assert "hx-get" not in html  # an ended audit no longer polls
    assert 'data-testid="kappa"' not in html  # nobody labelled these datapoints


def test_a_running_audit_polls_and_shows_its_progress(client):
    study, researcher = make_audit_study()
    audit = Audit.objects.create(study=study, rubric=make_rubric(study), total=10, done=4,
                                 status=Audit.Status.RUNNING)
    client.force_login(researcher)
    url = reverse("audit-detail", args=[study.pk, audit.pk])
    html = client.get(url).content.decode()
    assert f'hx-get="{url}?progress=1"' in html and "Running: 4/10 datapoints" in html
    part = client.get(url + "?progress=1", HTTP_HX_REQUEST="true").content.decode()
    assert part.startswith('<div id="audit-result"') and "<html" not in part
    client.post(url, {"action": "cancel"})
    audit.refresh_from_db()
    assert audit.cancel_requested


@pytest.mark.parametrize("role", ["other_researcher", "manager", "specialist"])
def test_nobody_but_the_studys_researchers_runs_or_reads_its_audits(client, finished, role):
    study, _, audit = finished
    other, other_researcher = make_audit_study("other")
    user = {"other_researcher": other_researcher,
            "manager": study.memberships.get(role=StudyMembership.Role.MANAGER).user,
            "specialist": study.memberships.filter(
                role=StudyMembership.Role.SPECIALIST).first().user}[role]
    client.force_login(user)
    for url in (reverse("audits", args=[study.pk]),
                reverse("audit-detail", args=[study.pk, audit.pk]),
                reverse("audit-download", args=[study.pk, audit.pk]) + "?what=outcomes",
                reverse("audit-download", args=[study.pk, audit.pk]) + "?what=commitments"):
        assert client.get(url).status_code == 404, url
    assert client.post(reverse("audit-detail", args=[study.pk, audit.pk]),
                       {"action": "cancel"}).status_code == 404
    before = Audit.objects.count()
    response = _post_start(client, study, Rubric.objects.get(study=study),
                           commitments_file(liar))
    assert response.status_code == 404 and Audit.objects.count() == before
    # nor through their own study's address
    if role == "other_researcher":
        assert client.get(reverse("audit-detail", args=[other.pk, audit.pk])).status_code == 404


# Issue 27: several problems on a line, invalid JSON between them, and both files at once.
BAD_DATAPOINTS = (b'{"item": "d0", "datapoint": "01"}\n'
                  b'{"item": "d0", "reference": 2, "colour": 1}\n'
                  b'{"item": oops\n'
                  b'{"item": "", "datapoint": null}\n')
BAD_COMMITMENTS = (b'{"item": "d0", "round": 1, "label": 1, "similar": "0"}\n'
                   b'{"item": "zz", "round": 9, "label": "yes", "similar": null, "why": 1}\n'
                   b'not json\n'
                   b'{"item": "d0", "round": 1, "label": 0, "similar": "1"}\n'
                   b'{"round": 1}\n')
EVERY_PROBLEM = [
    "d.jsonl:2: colour: unknown field (expected one of datapoint, item, reference)",
    "d.jsonl:2: item: 'd0' repeats line 1",
    "d.jsonl:2: datapoint: missing (any JSON value but null)",
    "d.jsonl:2: reference: the integer 0 or 1 (a person's label), or leave it out; got 2",
    "d.jsonl:3: invalid JSON (Expecting value, column 10)",
    "d.jsonl:4: item: a non-empty text of at most 200 characters or an integer, got ''",
    "d.jsonl:4: datapoint: missing (any JSON value but null)",
    "c.jsonl:2: why: unknown field (expected item, round, label, similar)",
    "c.jsonl:2: item: 'zz' is not an item of the audited data set",
    "c.jsonl:2: round: 9 exceeds the audit's 3 rounds",
    "c.jsonl:2: label: expected the integer 0 or 1, got 'yes'",
    "c.jsonl:2: similar: expected a datapoint, got null",
    "c.jsonl:3: invalid JSON (Expecting value, column 1)",
    "c.jsonl:4: round: item 'd0' round 1 already committed on line 1",
    "c.jsonl:5: item: missing",
    "c.jsonl:5: label: missing",
    "c.jsonl:5: similar: missing",
]


def test_every_problem_of_both_files_is_listed_in_line_order_and_nothing_changes(client):
    """Issue 27: one invalid JSON line hid the other problems, datapoint errors hid the
    commitments', a line showed its first problem only, and commitments spoke their own
    format ("c.jsonl, line 2, field item: …")."""
    study, researcher = make_audit_study()
    rubric = make_rubric(study)
    client.force_login(researcher)
    response = client.post(reverse("audits", args=[study.pk]), {
        "action": "start", "rubric": rubric.pk, "dataset": "upload", "rounds": 3, "phi": 0.5,
        "seed": 4, "commitments": SimpleUploadedFile("c.jsonl", BAD_COMMITMENTS),
        "datapoints": SimpleUploadedFile("d.jsonl", BAD_DATAPOINTS)})
    job = ImportJob.objects.get(study=study, kind=ImportJob.Kind.AUDIT)
    assert response["Location"] == reverse("audit-upload", args=[study.pk, job.pk])
    assert job.status == ImportJob.Status.FAILED
    assert job.errors == EVERY_PROBLEM
    page = client.get(response["Location"])
    html = page.content.decode()
    assert "Nothing was changed: no audit was started." in html
    listed = html.split('data-testid="import-errors">')[1].split("</ul>")[0]
    assert listed.count("<li>") == len(EVERY_PROBLEM)
    assert "c.jsonl:2: label: expected the integer 0 or 1, got &#x27;yes&#x27;" in listed
    assert not Audit.objects.exists() and not AuditFile.objects.exists()
    assert not ImportJobFile.objects.exists()  # the uploaded bytes are dropped
    audits_page = client.get(reverse("audits", args=[study.pk])).content.decode()
    assert f"{len(EVERY_PROBLEM)} problems; no audit started" in audits_page


def test_a_bad_rubric_file_on_the_page_changes_nothing(client):
    study, researcher = make_audit_study()
    client.force_login(researcher)
    response = client.post(reverse("audits", args=[study.pk]), {
        "action": "rubric", "name": "r", "aggregator": "majority",
        "file": SimpleUploadedFile("r.jsonl", b'{"name": "a", "check": "regex", "text": "x(?!y)"}\n')})
    assert response.status_code == 400
    assert "r.jsonl:1: text: criterion a: uses a negative look-ahead" in response.content.decode()
    assert not Rubric.objects.exists()


def test_downloads_carry_every_outcome_and_round_as_csv_and_jsonl(client, finished):
    study, _, audit = finished
    url = reverse("audit-download", args=[study.pk, audit.pk])
    stored = list(AuditOutcome.objects.filter(audit=audit).order_by("position"))
    jsonl = client.get(url + "?what=outcomes&format=jsonl")
    assert jsonl["Content-Type"] == "application/jsonl"
    rows = [json.loads(line) for line in jsonl.content.decode().splitlines()]
    assert [(r["item"], r["success"], r["final_label"]) for r in rows] == [
        (o.item, o.success, o.final_label) for o in stored]
    table = list(csv.DictReader(io.StringIO(
        client.get(url + "?what=outcomes&format=csv").content.decode())))
    assert [r["item"] for r in table] == [o.item for o in stored]
    assert [r["success"] for r in table] == [str(o.success) for o in stored]
    rounds = list(csv.DictReader(io.StringIO(
        client.get(url + "?what=rounds&format=csv").content.decode())))
    assert len(rounds) == sum(len(o.rounds) for o in stored)
    summary = json.loads(client.get(url + "?what=summary&format=jsonl").content)
    assert summary["successes"] == audit.successes and summary["criteria"] == ["has_11",
                                                                               "starts_0"]
    assert client.get(url + "?what=commitments").content == commitments_file(liar)
    assert client.get(url + "?what=datapoints").content == datapoints_file()
    assert client.get(url + "?what=secrets").status_code == 404


def test_the_rubric_admin_saves_two_programmatic_criteria_and_refuses_unsafe_ones(client):
    study, researcher = make_audit_study()
    client.force_login(researcher)
    url = reverse("admin:annotations_rubric_add")
    assert client.get(url).status_code == 200

    def post(second_pattern: str):
        return client.post(url, {
            "study": study.pk, "name": "r", "aggregator": "all", "description": "",
            "criteria-TOTAL_FORMS": 2, "criteria-INITIAL_FORMS": 0,
            "criteria-MIN_NUM_FORMS": 1, "criteria-MAX_NUM_FORMS": 1000,
            "criteria-0-position": 0, "criteria-0-name": "a", "criteria-0-kind": "contains",
            "criteria-0-text": "11", "criteria-0-value": "null",
            "criteria-1-position": 1, "criteria-1-name": "b", "criteria-1-kind": "regex",
            "criteria-1-text": second_pattern, "criteria-1-value": "null", "_save": "Save"})

    refused = post("(?<=a)b")
    assert refused.status_code == 200
    assert "criterion b: uses a look-ahead or look-behind" in refused.content.decode()
    assert not Rubric.objects.exists()
    saved = post("^0")
    rubric = Rubric.objects.get(study=study)
    assert saved.status_code == 302
    assert saved["Location"] == f"{reverse('audits', args=[study.pk])}?rubric={rubric.pk}"
    page = client.get(saved["Location"]).content.decode()
    assert f'<option value="{rubric.pk}" selected>' in page
    assert list(Criterion.objects.values_list("name", "kind")) == [("a", "contains"),
                                                                  ("b", "regex")]


def test_another_studys_researcher_does_not_see_the_rubric_in_the_admin(client):
    study, _ = make_audit_study()
    rubric = make_rubric(study)
    _, other = make_audit_study("other")
    client.force_login(other)
    assert client.get(reverse("admin:annotations_rubric_change", args=[rubric.pk])
                      ).status_code in (302, 404)
    listing = client.get(reverse("admin:annotations_rubric_changelist")).content.decode()
    assert rubric.name not in listing


def test_the_audit_guide_is_a_page_of_the_site_with_its_links(client):
    _, researcher = make_audit_study()
    client.force_login(researcher)
    html = client.get(reverse("help-page", args=["audit"])).content.decode()
    assert "What the success rate means" in html
    assert f'href="{reverse("help-page", args=["nodata"])}' in html
    assert f'href="{reverse("help-page", args=["coverage"])}' in html
    assert client.get(reverse("help-page", args=["nodata"])).status_code == 200


def test_the_result_shows_kappa_where_people_labelled_the_datapoints(
        client, django_capture_on_commit_callbacks, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the run in process, even with a broker
    study, researcher = make_audit_study()
    rubric = make_rubric(study)
    client.force_login(researcher)
    datapoints = "".join(json.dumps({"item": f"d{i}", "datapoint": x, "reference": i % 2})
                         + "\n" for i, x in enumerate(DATA)).encode()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("audits", args=[study.pk]), {
            "action": "start", "rubric": rubric.pk, "dataset": "upload", "rounds": 3,
            "phi": 0.5, "seed": 4, "commitments": SimpleUploadedFile("c.jsonl",
                                                                     commitments_file(liar)),
            "datapoints": SimpleUploadedFile("d.jsonl", datapoints)})
    audit = Audit.objects.get(study=study)
    html = client.get(reverse("audit-detail", args=[study.pk, audit.pk])).content.decode()
    assert 'data-testid="kappa"' in html
    assert f"labels of {len(DATA)} datapoints" in html
    # ten datapoints: one side gave its less common label at most five times, fewer than
    # MIN_KAPPA_MINORITY, so the page says κ's interval is unreliable
    kappa = audit.summary["kappa"]
    assert kappa["n_minority"] <= 5 and kappa["interval_reliable"] is False
    assert 'data-testid="kappa-unreliable"' in html
    assert f"less common label only {kappa['n_minority']} time" in html
    plain = client.get(reverse("audit-detail", args=[study.pk, audit.pk]))
    assert plain.status_code == 200


def _kappa_summary(n_minority: int) -> dict:
    return {"kappa": 0.62, "lower": 0.48, "upper": 0.75, "se": 0.07, "observed": 0.82,
            "expected": 0.53, "n": 120, "n_minority": n_minority,
            "interval_reliable": n_minority >= MIN_KAPPA_MINORITY}


@pytest.mark.parametrize(("n_minority", "noted"), [(MIN_KAPPA_MINORITY - 1, True),
                                                    (MIN_KAPPA_MINORITY, False)])
def test_the_kappa_note_shows_only_with_too_few_minority_labels(client, n_minority, noted):
    # given a finished audit whose κ rests on n_minority datapoints of the rarer label
    study, researcher = make_audit_study()
    audit = Audit.objects.create(
        study=study, rubric=make_rubric(study), total=120, done=120,
        status=Audit.Status.SUCCEEDED,
        summary={"n": 120, "successes": 60, "success_rate": 0.5, "interval": [0.4, 0.6],
                 "kappa": _kappa_summary(n_minority)})
    client.force_login(researcher)
    html = client.get(reverse("audit-detail", args=[study.pk, audit.pk])).content.decode()
    # then the κ card is there, and its note only below MIN_KAPPA_MINORITY
    assert 'data-testid="kappa"' in html and "0.480 – 0.750" in html
    assert ('data-testid="kappa-unreliable"' in html) is noted


def test_a_kappa_stored_before_the_minority_count_shows_no_note(client):
    study, researcher = make_audit_study()
    old = {k: v for k, v in _kappa_summary(3).items()
           if k not in ("n_minority", "interval_reliable")}
    audit = Audit.objects.create(study=study, rubric=make_rubric(study), total=120, done=120,
                                 status=Audit.Status.SUCCEEDED,
                                 summary={"n": 120, "successes": 60, "kappa": old})
    client.force_login(researcher)
    html = client.get(reverse("audit-detail", args=[study.pk, audit.pk])).content.decode()
    assert 'data-testid="kappa"' in html and 'data-testid="kappa-unreliable"' not in html
