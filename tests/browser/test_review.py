"""The review queue in Chromium (``core.reviews``): a reviewer works the answers by keys —
a reason typed in the box stays text, Enter rejects, the card swaps in place and the keys
go on from it (undo, accept) — and a researcher opens a flag in context from the admin's
queue and from the Review page's Flags tab, at 1 280 and 390 px, and withdraws the item
there."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.core.services.flags import flag_item
from annotations.models import AnswerReview, ItemFlag, Query
from tests.annotations.core.review_helpers import partitioned_answered, reviewer_of
from tests.browser.conftest import login
from tests.factories import role_user, specialist

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)

# letters that are the page's keys: typed into the reason they must stay text
REASON = "a j k u o r: says yes to an item of another class"


def _no_sideways_scroll(page, width: int, where: str) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width, where


def test_a_reviewer_rejects_undoes_and_accepts_by_keys(page, live_server, shots):
    study, _model, ids = partitioned_answered()
    reviewer = reviewer_of(study)
    login(page, live_server, reviewer.username)
    page.get_by_test_id("review-link").click()
    expect(page.locator("h1")).to_contain_text("Review")
    cards = page.get_by_test_id("answer")
    expect(cards.first).to_be_visible()
    first_id = int(cards.first.get_attribute("data-answer"))
    page.wait_for_load_state("load")  # review.js's keys listen from then on (loaded CI)

    page.keyboard.press("j")
    expect(cards.first).to_be_focused()
    page.keyboard.press("r")
    reason = cards.first.get_by_test_id("reason")
    expect(reason).to_be_focused()
    page.keyboard.type(REASON)
    expect(reason).to_have_value(REASON)  # no letter was taken as a key
    assert not AnswerReview.objects.exists()
    page.keyboard.press("Enter")
    card = page.locator(f"#answer-{first_id}")
    expect(card.get_by_test_id("review-state")).to_contain_text("Rejected")
    expect(card.get_by_test_id("review-state")).to_contain_text(REASON)
    review = AnswerReview.objects.get()
    assert (review.answer_id, review.state, review.reason) == (first_id, "rejected", REASON)
    page.screenshot(path=str(shots / "review-1280.png"), full_page=True)

    # the swapped card keeps the keyboard: u undoes, j moves on, a accepts
    expect(card).to_be_focused()
    page.keyboard.press("u")
    expect(card.get_by_test_id("review-state")).to_contain_text("Rejection undone")
    review.refresh_from_db()
    assert review.state == "undone"
    page.keyboard.press("j")
    second = cards.nth(1)
    expect(second).to_be_focused()
    second_id = int(second.get_attribute("data-answer"))
    page.keyboard.press("a")
    expect(page.locator(f"#answer-{second_id}").get_by_test_id("review-state")
           ).to_contain_text("Accepted")
    assert AnswerReview.objects.get(answer_id=second_id).state == "accepted"

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/studies/{study.pk}/review/?show=answers&state=all")
    expect(cards.first).to_be_visible()
    _no_sideways_scroll(page, 390, "the Review page")
    page.screenshot(path=str(shots / "review-390.png"), full_page=True)


def test_a_flag_opens_in_context_with_fix_withdraw_dismiss(page, live_server, shots):
    study, _model, _ids = partitioned_answered()
    flagger = specialist(study, 0)
    query = Query.objects.filter(study=study, answered_by=flagger).first()
    note = "Options B and C say the same thing; " * 4
    flag_item(study=study, user=flagger, public_id=query.public_id, reason="ambiguous",
              note=note.strip())
    researcher = role_user(study, "researcher")
    login(page, live_server, researcher.username)

    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/admin/annotations/itemflag/?study__id__exact={study.pk}")
        row = page.locator("#result_list tbody tr").first
        expect(row).to_contain_text("Ambiguous")
        expect(row).to_contain_text(flagger.username)
        expect(row).to_contain_text("Options B and C say the same thing")
        expect(row).to_contain_text(query.item.external_id)
        # reason, note, flagger and item on one screen: the row fits the width
        box = row.bounding_box()
        assert box["x"] + box["width"] <= width + 1, f"admin queue row at {width} px"
        _no_sideways_scroll(page, width, f"the admin flag queue at {width} px")
        page.screenshot(path=str(shots / f"flag-queue-admin-{width}.png"), full_page=True)

        page.goto(f"{live_server.url}/studies/{study.pk}/review/?show=flags")
        flag_row = page.get_by_test_id("flag-row").first
        expect(flag_row).to_contain_text(flagger.username)
        _no_sideways_scroll(page, width, f"the Flags tab at {width} px")
        page.screenshot(path=str(shots / f"flag-queue-{width}.png"), full_page=True)

    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/admin/annotations/itemflag/?study__id__exact={study.pk}")
    page.get_by_test_id("flag-in-context").first.click()
    expect(page.get_by_test_id("item-text")).to_contain_text(query.item.text[:30])
    expect(page.get_by_test_id("item-flags")).to_contain_text(f"flagged by {flagger.username}")
    expect(page.locator(f"#answer-{query.pk}")).to_be_visible()  # the answers it has
    page.screenshot(path=str(shots / "flag-in-context-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.get_by_test_id("resolve-withdrawn")).to_be_visible()
    _no_sideways_scroll(page, 390, "an item in context")
    page.screenshot(path=str(shots / "flag-in-context-390.png"), full_page=True)
    page.get_by_test_id("resolve-withdrawn").click()
    expect(page.locator(".messages")).to_contain_text("1 flag withdrawn")
    assert ItemFlag.objects.get().resolution == "withdrawn"
    expect(page.get_by_test_id("resolve-withdrawn")).to_have_count(0)


@pytest.mark.parametrize("build", ["assisted", "critique"])
def test_a_reviewer_settles_a_disagreement_on_the_items_page(page, live_server, build):
    from tests.annotations.core.review_helpers import assisted_answered, critique_answered

    study, _model, _ids = {"assisted": assisted_answered, "critique": critique_answered}[build]()
    reviewer = reviewer_of(study)
    login(page, live_server, reviewer.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/review/?show=disagreements")
    row = page.get_by_test_id("disagreements").locator("li").first
    expect(row).to_contain_text("×")
    row.locator("a").first.click()
    expect(page.get_by_test_id("item-context")).to_be_visible()
    cards = page.get_by_test_id("answer")
    assert cards.count() >= 2  # every answer of the item, side by side
    page.wait_for_load_state("load")  # review.js's keys listen from then on
    page.keyboard.press("j")
    expect(cards.first).to_be_focused()
    answer_id = int(cards.first.get_attribute("data-answer"))
    page.keyboard.press("r")
    page.keyboard.type(REASON)
    page.keyboard.press("Enter")
    expect(page.locator(f"#answer-{answer_id}").get_by_test_id("review-state")
           ).to_contain_text("Rejected")
    assert AnswerReview.objects.get().answer_id == answer_id
    page.set_viewport_size({"width": 390, "height": 844})
    _no_sideways_scroll(page, 390, f"a {build} item in context")
