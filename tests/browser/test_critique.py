"""Critique pages in Chromium: an annotator completes a level-2 task (a critique of
critiques) with the keyboard only, and the managers' level table updates by itself; phone
widths; the guide's screenshots."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotations.core.engine import leases_reclaim_all
from annotations.core.services.studies import membership_add
from annotations.models import CritiqueOutput, CritiqueTask
from tests.annotations.critique.helpers import answer_next, make_critique_study
from tests.browser.conftest import login
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

READ_MS = 700  # a little over the minimum time on screen (OVERSIGHT_MIN_ANSWER_MS)
expect.set_options(timeout=15_000)


def _study_with_a_c2_task():
    """One question whose responses and critiques are written (by four annotators); the
    fifth annotator's next task is the critique of the two critiques."""
    study, users = make_critique_study(n_questions=1, top_level=2, counts=[2, 2, 1],
                                       n_annotators=5, name="Demo: critique of critiques")
    study.guidelines = "Refer to outputs by their **names**."
    study.save(update_fields=["guidelines"])
    writers, person = users[:4], users[4]
    for user, (final, choice) in zip(writers, [(1, ""), (2, ""), (1, "first"), (2, "second")],
                                     strict=True):
        task, _ = answer_next(study, user, final=final, choice=choice or "first",
                              reasoning=f"{user.username[-1]}: option {'BC'[final - 1]} "
                              "follows from the second clause.")
        assert task is not None
    assert CritiqueTask.objects.filter(study=study, level=2, status="pending").count() == 1
    return study, person


def a_response_on_screen(page, live_server):
    """A one-question study (two responses, one critique); its first annotator signed in with
    a response task on screen (Enter on the critique page)."""
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1],
                                       n_annotators=2)
    login(page, live_server, users[0].username)
    page.goto(f"{live_server.url}/studies/{study.pk}/critique/")
    page.keyboard.press("Enter")
    expect(page.locator("article.critique-task")).to_be_visible()
    return study, users


