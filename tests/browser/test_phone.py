"""Phone-first pages (issue 17), in Chromium at 390 px: no page of any role scrolls
sideways; every dashboard leads with its headline figures and their intervals; every chart's
text is at least 11 CSS px on screen (at 390 px and at 1280 px); wide tables scroll inside
their box with a visible cue; the labelling pages follow a dark system setting with legible
text in every state."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotations.assisted.services.analysis import assisted_recompute
from annotations.assisted.services.demo import assisted_study_from_simulation
from annotations.core.guides import GUIDES
from annotations.core.services.studies import membership_add
from annotations.core.views import study_page_url
from annotations.critique.services.analysis import critique_recompute
from annotations.models import Arm, StudyMembership
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.simulation import study_simulate
from estimators.assisted.simulation import AssistedDesign, simulate_assisted
from tests.annotations.assisted.helpers import add_rater, make_assisted_study
from tests.annotations.critique.helpers import answer_next, make_critique_study
from tests.browser.conftest import login, watch_csp
from tests.factories import UserFactory, make_study, specialist

# presentation: the same on both databases (CI runs it on the first pass only)
pytestmark = [pytest.mark.browser, pytest.mark.presentation,
              pytest.mark.django_db(transaction=True)]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}

# The smallest on-screen size of the text of every chart of the page: the text's computed
# font size (in the SVG's units) times the SVG's scale on screen.
CHART_TEXT_PX = """() => {
  const out = [];
  for (const svg of document.querySelectorAll("svg.chart")) {
    const box = svg.viewBox.baseVal, scale = svg.getBoundingClientRect().width / box.width;
    for (const t of svg.querySelectorAll("text")) {
      out.push([parseFloat(getComputedStyle(t).fontSize) * scale, t.textContent.trim()]);
    }
  }
  return out;
}"""
# For the failure message: the elements that reach past the window's right edge outside any
# scrolling box (text overflowing its element shows as its element).
WIDEST = """() => {
  const edge = document.documentElement.clientWidth + 0.5;
  const clipped = (e) => { for (e = e.parentElement; e && e !== document.body;
    e = e.parentElement) if (getComputedStyle(e).overflowX !== "visible") return true;
    return false; };
  return [...document.querySelectorAll("body *")].filter((e) => !clipped(e)
    && (e.getBoundingClientRect().right > edge || e.scrollWidth > e.clientWidth + 1))
    .slice(-6).map((e) => `${e.tagName}.${e.className}`).join(", ");
}"""
SIDEWAYS = ("() => [document.documentElement.scrollWidth, "
            "document.documentElement.clientWidth]")


def _studies(settings):
    """One study of each type with figures, and one person per role (the manager and the
    researcher belong to all three; the researcher is staff, as the admin needs)."""
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    part = make_study(k=4, n_items=240, seed=91, strata=2,
                      systems={"frontier-model": 0.86, "a-much-longer-ai-system-name": 0.5})
    study_simulate(study=part)
    study_recompute(study_id=part.pk)
    seeded = assisted_study_from_simulation(
        name="Phone: assisted", sim=simulate_assisted(AssistedDesign(
            n_items=40, n_samples=5, raters_per_arm=3, items_per_rater=15), seed=9), seed=9,
        prefix="ph")
    assisted = seeded.study
    assisted_recompute(study_id=assisted.pk)
    crit, annotators = make_critique_study(n_questions=4, top_level=1, counts=[3, 2],
                                           name="Phone: critique")
    # answers until both levels have some (which tasks come first depends on the ids drawn)
    from annotations.critique.models import CritiqueOutput

    for user in [*annotators[:7], *annotators * 3]:
        answer_next(study=crit, user=user, final=0)
        if CritiqueOutput.objects.filter(study=crit, level=1).count() >= 2:
            break
    critique_recompute(study_id=crit.pk)
    manager = UserFactory(username="phone-manager")
    researcher = UserFactory(username="phone-researcher", is_staff=True)
    for study in (part, assisted, crit):
        membership_add(study=study, user=manager, role=StudyMembership.Role.MANAGER)
        membership_add(study=study, user=researcher, role=StudyMembership.Role.RESEARCHER)
    admin = UserFactory(username="phone-admin", is_staff=True, is_superuser=True)
    # the labellers work on studies with tasks left (the ones above are fully answered)
    to_label = make_study(k=3, n_items=12, seed=92, name="Phone: labelling")
    to_rate = make_assisted_study(n_sentences=4, arms={"Evidence": ["search", "evidence"]})
    rater = next(u for u in (add_rater(to_rate) for _ in range(4))
                 if u.rater_assignments.get(study=to_rate).arm.name != "Baseline")
    return {"partitioned": part, "assisted": assisted, "critique": crit,
            "to_label": to_label, "to_rate": to_rate,
            "specialist": specialist(to_label, 0), "rater": rater,
            "annotator": annotators[7], "manager": manager, "researcher": researcher,
            "admin": admin}


def _show_task(page) -> None:
    """On a labelling page: ask for the next task unless one is shown, and wait for it."""
    ask = page.locator("button.primary.big:visible", has_text="Get the next")
    if ask.count():
        ask.first.click()
    expect(page.locator("main .query.card").first).to_be_visible()
    page.wait_for_load_state("networkidle")


def _context(browser, viewport, **kw):
    context = browser.new_context(viewport=viewport, **kw)
    violations = watch_csp(context)
    page = context.new_page()
    page.set_default_timeout(15_000)
    return context, page, violations


def _pages(s) -> dict[str, list[str]]:
    """Every page each role uses (the labelling pages also after "next": a task shown)."""
    part, assisted, crit = s["partitioned"], s["assisted"], s["critique"]
    dashboards = [reverse("dashboard", args=[x.pk]) for x in (part, assisted, crit)]
    readers = ["/", *dashboards, reverse("assisted-comments", args=[assisted.pk]),
               reverse("swagger-ui")]
    arm = Arm.objects.filter(study=assisted).first()
    return {
        "specialist": ["/", reverse("label", args=[s["to_label"].pk]), "next",
                       reverse("swagger-ui")],
        "rater": ["/", reverse("rate", args=[s["to_rate"].pk]), "next"],
        "annotator": ["/", reverse("critique-work", args=[crit.pk]), "next"],
        "manager": readers,
        "researcher": readers + [reverse("help-page", args=[g]) for g in GUIDES] + [
            reverse("admin:index"), reverse("admin:annotations_study_changelist"),
            reverse("admin:annotations_study_change", args=[part.pk]),
            reverse("admin:annotations_study_import_items", args=[part.pk]),
            reverse("admin:annotations_study_import_predictions", args=[part.pk]),
            reverse("admin:annotations_assistedstudy_changelist"),
            reverse("admin:annotations_assistedstudy_import_sentences", args=[assisted.pk]),
            reverse("admin:annotations_assistedstudy_import_traces", args=[assisted.pk]),
            reverse("admin:annotations_assistedstudy_progress", args=[assisted.pk]),
            reverse("admin:annotations_assistedstudy_routing", args=[assisted.pk]),
            reverse("admin:annotations_assistedstudy_preview", args=[assisted.pk, arm.pk]),
            *[study_page_url(x) for x in (part, assisted, crit)],
            *[reverse("admin:annotations_study_members", args=[x.pk])
              for x in (part, assisted, crit)]],
        "admin": ["/", reverse("admin:index"), reverse("admin:annotations_study_changelist"),
                  reverse("admin:annotations_user_changelist"), reverse("swagger-ui")],
    }


def test_no_page_of_any_role_scrolls_sideways_at_390px(browser, live_server, settings,
                                                       shots):
    s = _studies(settings)
    wide, violations = [], []
    for role, urls in _pages(s).items():
        context, page, seen = _context(browser, PHONE, has_touch=True, is_mobile=True)
        try:
            page.goto(f"{live_server.url}/accounts/login/")
            scroll, client = page.evaluate(SIDEWAYS)
            if scroll > client:
                wide.append(f"/accounts/login/: {scroll} > {client}")
            login(page, live_server, s[role].username)
            for url in [*urls, reverse("password_change")]:
                if url == "next":  # the labelling page with a task on it
                    _show_task(page)
                    url = page.url.removeprefix(live_server.url) + " (a task shown)"
                else:
                    response = page.goto(f"{live_server.url}{url}")
                    assert response.status == 200, (role, url, response.status)
                    page.wait_for_load_state("networkidle")
                scroll, client = page.evaluate(SIDEWAYS)
                if scroll > client:
                    wide.append(f"{role} {url}: {scroll} > {client}: " + page.evaluate(WIDEST))
                if role == "researcher":
                    name = re.sub(r"\W+", "-", url.strip("/")) or "home"
                    page.screenshot(path=str(shots / f"390-{name}.png"))
        finally:
            context.close()
        violations += seen
    assert wide == [], "\n".join(wide)
    assert violations == [], "\n".join(violations)


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390px", "1280px"])
def test_dashboards_lead_with_headline_intervals_and_legible_charts(browser, live_server,
                                                                   settings, shots,
                                                                   viewport):
    s = _studies(settings)
    context, page, violations = _context(browser, viewport)
    try:
        login(page, live_server, s["manager"].username)
        for kind in ("partitioned", "assisted", "critique"):
            page.goto(f"{live_server.url}/studies/{s[kind].pk}/dashboard/")
            headline = page.get_by_test_id("headline")
            expect(headline).to_be_visible()
            figures = headline.get_by_test_id("headline-figure")
            assert figures.count() >= 2, kind
            for text in figures.get_by_test_id("headline-interval").all_inner_texts():
                assert re.fullmatch(r"95 % interval \[[-\d.]+, [-\d.]+\]", text), (kind, text)
            # the headline is the first figure of the live region, above its first table
            assert page.evaluate("""() => {
              const live = document.getElementById("live");
              const h = live.querySelector("[data-testid=headline]");
              const t = live.querySelector("table, svg.chart");
              return h.getBoundingClientRect().top < t.getBoundingClientRect().top;}""")
            sizes = page.evaluate(CHART_TEXT_PX)
            assert sizes, kind
            small = [(round(px, 1), text) for px, text in sizes if px < 11]
            assert small == [], (kind, small)
            scroll, client = page.evaluate(SIDEWAYS)
            assert scroll <= client, (kind, scroll, client)
            if viewport is PHONE:  # a wide table scrolls in its box, which shows a cue
                box = page.locator(".table-scroll").first
                assert box.evaluate("b => b.scrollWidth > b.clientWidth"), kind
                assert "gradient" in box.evaluate("b => getComputedStyle(b).backgroundImage")
            name = f"phone-{kind}-{viewport['width']}"
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
            headline.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"{name}-headline.png"))
            page.locator("svg.chart").first.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"{name}-chart.png"))
    finally:
        context.close()
    assert violations == [], "\n".join(violations)


# The visible text of the page whose contrast against its background is below 4.5:1 (the
# background: the first ancestor with an opaque colour).
LOW_CONTRAST = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92
    : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(r) + 0.7152 * f(g)
    + 0.0722 * f(b); };
  const bg = (el) => { for (; el; el = el.parentElement) { const c = rgb(getComputedStyle(el)
    .backgroundColor); if (c.length === 3 || c[3] > 0.5) return c; } return [255, 255, 255]; };
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.getClientRects().length) continue;
    const style = getComputedStyle(el);
    if (style.visibility === "hidden" || parseFloat(style.opacity) < 0.6) continue;
    const a = lum(rgb(style.color)), b = lum(bg(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) out.push(`${el.tagName}.${el.className}: ${ratio.toFixed(2)} "`
      + el.textContent.trim().slice(0, 30) + '"');
  }
  return out;
}"""
SHOW_STATES = """() => { for (const el of document.querySelectorAll(".lease-warning, [hidden]"))
  if (el.closest("main")) el.hidden = false; }"""


