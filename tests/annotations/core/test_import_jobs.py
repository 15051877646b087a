"""Imports as jobs (issue 8: 200 000 items hit gunicorn's timeout): every import from the
admin page and the API is an ImportJob run by a task — all or nothing, with its progress,
its summary or its errors naming file, line and field; duplicates return the running job;
only the study's researchers see it. The real Celery worker runs them in the second pass."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import time

import pytest
from django.core.management import call_command
from django.db import OperationalError, connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotations.core.errors import ImportFailed
from annotations.core.selectors import import_job_progress
from annotations.core.services.import_jobs import (
    background_imports_join,
    import_job_run,
    import_job_submit,
    import_jobs_expire,
)
from annotations.core.services.progress import Progress, progress_reporting
from annotations.models import ImportJob, ImportJobFile, Item, Query, Study
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.predictions import predictions_import
from assistants.models import AISystem, Prediction
from tests.factories import make_study, role_user, specialist

pytestmark = pytest.mark.django_db


def items_file(n: int, k: int = 4, *, start: int = 0) -> bytes:
    return "\n".join(json.dumps({"id": f"i{i}", "text": f"Question {i}?",
                                 "options": [f"answer {i}.{j}" for j in range(k)],
                                 "gold": f"answer {i}.{i % k}"})
                     for i in range(start, start + n)).encode()


def predictions_file(n: int, system: str = "model-a", k: int = 4) -> bytes:
    # one in ten names no option: counted as unparseable in the summary
    return "\n".join(json.dumps({"item_id": f"i{i}", "system": system,
                                 "prediction": "no idea" if i % 10 == 0
                                 else f"answer {i}.{(i * 3) % k}"})
                     for i in range(n)).encode()


def open_study(name: str = "jobs", k: int = 4) -> Study:
    """An open study without items, with its researcher, manager and specialists."""
    return make_study(k=k, n_items=0, name=name, seed=90)


def researcher_client(study: Study) -> Client:
    client = Client()
    client.force_login(role_user(study, "researcher"))
    return client


# --- the job runs the import, all or nothing ------------------------------------------------

def test_a_job_imports_items_and_predictions_and_keeps_the_summary():
    study = open_study()
    job, created = import_job_submit(study=study, kind="items", data=items_file(40),
                                     name="items.jsonl")
    assert created and job.status == ImportJob.Status.SUCCEEDED
    assert job.summary == {"created": 40, "updated": 0, "routed": 40, "unchanged": 0,
                           "text": "40 created, 0 updated, 40 routed.",
                           "details": [["Unchanged", "0", "unchanged"],
                                       ["Routed at once (the study is open)", "40", "routed"]],
                           "next": "The new items' first queries are routed: specialists "
                                   "get them now, and the dashboard counts their answers."}
    assert Query.objects.filter(study=study).count() == 40
    assert (job.done, job.total, job.phase) == (40, 40, "done")
    assert not ImportJobFile.objects.filter(job=job).exists()  # the bytes are dropped
    assert job.size == len(items_file(40)) and len(job.sha256) == 64
    assert job.started_at <= job.finished_at

    pjob, _ = import_job_submit(study=study, kind="predictions", data=predictions_file(40),
                                name="preds.jsonl")
    assert pjob.status == ImportJob.Status.SUCCEEDED
    assert pjob.summary["created"] == 40 and pjob.summary["systems_created"] == ["model-a"]
    assert pjob.summary["unparseable"] == {"model-a": 4}  # i0, i10, i20, i30
    assert Prediction.objects.filter(system__study=study).count() == 40


def test_a_failed_job_writes_nothing_and_names_file_line_and_field():
    study = open_study()
    rows = items_file(5).decode().splitlines()
    rows[2] = json.dumps({"id": "i2", "text": "t", "options": ["a", "b", "c", "d"],
                          "gold": "e"})
    job, _ = import_job_submit(study=study, kind="items", data="\n".join(rows).encode(),
                               name="bad.jsonl")
    assert job.status == ImportJob.Status.FAILED
    assert job.errors == ["bad.jsonl:3: gold: 'e' is not one of the options"]
    assert job.summary == {} and job.finished_at is not None
    assert not Item.objects.filter(study=study).exists()
    assert not ImportJobFile.objects.filter(job=job).exists()


def test_a_failure_after_rows_were_written_rolls_them_back():
    """The prediction import creates the new AI system, then finds an existing pair: the
    system it wrote is rolled back with everything else."""
    study = open_study()
    import_job_submit(study=study, kind="items", data=items_file(10), name="items.jsonl")
    import_job_submit(study=study, kind="predictions", data=predictions_file(3, "old"),
                      name="old.jsonl")
    mixed = predictions_file(10, "new") + b"\n" + json.dumps(
        {"item_id": "i1", "system": "old", "prediction": "answer 1.0"}).encode()
    job, _ = import_job_submit(study=study, kind="predictions", data=mixed, name="mixed.jsonl")
    assert job.status == ImportJob.Status.FAILED
    assert job.errors == ["mixed.jsonl:11: item_id: 'i1' already has a prediction from 'old' "
                          "(import it with the update option to rewrite existing ids)"]
    assert list(AISystem.objects.filter(study=study).values_list("name", flat=True)) == ["old"]
    assert Prediction.objects.filter(system__study=study).count() == 3


def test_an_unexpected_error_fails_the_job_with_a_reason_and_writes_nothing():
    """A study with fewer than 2 classes is refused by the service; a file of another kind
    of data (predictions uploaded as items) fails on its fields — both leave a clear job."""
    study = open_study()
    job, _ = import_job_submit(study=study, kind="items", data=predictions_file(3),
                               name="wrong.jsonl")
    assert job.status == ImportJob.Status.FAILED
    assert job.errors[0].startswith("wrong.jsonl:1: item_id: unknown field")
    # every problem of every line: each unknown field, no id, no text (issue 17)
    assert len(job.errors) == 3 * 5 and not Item.objects.filter(study=study).exists()
    assert [e.split(": ")[1] for e in job.errors[:5]] == ["item_id", "prediction", "system",
                                                          "id", "text"]


def test_many_errors_are_kept_up_to_a_limit():
    from annotations.core.services import import_jobs

    study = open_study()
    bad = "\n".join(json.dumps({"id": f"x{i}"}) for i in range(1200)).encode()
    job, _ = import_job_submit(study=study, kind="items", data=bad, name="bad.jsonl")
    assert len(job.errors) == import_jobs.ERRORS_KEPT + 1
    assert job.errors[0] == "bad.jsonl:1: text: missing"
    assert job.errors[-1] == f"… and {1200 - import_jobs.ERRORS_KEPT} more"


def test_uploads_that_cannot_be_a_job_are_refused_at_once(settings):
    study = open_study()
    with pytest.raises(ImportFailed, match=r"items.txt: cannot tell the format"):
        import_job_submit(study=study, kind="items", data=b"{}", name="items.txt")
    settings.OVERSIGHT_IMPORT_MAX_BYTES = 100
    data = items_file(20)
    with pytest.raises(ImportFailed, match=rf"big.jsonl: {len(data):,} bytes; at most 100 "):
        import_job_submit(study=study, kind="items", data=data, name="big.jsonl")
    assert not ImportJob.objects.exists()


# --- progress -------------------------------------------------------------------------------

def _reports(run) -> list[Progress]:
    seen: list[Progress] = []
    with progress_reporting(seen.append, interval=0.0):
        run()
    return seen


def test_the_services_report_reading_then_writing_progress():
    study = open_study()
    n = 3000
    seen = _reports(lambda: items_import(study=study, source=io.BytesIO(items_file(n)),
                                         name="items.jsonl"))
    phases = [p.phase for p in seen]
    assert phases[0] == "reading" and phases[-1] == "writing"
    assert phases == sorted(phases, key=["reading", "writing"].index)  # no going back
    reading = [p for p in seen if p.phase == "reading"]
    writing = [p for p in seen if p.phase == "writing"]
    assert reading[0].total == n and [p.done for p in reading] == sorted(p.done for p in reading)
    assert reading[-1].done == n - n % 500 and len(reading) > 3
    # new items, then their first queries (the study is open): 2n rows
    assert {p.total for p in writing} == {2 * n}
    assert [p.done for p in writing] == sorted(p.done for p in writing)
    assert writing[-1].done == 2 * n and len(writing) > 3

    seen = _reports(lambda: predictions_import(
        study=study, source=io.BytesIO(predictions_file(n)), name="p.jsonl"))
    writing = [p for p in seen if p.phase == "writing"]
    assert writing[-1] == Progress("writing", n, n)


def test_progress_without_a_reporter_costs_nothing_and_a_failing_sink_is_ignored():
    study = open_study()

    def broken(_: Progress) -> None:
        raise ConnectionError("the progress store is down")

    with progress_reporting(broken, interval=0.0):
        result = items_import(study=study, source=io.BytesIO(items_file(600)),
                              name="items.jsonl")
    assert result.created == 600  # the import does not care


def test_the_job_page_percent_runs_over_both_phases():
    job = ImportJob(status=ImportJob.Status.RUNNING, phase="reading", done=50, total=100)
    assert import_job_progress(job=job).percent == 12  # half of the reading quarter
    job.phase, job.done = "writing", 0
    assert import_job_progress(job=job).percent == 25
    job.done = 100
    assert import_job_progress(job=job).percent == 98
    job.phase, job.done, job.total = "committing", 0, 0
    assert import_job_progress(job=job).percent == 99
    job.status = ImportJob.Status.FAILED
    assert import_job_progress(job=job).percent is None


def _follow(job_id: int, seconds: float = 120.0) -> list[tuple[str, str, int]]:
    """Read a job's progress as the page does, from this thread, until it ends.

    The test database on SQLite is in memory with a shared cache, where a reader holds a
    table lock and a writer meeting it fails at once (SQLITE_LOCKED: no busy timeout, unlike
    the file database of the embedded mode). So this reader reads uncommitted, which in
    shared-cache mode takes no table locks: the import thread's writes never meet it."""
    seen = []
    deadline = time.monotonic() + seconds
    with _reading_without_table_locks():
        while time.monotonic() < deadline:
            try:
                job = ImportJob.objects.get(pk=job_id)
            except OperationalError:  # the schema lock at the thread's commit
                continue
            p = import_job_progress(job=job)
            seen.append((job.status, p.phase, p.percent))
            if job.finished:
                return seen
            time.sleep(0.01)
    raise AssertionError(f"job {job_id} did not finish: {seen[-3:]}")


