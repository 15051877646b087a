"""Neyman allocation as its users meet it: the researcher reads the Routing design page's
preview after a pilot and chooses it with the form; the manager's dashboard leads with the
stratified estimate and lists the rates, on a phone and a desktop, with nothing scrolling
sideways."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.simulation import study_simulate
from tests.annotations.partitioned.test_allocation import _study
from tests.browser.conftest import login
from tests.browser.test_admin import admin_login
from tests.browser.test_phone import DESKTOP, PHONE, SIDEWAYS, WIDEST
from tests.browser.walks import sized_page
from tests.factories import role_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_chooses_neyman_allocation_and_the_manager_reads_it(browser, page,
                                                                         live_server, shots):
    study = _study(seed=14)
    study_simulate(study=study, answers=300, recompute_every=0)
    study_recompute(study_id=study.pk)
    # the researcher: the preview, then the form
    admin_login(page, live_server, role_user(study, "researcher").username)
    page.goto(live_server.url + reverse("admin:annotations_study_routing_design",
                                        args=[study.pk]))
    expect(page.get_by_test_id("neyman-preview")).to_contain_text("From the 300 answers so far")
    page.select_option("#design-kind", "neyman")
    page.click("input[value='Change the design']")
    expect(page.locator(".messagelist")).to_contain_text("Neyman allocation across strata")
    expect(page.locator("table.study-events").first).to_contain_text("Neyman allocation: s0")
    page.screenshot(path=str(shots / "admin-routing-design-neyman.png"), full_page=True)
    # more answers under it, then the manager's dashboard at both widths
    study_simulate(study=study, answers=200, seed=1, recompute_every=0)
    study_recompute(study_id=study.pk)
    manager = role_user(study, "manager")
    for name, viewport in (("390", PHONE), ("1280", DESKTOP)):
        with sized_page(browser, viewport) as view:
            login(view, live_server, manager.username)
            view.goto(live_server.url + reverse("dashboard", args=[study.pk]))
            expect(view.get_by_test_id("allocation")).to_contain_text("stratified")
            expect(view.locator("table.allocation")).to_contain_text("s1")
            expect(view.get_by_test_id("headline")).to_contain_text(
                "strata weighted by their items")
            scroll, client = view.evaluate(SIDEWAYS)
            assert scroll <= client, view.evaluate(WIDEST)
            view.locator("#allocation").scroll_into_view_if_needed()
            view.screenshot(path=str(shots / f"{name}-dashboard-allocation.png"))
