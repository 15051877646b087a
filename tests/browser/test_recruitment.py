"""A participant from each recruiting platform walks from the entry link through consent,
the screening quiz, the work and the completion, in Chromium (issue 31, must hold):
Prolific into an assisted study (the study's own tutorial and quiz too), Amazon Mechanical
Turk with sandbox-shaped parameters into a partitioned study (the preview first), a
generic link into a critique study. The platforms' pages are answered by the test
(``page.route``): the browser never leaves the machine."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode

import pytest
from playwright.sync_api import expect

from annotations.assisted.services.design import DEFAULT_QUIZ
from annotations.models import Participant, RaterAssignment, RecruitmentLink
from tests.annotations.assisted.helpers import make_assisted_study
from tests.annotations.critique.helpers import make_critique_study
from tests.factories import make_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)

SCREENING = [{"question": "What do you do when you cannot judge a sentence?",
              "options": ["Guess", "Say I can't assess it"], "answer": 1}]


def _platform(page, origin: str) -> list[dict]:
    """Answer every request to ``origin`` with a small page; returns what reached it."""
    seen: list[dict] = []

    def answer(route):
        seen.append({"url": route.request.url, "method": route.request.method,
                     "body": route.request.post_data or ""})
        route.fulfill(status=200, content_type="text/html",
                      body="<!doctype html><title>platform</title><p>Back on the platform")
    page.route(f"{origin}/**", answer)
    return seen


def _consent_and_screen(page, *, quiz: bool) -> None:
    expect(page.get_by_test_id("consent")).to_be_visible()
    page.get_by_test_id("consent-agree").click()
    if quiz:
        expect(page.get_by_test_id("screening")).to_be_visible()
        page.get_by_label("Say I can't assess it").check()
        page.get_by_test_id("quiz-submit").click()


def test_a_prolific_participant_from_the_link_to_prolifics_completion_page(
        page, live_server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_assisted_study(n_sentences=4, ratings_per_item=2)
    link = RecruitmentLink.objects.create(study=study, platform="prolific", name="pilot",
                                          completion_code="C1A2B3", max_tasks=2,
                                          quiz=SCREENING)
    prolific = _platform(page, "https://app.prolific.com")
    query = urlencode({"PROLIFIC_PID": "5f0c" + "1" * 20, "STUDY_ID": "7b2e" + "2" * 20,
                       "SESSION_ID": "6a1d" + "3" * 20})
    page.goto(f"{live_server.url}/join/{link.token}/?{query}")
    _consent_and_screen(page, quiz=True)
    # the study's own tutorial and comprehension quiz, as for every rater
    expect(page.get_by_test_id("tutorial")).to_be_visible()
    for i, q in enumerate(DEFAULT_QUIZ):
        page.locator(f'input[name="q{i}"][value="{q["answer"]}"]').check()
    page.get_by_role("button", name="Check my answers").click()
    participant = Participant.objects.get()
    arm = RaterAssignment.objects.get(user=participant.user).arm  # randomised as for anyone
    if not arm.is_baseline:
        page.get_by_role("button", name="I understand: start rating").click()
    page.get_by_role("button", name="Get the next sentence").click()
    for n in range(2):
        card = page.locator("article.rating")
        expect(card).to_be_visible()
        task_id = card.get_attribute("data-query-id")
        expect(page.get_by_test_id("participant-progress")).to_contain_text(f"{n} of 2")
        card.locator('input[name="label"][value="accurate"]').check()
        card.locator('input[name="confidence"]').nth(2).check()
        if not arm.is_baseline:
            card.locator('input[name="helpfulness"]').first.check()
        card.get_by_role("button", name="Submit rating").click()
        if n == 0:  # the next sentence comes at once
            expect(page.locator(f'article.rating[data-query-id="{task_id}"]')).to_have_count(0)
    expect(page.get_by_test_id("participant-end")).to_contain_text("All done")
    page.get_by_test_id("complete").click()
    page.wait_for_url("https://app.prolific.com/**")
    assert prolific[-1]["url"] == "https://app.prolific.com/submissions/complete?cc=C1A2B3"
    participant.refresh_from_db()
    assert participant.status == "completed"


def test_an_mturk_worker_previews_accepts_works_and_submits_to_the_sandbox(
        page, live_server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_study(k=2, n_items=10, systems={"sys": 0.75})
    link = RecruitmentLink.objects.create(study=study, platform="mturk", name="HIT",
                                          completion_code="done", max_tasks=2)
    sandbox = _platform(page, "https://workersandbox.mturk.com")
    base = f"{live_server.url}/join/{link.token}/?"
    page.goto(base + urlencode({"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE",
                                "hitId": "3SANDBOXHIT"}))
    expect(page.get_by_test_id("mturk-preview")).to_contain_text("Accept the HIT")
    assert not Participant.objects.exists()
    page.goto(base + urlencode({"assignmentId": "3SANDBOXASSIGN", "hitId": "3SANDBOXHIT",
                                "workerId": "A2SANDBOXWORKER",
                                "turkSubmitTo": "https://workersandbox.mturk.com"}))
    _consent_and_screen(page, quiz=False)
    page.wait_for_url(f"{live_server.url}/studies/{study.pk}/label/")
    page.keyboard.press("Enter")
    for _ in range(2):
        card = page.locator("article.query")
        expect(card).to_be_visible()
        query_id = card.get_attribute("data-query-id")
        page.keyboard.press("n")
        expect(page.locator(f'article.query[data-query-id="{query_id}"]')).to_have_count(0)
    expect(page.get_by_test_id("participant-end")).to_contain_text("All done")
    page.get_by_test_id("complete").click()
    page.get_by_test_id("mturk-submit-button").click()
    page.wait_for_url("https://workersandbox.mturk.com/**")
    posted = sandbox[-1]
    assert posted["url"] == "https://workersandbox.mturk.com/mturk/externalSubmit"
    assert parse_qs(posted["body"])["assignmentId"] == ["3SANDBOXASSIGN"]
    assert Participant.objects.get().status == "completed"


def test_a_generic_link_participant_answers_a_critique_task_and_goes_back(
        page, live_server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study, _ = make_critique_study(n_questions=3, top_level=1, n_annotators=1)
    link = RecruitmentLink.objects.create(
        study=study, platform="generic", name="panel", id_parameter="panel_id",
        completion_code="PANEL-OK", max_tasks=1, quiz=SCREENING,
        completion_url="https://panel.example/return?code={code}&id={participant}")
    panel = _platform(page, "https://panel.example")
    page.goto(f"{live_server.url}/join/{link.token}/?panel_id=member-42")
    _consent_and_screen(page, quiz=True)
    page.wait_for_url(f"{live_server.url}/studies/{study.pk}/critique/")
    page.get_by_role("button", name="Get the next task").click()
    card = page.locator("article.critique-task")
    expect(card).to_be_visible()
    card.locator("textarea[name=reasoning]").fill("Option B follows from the question.")
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.keyboard.press("4")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("participant-end")).to_contain_text("All done")
    page.get_by_test_id("complete").click()
    page.wait_for_url("https://panel.example/**")
    assert panel[-1]["url"] == "https://panel.example/return?code=PANEL-OK&id=member-42"
