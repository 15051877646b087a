"""The smaller holes of the browser walk-through (issue 27), in Chromium: the dashboards of all
three study types, the audit pages and the evaluation pages follow a dark system setting (no
white panel, legible text, chart lines that show); the admin's study list fits a 390 px phone
with its key columns; the assisted study page's Arms table is not cut at 1 280 px; the
``/help/`` index lists every role guide and is linked from every page."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotations.audit.services.runs import audit_run, audit_start
from annotations.core.guides import ROLE_GUIDES
from annotations.core.views import study_page_url
from annotations.evaluation.models import EvaluationSettings
from annotations.evaluation.services.evaluate import evaluation_submit
from annotations.evaluation.services.tokens import token_create
from assistants.models import Prediction
from tests.annotations.audit.helpers import commitments_file, datapoints_file, liar, make_rubric
from tests.browser.conftest import login
from tests.browser.test_phone import DESKTOP, LOW_CONTRAST, PHONE, SIDEWAYS, WIDEST, _context
from tests.browser.test_phone import _studies as phone_studies
from tests.factories import make_study

# presentation: the same on both databases (CI runs it on the first pass only)
pytestmark = [pytest.mark.browser, pytest.mark.presentation,
              pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)

# The panels of a page (cards, tables, charts, notes, headline figures …) whose own background
# is light (every channel above 200): a white panel on a dark page.
LIGHT_PANELS = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const out = [];
  for (const el of document.querySelectorAll("main *")) {
    // a guide's pictures are screenshots of the light pages: pictures, not panels
    if (!el.getClientRects().length || el.tagName === "IMG") continue;
    const c = rgb(getComputedStyle(el).backgroundColor);
    if (c.length === 4 && c[3] < 0.5) continue;
    if (c.length >= 3 && Math.min(c[0], c[1], c[2]) > 200)
      out.push(`${el.tagName}.${el.className.baseVal ?? el.className}`);
  }
  return [...new Set(out)];
}"""
# test_phone's text contrast check, chart text left to FAINT_MARKS (which sees the chart's filter)
TEXT_CONTRAST = LOW_CONTRAST.replace(
    "if (!own || !el.getClientRects().length) continue;",
    "if (!own || !el.getClientRects().length || el.closest('svg.chart')) continue;")
