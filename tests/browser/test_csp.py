"""Every page of every role works under the Content-Security-Policy in Chromium: the header is
there, the browser reports no violation (``securitypolicyviolation``) and no console error,
htmx swaps and polls, and the dashboards draw their charts. (Every other browser test fails
on a violation too: the ``page`` fixture watches for them. The server side — the header on
every HTML page of the URL configuration — is tests/security/test_csp.py.)"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.assisted.services.analysis import assisted_recompute
from annotations.assisted.services.demo import assisted_study_from_simulation, demo_design
from annotations.core.services.studies import membership_add
from annotations.critique.services.analysis import critique_recompute
from annotations.partitioned.services.estimates import study_recompute
from estimators.assisted.simulation import simulate_assisted
from tests.annotations.assisted.helpers import add_rater
from tests.annotations.critique.helpers import make_critique_study
from tests.browser.conftest import login, watch_csp
from tests.factories import UserFactory, make_study, role_user, specialist

# presentation: the same on both databases (CI runs it on the first pass only)
pytestmark = [pytest.mark.browser, pytest.mark.presentation,
              pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)  # an answer recomputes the study inside the request here


def _studies():
    partitioned = make_study(k=4, n_items=30, systems={"model-a": 0.8, "model-b": 0.5},
                             seed=71, name="CSP partitioned")
    study_recompute(study_id=partitioned.pk)
    study_recompute(study_id=partitioned.pk)  # two snapshots: the convergence chart draws
    sim = simulate_assisted(demo_design(n_items=60, raters_per_arm=4, items_per_rater=20),
                            seed=72)
    assisted = assisted_study_from_simulation(name="CSP assisted", sim=sim, seed=72,
                                              prefix="csp", spare_slots=1).study
    rater = add_rater(assisted, "csp-rater")
    assisted_recompute(study_id=assisted.pk)
    critique, annotators = make_critique_study(n_questions=2, n_annotators=2,
                                               name="CSP critique")
    critique_recompute(study_id=critique.pk)
    manager = UserFactory(username="csp-manager")
    for study in (assisted, critique):
        membership_add(study=study, user=manager, role="manager")
    return partitioned, assisted, critique, rater, annotators[0], manager


def test_every_role_s_pages_work_under_the_policy(browser, live_server, shots, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    partitioned, assisted, critique, rater, annotator, manager = _studies()
    UserFactory(username="csp-root", is_staff=True, is_superuser=True)
    P, A, C = partitioned.pk, assisted.pk, critique.pk
    visits = {
        None: ["/accounts/login/", "/no-such-page/"],
        specialist(partitioned, 1).username: ["/", f"/studies/{P}/label/",
                                             "/help/manager/", f"/studies/{A}/rate/"],
        role_user(partitioned, "manager").username: [f"/studies/{P}/dashboard/"],
        manager.username: [f"/studies/{A}/assisted/dashboard/",
                           f"/studies/{C}/critique/dashboard/"],
        rater.username: [f"/studies/{A}/rate/"],
        annotator.username: [f"/studies/{C}/critique/"],
        "csp-root": ["/admin/", "/admin/annotations/study/", f"/admin/annotations/study/{P}/change/",
                     "/admin/annotations/study/add/", f"/admin/annotations/study/{P}/members/",
                     f"/admin/annotations/study/{P}/import-items/",
                     f"/admin/annotations/assistedstudy/{A}/change/",
                     f"/admin/annotations/assistedstudy/{A}/preview/"
                     f"{assisted.arms.order_by('position').last().pk}/",
                     "/admin/annotations/critiquesettings/add/",
                     f"/admin/annotations/critiquesettings/{C}/change/",
                     f"/admin/annotations/critiquesettings/{C}/import-questions/",
                     "/admin/annotations/item/",
                     "/admin/annotations/user/", "/api/docs/", "/accounts/password/"],
    }
    for username, urls in visits.items():
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        violations = watch_csp(context)
        errors: list[str] = []
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.on("console", lambda msg, errors=errors, page=page: errors.append(
            f"{page.url}: {msg.text}") if msg.type == "error" else None)
        page.on("pageerror", lambda exc, errors=errors, page=page: errors.append(
            f"{page.url}: {exc}"))
        if username:
            login(page, live_server, username)
        for url in urls:
            response = page.goto(f"{live_server.url}{url}")
            header = response.headers.get("content-security-policy", "")
            assert "script-src 'self'" in header and "object-src 'none'" in header, url
            page.wait_for_load_state("networkidle")
            expected_status = {"/no-such-page/": 404}.get(url, 200)
            if username == specialist(partitioned, 1).username and "/rate/" in url:
                expected_status = 403  # not a rater there: the error page, same policy
            assert response.status == expected_status, url
            if expected_status != 200:  # the browser logs the refused page's status
                errors[:] = [e for e in errors if "the server responded with a status" not in e]
        # the pages did their work under the policy
        if username == specialist(partitioned, 1).username:
            page.goto(f"{live_server.url}/studies/{P}/label/")
            page.keyboard.press("Enter")  # htmx fetches a query and swaps it in
            card = page.locator("article.query")
            expect(card).to_be_visible()
            first = card.get_attribute("data-query-id")
            page.wait_for_timeout(700)  # the minimum time on screen
            page.keyboard.press("n")  # htmx posts the answer and swaps the next query in
            expect(page.get_by_test_id("recorded")).to_have_text("Recorded: No")
            expect(page.locator(f'article.query:not([data-query-id="{first}"])')).to_be_visible()
            page.screenshot(path=str(shots / "csp-label.png"), full_page=True)
        if username == role_user(partitioned, "manager").username:
            page.goto(f"{live_server.url}/studies/{P}/dashboard/")
            expect(page.locator("svg.chart circle").first).to_be_visible()
            assert page.locator("svg.chart").count() == 2
            key = page.locator(".legend svg.key circle").first
            assert key.evaluate("c => getComputedStyle(c).fill") != "none"
            page.screenshot(path=str(shots / "csp-dashboard.png"), full_page=True)
            # htmx polls under the policy: a new answer shows without a reload
            before = page.get_by_test_id("n-answered").inner_text()
            from annotations.partitioned.services.labels import label_submit
            from annotations.partitioned.services.routing import query_lease_next

            user = specialist(partitioned, 2)
            label_submit(query_id=query_lease_next(study=partitioned, user=user).pk,
                         user=user, answer="no")
            expect(page.get_by_test_id("n-answered")).not_to_have_text(before, timeout=8000)
        if username == manager.username:
            page.goto(f"{live_server.url}/studies/{A}/assisted/dashboard/")
            assert page.locator("svg.chart").count() >= 1
            page.screenshot(path=str(shots / "csp-assisted-dashboard.png"), full_page=True)
        if username == "csp-root":
            page.goto(f"{live_server.url}/api/docs/")
            expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
            page.goto(f"{live_server.url}/admin/annotations/study/{P}/change/")
            panel = page.locator(".study-panel").first
            assert panel.evaluate("e => getComputedStyle(e).borderTopStyle") == "solid"
            page.screenshot(path=str(shots / "csp-admin-study.png"), full_page=True)
        context.close()
        assert violations == [], "\n".join(violations)
        assert errors == [], "\n".join(errors)
