"""Flags in Chromium, on each study type's labelling page: the key ``!`` opens the flag
form, a note typed there triggers no answer key, Ctrl+Enter sends it; the button opens it
too and Esc closes it without a flag. The task stays held and unanswered throughout."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import ItemFlag
from tests.annotations.assisted.helpers import add_rater, make_assisted_study
from tests.annotations.critique.helpers import make_critique_study
from tests.browser.conftest import login
from tests.factories import make_study, specialist

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)

# letters that are answer keys on one page or another: typed into the note, they must
# stay text
NOTE = "a y n u s z c i 1 options B and C both fit"


def _flag_by_key_then_button(page, study, user, card_selector: str, noun: str) -> None:
    card = page.locator(card_selector)
    expect(card).to_be_visible()
    page.keyboard.press("!")
    form = page.locator("form.flag-form")
    expect(form).to_contain_text(f"What is wrong with this {noun}?")
    form.get_by_label("Ambiguous").check()
    page.keyboard.press("Enter")  # on the radio button: not the page's Enter (submit/next)
    form.locator("textarea[name=note]").click()
    page.keyboard.type(NOTE)
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("flagged")).to_contain_text("Flagged as ambiguous")
    # neither Enter nor Ctrl+Enter reached the answer form (it would say what is missing)
    page.wait_for_timeout(500)
    expect(page.get_by_test_id("message")).to_have_count(0)
    flag = ItemFlag.objects.get(study=study, user=user)
    assert (flag.reason, flag.note) == ("ambiguous", NOTE)

    # the button opens the same form; Esc closes it and flags nothing more
    page.get_by_role("button", name=f"Flag a problem with this {noun}").click()
    expect(form).to_be_visible()
    form.get_by_label("Broken").check()
    page.keyboard.press("Escape")
    expect(form).to_have_count(0)
    assert ItemFlag.objects.get(study=study, user=user).reason == "ambiguous"
    # nothing was answered or skipped meanwhile: the same task is still on screen
    expect(card).to_be_visible()
    expect(page.get_by_test_id("recorded")).to_have_count(0)

    # on a phone the open form does not make the page scroll sideways
    page.set_viewport_size({"width": 390, "height": 800})
    page.keyboard.press("!")
    expect(form).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_a_specialist_flags_an_item_by_key_and_by_button(page, live_server):
    study = make_study(k=3, n_items=6)
    user = specialist(study, 1)
    login(page, live_server, user.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/label/")
    page.keyboard.press("Enter")
    _flag_by_key_then_button(page, study, user, "article.query", "item")
    assert not study.queries.filter(status="answered").exists()


def test_a_rater_flags_a_sentence_by_key_and_by_button(page, live_server):
    study = make_assisted_study(n_sentences=3)
    user = add_rater(study)
    login(page, live_server, user.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/rate/")
    page.keyboard.press("Enter")
    _flag_by_key_then_button(page, study, user, "article.rating", "sentence")
    assert not study.rating_tasks.filter(status="answered").exists()


def test_an_annotator_flags_a_question_by_key_and_by_button(page, live_server):
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1],
                                       n_annotators=2)
    login(page, live_server, users[0].username)
    page.goto(f"{live_server.url}/studies/{study.pk}/critique/")
    page.keyboard.press("Enter")
    _flag_by_key_then_button(page, study, users[0], "article.critique-task", "question")
    assert not study.critique_tasks.filter(status="answered").exists()