@contextlib.contextmanager
def _reading_without_table_locks():
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA read_uncommitted = 1")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = 0")


@pytest.mark.django_db(transaction=True)
def test_the_embedded_thread_runs_the_job_while_the_request_returns_and_progress_advances(
        settings):
    """Embedded mode (no broker): the job runs in the web process's import thread; the
    submitting call returns at once and the progress the page reads advances."""
    settings.OVERSIGHT_IMPORT_RUNNER = "thread"
    settings.OVERSIGHT_IMPORT_PROGRESS_SECONDS = 0.02
    study = open_study()
    data = items_file(20_000)
    job, _ = import_job_submit(study=study, kind="items", data=data, name="items.jsonl")
    returned_at = timezone.now()
    seen = _follow(job.pk)
    background_imports_join()
    job.refresh_from_db()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert job.finished_at > returned_at  # the submitting call did not wait for the import
    percents = [p for status, _, p in seen if status == ImportJob.Status.RUNNING]
    assert percents == sorted(percents)
    assert len({p for p in percents if 0 < p < 100}) >= 3, seen
    assert {phase for _, phase, _ in seen} >= {"reading", "writing"}
    assert seen[-1] == (ImportJob.Status.SUCCEEDED, "done", 100)
    assert Item.objects.filter(study=study).count() == 20_000


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_only_a_job_that_waits_for_another_import_says_it_waits(settings):
    """The page says "waiting for another import of this study" only while one holds the
    study's import lock; a job alone goes straight to reading."""
    from django.db import DEFAULT_DB_ALIAS, connections

    from annotations.core.services.import_jobs import ADVISORY_LOCK_CLASS

    settings.OVERSIGHT_IMPORT_RUNNER = "thread"
    settings.OVERSIGHT_IMPORT_PROGRESS_SECONDS = 0.02
    study = open_study()
    other = connections.create_connection(DEFAULT_DB_ALIAS)  # another import's transaction
    try:
        other.set_autocommit(False)
        with other.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [ADVISORY_LOCK_CLASS, study.pk])
        job, _ = import_job_submit(study=study, kind="items", data=items_file(50),
                                   name="second.jsonl")
        deadline = time.monotonic() + 20
        while ImportJob.objects.get(pk=job.pk).phase != "waiting":
            assert time.monotonic() < deadline, ImportJob.objects.get(pk=job.pk).phase
            time.sleep(0.01)
        assert not Item.objects.filter(study=study).exists()
    finally:
        other.rollback()
        other.close()
    background_imports_join()
    job.refresh_from_db()
    assert job.status == ImportJob.Status.SUCCEEDED
    # alone: never "waiting"
    alone, _ = import_job_submit(study=study, kind="items", data=items_file(20_000, start=50),
                                 name="alone.jsonl")
    seen = _follow(alone.pk)
    background_imports_join()
    assert "waiting" not in {phase for _, phase, _ in seen}, seen
    assert seen[-1] == (ImportJob.Status.SUCCEEDED, "done", 100)


