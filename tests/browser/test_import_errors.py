"""Issue 17, must hold: the import pages list every problem of a many-error file. Each
admin import page of the partitioned and assisted study types gets the file of its kind
from tests/annotations/core/test_import_readers.py (several lines, several bad fields a
line, unknown ids, invalid JSON in the middle): the page lists all of them with line and
field, in the same words as the other types, and nothing is imported. A file that is not
CSV or JSONL is refused in the same words on every page.

The critique questions page is here too; critique AI outputs are imported as a run, whose
problems the service test (test_import_readers.py) checks."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.core.services.studies import membership_add
from annotations.models import CritiqueQuestion, Item, Sentence, StudyMembership
from assistants.models import AISystem, Prediction, TraceSample
from tests.annotations.assisted.helpers import make_assisted_study
from tests.annotations.core.test_import_readers import MANY_ERRORS, many_errors_file
from tests.annotations.critique.helpers import make_critique_study
from tests.browser.walks import admin_sign_in
from tests.factories import UserFactory, make_study, role_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)

# kind → (admin page of the study, the link on the study's page); the problems are listed
# at [data-testid=import-errors] on every page (partitioned: the import job's page)
PAGES = {
    "items": ("annotations/study", "Import items"),
    "predictions": ("annotations/study", "Import AI predictions"),
    "sentences": ("annotations/assistedstudy", "Import sentences"),
    "traces": ("annotations/assistedstudy", "Import AI traces"),
    "critique questions": ("annotations/critiquesettings", "Import questions"),
}


def _study(kind: str):
    if kind in ("items", "predictions"):
        return make_study(k=3, n_items=3, open_=False, seed=71)
    if kind == "critique questions":
        study = make_critique_study(n_questions=1, open_=False, mode="ai_below")[0]
        membership_add(study=study, role=StudyMembership.Role.RESEARCHER,
                       user=UserFactory(username=f"{study.pk}-researcher", is_staff=True))
        return study
    return make_assisted_study(n_sentences=2, traces=False, open_=False)


def _stored(study) -> tuple:
    return (Item.objects.filter(study=study).count(),
            AISystem.objects.filter(study=study).count(),
            Prediction.objects.filter(system__study=study).count(),
            Sentence.objects.filter(study=study).count(),
            CritiqueQuestion.objects.filter(study=study).count(),
            TraceSample.objects.filter(sentence__study=study).count())


@pytest.mark.parametrize("kind", PAGES)
def test_an_import_page_lists_every_problem_of_a_many_error_file(page, live_server, tmp_path,
                                                                 kind):
    admin, link = PAGES[kind]
    study = _study(kind)
    before = _stored(study)
    admin_sign_in(page, live_server, role_user(study, "researcher").username, "pw")
    page.goto(f"{live_server.url}/admin/{admin}/{study.pk}/change/")
    page.get_by_role("link", name=link, exact=True).first.click()
    expect(page.locator("#content h1")).to_contain_text(link)
    import_page = page.url

    # not CSV or JSONL: the same words on every page
    wrong = tmp_path / "notes.txt"
    wrong.write_text("id,text\n")
    page.set_input_files("input[name=file]", str(wrong))
    page.click("input[value=Import]")
    expect(page.get_by_test_id("import-errors")).to_have_text(
        "“notes.txt” is neither a .csv nor a .jsonl file; rename it to say which it is.")

    bad = tmp_path / "bad.jsonl"
    bad.write_text(many_errors_file(kind), encoding="utf-8")
    page.goto(import_page)
    page.set_input_files("input[name=file]", str(bad))
    page.click("input[value=Import]")
    listed = page.get_by_test_id("import-errors").locator("li")
    expect(listed.first).to_be_visible()
    expect(page.locator("#content")).to_contain_text("Nothing was imported")
    assert listed.all_inner_texts() == MANY_ERRORS[kind][3]
    assert _stored(study) == before


def test_the_audit_page_lists_every_problem_of_both_files_in_order(page, live_server, tmp_path,
                                                                   shots):
    """Issue 27: several problems a line, invalid JSON between them, datapoints and
    commitments together — all listed in line order, file after file, in the one format;
    nothing started. At 1 280 and 390 px the list reads without sideways scrolling."""
    from annotations.audit.models import Audit
    from tests.annotations.audit.helpers import make_audit_study, make_rubric
    from tests.annotations.audit.test_views import (
        BAD_COMMITMENTS,
        BAD_DATAPOINTS,
        EVERY_PROBLEM,
    )
    from tests.browser.conftest import login

    study, researcher = make_audit_study("browser-audit-errors")
    make_rubric(study)
    login(page, live_server, researcher.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/audits/")
    (tmp_path / "d.jsonl").write_bytes(BAD_DATAPOINTS)
    (tmp_path / "c.jsonl").write_bytes(BAD_COMMITMENTS)
    start = page.get_by_test_id("start")
    start.locator("input[name=commitments]").set_input_files(str(tmp_path / "c.jsonl"))
    start.locator("input[name=datapoints]").set_input_files(str(tmp_path / "d.jsonl"))
    start.get_by_role("button", name="Start the audit").click()
    page.wait_for_url(f"{live_server.url}/studies/{study.pk}/audits/uploads/*/")
    listed = page.get_by_test_id("import-errors").locator("li")
    expect(listed.first).to_be_visible()
    expect(page.locator("main")).to_contain_text("Nothing was changed: no audit was started.")
    assert listed.all_inner_texts() == EVERY_PROBLEM
    assert not Audit.objects.filter(study=study).exists()
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(shots / f"audit-upload-errors-{width}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.get_by_role("link", name="Back to the audits").click()
    expect(page.get_by_test_id("audit-uploads")).to_contain_text(
        f"{len(EVERY_PROBLEM)} problems; no audit started")
