"""Written work is never lost (issue 27): undo puts the answer taken back into the form (a
critique's reasoning, choice, final answer and confidence; a rating's choices and
comment), a blind-arm rater has the comment box and its keys, keys typed in any text field
are text and never shortcuts, the time left stays in view while typing on a phone, the
critique page names every missing field, and "Undo" is offered only when there is
something to undo, on the labelling page of every study type."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import CritiqueOutput, CritiqueTask, Query, Rating, RatingSkip
from tests.annotations.assisted.helpers import make_assisted_study, rater_in_arm
from tests.annotations.critique.helpers import make_critique_study
from tests.browser.conftest import login
from tests.browser.test_critique import _study_with_a_c2_task
from tests.factories import make_study, specialist

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

READ_MS = 700  # a little over the minimum time on screen (OVERSIGHT_MIN_ANSWER_MS)
expect.set_options(timeout=15_000)

# about 20 minutes of writing: long, several paragraphs, with every key that is a shortcut
# elsewhere on the page (letters, digits, z for undo, ! for flag, s for skip, x, ?)
REASONING = ("Option C. The second clause rules out A and B: both need the premise to hold "
             "at z = 0, which it does not (see the first line!).\n\nD fails for the same "
             "reason; x, s and ? are only letters here. Confidence 4 of 5. " * 6).strip()


def _critique_page(page, live_server, *, annotators: int = 2):
    study, users = make_critique_study(n_questions=2, top_level=1, counts=[2, 1],
                                       n_annotators=annotators)
    login(page, live_server, users[0].username)
    page.goto(f"{live_server.url}/studies/{study.pk}/critique/")
    page.keyboard.press("Enter")
    expect(page.locator("article.critique-task")).to_be_visible()
    return study, users


def test_undo_of_a_critique_answer_brings_the_whole_answer_back_into_the_form(
        page, live_server, settings):
    settings.OVERSIGHT_UNDO_SECONDS = 60
    study, users = _critique_page(page, live_server)
    task_id = page.locator("article.critique-task").get_attribute("data-task-id")
    page.keyboard.press("/")
    page.get_by_test_id("reasoning").fill(REASONING)
    page.keyboard.press("Escape")
    page.keyboard.press("c")
    page.keyboard.press("4")
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("recorded")).to_be_visible()
    assert CritiqueOutput.objects.get(task__public_id=task_id).reasoning == REASONING
    page.keyboard.press("z")
    expect(page.get_by_test_id("message")).to_contain_text("Undone")
    expect(page.locator("article.critique-task")).to_have_attribute("data-task-id", task_id)
    expect(page.get_by_test_id("reasoning")).to_have_value(REASONING)
    expect(page.locator('input[name="final"][value="2"]')).to_be_checked()
    expect(page.locator('input[name="confidence"][value="4"]')).to_be_checked()
    assert not CritiqueOutput.objects.filter(task__public_id=task_id).exists()
    # a reload (as after a crash) still shows it; an edit then a submit records the edit
    page.reload()
    expect(page.get_by_test_id("reasoning")).to_have_value(REASONING)
    page.get_by_test_id("reasoning").press("Control+End")
    page.keyboard.type(" Checked again.")
    page.keyboard.press("Escape")
    page.keyboard.press("5")
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("recorded")).to_be_visible()
    again = CritiqueOutput.objects.get(task__public_id=task_id)
    assert (again.reasoning, again.final, again.confidence) == (
        REASONING + " Checked again.", 2, 5)


def test_the_critique_page_names_every_missing_field(page, live_server):
    study, users = _critique_page(page, live_server)
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("Control+Enter")  # nothing written, nothing chosen
    message = page.get_by_test_id("message")
    expect(message).to_contain_text("Write your reasoning.")
    expect(message).to_contain_text("Choose your final answer.")
    expect(message).to_contain_text("Rate your confidence from 1 to 5.")
    assert not CritiqueOutput.objects.filter(study=study).exists()


def test_a_critique_undo_is_offered_only_within_its_window(page, live_server, settings):
    settings.OVERSIGHT_UNDO_SECONDS = 8  # long enough to see it on a loaded machine
    study, users = _critique_page(page, live_server)
    expect(page.get_by_test_id("undo")).to_have_count(0)  # nothing answered yet
    page.get_by_test_id("reasoning").fill("B, from the second clause.")
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.keyboard.press("3")
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("recorded")).to_be_visible()
    expect(page.get_by_test_id("undo")).to_be_visible()
    expect(page.get_by_test_id("undo")).to_have_count(0, timeout=20_000)  # its window ended
    page.reload()
    expect(page.get_by_test_id("answered-count")).to_have_text("1")
    expect(page.get_by_test_id("undo")).to_have_count(0)
    page.keyboard.press("z")  # nothing happens: no refusal to read either
    expect(page.get_by_test_id("message")).to_have_count(0)


def _rating_page(page, live_server, arm: str):
    study = make_assisted_study(n_sentences=4, arms={"E": ["evidence"]})
    user = rater_in_arm(study, arm)
    login(page, live_server, user.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/rate/")
    page.keyboard.press("Enter")
    expect(page.locator("article.rating")).to_be_visible()
    return study, user


def test_undo_of_a_rating_brings_its_choices_and_comment_back(page, live_server, settings):
    settings.OVERSIGHT_UNDO_SECONDS = 60
    study, user = _rating_page(page, live_server, "E")
    sentence = page.locator("article.rating").get_attribute("data-query-id")
    page.keyboard.press("a")
    page.keyboard.press("3")
    page.keyboard.press("8")
    page.keyboard.press("m")
    page.keyboard.type("The evidence quote is from an unrelated page; I checked two others.")
    page.keyboard.press("Escape")
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("recorded")).to_be_visible()
    assert Rating.objects.get(rater=user).comment.startswith("The evidence quote")
    page.keyboard.press("z")
    expect(page.get_by_test_id("message")).to_contain_text("Undone")
    expect(page.locator("article.rating")).to_have_attribute("data-query-id", sentence)
    expect(page.get_by_test_id("comment")).to_have_value(
        "The evidence quote is from an unrelated page; I checked two others.")
    expect(page.locator('input[name="label"][value="accurate"]')).to_be_checked()
    expect(page.locator('input[name="confidence"][value="2"]')).to_be_checked()
    expect(page.locator('input[name="helpfulness"][value="1"]')).to_be_checked()
    expect(page.get_by_test_id("undo")).to_have_count(0)  # undone: nothing left to undo
    assert not Rating.objects.filter(rater=user).exists()


def test_a_blind_arm_rater_comments_and_keys_typed_there_are_text(page, live_server):
    # issue 27: the baseline arm had no comment box: m did nothing and the comment typed
    # after it was read as rating keys (s skipped the sentence)
    study, user = _rating_page(page, live_server, "Baseline")
    sentence = page.locator("article.rating").get_attribute("data-query-id")
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("m")
    text = "is said in 2 sources; a third disputes it! z"
    page.keyboard.type(text)
    for key in ("s", "a", "Enter", "z"):  # held down: repeated keydowns
        page.keyboard.down(key)
        page.keyboard.down(key)
        page.keyboard.up(key)
    typed = page.get_by_test_id("comment").input_value()
    assert typed.startswith(text) and "ss" in typed and "aa" in typed and "zz" in typed
    page.wait_for_timeout(300)
    assert not Rating.objects.filter(rater=user).exists()
    assert not RatingSkip.objects.filter(user=user).exists()
    expect(page.locator("article.rating")).to_have_attribute("data-query-id", sentence)
    expect(page.locator('input[name="label"]:checked')).to_have_count(0)
    # Esc leaves the box; the keys rate again
    page.keyboard.press("Escape")
    page.keyboard.press("d")
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("recorded")).to_contain_text("Disputed")
    rating = Rating.objects.get(rater=user)
    assert (rating.label, rating.confidence, rating.comment) == ("disputed", 1, typed.strip())


def test_keys_typed_in_the_flag_note_and_the_critique_box_are_text(page, live_server):
    study, users = _critique_page(page, live_server)
    task = CritiqueTask.objects.get(holder=users[0], status="leased")
    box = page.get_by_test_id("reasoning")
    box.click()
    for key in ("a", "4", "z", "x", "!", "?", "Enter"):
        page.keyboard.down(key)
        page.keyboard.down(key)
        page.keyboard.up(key)
    assert box.input_value() == "aa44zzxx!!??\n\n"
    expect(page.locator("dialog#shortcuts")).not_to_have_attribute("open", "")
    expect(page.locator('input[name="final"]:checked')).to_have_count(0)
    expect(page.locator("form.flag-form")).to_have_count(0)
    page.keyboard.press("Escape")
    page.keyboard.press("!")
    note = page.locator("form.flag-form textarea[name=note]")
    note.click()
    page.keyboard.type("z s a 4 Enter? x")
    expect(note).to_have_value("z s a 4 Enter? x")
    page.keyboard.press("Escape")  # closes the flag form
    expect(page.locator("form.flag-form")).to_have_count(0)
    task.refresh_from_db()
    assert task.status == "leased" and task.holder_id == users[0].pk
    assert not CritiqueOutput.objects.filter(study=study).exists()


def test_partitioned_undo_is_offered_only_when_there_is_something_to_undo(
        page, live_server, settings):
    settings.OVERSIGHT_UNDO_SECONDS = 60
    study = make_study(k=3, n_items=30, seed=57)
    user = specialist(study, 1)
    login(page, live_server, user.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/label/")
    expect(page.get_by_test_id("undo")).to_have_count(0)
    page.keyboard.press("Enter")
    for n in (1, 2):
        expect(page.locator("article.query")).to_be_visible()
        page.wait_for_timeout(READ_MS)
        page.keyboard.press("y")
        expect(page.get_by_test_id("answered-count")).to_have_text(str(n))
    expect(page.get_by_test_id("undo")).to_be_visible()
    page.keyboard.press("z")
    expect(page.get_by_test_id("message")).to_contain_text("Undone")
    # one answer is still recorded, but only the last can be undone, once
    assert Query.objects.filter(answered_by=user).count() == 1
    expect(page.get_by_test_id("undo")).to_have_count(0)
    page.reload()
    expect(page.get_by_test_id("undo")).to_have_count(0)


@pytest.mark.parametrize("width", [390, 1280])
def test_the_time_left_and_its_warning_stay_in_view_while_typing(page, live_server, settings,
                                                                  shots, width):
    settings.OVERSIGHT_LEASE_SECONDS = 100  # under the 2-minute warning at once
    page.set_viewport_size({"width": width, "height": 844 if width == 390 else 900})
    study, person = _study_with_a_c2_task()  # two critiques and the responses below them
    login(page, live_server, person.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/critique/")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("lease-warning")).to_be_visible()
    box = page.get_by_test_id("reasoning")
    box.click()
    page.keyboard.type("Option C, since the second clause rules out A.")
    box.evaluate("el => el.scrollIntoView({block: 'end'})")  # as a phone's keyboard does
    lease, warning = page.locator("#lease"), page.get_by_test_id("lease-warning")
    lease_box, box_box = lease.bounding_box(), box.bounding_box()
    viewport = page.viewport_size
    # the lease line (clock and warning) is on screen above the text box; on a phone the
    # page scrolled past its place, so it stuck to the top of the screen
    assert lease_box["y"] >= 0 and lease_box["y"] + lease_box["height"] <= viewport["height"]
    if width == 390:
        card = page.locator("article.critique-task").bounding_box()
        assert card["y"] < -100 and lease_box["y"] <= 12, (card, lease_box)
    assert lease_box["y"] + lease_box["height"] <= box_box["y"] + box_box["height"], (lease_box,
                                                                                     box_box)
    assert box_box["y"] < viewport["height"], box_box
    expect(warning).to_be_in_viewport()
    expect(page.locator("#lease .countdown")).to_be_in_viewport()
    page.screenshot(path=str(shots / f"critique-typing-{width}.png"))
    if width == 390:
        page.screenshot(path="/tmp/written-typing-390.png")
    else:
        page.screenshot(path="/tmp/written-typing-1280.png")


def test_the_rating_page_keeps_the_time_left_in_view_while_commenting_on_a_phone(
        page, live_server, shots):
    page.set_viewport_size({"width": 390, "height": 844})
    study, user = _rating_page(page, live_server, "E")
    page.locator("details[data-section=evidence] summary").first.click()  # a longer card
    page.keyboard.press("m")
    box = page.get_by_test_id("comment")
    expect(box).to_be_focused()
    page.keyboard.type("The quote is from an unrelated page.")
    box.evaluate("el => el.scrollIntoView({block: 'end'})")  # as a phone's keyboard does
    lease = page.locator("article.rating #lease").bounding_box()
    card = page.locator("article.rating").bounding_box()
    assert card["y"] < -100, card  # scrolled past the lease line's own place
    assert 0 <= lease["y"] <= 12 and lease["y"] + lease["height"] <= 844, lease
    expect(page.locator("#lease .countdown")).to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(shots / "rating-typing-390.png"))
    page.screenshot(path="/tmp/written-rating-390.png")