# --- duplicates, re-runs, stale jobs ------------------------------------------------------------

def test_the_same_file_while_its_job_is_queued_is_that_job(settings):
    """A double click, or a client retrying: the queued job is returned, not a second one.
    (The background runner starts jobs after the commit; inside this test's transaction they
    stay queued.)"""
    settings.OVERSIGHT_IMPORT_RUNNER = "thread"
    study = open_study()
    first, created = import_job_submit(study=study, kind="items", data=items_file(5),
                                       name="items.jsonl")
    assert created and first.status == ImportJob.Status.QUEUED
    again, created = import_job_submit(study=study, kind="items", data=items_file(5),
                                       name="copy.jsonl")
    assert (again.pk, created) == (first.pk, False)
    other_options, created = import_job_submit(study=study, kind="items", update=True,
                                               data=items_file(5), name="items.jsonl")
    other_file, created2 = import_job_submit(study=study, kind="items", data=items_file(6),
                                             name="items.jsonl")
    assert created and created2 and len({first.pk, other_options.pk, other_file.pk}) == 3
    # run it (twice: a redelivered task): one import, then nothing
    assert import_job_run(job_id=first.pk).status == ImportJob.Status.SUCCEEDED
    assert import_job_run(job_id=first.pk).status == ImportJob.Status.SUCCEEDED
    assert Item.objects.filter(study=study).count() == 5
    # once it has ended, the same file is a new job (here: refused, the ids exist)
    later, created = import_job_submit(study=study, kind="items", data=items_file(5),
                                       name="items.jsonl")
    assert created and later.pk != first.pk


