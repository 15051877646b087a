"""The labelling page in Chromium: keys, a held key, expired leases, undo, skip, the
shortcuts overlay, guidelines, and the guide's screenshots (desktop and phone)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotations.models import Query, QueryEvent
from annotations.partitioned.services.routing import query_lease_next
from tests.browser.conftest import login
from tests.factories import make_study, specialist

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

READ_MS = 700  # a little over the default minimum time on screen (OVERSIGHT_MIN_ANSWER_MS)
# Each answer recomputes the study inside the request here (test settings): on a loaded
# 2-core machine a swap can take longer than Playwright's default 5 s.
expect.set_options(timeout=15_000)


def _card_id(page) -> str:
    card = page.locator("article.query")
    expect(card).to_be_visible()
    return card.get_attribute("data-query-id")


def _open(page, live_server, study, user) -> None:
    login(page, live_server, user.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/label/")


def test_specialist_labels_three_queries_with_the_keyboard(page, shots, live_server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    study = make_study(k=4, n_items=30, systems={"hidden-model-name": 0.7}, seed=51,
                       name="Demo: multiple-choice QA (K = 4)")
    study.guidelines = ("Read the **whole** question before answering.\n\n"
                        "- Answer *Not sure* rather than guess.\n"
                        "- Skip a question you cannot judge.")
    study.save(update_fields=["guidelines"])
    cls = study.classes.get(index=2)
    cls.guidelines = "Say **yes** only when option C2 is the correct answer."
    cls.save(update_fields=["guidelines"])
    user = specialist(study, 2)
    _open(page, live_server, study, user)
    page.keyboard.press("Enter")
    pressed = []
    for key, answer, label in (("y", "yes", "Yes"), ("n", "no", "No"), ("u", "unsure",
                                                                       "Not sure")):
        query_id = _card_id(page)
        assert "hidden-model-name" not in page.content()
        page.wait_for_timeout(READ_MS)
        page.keyboard.press(key)
        expect(page.get_by_test_id("recorded")).to_have_text(f"Recorded: {label}")
        expect(page.locator(f'article.query:not([data-query-id="{query_id}"])')).to_be_visible()
        pressed.append((query_id, answer))
    expect(page.get_by_test_id("session-count")).to_have_text("3")
    stored = list(Query.objects.filter(answered_by=user).order_by("answered_at")
                  .values_list("public_id", "answer", "k"))
    assert [(pk, a) for pk, a, _ in stored] == pressed
    assert {k for _, _, k in stored} == {2}
    page.locator("details.guidelines summary").click()
    expect(page.locator("details.guidelines strong").first).to_have_text("whole")
    page.screenshot(path=str(shots / "labelling.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width  # no page-wide horizontal scroll on a phone
    page.screenshot(path=str(shots / "labelling-phone.png"), full_page=True)


def test_holding_a_key_for_a_second_answers_at_most_one_query(page, live_server):
    study = make_study(k=3, n_items=30, seed=56)
    user = specialist(study, 1)
    _open(page, live_server, study, user)
    page.keyboard.press("Enter")
    first = _card_id(page)
    page.wait_for_timeout(READ_MS)
    # keyboard.down on a key already down sends keydown with repeat = true, as a held key
    for _ in range(20):
        page.keyboard.down("n")
        page.wait_for_timeout(50)
    page.keyboard.up("n")
    expect(page.locator(f'article.query:not([data-query-id="{first}"])')).to_be_visible()
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(500)
    answered = list(Query.objects.filter(answered_by=user).values_list("public_id", flat=True))
    assert answered == [first]


def test_an_expired_lease_says_what_happened_and_enter_gets_the_next_query(page, shots,
                                                                           live_server, settings):
    settings.OVERSIGHT_LEASE_SECONDS = 3
    study = make_study(k=3, n_items=12, seed=52, name="Demo: multiple-choice QA (K = 3)")
    user = specialist(study, 0)
    _open(page, live_server, study, user)
    page.keyboard.press("Enter")
    first = _card_id(page)
    # wait the lease out (3 s, plus the first heartbeat's renewal)
    notice = page.locator(".expired-next .notice")
    expect(notice).to_be_visible(timeout=10_000)
    expect(notice).to_contain_text("Your time on this query ran out")
    expect(page.locator("#lease")).to_have_text("Reserved for you: time is up")
    expect(page.locator("button.answer.yes")).to_be_disabled()
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(shots / "labelling-expired.png"), full_page=True)
    page.keyboard.press("y")  # refused on the page itself: nothing is sent
    page.keyboard.press("Enter")
    expect(page.locator(f'article.query:not([data-query-id="{first}"])')).to_be_visible()
    assert not Query.objects.filter(answered_by=user).exists()
    expired = Query.objects.get(public_id=first)
    assert expired.holder_id is None or expired.lease_expires_at < timezone.now()


def test_an_answer_the_server_finds_expired_is_refused_with_a_way_on(page, live_server):
    study = make_study(k=3, n_items=9, seed=57)
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    _open(page, live_server, study, user)
    expect(page.locator(f'article.query[data-query-id="{q.public_id}"]')).to_be_visible()
    page.wait_for_load_state("networkidle")  # the first heartbeat has extended the lease
    page.wait_for_timeout(READ_MS)
    # the lease runs out on the server while the page still counts down
    Query.objects.filter(pk=q.pk).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
    page.keyboard.press("y")
    expect(page.get_by_test_id("message")).to_contain_text("Your time on this query ran out")
    q.refresh_from_db()
    assert (q.status, q.answer, q.answered_at) == ("leased", "", None)
    page.keyboard.press("Enter")
    expect(page.locator("article.query")).to_be_visible()
    assert Query.objects.filter(holder=user, status="leased",
                                lease_expires_at__gt=timezone.now()).count() == 1


def test_undo_with_z_gives_the_query_back_and_skip_with_s_hands_it_on(page, live_server):
    study = make_study(k=3, n_items=30, seed=58, specialists_per_class=2)
    user = specialist(study, 0)
    _open(page, live_server, study, user)
    page.keyboard.press("Enter")
    first = _card_id(page)
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("n")
    expect(page.get_by_test_id("recorded")).to_have_text("Recorded: No")
    second = _card_id(page)
    assert second != first
    page.keyboard.press("z")
    expect(page.get_by_test_id("message")).to_contain_text("Undone")
    expect(page.locator(f'article.query[data-query-id="{first}"]')).to_be_visible()
    q = Query.objects.get(public_id=first)
    assert (q.status, q.answer, q.holder_id) == ("leased", "", user.pk)
    assert QueryEvent.objects.filter(query=q, kind="undone").count() == 1
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("s")
    expect(page.get_by_test_id("message")).to_contain_text("Skipped")
    expect(page.locator(f'article.query:not([data-query-id="{first}"])')).to_be_visible()
    q.refresh_from_db()
    assert (q.status, q.holder_id) == ("pending", None)
    assert query_lease_next(study=study, user=specialist(study, 0, 1)).public_id == first


def test_a_key_pressed_before_the_swap_settles_stays_on_the_page(page, live_server):
    """htmx enables a swapped-in form only when the swap settles: "z" pressed just after an
    answer's swap submitted the undo form natively (a full page load, seen in CI). A long
    settle delay makes that window deterministic here."""
    study = make_study(k=3, n_items=30, seed=60, specialists_per_class=2)
    user = specialist(study, 0)
    _open(page, live_server, study, user)
    page.evaluate("htmx.config.defaultSettleDelay = 3000")
    page.evaluate("window.stillTheSamePage = true")
    page.keyboard.press("Enter")
    first = _card_id(page)
    page.wait_for_timeout(READ_MS)
    page.keyboard.press("n")
    expect(page.get_by_test_id("recorded")).to_have_text("Recorded: No")
    page.keyboard.press("z")
    expect(page.get_by_test_id("message")).to_contain_text("Undone")
    expect(page.locator(f'article.query[data-query-id="{first}"]')).to_be_visible()
    assert page.evaluate("window.stillTheSamePage") is True


def test_question_mark_opens_the_shortcuts_and_escape_closes_them(page, live_server):
    study = make_study(k=3, n_items=6, seed=59)
    user = specialist(study, 0)
    _open(page, live_server, study, user)
    dialog = page.locator("dialog#shortcuts")
    expect(dialog).to_be_hidden()
    page.keyboard.press("?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Undo your last answer")
    page.keyboard.press("n")  # keys do nothing behind the overlay
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert not Query.objects.filter(holder=user).exists()
    page.get_by_role("button", name="Keyboard shortcuts").click()
    expect(dialog).to_be_visible()
