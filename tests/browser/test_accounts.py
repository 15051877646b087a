"""Issue 27 in Chromium: a handed-out password signs in once and, until it is replaced,
opens nothing but the password change (the API through the session included); an
invitation link opened while someone else is signed in asks before switching accounts."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.core.services.studies import NewMember, members_add
from annotations.models import User
from tests.browser.conftest import login, own_password
from tests.browser.walks import phone
from tests.factories import make_study, role_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)


def _added(name: str = "nina"):
    study = make_study(k=3, n_items=3, seed=21)
    [added] = members_add(study=study, by=role_user(study, "researcher"),
                          members=[NewMember(name, "specialist", class_index=0)])
    return study, added


def test_a_one_time_password_signs_in_once_and_opens_only_the_change(browser, page,
                                                                    live_server):
    study, added = _added()
    login(page, live_server, "nina", added.password, landing="/accounts/password/")
    # the session reaches no API before the change: not the next query, not the list
    for url in (f"/api/studies/{study.pk}/queries/next/", "/api/studies/"):
        response = (page.request.post if "next" in url else page.request.get)(
            f"{live_server.url}{url}")
        assert response.status == 403 and response.json()["code"] == "password_change_required"
    assert not study.queries.exclude(status="pending").exists()
    page.goto(f"{live_server.url}/studies/{study.pk}/label/")
    expect(page).to_have_url(f"{live_server.url}/accounts/password/")
    # a second sign-in with the same password, on a phone, is refused with the reason
    with phone(browser) as other:
        other.goto(f"{live_server.url}/accounts/login/")
        other.fill("input[name=username]", "nina")
        other.fill("input[name=password]", added.password)
        other.click("button[type=submit]")
        expect(other.locator("body")).to_contain_text(
            "The password you were given has already signed in once")
        expect(other).to_have_url(f"{live_server.url}/accounts/login/")
    # the first session chooses its own password, then everything opens
    own_password(page, added.password)
    expect(page.locator("h1")).to_have_text("Password changed")
    assert page.request.get(f"{live_server.url}/api/studies/").status == 200
    assert not User.objects.get(username="nina").password_must_change


def test_an_invitation_opened_while_signed_in_asks_before_switching(browser, live_server,
                                                                    shots):
    study, added = _added()
    someone = role_user(study, "manager")
    someone.set_password("manager-pass-4410")
    someone.save()
    for width, height in ((390, 844), (1280, 900)):
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        login(page, live_server, someone.username, "manager-pass-4410")
        page.goto(f"{live_server.url}{added.invitation}")
        expect(page.locator("h1")).to_have_text("Switch accounts?")
        expect(page.get_by_test_id("invitation-switch")).to_contain_text(
            f"You are signed in as {someone.username}")
        page.screenshot(path=str(shots / f"invitation-switch-{width}.png"), full_page=True)
        # "stay": nothing changed, still the manager
        page.get_by_role("link", name=f"Stay signed in as {someone.username}").click()
        expect(page).to_have_url(f"{live_server.url}/")
        expect(page.locator("body")).to_contain_text(someone.username)
        context.close()
    # "switch": signed out, then the invitation's own form, then signed in as the invited
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    login(page, live_server, someone.username, "manager-pass-4410")
    page.goto(f"{live_server.url}{added.invitation}")
    page.get_by_role("button", name="Sign out and accept the invitation").click()
    expect(page.locator("h1")).to_have_text("Choose your password")
    page.fill("input[name=new_password1]", "invited-secret-7302")
    page.fill("input[name=new_password2]", "invited-secret-7302")
    page.get_by_role("button", name="Set my password").click()
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.locator("body")).to_contain_text("nina")
    context.close()
    nina = User.objects.get(username="nina")
    assert nina.check_password("invited-secret-7302") and not nina.password_must_change