def test_a_double_submitted_upload_form_lands_on_one_job(settings):
    settings.OVERSIGHT_IMPORT_RUNNER = "thread"
    study = open_study()
    client = researcher_client(study)
    url = reverse("admin:annotations_study_import_items", args=[study.pk])
    locations = []
    for _ in range(2):
        upload = io.BytesIO(items_file(5))
        upload.name = "items.jsonl"
        response = client.post(url, {"file": upload})
        assert response.status_code == 302
        locations.append(response["Location"])
    job = ImportJob.objects.get(study=study)
    assert locations == [reverse("admin:annotations_study_import_job",
                                 args=[study.pk, job.pk])] * 2


def test_a_job_whose_runner_ended_is_failed_after_the_time_limit(settings):
    study = open_study()
    settings.OVERSIGHT_IMPORT_RUNNER = "thread"
    job, _ = import_job_submit(study=study, kind="items", data=items_file(5), name="a.jsonl")
    limit = settings.OVERSIGHT_IMPORT_TIME_LIMIT
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJob.Status.RUNNING,
        started_at=timezone.now() - dt.timedelta(seconds=limit - 10))
    assert import_jobs_expire(study=study) == 0  # it may still be running
    later = timezone.now() + dt.timedelta(seconds=120)
    assert import_jobs_expire(study=study, now=later) == 1
    job.refresh_from_db()
    assert job.status == ImportJob.Status.FAILED
    assert job.errors == ["The import did not finish within 30 minutes (its worker or the "
                          "server stopped, or the file is too large); nothing was written. "
                          "Upload the file again, or split it."]
    again, created = import_job_submit(study=study, kind="items", data=items_file(5),
                                       name="a.jsonl")
    assert created and again.pk != job.pk


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_run_whose_job_expired_meanwhile_keeps_nothing(settings):
    """The embedded thread has no hard time limit: a job marked failed while it still ran
    must not turn succeeded at the end (its rows are rolled back with it)."""
    settings.OVERSIGHT_IMPORT_RUNNER = "thread"
    study = open_study()
    job, _ = import_job_submit(study=study, kind="items", data=items_file(30_000),
                               name="slow.jsonl")
    deadline = time.monotonic() + 60
    while ImportJob.objects.get(pk=job.pk).status == ImportJob.Status.QUEUED:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    late = timezone.now() + dt.timedelta(seconds=settings.OVERSIGHT_IMPORT_TIME_LIMIT + 61)
    assert import_jobs_expire(study=study, now=late) == 1
    background_imports_join()
    job.refresh_from_db()
    assert job.status == ImportJob.Status.FAILED and job.summary == {}
    assert job.errors[0].startswith("The import did not finish within 30 minutes")
    assert not Item.objects.filter(study=study).exists()


