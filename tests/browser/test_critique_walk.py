"""A critique study from an empty database, in Chromium (issue 17): a researcher creates
it in the admin, adds its annotators and a manager on its Members page, imports questions
(a file with several problems first: every one is listed), opens it; an annotator answers a
task; the manager reads the dashboard and downloads the raw export."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from annotations.models import CritiqueOutput, CritiqueQuestion, Study, StudyMembership, User
from tests.browser.conftest import login, own_password

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)

REASONING = "Two plus two is four; the third option says so."


def _passwords(page, names) -> dict[str, str]:
    expect(page.locator(".passwords")).to_contain_text("only now")
    return {name: page.locator(f".passwords tr[data-username='{name}'] code.password")
            .inner_text() for name in names}


def test_from_an_empty_database_to_an_answered_critique_study_and_its_export(
        browser, page, live_server, tmp_path, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    User.objects.create_user("rosa", password="rosa-pass-5521", is_staff=True)

    # the researcher (staff: may create studies) adds a critique study from the one list
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", "rosa")
    page.fill("input[name=password]", "rosa-pass-5521")
    page.click("input[type=submit]")
    page.get_by_role("link", name="Studies", exact=True).click()
    page.get_by_role("link", name="Add critique study").click()
    page.fill("input[name=name]", "Arithmetic chains")
    page.fill("input[name=top_level]", "1")
    page.fill("input[name=counts]", "2, 1")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("Critique study “Arithmetic chains” "
                                                         "created")
    study = Study.objects.get(name="Arithmetic chains")
    assert study.kind == Study.Kind.CRITIQUE
    expect(page.get_by_test_id("critique-panel")).to_contain_text("Status: Draft")

    # members: three annotators pasted at once, a manager on a row of their own
    page.get_by_role("link", name="Members: annotators, managers, researchers").click()
    page.fill("textarea[name=bulk-people]", "ann-1\nann-2\nann-3")
    page.select_option("select[name=bulk-role]", "annotator")
    page.click("input[value='Add them all']")
    passwords = _passwords(page, ["ann-1", "ann-2", "ann-3"])
    roles = [o.get_attribute("value") for o in
             page.locator("select[name=members-0-role] option").all()]
    assert {"annotator", "manager"} <= set(roles)  # every role critique studies use
    page.fill("input[name=members-0-username]", "mia")
    page.select_option("select[name=members-0-role]", "manager")
    page.click("input[value='Add these people']")
    passwords.update(_passwords(page, ["mia"]))
    assert sorted(StudyMembership.objects.filter(study=study).values_list(
        "user__username", "role")) == [("ann-1", "annotator"), ("ann-2", "annotator"),
                                       ("ann-3", "annotator"), ("mia", "manager"),
                                       ("rosa", "researcher")]

    # questions: a file with three bad lines lists every problem, nothing is imported …
    page.get_by_role("link", name="Back to the study").click()
    page.get_by_role("link", name="Import questions").click()
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"id": "q1", "text": "2 + 2?", "options": ["3", "5"]},
        {"id": "q1", "text": "Again?", "options": ["a", "b"]},
        {"id": "q3", "options": ["a"], "gold": "C"}]) + "\n")
    page.set_input_files("input[name=file]", str(questions))
    page.click("input[value=Import]")
    errors = page.get_by_test_id("import-errors")
    expect(errors).to_contain_text("questions.jsonl:2: id: 'q1' repeats line 1")
    expect(errors).to_contain_text("questions.jsonl:3: text: missing")
    expect(errors).to_contain_text("questions.jsonl:3: options: 1 option;")
    assert not CritiqueQuestion.objects.filter(study=study).exists()
    # … then the fixed file
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"id": "q1", "text": "2 + 2?", "options": ["3", "5", "4"], "gold": "C"},
        {"id": "q2", "text": "3 + 3?", "options": ["6", "7"], "gold": "A"}]) + "\n")
    page.set_input_files("input[name=file]", str(questions))
    page.click("input[value=Import]")
    summary = page.get_by_test_id("import-summary")  # the summary every import ends on
    expect(summary).to_contain_text("Imported questions.jsonl")
    expect(summary.get_by_test_id("created")).to_have_text("2")
    summary.get_by_role("link", name="Back to the study").click()
    expect(page.get_by_test_id("n-questions")).to_have_text("2")

    # open it, after the confirmation page
    page.get_by_role("link", name="Open the study…").click()
    expect(page.locator("#content")).to_contain_text("cannot go back to draft")
    page.click("input[value='Open the study']")
    expect(page.locator(".messagelist")).to_contain_text("opened, 4 tasks made")
    expect(page.get_by_test_id("critique-panel")).to_contain_text("Status: Open")

    # an annotator signs in with the one-time password, chooses theirs, answers a task
    annotator = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    login(annotator, live_server, "ann-1", passwords["ann-1"], landing="/accounts/password/")
    own_password(annotator, passwords["ann-1"])
    annotator.get_by_role("link", name="Back to your studies").click()
    annotator.get_by_test_id("critique-work-link").click()
    annotator.get_by_role("button", name="Get the next task").click()
    card = annotator.locator("article.critique-task")
    expect(card).to_be_visible()
    question = CritiqueQuestion.objects.get(
        study=study, tasks__public_id=card.get_attribute("data-task-id"))
    annotator.get_by_test_id("reasoning").fill(REASONING)
    annotator.locator(f'input[name="final"][value="{question.gold}"]').check()
    annotator.locator('input[name="confidence"][value="4"]').check()
    annotator.wait_for_timeout(1200)  # a task must be on screen a moment first
    annotator.keyboard.press("Control+Enter")
    expect(annotator.get_by_test_id("recorded")).to_contain_text("Recorded")
    output = CritiqueOutput.objects.get(study=study)
    assert (output.author.username, output.reasoning) == ("ann-1", REASONING)
    annotator.context.close()

    # the manager reads the dashboard and downloads the raw export of every output
    manager = browser.new_context(viewport={"width": 1200, "height": 900},
                                  accept_downloads=True).new_page()
    login(manager, live_server, "mia", passwords["mia"], landing="/accounts/password/")
    own_password(manager, passwords["mia"])
    manager.get_by_role("link", name="Back to your studies").click()
    manager.get_by_role("link", name="Dashboard").click()
    expect(manager).to_have_url(f"{live_server.url}/studies/{study.pk}/dashboard/")
    expect(manager.get_by_test_id("n-level-0")).to_have_text("1")
    with manager.expect_download() as info:
        manager.get_by_test_id("export-outputs-csv").click()
    content = (tmp_path / "outputs.csv")
    info.value.save_as(content)
    text = content.read_text()
    assert REASONING in text and question.external_id in text
    manager.context.close()
