"""Issue 17, must hold: an assisted study from an empty database to its raw export, every
step in Chromium. A researcher (a staff account, the only thing made in code) creates the
study and an assistance arm in the admin, adds raters and a manager on the Members page
(pasted lists; one rater joins by the invitation link, the others with their one-time
password, which they must change at once), imports sentences and AI traces from files,
opens the study; a rater of the blind arm and a rater of the assisted arm rate once each;
every rating has its exposure record (nothing for the blind arm); the manager reads the
dashboard and downloads the raw export, which holds both ratings with what each rater was
shown."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotations.assisted.services.design import DEFAULT_QUIZ
from annotations.core.exports import csv_cell
from annotations.models import Arm, RaterAssignment, Rating, Study, StudyMembership, User
from tests.assistants.conftest import good_trace
from tests.browser.conftest import login, own_password
from tests.browser.walks import (
    admin_sign_in,
    bulk_add,
    download,
    narrow_too,
    no_sideways_scroll,
    phone,
    via_invitation,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)

RATERS = ["ann", "bob@example.org"]
INVITED = "bob@example.org"  # chooses a password through the invitation link
COMMENT = "The evidence quotes the source word for word."


def _files(tmp_path: Path) -> tuple[Path, Path]:
    """Four sentences (CSV) and three sampled traces of each (JSONL: two say Accurate)."""
    sentences = tmp_path / "sentences.csv"
    rows = ["id,prompt,response,sentence,gold"]
    for i in range(4):
        rows.append(f'straw-{i},Question {i} about strawberries?,"Strawberries are rich in '
                    f'vitamin C. Answer {i} goes on.",Strawberries are rich in vitamin C.,'
                    f'{"accurate" if i % 2 else "inaccurate"}')
    sentences.write_text("\n".join(rows) + "\n")
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(
        json.dumps({"sentence": f"straw-{i}", "sample": k,
                    "trace": good_trace(verdict=verdict, claims=[
                        {**c, "verdict": verdict} for c in good_trace()["claims"]])}) + "\n"
        for i in range(4) for k, verdict in enumerate(("Accurate", "Accurate", "Inaccurate"))))
    return sentences, traces


def _rate_once(worker, live_server, study: Study) -> tuple[str, str]:
    """Past the quiz (and, in an assisted arm, the assistant's warning), one rating: the
    rated task's public id and the rater's arm."""
    worker.goto(f"{live_server.url}/")
    worker.get_by_role("link", name="Rate sentences").click()
    expect(worker.get_by_test_id("tutorial")).to_be_visible()
    for i, q in enumerate(DEFAULT_QUIZ):
        worker.locator(f'input[name="q{i}"][value="{q["answer"]}"]').check()
    worker.get_by_role("button", name="Check my answers").click()
    arm = RaterAssignment.objects.select_related("arm").get(
        study=study, user__username=worker.rater).arm
    if not arm.is_baseline:
        expect(worker.get_by_test_id("assistant-warning")).to_be_visible()
        worker.get_by_role("button", name="I understand: start rating").click()
    worker.get_by_role("button", name="Get the next sentence").click()
    card = worker.locator("article.rating")
    expect(card).to_be_visible()
    task_id = card.get_attribute("data-query-id")
    no_sideways_scroll(worker, f"the rating page ({arm.name})")
    card.locator('input[name="label"][value="accurate"]').check()
    card.locator('input[name="confidence"]').nth(2).check()
    if arm.is_baseline:
        expect(worker.get_by_test_id("ai-panel")).to_have_count(0)
    else:
        expect(worker.get_by_test_id("ai-panel")).to_be_visible()
        card.locator('input[name="helpfulness"]').first.check()
        card.locator("textarea[name=comment]").fill(COMMENT)
    card.get_by_role("button", name="Submit rating").click()
    expect(worker.get_by_test_id("recorded")).to_have_text("Recorded: Accurate")
    expect(worker.get_by_test_id("rated-count")).to_have_text("1")
    return task_id, arm.name


def test_an_assisted_study_from_an_empty_database_to_the_managers_raw_export(
        browser, page, live_server, tmp_path, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_MIN_ANSWER_MS = 0  # the answer rule is test_assisted's; no waiting here
    assert not User.objects.exists() and not Study.objects.exists()
    User.objects.create_user("rita", password="rita-pass-9317", is_staff=True)

    # the researcher creates the study (a baseline arm comes with it) and an assisted arm
    admin_sign_in(page, live_server, "rita", "rita-pass-9317")
    page.get_by_role("link", name="Assisted studies", exact=True).click()
    page.get_by_role("link", name="Add assisted study").click()
    page.fill("input[name=name]", "Strawberry facts")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("created with a baseline arm")
    study = Study.objects.get(name="Strawberry facts")
    narrow_too(page, "the study page")
    page.locator("#arms-group .add-row a").click()  # "Add another Arm"
    row = page.locator("#arms-group tr.dynamic-arms").last
    row.locator("input[name$=-name]").fill("Evidence")
    row.locator("input[name$=-position]").fill("1")
    row.locator("input[name$=-show_search]").check()
    row.locator("input[name$=-show_evidence]").check()
    page.click("input[name=_continue]")
    expect(page.get_by_test_id("arms")).to_contain_text("Evidence")
    narrow_too(page, "the study page with its arms")
    assert sorted((a.name, a.components) for a in Arm.objects.filter(study=study)) == [
        ("Baseline", []), ("Evidence", ["search", "evidence"])]

    # members: the raters in one pasted list, then the manager
    page.get_by_role("link", name="Members: raters, managers, researchers").click()
    expect(page.locator("#content h1")).to_contain_text("Members of")
    roles = page.locator("select[name=bulk-role] option").all_inner_texts()
    assert [r.split(" (")[0] for r in roles] == ["Rater", "Manager", "Reviewer", "Researcher"]
    narrow_too(page, "the members page")
    got = bulk_add(page, RATERS, "annotator")
    got.update(bulk_add(page, ["mo"], "manager"))
    assert {(m.user.username, m.role) for m in StudyMembership.objects.filter(study=study)
            .exclude(role="researcher").select_related("user")} == {
        ("ann", "annotator"), ("bob@example.org", "annotator"), ("mo", "manager")}

    # sentences and traces through the admin's import pages
    sentences, traces = _files(tmp_path)
    page.get_by_role("link", name="Back to the study").click()
    page.get_by_role("link", name="Import sentences").click()
    expect(page.locator("#content h1")).to_contain_text("Import sentences")
    narrow_too(page, "the sentences import page")
    page.set_input_files("input[name=file]", str(sentences))
    page.click("input[value=Import]")
    # every import ends on the same summary (issue 27), with what to do next
    summary = page.get_by_test_id("import-summary")
    expect(summary).to_contain_text("Imported sentences.csv")
    expect(summary.get_by_test_id("import-next")).to_contain_text("Import the AI traces")
    summary.get_by_role("link", name="Back to the study").click()
    page.get_by_role("link", name="Import AI traces").click()
    page.set_input_files("input[name=file]", str(traces))
    page.click("input[value=Import]")
    expect(summary).to_contain_text("Imported traces.jsonl")
    expect(summary.get_by_test_id("created")).to_have_text("12")  # 3 samples x 4
    narrow_too(page, "the traces import's summary")
    summary.get_by_role("link", name="Back to the study").click()

    # open it
    page.get_by_role("link", name="Open the study…").click()
    expect(page.locator("#content")).to_contain_text("cannot go back to draft")
    narrow_too(page, "the open confirmation")
    page.click("input[value='Open the study']")
    expect(page.locator(".messagelist")).to_contain_text("opened, 4 sentences routed")
    study.refresh_from_db()
    assert study.status == Study.Status.OPEN

    # each rater, on a phone: signed in (invitation or one-time password), one rating
    rated: dict[str, tuple[str, str]] = {}  # user name -> (task id, arm)
    for name in RATERS:
        with phone(browser) as worker:
            worker.rater = name
            if name == INVITED:
                via_invitation(worker, live_server, got[name][1])
            else:
                login(worker, live_server, name, got[name][0], landing="/accounts/password/")
                own_password(worker, got[name][0])
                expect(worker.locator("h1")).to_have_text("Password changed")
            no_sideways_scroll(worker, "the home page")
            rated[name] = _rate_once(worker, live_server, study)
    # balanced blocks: two raters, two arms, one each
    assert sorted(arm for _, arm in rated.values()) == ["Baseline", "Evidence"]

    # every rating records what its rater was shown: nothing in the blind arm
    ratings = list(Rating.objects.filter(study=study).select_related("rater", "arm", "task"))
    assert len(ratings) == 2
    shown = {}
    for rating in ratings:
        assert rating.exposure is not None, f"no exposure for {rating.rater}'s rating"
        assert rating.exposure.components == rating.arm.components
        shown[rating.rater.username] = rating.exposure
    blind = next(n for n, (_, arm) in rated.items() if arm == "Baseline")
    helped = next(n for n in RATERS if n != blind)
    assert shown[blind].components == [] and shown[blind].trace_ids == []
    assert shown[helped].components == ["search", "evidence"]
    assert len(shown[helped].trace_ids) == 1

    # the manager: the dashboard from the home page, then the raw export from it
    with phone(browser) as manager:
        login(manager, live_server, "mo", got["mo"][0], landing="/accounts/password/")
        own_password(manager, got["mo"][0])
        manager.goto(f"{live_server.url}/")
        manager.get_by_role("link", name="Dashboard").click()
        main = manager.locator("main")
        expect(main).to_contain_text("Assisted oversight")  # the type's own dashboard
        expect(main).to_contain_text("2 ratings")
        no_sideways_scroll(manager, "the dashboard")
        exports = manager.get_by_test_id("raw-exports")
        rows = list(csv.DictReader(download(manager, exports.get_by_role("link", name="CSV")
                                            .first).splitlines()))
        lines = [json.loads(line) for line in download(
            manager, exports.get_by_role("link", name="JSONL").first).splitlines()]
    assert len(rows) == len(lines) == 2
    for name, (task_id, arm) in rated.items():
        line = next(r for r in lines if r["rater"] == name)
        row = next(r for r in rows if r["rater"] == name)
        assert (line["task"], line["arm"], line["label"]) == (task_id, arm, "accurate")
        # the CSV cell as csv_cell writes it: a public id may begin with "-" (random), and a
        # spreadsheet would run it as a formula, so the CSV prefixes an apostrophe
        assert (row["task"], row["arm"], row["label"]) == (csv_cell(task_id), arm, "accurate")
        assert line["shown_components"] == shown[name].components
        assert line["shown_trace_ids"] == shown[name].trace_ids
        assert json.loads(row["shown_components"]) == shown[name].components
        assert line["shown_via"] == row["shown_via"] == "page"
    assert next(r for r in lines if r["rater"] == helped)["comment"] == COMMENT
    assert next(r for r in rows if r["rater"] == blind)["comment"] == ""
