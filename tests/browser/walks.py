"""Steps the walks of issue 17 share (tests/browser/test_walk_*.py): a researcher in the
admin, the Members page's pasted list, a person joining by invitation, a phone-sized page
whose CSP violations fail the test, a download read back, the sideways-scroll check."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.conftest import watch_csp

PHONE = {"width": 390, "height": 844}


def admin_sign_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()


def bulk_add(page, people: list[str], role: str, *, study_class: str | None = None
             ) -> dict[str, tuple[str, str]]:
    """On a study's Members page: paste ``people`` with one ``role`` (and class) into the
    "many at once" form; returns each person's (one-time password, invitation link), shown
    only now."""
    page.fill("textarea[name=bulk-people]", "\n".join(people))
    page.select_option("select[name=bulk-role]", role)
    if study_class is not None:
        page.select_option("select[name=bulk-study_class]", label=study_class)
    page.get_by_role("button", name="Add them all").click()
    created = page.get_by_test_id("created")
    for person in people:
        expect(created.locator(f'tr[data-username="{person}"]')).to_be_visible()
    return {person: (created.locator(f'tr[data-username="{person}"] code.password').inner_text(),
                     created.locator(f'tr[data-username="{person}"] code.invitation')
                     .inner_text())
            for person in people}


def via_invitation(page, live_server, link: str, password: str = "invited-secret-7302") -> None:
    """Follow an invitation link, choose a password, land on the home page signed in."""
    page.goto(link)
    page.fill("input[name=new_password1]", password)
    page.fill("input[name=new_password2]", password)
    page.get_by_role("button", name="Set my password").click()
    expect(page).to_have_url(f"{live_server.url}/")


@contextmanager
def sized_page(browser, viewport: dict) -> Iterator:
    """A page of ``viewport`` in its own context (its own session); the CSP violations of
    its pages fail the test, as the ``page`` fixture's do."""
    context = browser.new_context(viewport=viewport)
    violations = watch_csp(context)
    try:
        yield context.new_page()
    finally:
        context.close()
    assert violations == [], "\n".join(violations)


@contextmanager
def phone(browser) -> Iterator:
    """:func:`sized_page` 390 px wide, its actions given 10 s."""
    with sized_page(browser, PHONE) as page:
        page.set_default_timeout(10_000)
        yield page


def download(page, link) -> str:
    """Click a download link; the downloaded file's text."""
    with page.expect_download() as info:
        link.click()
    return Path(info.value.path()).read_text(encoding="utf-8")


def no_sideways_scroll(page, what: str) -> None:
    width = page.viewport_size["width"]
    # after a click that navigates, the old document may be gone before the new one has an
    # element: wait for the new one's
    page.wait_for_load_state()
    scroll = page.wait_for_function(
        "() => document.documentElement && document.documentElement.scrollWidth").json_value()
    assert scroll <= width, f"{what} scrolls sideways at {width} px ({scroll} px wide)"


def narrow_too(page, what: str) -> None:
    """The page at 390 px must not scroll sideways either (then back to its own width)."""
    size = page.viewport_size
    page.set_viewport_size(PHONE)
    try:
        no_sideways_scroll(page, what)
    finally:
        page.set_viewport_size(size)