def test_labelling_pages_follow_a_dark_system_setting_with_legible_text(browser, live_server,
                                                                        settings, shots):
    s = _studies(settings)
    pages = {"specialist": reverse("label", args=[s["to_label"].pk]),
             "rater": reverse("rate", args=[s["to_rate"].pk]),
             "annotator": reverse("critique-work", args=[s["critique"].pk])}
    problems, violations = [], []
    for role, url in pages.items():
        for scheme in ("dark", "light"):
            context, page, seen = _context(browser, PHONE, color_scheme=scheme)
            try:
                login(page, live_server, s[role].username)
                page.goto(f"{live_server.url}{url}")
                problems += [f"{role} {scheme} waiting: {p}" for p in page.evaluate(LOW_CONTRAST)]
                _show_task(page)
                page.evaluate(SHOW_STATES)  # the lease warning and every hidden notice
                problems += [f"{role} {scheme} task: {p}" for p in page.evaluate(LOW_CONTRAST)]
                if role == "annotator":  # an empty answer: the form's errors
                    page.locator("button.submit").click()
                    expect(page.locator("main .error").first).to_be_visible()
                    problems += [f"{role} {scheme} errors: {p}"
                                 for p in page.evaluate(LOW_CONTRAST)]
                background = page.evaluate("getComputedStyle(document.body).backgroundColor")
                dark = sum(int(v) for v in re.findall(r"\d+", background)[:3]) < 3 * 60
                assert dark == (scheme == "dark"), (role, scheme, background)
                page.screenshot(path=str(shots / f"{role}-{scheme}.png"), full_page=True)
            finally:
                context.close()
            violations += seen
    # the dashboards follow the setting too (tests/browser/test_polish.py checks them)
    context, page, seen = _context(browser, PHONE, color_scheme="dark")
    try:
        login(page, live_server, s["manager"].username)
        page.goto(f"{live_server.url}/studies/{s['partitioned'].pk}/dashboard/")
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == \
            "rgb(16, 22, 30)"
    finally:
        context.close()
    assert problems == [], "\n".join(problems)
    assert violations == [] and seen == [], "\n".join(violations + seen)