# --- the pages ------------------------------------------------------------------------------

def test_the_import_page_submits_a_job_and_its_page_shows_the_summary():
    study = open_study()
    import_job_submit(study=study, kind="items", data=items_file(12), name="items.jsonl")
    client = researcher_client(study)
    upload = io.BytesIO(predictions_file(12))
    upload.name = "preds.jsonl"
    response = client.post(
        reverse("admin:annotations_study_import_predictions", args=[study.pk]),
        {"file": upload}, follow=True)
    html = response.content.decode()
    job = ImportJob.objects.get(study=study, kind="predictions")
    assert response.redirect_chain == [(reverse("admin:annotations_study_import_job",
                                                args=[study.pk, job.pk]), 302)]
    assert 'data-status="succeeded"' in html and "hx-get" not in html  # no more polling
    assert "12 predictions created, 0 updated. New systems: model-a." in html
    assert '<td data-testid="unparseable">model-a: 2</td>' in html
    listing = client.get(reverse("admin:annotations_study_import_predictions",
                                 args=[study.pk])).content.decode()
    assert "Recent imports" in listing and "preds.jsonl" in listing


def test_a_running_job_page_polls_with_htmx_and_the_fragment_stops_when_done(settings):
    settings.OVERSIGHT_IMPORT_RUNNER = "thread"  # stays queued in this transaction
    study = open_study()
    job, _ = import_job_submit(study=study, kind="items", data=items_file(5), name="a.jsonl")
    client = researcher_client(study)
    url = reverse("admin:annotations_study_import_job", args=[study.pk, job.pk])
    page = client.get(url).content.decode()
    assert f'hx-get="{url}" hx-trigger="every 1s"' in page
    assert "<progress" in page and "Waiting to start" in page and "htmx" in page
    ImportJob.objects.filter(pk=job.pk).update(status="running", phase="writing", done=30,
                                               total=60)
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.startswith('<div id="import-job"') and "<html" not in fragment
    assert 'value="62"' in fragment and "Writing 30 of 60 rows" in fragment  # 25 + 73 / 2
    ImportJob.objects.filter(pk=job.pk).update(status="queued")
    import_job_run(job_id=job.pk)
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in fragment and "5 created, 0 updated, 5 routed." in fragment


# --- the API --------------------------------------------------------------------------------

def test_the_api_answers_202_with_a_job_to_poll():
    study = open_study()
    client = researcher_client(study)
    records = [json.loads(line) for line in items_file(3).decode().splitlines()]
    response = client.post(reverse("api-items", args=[study.pk]), records,
                           content_type="application/json")
    assert response.status_code == 202
    body = response.json()
    assert response["Location"] == body["url"] == (
        "http://testserver" + reverse("api-import-job", args=[body["id"]]))
    assert (body["kind"], body["name"], body["format"]) == ("items", "request", "jsonl")
    polled = client.get(body["url"]).json()  # the test settings run it in the request
    assert polled["status"] == "succeeded" and polled["percent"] == 100
    assert polled["summary"]["created"] == 3 and polled["errors"] == []
    bad = client.post(reverse("api-predictions", args=[study.pk]),
                      [{"item_id": "nope", "system": "m", "prediction": "x"}],
                      content_type="application/json")
    assert bad.status_code == 202
    failed = client.get(bad.json()["url"]).json()
    assert failed["status"] == "failed" and failed["percent"] is None
    assert failed["errors"] == ["request:1: item_id: 'nope' is not an item of this study"]
    listed = client.get(reverse("api-import-jobs", args=[study.pk])).json()
    assert [j["id"] for j in listed["results"]] == [bad.json()["id"], body["id"]]