def test_an_annotator_completes_a_c2_task_with_the_keyboard_and_the_level_table_updates(
        page, browser, shots, live_server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_MIN_ANSWER_MS = 600
    study, person = _study_with_a_c2_task()
    manager = UserFactory(username="manager-crit")
    membership_add(study=study, user=manager, role="manager")
    from annotations.critique.services.analysis import critique_recompute

    critique_recompute(study_id=study.pk)

    # the manager's dashboard, open before the answer
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    dash = context.new_page()
    login(dash, live_server, manager.username)
    dash.goto(f"{live_server.url}/studies/{study.pk}/critique/dashboard/")
    expect(dash.get_by_test_id("n-level-1")).to_have_text("2")
    expect(dash.get_by_test_id("n-level-2")).to_have_count(0)

    login(page, live_server, person.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/critique/")
    page.keyboard.press("Enter")
    card = page.locator("article.critique-task")
    expect(card).to_be_visible()
    expect(page.get_by_test_id("task-kind")).to_contain_text("Level 2: compare two critiques")
    expect(page.get_by_test_id("chain-level")).to_have_count(1)  # the two responses below
    for writer in CritiqueOutput.objects.filter(study=study).values_list("author__username",
                                                                          flat=True):
        assert writer not in page.content()
    page.keyboard.press("x")  # fold the chain, and unfold it again
    expect(page.locator("details.chain-level[open]")).to_have_count(0)
    page.keyboard.press("x")
    expect(page.locator("details.chain-level[open]")).to_have_count(1)
    page.keyboard.press("/")
    expect(page.get_by_test_id("reasoning")).to_be_focused()
    page.keyboard.type("The second critique spots the misread clause; the first does not.")
    page.keyboard.press("Escape")
    page.keyboard.press("ArrowRight")  # the input shown second is better
    page.keyboard.press("c")  # final answer C
    page.keyboard.press("4")  # confidence 4
    expect(page.locator('input[name="choice"][value="second"]')).to_be_checked()
    expect(page.locator('input[name="final"][value="2"]')).to_be_checked()
    expect(page.locator('input[name="confidence"][value="4"]')).to_be_checked()
    page.screenshot(path=str(shots / "critique-task.png"), full_page=True)
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("recorded")).to_contain_text("final answer C")

    output = CritiqueOutput.objects.get(study=study, level=2)
    task = output.task
    assert (output.author_id, output.choice, output.final, output.confidence) == (
        person.pk, "second", 2, 4)
    assert output.reasoning.startswith("The second critique spots")
    assert output.time_ms >= 600 and task.status == "answered"
    # the level table updated by itself (the dashboard polls its live region)
    expect(dash.get_by_test_id("n-level-2")).to_have_text("1")
    expect(dash.get_by_test_id("accuracy-level-2")).not_to_have_text("—")
    dash.screenshot(path=str(shots / "critique-dashboard.png"), full_page=True)
    for p in (page, dash):
        p.set_viewport_size({"width": 390, "height": 844})
        width = p.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width  # no page-wide horizontal scroll on a phone
    dash.screenshot(path=str(shots / "critique-dashboard-phone.png"), full_page=True)
    context.close()


def test_keys_do_nothing_while_typing_and_an_incomplete_answer_keeps_the_text(page,
                                                                              live_server):
    study, users = a_response_on_screen(page, live_server)
    page.keyboard.press("/")
    page.keyboard.type("a b 4")  # typed text, not shortcuts
    expect(page.locator('input[name="final"]:checked')).to_have_count(0)
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("Control+Enter")  # no confidence yet
    expect(page.get_by_test_id("message")).to_contain_text("Rate your confidence")
    expect(page.get_by_test_id("reasoning")).to_have_value("a b 4")
    expect(page.locator('input[name="final"][value="1"]')).to_be_checked()
    assert not CritiqueOutput.objects.filter(study=study).exists()


def test_skip_asks_first_then_hands_the_task_over(page, live_server):
    study, users = a_response_on_screen(page, live_server)
    first = CritiqueTask.objects.get(holder=users[0])
    # dismissing the question keeps the task and what was typed
    page.get_by_test_id("reasoning").fill("half a thought")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_test_id("skip").click()
    expect(page.get_by_test_id("reasoning")).to_have_value("half a thought")
    first.refresh_from_db()
    assert first.holder_id == users[0].pk
    # accepting it hands the task back and shows the next one
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("skip").click()
    expect(page.get_by_test_id("recorded")).to_contain_text("Skipped")
    expect(page.get_by_test_id("skipped-count")).to_have_text("1")
    expect(page.locator("article.critique-task")).to_be_visible()
    first.refresh_from_db()
    assert first.status == "pending" and first.holder_id is None
    assert CritiqueTask.objects.get(holder=users[0], status="leased").pk != first.pk


def test_the_demo_dashboards_show_every_table(page, shots, live_server, settings):
    from annotations.critique.services.demo import critique_demo_seed

    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    demo = critique_demo_seed()
    humans, mixed = demo.studies
    login(page, live_server, "manager", "manager")
    page.goto(f"{live_server.url}/")
    for study in (humans, mixed):
        expect(page.get_by_role("heading", name=study.name)).to_be_visible()
    page.goto(f"{live_server.url}/studies/{humans.pk}/critique/dashboard/")
    for testid in ("progress", "level-table", "effort-table", "input-pair-table",
                   "choice-table"):
        expect(page.get_by_test_id(testid)).to_be_visible()
    for level in range(4):
        expect(page.get_by_test_id(f"accuracy-level-{level}")).not_to_have_text("—")
    page.screenshot(path=str(shots / "critique-demo-dashboard.png"), full_page=True)
    page.select_option("select[name=domain]", "math")
    expect(page.locator("#levels-title")).to_contain_text("math")
    expect(page).to_have_url(f"{live_server.url}/studies/{humans.pk}/critique/dashboard/"
                             "?domain=math", ignore_case=True)
    page.goto(f"{live_server.url}/studies/{mixed.pk}/critique/dashboard/")
    expect(page.get_by_test_id("human-ai-table")).to_be_visible()
    page.select_option("select[name=author]", "ai")
    expect(page.locator("#levels-title")).to_contain_text("AI")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    login(page, live_server, "annotator-l3", "annotator-l3")
    page.goto(f"{live_server.url}/studies/{humans.pk}/critique/")
    page.keyboard.press("Enter")
    expect(page.locator("article.critique-task")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(shots / "critique-task-phone.png"), full_page=True)


@pytest.mark.parametrize("width", [390, 1280])
def test_the_study_page_with_a_long_endpoint_does_not_scroll_sideways(page, live_server,
                                                                      width):
    from annotations.critique.services.studies import critique_settings_update
    from annotations.models import StudyMembership

    # given: a study pointed at an endpoint with a long path (as a hosted API's can be)
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1],
                                   mode="ai_below", open_=False)
    critique_settings_update(study=study, ai_model="a-model-with-a-long-name-7b-instruct",
                             ai_base_url="http://127.0.0.1:9/" + "deployments/" * 6 + "v1")
    researcher = UserFactory(username=f"res-wide-{width}", is_staff=True)
    membership_add(study=study, user=researcher, role=StudyMembership.Role.RESEARCHER)
    # when
    page.set_viewport_size({"width": width, "height": 900})
    login(page, live_server, researcher.username)
    page.goto(f"{live_server.url}/admin/annotations/critiquesettings/{study.pk}/change/")
    # then (435 px wide at 390 before: the endpoint's <code> did not wrap)
    expect(page.get_by_text("Write the missing AI outputs")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_a_draft_survives_a_reload_and_the_time_limit_with_a_warning_first(page, live_server,
                                                                            settings):
    # issue 17: a 20-minute task gave no warning before its time ran out, and a reload, a
    # crash or the time-out lost what was typed
    study, users = a_response_on_screen(page, live_server)
    card = page.locator("article.critique-task")
    expect(card).to_be_visible()
    task_id = card.get_attribute("data-task-id")
    page.keyboard.press("/")
    page.keyboard.type("Option C: the second clause rules out A.")
    page.keyboard.press("Escape")
    page.keyboard.press("c")
    page.reload()  # as after a crash: the page resumes the lease
    expect(page.get_by_test_id("draft-restored")).to_be_visible()
    expect(page.get_by_test_id("reasoning")).to_have_value(
        "Option C: the second clause rules out A.")
    expect(page.locator('input[name="final"][value="2"]')).to_be_checked()
    expect(page.get_by_test_id("lease-warning")).to_be_hidden()  # 20 minutes left
    # a short time limit: the warning shows, then the time runs out with the text readable
    settings.OVERSIGHT_LEASE_SECONDS = 4
    CritiqueTask.objects.filter(public_id=task_id).update(status="pending", holder=None,
                                                          lease_expires_at=None)
    page.reload()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("lease-warning")).to_be_visible()
    expect(card).to_have_attribute("data-task-id", task_id)
    expect(page.get_by_test_id("reasoning")).to_have_value(
        "Option C: the second clause rules out A.")
    expect(page.locator("#lease")).to_have_class(re.compile(r"\bexpired\b"), timeout=10_000)
    reasoning = page.get_by_test_id("reasoning")
    expect(reasoning).not_to_be_editable()
    expect(reasoning).to_have_value("Option C: the second clause rules out A.")
    expect(page.get_by_test_id("lease-warning")).to_be_hidden()
    # the same task again (back in the pool, first in its order): the draft comes back
    # once more; recorded, it is forgotten
    settings.OVERSIGHT_LEASE_SECONDS = None
    # the page's clock may call the lease expired a moment before the server's does: reclaim
    # as of the lease's end, or a lease still running on the server keeps the task from the pool
    ends = CritiqueTask.objects.get(public_id=task_id).lease_expires_at
    leases_reclaim_all(now=max(ends + dt.timedelta(milliseconds=1), timezone.now()))
    page.keyboard.press("Enter")
    expect(page.locator("article.critique-task:not(.expired)")).to_have_attribute(
        "data-task-id", task_id)
    expect(page.get_by_test_id("reasoning")).to_have_value(
        "Option C: the second clause rules out A.")
    page.keyboard.press("4")
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("recorded")).to_be_visible()
    assert CritiqueOutput.objects.get(task__public_id=task_id).final == 2
    assert page.evaluate("Object.keys(localStorage).filter(k => k.includes('draft'))") == []
