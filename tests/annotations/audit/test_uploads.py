"""An audit's uploaded files go through an import job (issue 27: a 99 MB commitments file
took a 15.5 s request and 1 GB): the request stores them and returns, the job reads them
line by line with progress and starts the audit; each file within the upload limit and the
study's audit files within its quota (OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES)."""

from __future__ import annotations

import threading

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from annotations.audit.models import Audit, AuditFile
from annotations.audit.services import datasets, uploads
from annotations.core.models import ImportJob
from annotations.core.services.import_jobs import background_imports_join
from tests.annotations.audit.helpers import (
    commitments_file,
    datapoints_file,
    liar,
    make_audit_study,
    make_rubric,
)
from tests.annotations.core.test_import_jobs import _follow

pytestmark = pytest.mark.django_db


def _start(client, study, rubric, commitments: bytes, datapoints: bytes):
    return client.post(reverse("audits", args=[study.pk]), {
        "action": "start", "rubric": rubric.pk, "dataset": "upload", "rounds": 3, "phi": 0.5,
        "seed": 1, "commitments": SimpleUploadedFile("c.jsonl", commitments),
        "datapoints": SimpleUploadedFile("d.jsonl", datapoints)})


@pytest.mark.django_db(transaction=True)
def test_a_big_audit_upload_is_parsed_by_the_job_not_the_request(client, settings,
                                                                 monkeypatch):
    settings.OVERSIGHT_IMPORT_RUNNER = "thread"  # the embedded default
    settings.OVERSIGHT_IMPORT_PROGRESS_SECONDS = 0.01
    monkeypatch.setattr("annotations.audit.services.runs.run_enqueue", lambda pk: None)
    parsed_in = []
    read = datasets.read_datapoints

    def spy(*args, **kwargs):
        parsed_in.append(threading.current_thread().name)
        yield from read(*args, **kwargs)

    monkeypatch.setattr(uploads, "read_datapoints", spy)
    study, researcher = make_audit_study()
    rubric = make_rubric(study)
    data = [format(i % 16, "04b") for i in range(20_000)]
    client.force_login(researcher)

    response = _start(client, study, rubric, commitments_file(liar, data=data),
                      datapoints_file(data))
    returned_at = timezone.now()

    job = ImportJob.objects.get(study=study, kind=ImportJob.Kind.AUDIT)
    assert response.status_code == 302
    assert response["Location"] == reverse("audit-upload", args=[study.pk, job.pk])
    seen = _follow(job.pk)
    background_imports_join()
    job.refresh_from_db()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert job.finished_at > returned_at  # the request did not wait for the parsing
    assert parsed_in and all(name.startswith("import-job") for name in parsed_in)
    percents = [p for status, _, p in seen if status == ImportJob.Status.RUNNING]
    assert percents == sorted(percents)
    assert "reading" in {phase for _, phase, _ in seen}
    assert len({p for p in percents if 0 < p < 100}) >= 2, seen
    assert seen[-1] == (ImportJob.Status.SUCCEEDED, "done", 100)
    audit = Audit.objects.get(study=study)
    assert (audit.total, audit.status) == (20_000, Audit.Status.QUEUED)
    assert job.summary["audit_id"] == audit.pk
    assert (job.summary["created"], job.summary["updated"]) == (1, 0)
    assert job.summary["details"] == [["Datapoints", "20,000", ""],
                                      ["Commitments", "60,000", ""]]
    page = client.get(response["Location"]).content.decode()
    assert f"Follow audit #{audit.pk}" in page and 'data-testid="import-summary"' in page


def test_an_upload_over_the_studys_quota_is_refused_naming_the_quota(client, settings):
    study, researcher = make_audit_study()
    rubric = make_rubric(study)
    client.force_login(researcher)
    commitments, datapoints = commitments_file(liar), datapoints_file()
    size = len(commitments) + len(datapoints)
    settings.OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES = size + 10  # one audit's files fit

    assert _start(client, study, rubric, commitments, datapoints).status_code == 302
    assert AuditFile.objects.filter(audit__study=study).count() == 1

    response = _start(client, study, rubric, commitments, datapoints)  # a second: over

    assert response.status_code == 400
    html = response.content.decode()
    assert (f"c.jsonl and d.jsonl: {size:,} bytes would bring this study&#x27;s audit files "
            f"to {2 * size:,} bytes, over its quota of {size + 10:,} bytes "
            f"(OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES; {size:,} bytes held now)") in html.replace(
        "d.jsonl and c.jsonl", "c.jsonl and d.jsonl")
    assert Audit.objects.filter(study=study).count() == 1
    assert ImportJob.objects.filter(study=study, kind=ImportJob.Kind.AUDIT).count() == 1


def test_a_file_over_the_upload_limit_is_refused_before_any_job(client, settings):
    settings.OVERSIGHT_IMPORT_MAX_BYTES = 200
    study, researcher = make_audit_study()
    client.force_login(researcher)
    response = _start(client, study, make_rubric(study), commitments_file(liar),
                      datapoints_file())
    assert response.status_code == 413  # the request guard, before the view
    assert "c.jsonl: " in response.content.decode()
    assert "per file (OVERSIGHT_IMPORT_MAX_BYTES)" in response.content.decode()
    assert not ImportJob.objects.filter(study=study).exists()


def test_the_settings_go_with_the_job_and_a_bad_r_is_the_jobs_error(client):
    study, researcher = make_audit_study()
    client.force_login(researcher)
    response = client.post(reverse("audits", args=[study.pk]), {
        "action": "start", "rubric": make_rubric(study).pk, "dataset": "upload", "rounds": 0,
        "phi": 0.5, "seed": 1,
        "commitments": SimpleUploadedFile("c.jsonl", commitments_file(liar)),
        "datapoints": SimpleUploadedFile("d.jsonl", datapoints_file())})
    job = ImportJob.objects.get(study=study)
    assert response["Location"] == reverse("audit-upload", args=[study.pk, job.pk])
    assert job.status == ImportJob.Status.FAILED
    assert job.errors == ["rounds: a whole number from 1 to 10, got 0"]
    assert not Audit.objects.exists()


def test_the_upload_page_is_the_studys_researchers_only(client):
    study, researcher = make_audit_study()
    client.force_login(researcher)
    _start(client, study, make_rubric(study), commitments_file(liar), datapoints_file())
    job = ImportJob.objects.get(study=study)
    other, other_researcher = make_audit_study("other")
    client.force_login(other_researcher)
    assert client.get(reverse("audit-upload", args=[study.pk, job.pk])).status_code == 404
    assert client.get(reverse("audit-upload", args=[other.pk, job.pk])).status_code == 404