assert TEXT_CONTRAST != LOW_CONTRAST
# The lines and marks of every chart as they show on screen: the luminance contrast of each
# stroke (or fill, for dots and bars) against the chart's background, after the chart's CSS
# filter (a dark theme may invert the chart). A mark under 1.5:1 does not show; a text under
# 4.5:1 is not legible.
FAINT_MARKS = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number).slice(0, 3);
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92
    : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(r) + 0.7152 * f(g)
    + 0.0722 * f(b); };
  const bg = (el) => { for (; el; el = el.parentElement) { const c = (getComputedStyle(el)
    .backgroundColor.match(/[\\d.]+/g) || []).map(Number); if (c.length === 3 || c[3] > 0.5)
    return c.slice(0, 3); } return [255, 255, 255]; };
  const out = [];
  for (const svg of document.querySelectorAll("main svg.chart")) {
    const inverted = /invert\\(1\\)/.test(getComputedStyle(svg).filter);
    const back = bg(svg.parentElement);
    const showing = (c) => inverted ? c.map((v) => 255 - v) : c;  // hue turns keep lightness
    const chartBack = (() => { const c = (getComputedStyle(svg).backgroundColor
      .match(/[\\d.]+/g) || []).map(Number); return (c.length === 3 || c[3] > 0.5)
      ? showing(c.slice(0, 3)) : back; })();
    // (the grid lines are faint on purpose, in both themes)
    for (const m of svg.querySelectorAll("line:not(.grid), polyline, circle, rect, path, text")) {
      const s = getComputedStyle(m);
      const paint = s.stroke !== "none" && !["rect", "circle", "text"].includes(m.tagName)
        ? s.stroke : s.fill;
      if (!paint || paint === "none" || !paint.startsWith("rgb")) continue;
      const a = lum(showing(rgb(paint))), b = lum(chartBack);
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      if (ratio < (m.tagName === "text" ? 4.5 : 1.5))
        out.push(`${m.tagName} ${paint}: ${ratio.toFixed(2)}`);
    }
  }
  return [...new Set(out)];
}"""


def _dark(page) -> bool:
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    return sum(int(v) for v in re.findall(r"\d+", background)[:3]) < 3 * 60


def _audit_and_evaluation(s) -> dict:
    """An audit with its result (on the partitioned study) and an evaluation study with a
    token and three calls."""
    part = s["partitioned"]
    audit = audit_start(study=part, rubric=make_rubric(part), commitments=commitments_file(liar),
                        commitments_name="c.jsonl", datapoints=datapoints_file(),
                        datapoints_name="d.jsonl", phi=1, enqueue=False)
    audit_run(audit_id=audit.pk)
    evaluated = make_study(k=4, n_items=120, systems={"cand": 0.7}, name="Dark: evaluations")
    from annotations.partitioned.services.simulation import study_simulate

    study_simulate(study=evaluated)
    EvaluationSettings.objects.update_or_create(study=evaluated,
                                                defaults={"holdout_share": 0.0})
    token, _ = token_create(study=evaluated, name="ADAS run", min_batch=10)
    predictions = [{"item": p.item.external_id, "prediction": p.option} for p in
                   Prediction.objects.filter(system__study=evaluated).select_related("item")]
    for _ in range(3):
        evaluation_submit(token=token, study_id=evaluated.pk,
                          body={"candidate": "agent-1", "predictions": predictions})
    from annotations.core.models import StudyMembership
    from annotations.core.services.studies import membership_add

    membership_add(study=evaluated, user=s["researcher"],
                   role=StudyMembership.Role.RESEARCHER)
    return {"audit": audit, "evaluated": evaluated}


def test_dashboards_audits_and_evaluations_follow_a_dark_system_setting(browser, live_server,
                                                                        settings, shots):
    s = phone_studies(settings)
    more = _audit_and_evaluation(s)
    part, audit, evaluated = s["partitioned"], more["audit"], more["evaluated"]
    pages = [*(reverse("dashboard", args=[s[kind].pk])
               for kind in ("partitioned", "assisted", "critique")),
             reverse("assisted-comments", args=[s["assisted"].pk]),
             reverse("audits", args=[part.pk]),
             reverse("audit-detail", args=[part.pk, audit.pk]),
             reverse("evaluations", args=[evaluated.pk]),
             reverse("help-index"), reverse("help-page", args=["researcher"]), "/"]
    problems = []
    for viewport in (PHONE, DESKTOP):
        context, page, violations = _context(browser, viewport, color_scheme="dark")
        try:
            login(page, live_server, s["researcher"].username)
            for url in pages:
                response = page.goto(f"{live_server.url}{url}")
                assert response.status == 200, url
                page.wait_for_load_state("networkidle")
                page.evaluate("""() => { for (const d of document.querySelectorAll(
                  "main details:not(.tip)")) d.open = true; }""")
                if not _dark(page):
                    problems.append(f"{url}: light page")
                problems += [f"{url} light panel: {p}" for p in page.evaluate(LIGHT_PANELS)]
                problems += [f"{url} text: {p}" for p in page.evaluate(TEXT_CONTRAST)]
                problems += [f"{url} chart: {p}" for p in page.evaluate(FAINT_MARKS)]
                name = re.sub(r"\W+", "-", url.strip("/")) or "home"
                page.screenshot(path=str(shots / f"dark-{viewport['width']}-{name}.png"),
                                full_page=True)
        finally:
            context.close()
        assert violations == [], "\n".join(violations)
    assert problems == [], "\n".join(problems)
    # the light theme is unchanged: the dashboard's page stays light without the setting
    context, page, violations = _context(browser, PHONE, color_scheme="light")
    try:
        login(page, live_server, s["researcher"].username)
        page.goto(f"{live_server.url}{reverse('dashboard', args=[part.pk])}")
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == \
            "rgb(246, 248, 250)"
        assert page.evaluate(TEXT_CONTRAST) == []
        assert page.evaluate(FAINT_MARKS) == []
    finally:
        context.close()


def test_admin_study_list_fits_a_phone_with_its_key_columns(browser, live_server, settings,
                                                            shots):
    s = phone_studies(settings)
    context, page, violations = _context(browser, PHONE, has_touch=True, is_mobile=True)
    try:
        login(page, live_server, s["admin"].username)
        page.goto(f"{live_server.url}{reverse('admin:annotations_study_changelist')}")
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(shots / "390-admin-studies.png"), full_page=True)
        scroll, client = page.evaluate(SIDEWAYS)
        assert scroll <= client, page.evaluate(WIDEST)
        width = page.evaluate("window.innerWidth")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= width
        # every study's name, type, status and links are on screen without scrolling sideways,
        # the list's box included (its rows are not cut at the window's edge)
        results = page.locator("#changelist .results")
        assert results.evaluate("r => r.scrollWidth <= r.clientWidth + 1"), \
            results.evaluate("r => [r.scrollWidth, r.clientWidth]")
        for study in (s["partitioned"], s["assisted"], s["critique"]):
            row = page.locator("#result_list tbody tr", has_text=study.name)
            for cell in (row.locator("th a").first, row.locator("td.field-study_type"),
                         row.locator("td.field-status"), row.locator("td.field-links")):
                expect(cell).to_be_visible()
                box = cell.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, \
                    (study.name, box)
            # the links read as a line of text, not a word a line
            links = row.locator("td.field-links a")
            assert links.first.bounding_box()["width"] > 40
    finally:
        context.close()
    assert violations == [], "\n".join(violations)


def test_assisted_arms_table_is_not_cut_at_1280px(browser, live_server, settings, shots):
    s = phone_studies(settings)
    context, page, violations = _context(browser, DESKTOP)
    try:
        login(page, live_server, s["researcher"].username)
        page.goto(f"{live_server.url}{study_page_url(s['assisted'])}")
        arms = page.locator("#arms-group table")
        expect(arms).to_be_visible()
        arms.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "1280-assisted-arms.png"), full_page=True)
        page.locator("#arms-group").screenshot(path=str(shots / "1280-assisted-arms-inline.png"))
        # the table shows whole in its box: no column is cut or left to a sideways scroll
        box = page.locator("#arms-group .tabular").first
        assert box.evaluate("b => b.scrollWidth <= b.clientWidth + 1"), \
            box.evaluate("b => [b.scrollWidth, b.clientWidth]")
        right = box.evaluate("b => b.getBoundingClientRect().right")
        for header in arms.locator("thead th").all():
            if header.is_visible():
                edge = header.evaluate("h => h.getBoundingClientRect().right")
                assert edge <= right + 0.5, (header.inner_text(), edge, right)
        expect(arms.locator("th", has_text="What raters see")).to_be_visible()
        scroll, client = page.evaluate(SIDEWAYS)
        assert scroll <= client
        # the study panel's table of arms above it shows whole too
        panel = page.get_by_test_id("arms")
        assert panel.evaluate("t => t.scrollWidth <= t.clientWidth + 1")
    finally:
        context.close()
    assert violations == [], "\n".join(violations)


def test_help_index_lists_every_role_guide_and_every_page_links_to_it(page, live_server):
    study = make_study(k=2, n_items=4, name="Help: partitioned")
    from tests.factories import role_user

    login(page, live_server, role_user(study, "manager").username)
    page.get_by_role("link", name="Help").first.click()
    page.wait_for_url(f"{live_server.url}/help/")
    expect(page.get_by_role("heading", name="Help", exact=True)).to_be_visible()
    expect(page.locator("header.topbar")).to_be_visible()  # the site's layout
    guides = page.get_by_test_id("role-guides")
    for role in ROLE_GUIDES:
        expect(guides.locator(f'a[href="{reverse("help-page", args=[role])}"]')).to_have_count(1)
    expect(guides.locator("article")).to_have_count(len(ROLE_GUIDES))
    guides.locator(f'a[href="{reverse("help-page", args=["rater"])}"]').click()
    expect(page.locator("article.guide h1")).to_contain_text("guide for raters")
    # every page of the site's layout links it (a dashboard, a guide)
    for url in (reverse("dashboard", args=[study.pk]), reverse("help-page", args=["manager"])):
        page.goto(f"{live_server.url}{url}")
        expect(page.locator("header.topbar").get_by_role("link", name="Help")) \
            .to_have_attribute("href", "/help/")
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{live_server.url}/help/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