def test_the_api_takes_a_file_upload_as_a_job():
    study = open_study()
    client = researcher_client(study)
    upload = io.BytesIO(items_file(7))
    upload.name = "items.jsonl"
    response = client.post(reverse("api-import-jobs", args=[study.pk]),
                           {"kind": "items", "file": upload})
    assert response.status_code == 202, response.content
    assert client.get(response["Location"]).json()["summary"]["routed"] == 7
    assert Item.objects.filter(study=study).count() == 7
    txt = io.BytesIO(b"x")
    txt.name = "items.txt"
    refused = client.post(reverse("api-import-jobs", args=[study.pk]),
                          {"kind": "items", "file": txt})
    assert refused.status_code == 400 and refused.json()["code"] == "import_failed"
    assert refused.json()["errors"] == ["items.txt: cannot tell the format from the name; say "
                                        "csv or jsonl"]


def test_the_schema_documents_the_jobs():
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    items_post = paths["/api/studies/{study_id}/items/"]["post"]
    assert set(items_post["responses"]) == {"201", "202"}
    assert {p["name"] for p in items_post["parameters"]} >= {"wait", "update"}
    assert "/api/import-jobs/{job_id}/" in paths
    upload = paths["/api/studies/{study_id}/import-jobs/"]["post"]["requestBody"]["content"]
    assert "multipart/form-data" in upload


# --- permissions ----------------------------------------------------------------------------

@pytest.mark.parametrize("who", ["other researcher", "manager", "specialist"])
def test_only_the_studys_researchers_see_or_submit_its_jobs(who):
    study = open_study()
    job, _ = import_job_submit(study=study, kind="items", data=items_file(3), name="a.jsonl")
    other = make_study(k=3, n_items=0, open_=False, seed=91, name="other")
    user = {"other researcher": role_user(other, "researcher"),
            "manager": role_user(study, "manager"), "specialist": specialist(study, 0)}[who]
    client = Client()
    client.force_login(user)
    api = [client.get(reverse("api-import-job", args=[job.pk])),
           client.get(reverse("api-import-jobs", args=[study.pk])),
           client.post(reverse("api-items", args=[study.pk]), [{"id": "z", "text": "t"}],
                       content_type="application/json")]
    assert [r.status_code for r in api] == [403, 403, 403]
    assert all(r.json()["code"] == "not_permitted" for r in api)
    page = client.get(reverse("admin:annotations_study_import_job", args=[study.pk, job.pk]))
    if who == "other researcher":
        assert page.status_code == 403
        # nor through their own study's address
        foreign = client.get(reverse("admin:annotations_study_import_job",
                                     args=[other.pk, job.pk]))
        assert foreign.status_code == 404
    else:  # not staff: the admin sends them to its login page
        assert page.status_code == 302 and page["Location"].startswith("/admin/login/")
    assert ImportJob.objects.filter(study=study).count() == 1
    assert not Item.objects.filter(study=study, external_id="z").exists()


# --- the commands stay synchronous and print progress ---------------------------------------

def test_the_import_commands_print_progress_on_stderr(tmp_path):
    study = open_study()
    path = tmp_path / "items.jsonl"
    path.write_bytes(items_file(30))
    out, err = io.StringIO(), io.StringIO()
    call_command("import_items", str(study.pk), str(path), stdout=out, stderr=err)
    assert out.getvalue().strip() == "Items: 30 created, 0 updated, 30 routed."
    lines = err.getvalue().splitlines()
    assert lines[0] == f"{path}: reading 0 of about 30 rows"
    assert f"{path}: writing 0 of 60 rows" in lines
    quiet = io.StringIO()
    path.write_bytes(predictions_file(30))
    call_command("import_predictions", str(study.pk), str(path), "--quiet", stdout=out,
                 stderr=quiet)
    assert quiet.getvalue() == ""
    assert not ImportJob.objects.exists()  # the commands do not make jobs


# --- a real Celery worker on PostgreSQL --------------------------------------------------------

def _poll_api(client: Client, url: str, seconds: float = 120.0) -> tuple[dict, list[dict]]:
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        body = client.get(url).json()
        seen.append(body)
        if body["status"] in ("succeeded", "failed"):
            return body, seen
        time.sleep(0.02)
    raise AssertionError(f"the job did not finish: {seen[-1]}")


