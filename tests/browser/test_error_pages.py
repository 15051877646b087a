"""Error pages and the throttled log-in in Chromium, at a phone's width and a desktop's."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login
from tests.factories import UserFactory, make_study, role_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [390, 1200])
def test_404_and_403_pages_keep_the_layout_and_lead_home(page, shots, live_server, width):
    study = make_study(k=2, n_items=4, seed=81)
    page.set_viewport_size({"width": width, "height": 800})
    login(page, live_server, role_user(study, "manager").username)

    page.goto(f"{live_server.url}/no-such-page/")
    expect(page.locator("h1")).to_have_text("Page not found")
    expect(page.locator("header.topbar")).to_be_visible()
    page.screenshot(path=str(shots / f"error-404-{width}.png"))
    # nothing wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= width

    page.goto(f"{live_server.url}/studies/{study.pk}/label/")
    expect(page.locator("h1")).to_have_text("Not allowed")
    expect(page.locator("main")).to_contain_text("You are not a specialist in this study.")
    page.screenshot(path=str(shots / f"error-403-{width}.png"))
    page.click("text=Back to your studies")
    page.wait_for_url(f"{live_server.url}/")


def test_throttled_login_says_how_long_to_wait(page, shots, live_server, settings):
    settings.OVERSIGHT_THROTTLES = {**settings.OVERSIGHT_THROTTLES, "login_user": {
        **settings.OVERSIGHT_THROTTLES["login_user"], "free_failures": 2, "lock_after": 2}}
    user = UserFactory()
    page.set_viewport_size({"width": 390, "height": 800})
    for _ in range(3):
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", user.username)
        page.fill("input[name=password]", "wrong")
        page.click("button[type=submit]")

    expect(page.locator("p.error").first).to_have_text(
        "Too many failed log-ins for this account. Try again in 15 minutes.")
    page.screenshot(path=str(shots / "login-throttled-390.png"))
