"""Audits in Chromium: a researcher defines a rubric with two programmatic criteria in the
admin, starts an audit of an evaluator's commitments, follows its progress (the run is in a
thread, the page polls) and reads the result; the pages do not scroll sideways at 390 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotations.audit.models import Audit
from tests.annotations.audit.helpers import (
    DATA,
    commitments_file,
    datapoints_file,
    expected_successes,
    liar,
    make_audit_study,
)
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)


def test_a_researcher_defines_a_rubric_runs_an_audit_with_progress_and_reads_the_result(
        page, live_server, settings, tmp_path, shots):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # embedded, even with a broker (CI's second pass)
    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 0.2  # the run goes to a thread, as embedded
    study, researcher = make_audit_study("browser-audit")
    login(page, live_server, researcher.username)
    page.locator(f'a[href="/studies/{study.pk}/audits/"]').click()
    expect(page.get_by_role("heading", name=f"Evaluator audits · {study.name}")).to_be_visible()
    page.get_by_role("link", name="define one in the admin").click()

    # the admin: a rubric with two programmatic criteria (a check and its parameters each)
    page.fill("input[name=name]", "has 11, starts with 0")
    page.select_option("select[name=aggregator]", "any")
    page.fill("input[name='criteria-0-name']", "has_11")
    page.select_option("select[name='criteria-0-kind']", "contains")
    page.fill("input[name='criteria-0-text']", "11")
    page.fill("input[name='criteria-1-name']", "starts_0")
    page.select_option("select[name='criteria-1-kind']", "regex")
    page.fill("input[name='criteria-1-text']", "^0")
    page.locator("input[name=_save]").click()
    page.wait_for_url(f"{live_server.url}/studies/{study.pk}/audits/?rubric=*")

    # start the audit: the evaluator's commitments and a file of datapoints
    (tmp_path / "commitments.jsonl").write_bytes(commitments_file(liar))
    (tmp_path / "datapoints.jsonl").write_bytes(datapoints_file())
    start = page.get_by_test_id("start")
    start.locator("input[name=commitments]").set_input_files(str(tmp_path / "commitments.jsonl"))
    start.locator("input[name=datapoints]").set_input_files(str(tmp_path / "datapoints.jsonl"))
    start.locator("input[name=phi]").fill("1")
    start.get_by_role("button", name="Start the audit").click()
    # the files are checked by an import job; its page ends on the import summary
    page.wait_for_url(f"{live_server.url}/studies/{study.pk}/audits/uploads/*/")
    audit = Audit.objects.get(study=study)
    summary = page.get_by_test_id("import-summary")
    expect(summary).to_contain_text(f"audit #{audit.pk} started on {len(DATA)} datapoints")
    expect(summary.get_by_test_id("created")).to_have_text("1")
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=str(shots / f"audit-upload-summary-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    summary.get_by_role("link", name=f"Follow audit #{audit.pk}").click()
    page.wait_for_url(f"{live_server.url}/studies/{study.pk}/audits/{audit.pk}/")
    progress = page.get_by_test_id("progress")
    expect(progress).to_be_visible()
    # the page polls until the thread has stored every outcome
    n, k = len(DATA), sum(expected_successes(liar))
    expect(progress).to_have_text(f"Succeeded: {n}/{n} datapoints, {k} successes")
    rate = page.get_by_test_id("success-rate")
    expect(rate).to_contain_text(f"{100 * k / n:.1f} %")
    expect(rate).to_contain_text(f"{k} of {n} datapoints")
    expect(rate).to_contain_text("Clopper–Pearson")
    expect(page.get_by_test_id("flips")).to_contain_text(f"{n - k} of {n} labels flipped")
    expect(page.get_by_test_id("failures")).to_contain_text("has_11")
    expect(page.get_by_test_id("failed").locator("tbody tr")).to_have_count(n - k)
    with page.expect_download() as got:
        page.get_by_test_id("downloads").get_by_role("link", name="CSV").first.click()
    assert got.value.suggested_filename == f"study-{study.pk}-audit-{audit.pk}-outcomes.csv"

    for path in (f"/studies/{study.pk}/audits/{audit.pk}/", f"/studies/{study.pk}/audits/"):
        page.set_viewport_size({"width": 390, "height": 800})
        page.goto(f"{live_server.url}{path}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path


def test_a_specialist_answers_the_verifier_questions_and_the_audit_resumes(
        page, live_server, settings):
    """Specialists as the verifier: a worker answers yes/no questions at 390 px (no sideways
    scroll, long datapoints wrap); the last answer of each wave resumes the audit."""
    from annotations.audit.services.runs import audit_run, audit_start
    from tests.annotations.audit.helpers import make_rubric
    from tests.factories import specialist

    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the resumed runs in process, even with a broker
    study, _ = make_audit_study("browser-verify")
    worker = specialist(study, 0)
    data = ["0110", "1000", "0" + "1" * 300]  # the last one long: it must wrap
    commitments = "".join(
        f'{{"item": "d{i}", "round": 1, "label": 1, "similar": "{x}0"}}\n'
        for i, x in enumerate(data)).encode()
    audit = audit_start(study=study, rubric=make_rubric(study), commitments=commitments,
                        commitments_name="c.jsonl", datapoints=datapoints_file(data),
                        datapoints_name="d.jsonl", rounds=1, verifier="human", enqueue=False)
    audit_run(audit_id=audit.pk)
    login(page, live_server, worker.username)
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{live_server.url}/studies/{study.pk}/audits/verify/")
    asked = 0
    while page.get_by_test_id("question").count():
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        text = page.get_by_test_id("question").locator("pre").inner_text()
        question = page.get_by_test_id("question").locator("strong").inner_text()
        truth = ("11" in text) if "'11'" in question else text.startswith("0")
        with page.expect_navigation():  # the next question's page, not the one left behind
            page.get_by_role("button", name="Yes" if truth else "No").click()
        asked += 1
    expect(page.get_by_test_id("no-question")).to_be_visible()
    assert asked == 2 * 2 * len(data)  # both criteria of each x and its x′
    audit.refresh_from_db()
    assert (audit.status, audit.successes) == ("succeeded", len(data))


def test_a_long_audit_runs_in_chunks_with_progress_and_the_researcher_cancels_it(
        page, live_server, settings, monkeypatch):
    """Issue 27: the run proceeds chunk by chunk (here half a second each, in the embedded
    thread), the page follows it, and **Cancel the audit** stops it: nothing is stored."""
    import time

    from annotations.audit.models import AuditOutcome
    from annotations.audit.services import runs
    from tests.annotations.audit.helpers import make_rubric

    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 0.2  # the run goes to a thread
    settings.OVERSIGHT_AUDIT_CHUNK_SECONDS = 0.5
    real = runs.ev_protocol

    def slow(*args, **kwargs):  # 20 ms a datapoint: 400 of them take 8 s
        time.sleep(0.02)
        return real(*args, **kwargs)

    monkeypatch.setattr(runs, "ev_protocol", slow)
    chunks = []
    real_chunk = runs.audit_run_chunk
    monkeypatch.setattr(runs, "audit_run_chunk", lambda **kw: chunks.append(1) or real_chunk(**kw))
    study, researcher = make_audit_study("browser-chunks")
    # signed in first: the run's thread writes from the start, and SQLite's shared in-memory
    # cache fails a second writer at once ("table is locked") where a file would wait
    login(page, live_server, researcher.username)
    data = DATA * 40
    audit = runs.audit_start(study=study, rubric=make_rubric(study),
                             commitments=commitments_file(liar, data=data),
                             commitments_name="c.jsonl", datapoints=datapoints_file(data),
                             datapoints_name="d.jsonl", rounds=3)
    page.goto(f"{live_server.url}/studies/{study.pk}/audits/{audit.pk}/")
    progress = page.get_by_test_id("progress")
    expect(progress).to_have_text(re.compile(r"^(Running|Queued): [1-9]\d*/400 datapoints$"))
    deadline = time.monotonic() + 10
    while len(chunks) < 2 and time.monotonic() < deadline:  # a second chunk carries on
        time.sleep(0.1)
    assert len(chunks) >= 2
    page.get_by_role("button", name="Cancel the audit").click()
    expect(progress).to_have_text(re.compile(r"^Cancelled: \d+/400 datapoints$"))
    audit.refresh_from_db()
    assert audit.status == Audit.Status.CANCELLED and 0 < audit.done < 400
    assert not AuditOutcome.objects.filter(audit=audit).exists()
    page.set_viewport_size({"width": 390, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