@pytest.mark.worker
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_worker_runs_jobs_with_progress_and_atomic_failures(celery_worker_process,
                                                                settings):
    assert connection.vendor == "postgresql"
    settings.OVERSIGHT_IMPORT_RUNNER = "celery"
    study = open_study("worker-jobs")
    client = researcher_client(study)
    upload = io.BytesIO(items_file(60_000))
    upload.name = "items.jsonl"
    response = client.post(reverse("api-import-jobs", args=[study.pk]),
                           {"kind": "items", "file": upload})
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    done, seen = _poll_api(client, response["Location"])
    assert done["status"] == "succeeded", done["errors"]
    assert done["summary"]["routed"] == 60_000
    running = [b["percent"] for b in seen if b["status"] == "running"]
    assert running == sorted(running) and len({p for p in running if 0 < p < 100}) >= 3, seen
    assert {b["phase"] for b in seen} >= {"reading", "writing"}

    # a failure found after the new system was written: the worker rolls it all back
    bad = predictions_file(20_000) + b'\n{"item_id": "missing", "system": "x", "prediction": ""}'
    upload = io.BytesIO(bad)
    upload.name = "preds.jsonl"
    response = client.post(reverse("api-import-jobs", args=[study.pk]),
                           {"kind": "predictions", "file": upload})
    failed, _ = _poll_api(client, response["Location"])
    assert failed["status"] == "failed"
    assert failed["errors"] == ["preds.jsonl:20001: item_id: 'missing' is not an item of "
                                "this study"]
    assert not AISystem.objects.filter(study=study).exists()
    assert not Prediction.objects.filter(item__study=study).exists()


@pytest.mark.worker
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_jobs_of_one_study_wait_for_each_other(celery_worker_process, settings):
    """The worker has two processes; two files with overlapping ids submitted together:
    the second job waits for the first (advisory lock), then finds its ids and fails with
    the import's own error — not a database error from two writers racing."""
    settings.OVERSIGHT_IMPORT_RUNNER = "celery"
    study = open_study("worker-order")
    client = researcher_client(study)
    urls = []
    for name, start in (("first.jsonl", 0), ("second.jsonl", 29_999)):
        upload = io.BytesIO(items_file(30_000, start=start))
        upload.name = name
        urls.append(client.post(reverse("api-import-jobs", args=[study.pk]),
                                {"kind": "items", "file": upload})["Location"])
    results = sorted((_poll_api(client, url)[0] for url in urls), key=lambda r: r["status"])
    assert [r["status"] for r in results] == ["failed", "succeeded"], results
    failed, succeeded = results
    line = 1 if failed["name"] == "second.jsonl" else 30_000
    assert failed["errors"] == [f"{failed['name']}:{line}: id: 'i29999' is already in the study "
                                f"(import it with the update option to rewrite existing ids)"]
    assert Item.objects.filter(study=study).count() == 30_000
    assert ImportJob.objects.get(pk=failed["id"]).started_at < ImportJob.objects.get(
        pk=succeeded["id"]).finished_at


def test_a_statement_that_meets_a_sqlite_table_lock_is_retried_and_other_errors_are_not():
    """The embedded import thread's last UPDATE of its job met the job page's read in the
    shared-cache test database ('database table is locked': no busy timeout there) and the
    job stayed 'running' for good (a CI failure). Its writes, like the pages' reads, are
    retried for a few seconds; any other error is raised at once."""
    from django.db import OperationalError

    from annotations.core.sqlite_locks import while_sqlite_locked

    locked = OperationalError("database table is locked: annotations_importjob")

    def statement(*outcomes):
        """A statement whose calls end, in turn, as ``outcomes`` (raised when errors);
        ``calls`` counts them."""
        calls = []

        def call():
            calls.append(1)
            outcome = outcomes[min(len(calls), len(outcomes)) - 1]
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        return call, calls

    call, calls = statement(locked, locked, "written")
    assert while_sqlite_locked(call, pause=0.01) == "written"
    assert len(calls) == 3

    call, calls = statement(OperationalError("no such table: annotations_importjob"))
    with pytest.raises(OperationalError, match="no such table"):
        while_sqlite_locked(call, pause=0.01)
    assert len(calls) == 1

    call, calls = statement(locked)  # locked every time
    with pytest.raises(OperationalError, match="locked"):
        while_sqlite_locked(call, tries=4, pause=0.01)
    assert len(calls) == 4
