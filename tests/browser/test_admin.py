"""The researcher's admin screens in Chromium: list, import with errors, open a study."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import Item, Query, Study
from tests.browser.conftest import login
from tests.factories import make_study, role_user, specialist

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def admin_login(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()


def test_researcher_imports_items_fixes_an_error_and_opens_the_study(page, shots, live_server,
                                                                   tmp_path):
    study = make_study(k=3, n_items=0, open_=False, seed=61, name="Radiology triage")
    admin_login(page, live_server, role_user(study, "researcher").username)
    page.goto(f"{live_server.url}/admin/annotations/study/")
    row = page.locator("#result_list tr", has_text="Radiology triage")
    expect(row).to_be_visible()
    page.screenshot(path=str(shots / "admin-studies.png"))

    bad = tmp_path / "scans.csv"
    bad.write_text("id,text,gold\nscan-1,First scan,C0\nscan-2,Second scan,C9\n")
    row.get_by_role("link", name="Import items").click()
    page.set_input_files("input[name=file]", str(bad))
    page.click("input[value=Import]")
    expect(page.locator(".errorlist")).to_contain_text("scans.csv:3: gold")
    page.screenshot(path=str(shots / "admin-import-error.png"))
    assert Item.objects.filter(study=study).count() == 0  # nothing half-done

    bad.write_text("id,text,gold\nscan-1,First scan,C0\nscan-2,Second scan,C2\n")
    page.set_input_files("input[name=file]", str(bad))
    page.click("input[value=Import]")
    expect(page.locator(".messagelist")).to_contain_text("2 created")

    page.goto(f"{live_server.url}/admin/annotations/study/")
    page.locator("#result_list tr", has_text="Radiology triage").locator(
        "input.action-select").check()
    page.select_option("select[name=action]", "open_studies")
    page.click("button[name=index]")
    expect(page.locator(".messagelist")).to_contain_text("opened, 2 items routed")
    study.refresh_from_db()
    assert study.status == Study.Status.OPEN
    assert Query.objects.filter(study=study).count() == 2


def test_specialist_home_lists_their_studies(page, shots, live_server):
    study = make_study(k=3, n_items=6, seed=62, name="Contract clauses")
    login(page, live_server, specialist(study, 1).username)
    expect(page.get_by_role("link", name="Label as C1 specialist")).to_be_visible()
    page.screenshot(path=str(shots / "home.png"))
