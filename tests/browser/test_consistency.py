"""The consistency check as the manager meets it: after a check found the running counts
different from a full recount (here: a count corrupted by hand, the check told not to
repair), the dashboard says so in a red alert, on a phone and a desktop, with nothing
scrolling sideways and no CSP violation."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotations.models import TallyGroup
from annotations.partitioned.services.consistency import tallies_check
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.simulation import study_simulate
from tests.browser.conftest import login
from tests.browser.test_phone import DESKTOP, PHONE, SIDEWAYS, WIDEST
from tests.browser.walks import sized_page
from tests.factories import make_study, role_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_dashboard_says_when_the_consistency_check_found_a_difference(browser,
                                                                          live_server, shots):
    study = make_study(k=3, n_items=60, systems={"a": 0.8}, seed=611)
    study_simulate(study=study, answers=40, recompute_every=0)
    study_recompute(study_id=study.pk)
    assert tallies_check(study_id=study.pk).ok
    group = TallyGroup.objects.filter(study=study, state="yes").first()
    TallyGroup.objects.filter(pk=group.pk).update(n=group.n + 3)
    assert not tallies_check(study_id=study.pk, repair=False).ok
    manager = role_user(study, "manager")
    for name, viewport in (("390", PHONE), ("1280", DESKTOP)):
        with sized_page(browser, viewport) as view:
            login(view, live_server, manager.username)
            view.goto(live_server.url + reverse("dashboard", args=[study.pk]))
            alert = view.get_by_test_id("estimates-differed")
            expect(alert).to_contain_text("The consistency check found a difference")
            expect(alert).to_contain_text("rebuilt from the answers")
            scroll, client = view.evaluate(SIDEWAYS)
            assert scroll <= client, view.evaluate(WIDEST)
            view.screenshot(path=str(shots / f"{name}-dashboard-consistency.png"))
    assert tallies_check(study_id=study.pk).ok is False  # reported, and now rebuilt
    assert tallies_check(study_id=study.pk).ok
