"""Real pages in Chromium: the live dashboard (labelling: test_labelling.py)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.browser.conftest import login
from tests.factories import make_study, role_user, specialist

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_manager_sees_the_dashboard_update_live(page, shots, live_server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    study = make_study(k=4, n_items=60, systems={"model-a": 0.8, "model-b": 0.5}, seed=53)
    user = specialist(study, 1)
    q = query_lease_next(study=study, user=user)
    label_submit(query_id=q.pk, user=user, answer="no")
    login(page, live_server, role_user(study, "manager").username)
    page.goto(f"{live_server.url}/studies/{study.pk}/dashboard/")
    expect(page.get_by_test_id("n-answered")).to_have_text("1")
    for _ in range(4):
        q = query_lease_next(study=study, user=user)
        label_submit(query_id=q.pk, user=user, answer="no")
    expect(page.get_by_test_id("n-answered")).to_have_text("5", timeout=5000)
    assert page.locator("table.estimates tr[data-system=model-a]").count() == 1
    page.screenshot(path=str(shots / "dashboard-live.png"), full_page=True)
    page.get_by_test_id("method").select_option("ivw_fixed")
    expect(page.locator('table.chosen[data-method="ivw_fixed"]')).to_be_visible()
    for _ in range(2):  # the live region keeps the manager's choice as it refreshes
        q = query_lease_next(study=study, user=user)
        label_submit(query_id=q.pk, user=user, answer="yes")
    expect(page.get_by_test_id("n-answered")).to_have_text("7", timeout=5000)
    expect(page.locator('table.chosen[data-method="ivw_fixed"]')).to_be_visible()


def test_a_converged_study_shows_every_system_inside_its_interval(page, shots, live_server,
                                                                  settings):
    """The picture in the managers' guide, and a check that what the page shows is right:
    each system's true accuracy lies inside the ML interval the dashboard displays."""
    from annotations.partitioned.services.simulation import study_simulate

    truth = {"frontier-model": 0.86, "mid-size-model": 0.68, "small-model": 0.42}
    study = make_study(k=5, n_items=900, systems=truth, seed=55, strata=3,
                       name="Demo: multiple-choice QA (K = 5)")
    study_simulate(study=study)
    login(page, live_server, role_user(study, "manager").username)
    page.goto(f"{live_server.url}/studies/{study.pk}/dashboard/")
    for name, acc in truth.items():
        row = page.locator(f'table.estimates tr[data-system="{name}"]')
        low, high = (float(x) for x in row.locator("td").nth(5).inner_text()
                     .strip("[]").split(","))
        assert low <= acc <= high, (name, low, high)
    page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
    page.fill("input[name=width]", "0.04")
    page.fill("input[name=pilot]", "0.7")
    page.get_by_role("button", name="Plan").click()
    expect(page.get_by_test_id("plan-routed")).to_be_visible()


def test_dashboard_on_a_390px_phone_has_no_page_wide_scroll(browser, shots, live_server):
    """Tables scroll inside their own box, charts scale to the screen, the "i" opens on a
    tap, and the estimator choice survives a reload."""
    from annotations.partitioned.services.simulation import study_simulate

    truth = {"frontier-model": 0.86, "mid-size-model": 0.68, "small-model": 0.42}
    study = make_study(k=5, n_items=400, systems=truth, seed=56, strata=2,
                       name="Demo: multiple-choice QA (K = 5)")
    study_simulate(study=study)
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True,
                                  is_mobile=True, device_scale_factor=2)
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        login(page, live_server, role_user(study, "manager").username)
        page.goto(f"{live_server.url}/studies/{study.pk}/dashboard/")
        expect(page.locator("table.estimates")).to_be_visible()
        width = page.evaluate("document.scrollingElement.scrollWidth")
        assert width <= 390, width
        # the chart's text stays legible: system names at least 11 CSS px on screen
        name_px = page.evaluate(
            "Math.min(...[...document.querySelectorAll('svg.chart .sysname')]"
            ".map(t => t.getBoundingClientRect().height))")
        assert name_px >= 11, name_px
        page.screenshot(path=str(shots / "dashboard-phone.png"), full_page=True)
        tip = page.locator("table.estimates thead details.tip").nth(5)
        tip.locator("summary").tap()
        expect(tip.locator(".tip-text")).to_be_visible()
        expect(tip.locator(".tip-text")).to_contain_text("Maximum likelihood")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
        page.screenshot(path=str(shots / "dashboard-phone-tip.png"))
        page.get_by_test_id("method").select_option("comp")
        expect(page.locator('table.chosen[data-method="comp"]')).to_be_visible()
        page.wait_for_url("**method=comp")
        page.reload()
        expect(page.locator('table.chosen[data-method="comp"]')).to_be_visible()
        assert page.get_by_test_id("method").input_value() == "comp"
        page.goto(f"{live_server.url}/help/manager/")
        expect(page.locator("article.guide h1")).to_contain_text("Guide for managers")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    finally:
        context.close()
