"""Worker pages anyone can use (issue 31): the specialist's, the rater's and the annotator's
pages and a crowd participant's entry, consent, screening and completion pages pass axe-core
with no serious or critical violation on a 390 px phone and a 1280 px screen, in the light
and the dark colour scheme, with a task on screen where the page has one; and they are
worked with the keyboard alone, the focus visible."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from annotations.assisted.services.design import DEFAULT_QUIZ
from annotations.models import RecruitmentLink
from tests.annotations.assisted.helpers import add_rater, make_assisted_study
from tests.annotations.critique.helpers import make_critique_study
from tests.browser.accessibility import axe_ready, axe_violations
from tests.browser.conftest import login
from tests.factories import make_study, specialist

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)
WIDTHS = (390, 1280)
SCREENING = [{"question": "What do you do when you cannot judge an item?",
              "options": ["Guess", "Say so"], "answer": 1}]


def _check(page, what: str, found: dict) -> None:
    """axe at both widths, in the light and the dark colour scheme (the worker pages have a
    dark theme)."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            violations = axe_violations(page)
            if violations:
                found[f"{what} at {width} px, {scheme}"] = violations
    page.emulate_media(color_scheme="light")


def _focus_visible(page) -> None:
    """The element the keyboard is on draws a visible focus ring (an outline or a shadow)."""
    style = page.evaluate("""() => { const e = document.activeElement; if (!e ||
        e === document.body) return null; const s = getComputedStyle(e);
        return [s.outlineStyle, s.outlineWidth, s.boxShadow]; }""")
    assert style is not None, "nothing has the focus"
    outline, width, shadow = style
    assert (outline != "none" and width != "0px") or shadow != "none", style


def test_the_specialists_raters_and_annotators_pages(page, live_server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    axe_ready(page)
    found: dict[str, list[str]] = {}

    study = make_study(k=3, n_items=10, systems={"sys": 0.7})
    login(page, live_server, specialist(study, 0).username)
    page.goto(f"{live_server.url}/studies/{study.pk}/label/")
    _check(page, "the labelling page, no query yet", found)
    page.keyboard.press("Enter")
    expect(page.locator("article.query")).to_be_visible()
    _check(page, "the labelling page with a query", found)
    page.keyboard.press("Tab")
    _focus_visible(page)
    page.keyboard.press("?")
    _check(page, "the labelling page's keyboard help", found)
    page.keyboard.press("Escape")

    assisted = make_assisted_study(n_sentences=3, arms={"Evidence": ["evidence"]})
    rater = add_rater(assisted, ready=False)
    page.context.clear_cookies()
    login(page, live_server, rater.username)
    page.goto(f"{live_server.url}/studies/{assisted.pk}/rate/")
    expect(page.get_by_test_id("tutorial")).to_be_visible()
    _check(page, "the rater's tutorial and quiz", found)
    for i, q in enumerate(DEFAULT_QUIZ):
        page.locator(f'input[name="q{i}"][value="{q["answer"]}"]').check()
    page.get_by_role("button", name="Check my answers").click()
    warning = page.get_by_role("button", name="I understand: start rating")
    # the page after the quiz, whichever arm: the assistant's warning or the first sentence
    expect(warning.or_(page.get_by_role("button", name="Get the next sentence"))).to_be_visible()
    if warning.count():
        _check(page, "the assistant's warning", found)
        warning.click()
    page.get_by_role("button", name="Get the next sentence").click()
    expect(page.locator("article.rating")).to_be_visible()
    _check(page, "the rating page with a sentence", found)

    critique, users = make_critique_study(n_questions=2, top_level=1)
    page.context.clear_cookies()
    login(page, live_server, users[0].username)
    page.goto(f"{live_server.url}/studies/{critique.pk}/critique/")
    page.keyboard.press("Enter")
    expect(page.locator("article.critique-task")).to_be_visible()
    _check(page, "the critique task page", found)
    assert found == {}, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in found.items())


def test_a_participants_pages(page, live_server, settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    axe_ready(page)
    found: dict[str, list[str]] = {}
    study = make_study(k=2, n_items=6, systems={"sys": 0.7})
    link = RecruitmentLink.objects.create(study=study, platform="prolific", name="pilot",
                                          completion_code="C0DE", max_tasks=1, quiz=SCREENING,
                                          screened_out_code="OUT")
    entry = f"{live_server.url}/join/{link.token}/"
    page.goto(entry + "?PROLIFIC_PID=<b>x</b>")
    expect(page.get_by_test_id("join-refused")).to_be_visible()
    _check(page, "a refused entry", found)
    page.goto(entry + "?" + urlencode({"PROLIFIC_PID": "a" * 24, "STUDY_ID": "b" * 24,
                                       "SESSION_ID": "c" * 24}))
    expect(page.get_by_test_id("consent")).to_be_visible()
    _check(page, "the consent page", found)
    page.keyboard.press("Tab")
    _focus_visible(page)
    page.get_by_test_id("consent-agree").focus()
    page.keyboard.press("Enter")  # agree by keyboard
    expect(page.get_by_test_id("screening")).to_be_visible()
    _check(page, "the screening quiz", found)
    page.get_by_label("Say so").focus()
    page.keyboard.press("Space")
    page.get_by_test_id("quiz-submit").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/studies/{study.pk}/label/")
    page.goto(f"{live_server.url}/join/{link.token}/complete/")
    expect(page.get_by_test_id("not-done")).to_be_visible()
    _check(page, "the not-done page", found)
    page.goto(f"{live_server.url}/studies/{study.pk}/label/")
    page.keyboard.press("Enter")
    expect(page.locator("article.query")).to_be_visible()
    _check(page, "a participant's labelling page", found)
    page.keyboard.press("n")
    expect(page.get_by_test_id("participant-end")).to_be_visible()
    _check(page, "the participant's end page", found)
    assert found == {}, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in found.items())


def test_the_check_itself_finds_a_serious_violation(page, live_server):
    """The check is not vacuous: a page with an unnamed button and a list item outside a
    list (the site's own messages were one, until this check found it) fails it."""
    axe_ready(page)
    page.goto(f"{live_server.url}/accounts/login/")
    page.evaluate("""() => { const b = document.createElement('button');
        document.querySelector('main').append(b);
        const u = document.createElement('ul'); u.setAttribute('role', 'status');
        u.append(document.createElement('li')); document.querySelector('main').append(u); }""")
    found = " ".join(axe_violations(page))
    assert "button-name (critical)" in found and "listitem (serious)" in found, found
