"""The assisted dashboard in Chromium: it updates live after a rating (the reliance chart
and the arm's counts), the rule choice stays in the URL, and a 390 px phone gets no
page-wide horizontal scroll. (The rater's side of the browser test — quiz, evidence,
keyboard rating — is tests/browser/test_assisted.py.)"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.assisted.services.analysis import assisted_recompute
from annotations.assisted.services.demo import assisted_study_from_simulation, demo_design
from annotations.assisted.services.design import DEFAULT_QUIZ
from annotations.core.services.studies import membership_add
from estimators.assisted.simulation import simulate_assisted
from tests.annotations.assisted.helpers import add_rater
from tests.browser.conftest import login
from tests.factories import UserFactory

READ_MS = 700  # a little over the default minimum time on screen

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _study(seed: int, name: str):
    sim = simulate_assisted(demo_design(n_items=120, raters_per_arm=8, items_per_rater=30),
                            seed=seed)
    seeded = assisted_study_from_simulation(name=name, sim=sim, seed=seed, prefix=f"b{seed}")
    manager = UserFactory(username=f"manager-{seed}")
    membership_add(study=seeded.study, user=manager, role="manager")
    assisted_recompute(study_id=seeded.study.pk)
    return seeded, manager


def _arm_ratings(page, arm: str) -> int:
    return int(page.locator(f'table.arms tr[data-arm="{arm}"] td').nth(2).inner_text()
               .replace(",", ""))


def test_the_managers_reliance_chart_updates_after_a_rating(browser, page, shots,
                                                            live_server, settings):
    """The issue's browser test, both sides: a rater drawn into the evidence arm passes the
    quiz, expands the evidence and rates with the keyboard on the real rating page, while
    the manager's dashboard (another browser) updates its reliance chart by itself."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    seeded, manager = _study(31, "Demo: assisted fact-checking (M2)")
    study = seeded.study
    arm = seeded.arms["evidence"]
    login(page, live_server, manager.username)
    page.goto(f"{live_server.url}/studies/{study.pk}/dashboard/")
    chart = page.get_by_test_id("reliance-chart")
    expect(chart).to_be_visible()
    page.screenshot(path=str(shots / "assisted-dashboard.png"), full_page=True)
    regression = page.get_by_test_id("regression")  # the paper's test, one row per arm
    expect(regression.locator("tbody tr")).to_have_count(2)
    regression.screenshot(path=str(shots / "assisted-regression.png"))
    before = _arm_ratings(page, arm.name)
    bars_before = chart.locator("rect").evaluate_all("rs => rs.map(r => r.dataset.value)")
    rater = None
    while rater is None:  # raters join until one is drawn into the evidence arm
        candidate = add_rater(study, ready=False)
        if candidate.rater_assignments.get(study=study).arm_id == arm.pk:
            rater = candidate
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    rate = context.new_page()
    rate.set_default_timeout(15_000)
    try:
        login(rate, live_server, rater.username)
        rate.goto(f"{live_server.url}/studies/{study.pk}/rate/")
        for i, q in enumerate(DEFAULT_QUIZ):
            rate.locator(f'input[name="q{i}"][value="{q["answer"]}"]').check()
        rate.get_by_role("button", name="Check my answers").click()
        rate.get_by_role("button", name="I understand: start rating").click()
        expect(rate.get_by_role("button", name="Get the next sentence")).to_be_visible()
        rate.wait_for_load_state("load")
        rate.keyboard.press("Enter")
        expect(rate.locator("article.rating")).to_be_visible()
        evidence = rate.get_by_test_id("ai-panel").locator('details[data-section="evidence"]')
        expect(evidence).to_be_visible()
        rate.keyboard.press("v")  # expand the evidence
        expect(evidence).to_have_attribute("open", "")
        rate.wait_for_timeout(READ_MS)
        rate.keyboard.press("a")  # Accurate
        rate.keyboard.press("3")  # mostly confident
        rate.keyboard.press("8")  # somewhat helpful
        rate.keyboard.press("Enter")
        expect(rate.get_by_test_id("recorded")).to_have_text("Recorded: Accurate")
    finally:
        context.close()
    # the manager's page polls: the evidence arm's count and its bars move
    row = page.locator(f'table.arms tr[data-arm="{arm.name}"] td').nth(2)
    expect(row).to_have_text(str(before + 1), timeout=15_000)
    bars_after = chart.locator("rect").evaluate_all("rs => rs.map(r => r.dataset.value)")
    assert bars_after != bars_before
    expect(page.get_by_test_id("n-ratings")).to_have_text(
        str(sum(_arm_ratings(page, a.name) for a in seeded.arms.values())))
    page.get_by_test_id("rule").select_option("majority")
    page.wait_for_url("**rule=majority")
    expect(page.get_by_text("Majority vote (ties count as Inaccurate))")).to_be_visible()
    page.reload()
    assert page.get_by_test_id("rule").input_value() == "majority"
    with page.expect_download() as download:
        page.get_by_test_id("csv-reliance").click()
    assert download.value.suggested_filename.startswith(f"study-{study.pk}-reliance-")


def test_assisted_dashboard_on_a_390px_phone_has_no_page_wide_scroll(browser, shots,
                                                                       live_server):
    seeded, manager = _study(33, "Demo: assisted fact-checking (M2) ")
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True,
                                  is_mobile=True, device_scale_factor=2)
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        login(page, live_server, manager.username)
        page.goto(f"{live_server.url}/studies/{seeded.study.pk}/dashboard/")
        expect(page.get_by_test_id("reliance-chart")).to_be_visible()
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
        # chart text stays legible on the phone
        name_px = page.evaluate(
            "Math.min(...[...document.querySelectorAll('svg.chart .sysname')]"
            ".map(t => t.getBoundingClientRect().height))")
        assert name_px >= 11, name_px
        tip = page.locator("table.reliance thead details.tip").nth(4)
        tip.locator("summary").tap()
        expect(tip.locator(".tip-text")).to_contain_text("misled")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
        page.screenshot(path=str(shots / "assisted-dashboard-phone.png"), full_page=True)
        page.goto(f"{live_server.url}/help/manager-assisted/")
        expect(page.locator("article.guide h1")).to_contain_text("assisted")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    finally:
        context.close()
