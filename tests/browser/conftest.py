"""Playwright driving Debian's chromium (its own browser download does not work here)."""

from __future__ import annotations

import os

import pytest

from tests.conftest import chromium_path

ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-gpu"]


@pytest.fixture(scope="session")
def browser():
    path = chromium_path()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed: .ci/run should have installed it")
        pytest.skip("chromium not installed (apt-get install chromium)")
    # Playwright's sync API runs an event loop in this thread; Django's ORM calls in the
    # test thread are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True, args=ARGS)
        yield browser
        browser.close()


# Every page reports what the Content-Security-Policy refused as a console line (Playwright's
# init scripts are not subject to the page's CSP).
CSP_WATCH = """document.addEventListener("securitypolicyviolation", (e) => console.error(
    "CSP violation: " + e.violatedDirective + " blocked " + (e.blockedURI || "inline") +
    " at " + e.sourceFile + ":" + e.lineNumber + " " + (e.sample || "")));"""


def watch_csp(context) -> list[str]:
    """Collect the CSP violations of every page of ``context`` (a list that fills as the
    pages run)."""
    violations: list[str] = []
    context.add_init_script(CSP_WATCH)
    context.on("console", lambda msg: violations.append(f"{msg.page.url if msg.page else '?'}: "
                                                        f"{msg.text}")
               if msg.text.startswith("CSP violation") else None)
    return violations


@pytest.fixture(autouse=True)
def _pages_closed_before_the_database(request):
    """Close every browser context a test opened before its database is flushed: fixtures
    end in reverse order, so a page still open at the flush (its heartbeat timer firing)
    would write through the live server into tables being emptied, on SQLite the very
    connection being flushed. Depends on ``live_server`` so that it ends first."""
    if "browser" not in request.fixturenames and "page" not in request.fixturenames:
        yield
        return
    browser = request.getfixturevalue("browser")
    request.getfixturevalue("live_server")
    yield
    for context in list(browser.contexts):
        context.close()


@pytest.fixture
def page(browser):
    """A page whose CSP violations fail the test (every browser test checks the policy)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    violations = watch_csp(context)
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()
    assert violations == [], "\n".join(violations)


def login(page, live_server, username: str, password: str = "pw", *,
          landing: str = "/") -> None:
    """Sign in; ``landing`` is where the site takes the person (a one-time password lands
    on the password change, ``/accounts/password/``)."""
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}{landing}")


def own_password(page, old: str, new: str = "my-own-secret-2291") -> None:
    """On the password change a one-time password lands on: choose one's own."""
    page.fill("input[name=old_password]", old)
    page.fill("input[name=new_password1]", new)
    page.fill("input[name=new_password2]", new)
    page.get_by_role("button", name="Change my password").click()


@pytest.fixture
def shots(tmp_path):
    """Where screenshots go: docs/img with OVERSIGHT_SCREENSHOTS=1 (to refresh the guides'
    pictures), else the test's temporary directory (the pages are still rendered)."""
    from pathlib import Path

    if os.environ.get("OVERSIGHT_SCREENSHOTS") == "1":
        target = Path(__file__).resolve().parents[2] / "docs" / "img"
        target.mkdir(parents=True, exist_ok=True)
        return target
    return tmp_path
