"""Every estimator, its corrections and the assumption flags reach the snapshot, the API
and the dashboard; the manager picks the estimator."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import Query
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.scope_estimates import METHODS
from annotations.partitioned.services.simulation import study_simulate
from tests.factories import built_once, make_study, role_user

pytestmark = pytest.mark.django_db
FIELDS = {"accuracy", "accuracy_clipped", "se", "ci_low", "ci_high", "bound", "weight",
          "bound_valid", "approximate"}


def _simulated():
    study = make_study(k=4, n_items=600, systems={"good": 0.85, "poor": 0.4}, seed=71,
                       strata=2)
    study_simulate(study=study, unsure_rate=0.02)
    return study


@pytest.fixture(scope="module")
def study(django_db_setup, django_db_blocker):
    with built_once(django_db_blocker, _simulated) as s:
        yield s


def test_snapshot_carries_every_estimator_and_correction(study):
    payload = study_recompute(study_id=study.pk).payload
    system = payload["systems"][0]
    assert set(system["estimates"]) == set(METHODS)
    for est in system["estimates"].values():
        assert set(est) == FIELDS
    assert system["estimates"]["ivw_fixed"]["weight"] == 0.5
    assert set(system["ipw"]) == {"accuracy", "se", "ci_low", "ci_high", "approximate"}
    stratified = system["stratified"]
    assert stratified["ci_low"] <= stratified["accuracy"] <= stratified["ci_high"]
    assert sum(stratified["weights"].values()) == pytest.approx(1)
    for stratum in system["strata"].values():
        assert set(stratum["estimates"]) == set(METHODS)
    assert payload["plan"]["routed_queries"] > 0
    assert system["design_effect"] is None  # one query per item: no clustering


def test_api_exposes_the_same_fields(study):
    study_recompute(study_id=study.pk)
    client = Client()
    client.force_login(role_user(study, "manager"))
    data = client.get(reverse("api-estimates", args=[study.pk])).json()
    est = data["payload"]["systems"][0]["estimates"]["ivw"]
    assert set(est) == FIELDS


def test_manager_picks_the_estimator_and_sees_bounds_and_strata(study):
    study_recompute(study_id=study.pk)
    client = Client()
    client.force_login(role_user(study, "manager"))
    page = client.get(reverse("dashboard", args=[study.pk]) + "?method=ivw_fixed")
    html = page.content.decode()
    assert 'data-method="ivw_fixed"' in html and "By stratum (IVW (w = 0.5))" in html
    assert 'option value="ivw_fixed" selected' in html
    assert "All estimators side by side" in html
    fallback = client.get(reverse("dashboard", args=[study.pk]) + "?method=nonsense")
    assert 'data-method="ml"' in fallback.content.decode()
    live = client.get(reverse("dashboard", args=[study.pk]) + "?method=comp",
                      HTTP_HX_REQUEST="true")
    assert 'data-method="comp"' in live.content.decode() and "&amp;method=comp" in (
        live.content.decode())


def test_completion_imbalance_and_abstention_are_flagged():
    study = make_study(k=3, n_items=900, systems={"m": 0.7}, seed=72)
    study_simulate(study=study)
    # class 0 answered everything 'not sure' and class 2 left half its queries unanswered
    Query.objects.filter(study=study, k=0).update(answer="unsure")
    answered = Query.objects.filter(study=study, k=2, status="answered").order_by("pk")
    half = list(answered.values_list("pk", flat=True)[: answered.count() // 2])
    Query.objects.filter(pk__in=half).update(status="pending", answer="", answered_at=None,
                                             answered_by=None)
    payload = study_recompute(study_id=study.pk).payload
    codes = {f["code"] for f in payload["assumptions"]}
    assert codes == {"completion_imbalance", "abstention_differs"}


def test_several_queries_per_item_use_the_clustered_variance():
    study = make_study(k=5, n_items=400, queries_per_item=3, systems={"m": 0.5}, seed=73)
    study_simulate(study=study)
    system = study_recompute(study_id=study.pk).payload["systems"][0]
    assert system["design_effect"] is not None and system["design_effect"] > 1
    # the counts are the labels themselves; the clustering acts on the SE and interval
    raw_n_comp = Query.objects.filter(study=study, answer="no").count()
    assert system["counts"]["n_comp"] == raw_n_comp


def test_few_labels_are_flagged_for_the_guarantee():
    study = make_study(k=4, n_items=30, systems={"m": 0.7}, seed=74)
    study_simulate(study=study)
    system = study_recompute(study_id=study.pk).payload["systems"][0]
    assert system["flags"] == ["few_labels_for_guarantee"]


def test_planning_calculator_answers_and_names_bad_fields(study):
    from estimators.partitioned.planning import plan_labels

    client = Client()
    client.force_login(role_user(study, "manager"))
    url = reverse("plan", args=[study.pk])
    html = client.get(url, {"width": "0.05", "pilot": "0.8"}).content.decode()
    expected = plan_labels(0.05, 0.8, 4)
    assert f"{expected.routed_queries:,.0f}" in html
    assert "width: must lie" in client.get(url, {"width": "2", "pilot": "0.8"}).content.decode()
    assert "enter numbers" in client.get(url, {"width": "x", "pilot": "0.8"}).content.decode()
    specialist_client = Client()
    from tests.factories import specialist

    specialist_client.force_login(specialist(study, 0))
    assert specialist_client.get(url, {"width": "0.05", "pilot": "0.8"}).status_code == 403


# --- the payload contract (BRIEF contract 1), rendered from snapshots built here -----------
def _est(acc, low, high, se=0.02):
    return {"accuracy": acc, "accuracy_clipped": acc, "se": se, "ci_low": low,
            "ci_high": high, "bound": None, "weight": None, "bound_valid": True}


def _contract_payload(k: int = 2) -> dict:
    """A K = 2 study: no complementary estimate, no labels to target, a 'yes' share that
    departs from 1/K, skips per class."""
    ml = _est(0.812, 0.771, 0.849)
    system = {"id": 1, "name": "sys-a", "counts": {"n_ord": 40.0, "s_ord": 32.0,
                                                   "n_comp": 0.0, "s_comp": 0.0},
              "estimates": {"ord": ml, "comp": None, "ivw": ml, "ivw_pilot": ml,
                            "ivw_fixed": ml, "ml": ml},
              "labels_needed": None, "ipw": {"accuracy": None, "se": None, "ci_low": None,
                                             "ci_high": None},
              "stratified": None, "design_effect": None, "flags": [],
              "reference": {"n": 0, "accuracy": None},
              "strata": {"": {"n_ord": 40.0, "n_comp": 0.0, **ml,
                              "estimates": {"ml": ml, "comp": None}}}}
    empty = {**system, "id": 2, "name": "sys-empty",
             "counts": {"n_ord": 0.0, "s_ord": 0.0, "n_comp": 0.0, "s_comp": 0.0},
             "estimates": dict.fromkeys(("ord", "comp", "ivw", "ivw_pilot", "ivw_fixed",
                                         "ml")),
             "strata": {"": {"n_ord": 0.0, "n_comp": 0.0, "estimates": {"ml": None}}}}
    return {
        "k": k, "confidence": 0.95, "interval_method": "auto", "n_answered": 50,
        "classes": [
            {"index": 0, "name": "cat", "yes": 30, "no": 5, "unsure": 1, "pending": 3,
             "leased": 0, "specialists": 1, "completion_rate": 0.9, "abstention_rate": 0.03,
             "skipped": 4, "skip_rate": 0.1},
            {"index": 1, "name": "dog", "yes": 10, "no": 4, "unsure": 0, "pending": 2,
             "leased": 1, "specialists": 1, "completion_rate": 0.8, "abstention_rate": 0.0,
             "skipped": 0, "skip_rate": None},
        ],
        "systems": [system, empty], "strata": [""],
        "completion_imbalance": {"ratio": 1.1, "warning": False},
        "yes_share": {"expected": 0.5, "yes": 40, "answered": 49, "share": 40 / 49,
                      "p_value": 0.00001, "flag": True,
                      "detectable": {"low": 0.2871, "high": 0.7129, "power": 0.8},
                      "classes": [{"index": 0, "name": "cat", "yes": 30, "answered": 35,
                                   "share": 30 / 35, "p_value": 0.00002, "flag": True},
                                  {"index": 1, "name": "dog", "yes": 10, "answered": 14,
                                   "share": 10 / 14, "p_value": 0.18, "flag": False}]},
        "assumptions": [{"code": "yes_share_departs",
                         "message": "Specialists say yes more often than 1 in 2."}],
    }


def _estimate_tables(html: str) -> str:
    return "".join(html.split(f'<table class="{name}"')[1].split("</table>")[0]
                   for name in ("estimates", "chosen", "side-by-side"))


def _render(study, payload, query: str = "") -> str:
    from annotations.models import EstimateSnapshot

    EstimateSnapshot.objects.create(study=study, n_answered=payload["n_answered"],
                                    duration_ms=1.0, payload=payload)
    client = Client()
    client.force_login(role_user(study, "manager"))
    return client.get(reverse("dashboard", args=[study.pk]) + query).content.decode()


def test_no_data_cells_say_so_and_no_labels_to_target_is_invented():
    study = make_study(k=2, n_items=10, seed=81)
    html = _render(study, _contract_payload())
    row = html.split('data-system="sys-a"')[1].split("</tr>")[0]
    assert '<td data-method="comp"><span class="nodata"' in row
    assert '<td data-method="ord">0.812</td>' in row
    assert '<td data-testid="labels-needed">—</td>' in row
    empty = html.split('data-system="sys-empty"')[1].split("</tr>")[0]
    assert empty.count(">no data</span>") == 5  # ord, comp, ivw, ML ± SE, ML interval
    assert "0.500" not in _estimate_tables(html)
    assert "What does no data mean?" not in html  # the no-data cells carry a title instead
    assert 'title="This estimator needs labels' in html


def test_old_snapshots_placeholder_is_shown_as_no_data():
    """Snapshots written before the contract stored 0.5 where a method had no labels."""
    study = make_study(k=4, n_items=10, seed=82)
    payload = _contract_payload(k=4)
    for system in payload["systems"]:
        system["estimates"]["comp"] = _est(0.5, 0.0, 1.0)  # the old no-data convention
    for key in ("yes_share", "assumptions"):
        del payload[key]
    for c in payload["classes"]:
        del c["skipped"], c["skip_rate"]
    html = _render(study, payload)
    assert "0.500" not in _estimate_tables(html)
    # main table: comp of sys-a + 5 cells of sys-empty; chosen (ML): 2 cells of sys-empty;
    # side by side: comp of sys-a + 6 methods of sys-empty
    assert html.count(">no data</span>") == (1 + 5) + 2 + (1 + 6)
    assert 'data-testid="yes-share"' not in html and "Skip rate" not in html  # absent keys


def test_yes_share_skips_and_assumption_flags_are_shown():
    study = make_study(k=2, n_items=10, seed=83)
    html = _render(study, _contract_payload())
    assert 'data-flag="yes_share_departs">Specialists say yes more often than 1 in 2.' in html
    share = html.split('data-testid="yes-share"')[1].split("</p>")[0]
    assert "<strong>0.816</strong> of 49 answered" in share and "expected 0.500" in share
    assert "p = 0.0000" in share and "Significant departure" in share
    assert ('At this size the check notices a share of "yes" below 0.287 or above 0.713 '
            "with probability 0.8; a smaller departure may pass unseen.") in share
    cat = html.split('<tr data-class="0">')[1].split("</tr>")[0]
    assert "departs from 1/K" in cat
    dog = html.split('<tr data-class="1">')[1].split("</tr>")[0]
    assert "departs" not in dog
    classes = html.split('<table class="classes">')[1].split("</table>")[0]
    assert '<td data-testid="skipped">4</td><td data-testid="skip-rate">10 %</td>' in classes
    assert '<td data-testid="skipped">0</td><td data-testid="skip-rate">—</td>' in classes


def test_every_column_explains_itself_and_the_guide_is_served():
    from annotations.partitioned.dashboard import GLOSSARY

    study = make_study(k=2, n_items=10, seed=84)
    html = _render(study, _contract_payload())
    headers = html.split("<thead>")[1:]
    for head in headers:
        for th in head.split("</thead>")[0].split("<th>")[1:]:
            assert 'class="tip"' in th, th
    assert 'href="/help/manager/"' in html and "What these numbers mean" in html
    client = Client()
    client.force_login(role_user(study, "manager"))
    guide = client.get("/help/manager/")
    assert guide.status_code == 200
    text = guide.content.decode()
    assert '<h1 id="guide-for-managers-the-study-dashboard">Guide for managers' in text
    for label, _ in GLOSSARY.values():  # the guide names every term the tooltips explain
        assert label.replace('"', "&quot;") in text or label in text, label
    assert client.get("/help/nope/").status_code == 404
    assert client.get("/help/img/dashboard-phone.png").status_code == 200
    assert client.get("/help/img/..%2Fmanager.md").status_code == 404


def test_guide_markdown_is_sanitised(tmp_path, settings, monkeypatch):
    from annotations.core import guides

    (tmp_path / "manager.md").write_text(
        "# T\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1)) "
        '<img src="img/a.png" onerror="alert(1)">\n', encoding="utf-8")
    monkeypatch.setattr(guides, "DOCS", tmp_path)
    _, html = guides.guide_html("manager")
    assert "<script" not in html and "javascript:" not in html and "onerror" not in html
    assert 'src="/help/img/a.png"' in html


def test_the_estimator_choice_is_kept_in_the_url_and_the_poll():
    study = make_study(k=2, n_items=10, seed=85)
    html = _render(study, _contract_payload(), "?method=ivw")
    assert 'hx-push-url="true"' in html and 'option value="ivw" selected' in html
    assert "&amp;method=ivw" in html.split('id="live"')[1].split(">")[0]


def test_chart_marks_carry_their_values_and_each_colour_means_one_thing(study):
    """The two charts of the page: every dot and interval bar has a tooltip (<title>)
    with the system, the estimator and the figures the snapshot holds; in the interval
    chart a colour is one estimator (as its legend says), in the convergence chart one AI
    system, and no colour is used by both charts."""
    import re

    payload = study_recompute(study_id=study.pk).payload
    study_recompute(study_id=study.pk)  # a second snapshot: the convergence chart draws
    client = Client()
    client.force_login(role_user(study, "manager"))
    html = client.get(reverse("dashboard", args=[study.pk])).content.decode()
    charts = re.findall(r"<svg class=\"chart\".*?</svg>\s*<p class=\"legend\">.*?</p>", html,
                        re.S)
    assert len(charts) == 2
    intervals, convergence = charts

    labels = {"ord": "Ordinary", "comp": "Complementary", "ivw": "IVW",
              "ml": "Maximum likelihood"}
    colour_of: dict[str, set[str]] = {}
    dots = re.findall(r'<circle [^>]*fill="([^"]+)"><title>([^<]+)</title>', intervals)
    assert len(dots) == len(payload["systems"]) * len(labels)
    bars = re.findall(r'<line [^>]*stroke="([^"]+)"[^>]*><title>([^<]+)</title>', intervals)
    for row in payload["systems"]:
        for method, label in labels.items():
            est = row["estimates"][method]
            want = (f"{row['name']} · {label}: {est['accuracy']:.3f} "
                    f"[{est['ci_low']:.3f}, {est['ci_high']:.3f}]")
            [colour] = [c for c, title in dots if title == want]
            colour_of.setdefault(label, set()).add(colour)
            assert (colour, want) in bars  # the interval bar says the same
    assert all(len(c) == 1 for c in colour_of.values())  # one colour per estimator
    interval_colours = {label: c.pop() for label, c in colour_of.items()}
    assert len(set(interval_colours.values())) == len(labels)  # … and one estimator a colour
    legend = {label: colour for colour, label in re.findall(
        r'<svg class="key"[^>]*><circle [^>]*fill="([^"]+)"/></svg>([^<]+)</span>', intervals)}
    assert {k: legend[k] for k in labels.values()} == interval_colours

    lines = re.findall(r'<polyline [^>]*stroke="([^"]+)"[^>]*><title>([^<]+)</title>',
                       convergence)
    assert sorted(name for _, name in lines) == sorted(r["name"] for r in payload["systems"])
    assert len({colour for colour, _ in lines}) == len(lines)  # one colour per system
    assert not {colour for colour, _ in lines} & set(interval_colours.values())
    for colour, name in lines:
        ml = next(r for r in payload["systems"] if r["name"] == name)["estimates"]["ml"]
        assert (f'fill="{colour}"><title>{name}: {ml["accuracy"]:.3f} after '
                f'{payload["n_answered"]:,} answers</title>') in convergence
        assert re.search(rf'<svg class="key"[^>]*><circle [^>]*fill="{colour}"/></svg>{name}</span>',
                         convergence)


def test_the_recomputed_yes_share_says_what_it_can_detect_at_the_studys_size():
    """The payload's detectable shares are those of the overall test at the study's answered
    first queries (estimators.partitioned.checks.detectable_shares), and older snapshots
    without them still render."""
    from estimators.partitioned.checks import detectable_shares

    study = make_study(k=3, n_items=40, seed=85)
    study_simulate(study=study)
    study_recompute(study_id=study.pk)
    payload = study.snapshots.latest("computed_at").payload
    share = payload["yes_share"]
    low, high = detectable_shares(share["answered"], 1 / 3, share["level"])
    assert share["detectable"] == {"low": low, "high": high, "power": 0.8}
    old = _contract_payload()
    del old["yes_share"]["detectable"]
    assert "yes-share-power" not in _render(study, old)


def test_intervals_resting_on_few_events_are_marked_approximate_with_the_reason():
    """Issue 18: a system whose labels show only a handful of errors gets "≈ approximate"
    after each interval of it and a note that says why and how far coverage strays; a
    system with plenty of errors and right answers gets neither."""
    import re

    from estimators.partitioned.intervals import APPROXIMATE_BELOW, APPROXIMATE_COVERAGE

    study = make_study(k=3, n_items=60, queries_per_item=2,
                       systems={"almost-perfect": 1.0, "middling": 0.5}, seed=5)
    study_simulate(study=study)
    payload = study_recompute(study_id=study.pk).payload
    perfect, middling = payload["systems"]
    assert perfect["estimates"]["ml"]["approximate"] is True
    assert perfect["ipw"]["approximate"] is True
    assert not any(cell["approximate"] for cell in middling["estimates"].values() if cell)
    client = Client()
    client.force_login(role_user(study, "manager"))
    html = client.get(reverse("dashboard", args=[study.pk])).content.decode()
    note = re.search(r'<p class="note" id="approximate" data-testid="approximate-note">(.*?)'
                     r"</p>", html, re.S)
    assert note, "no note"
    text = re.sub(r"<[^>]+>", "", note[1])
    low, high = APPROXIMATE_COVERAGE
    assert "(almost-perfect)" in text and "middling" not in text
    assert f"fewer than {APPROXIMATE_BELOW} events" in text
    assert f"{round(100 * low)}–{round(100 * high)} %" in text
    assert "counted after the design effect" in text  # several queries per item
    link = re.search(r'href="(/help/coverage/)#([\w-]+)"', note[1])
    guide = client.get(link[1]).content.decode()
    assert f'id="{link[2]}"' in guide  # the section that shows those coverages
    # each of its intervals carries the mark: headline, ML table, chosen table, IPW,
    # stratified (one stratum: none), and the side-by-side table's six estimators
    rows = re.findall(r'<tr data-system="almost-perfect">(.*?)</tr>', html, re.S)
    assert rows and all('data-testid="approximate"' in row for row in rows)
    assert not any('data-testid="approximate"' in row for row in
                   re.findall(r'<tr data-system="middling">(.*?)</tr>', html, re.S))
    headline = re.search(r'data-name="almost-perfect">(.*?)</li>', html, re.S)[1]
    assert 'href="#approximate"' in headline
    # without an approximate interval, no note
    for system in payload["systems"]:
        for cell in system["estimates"].values():
            if cell:
                cell["approximate"] = False
        system["ipw"]["approximate"] = False
    from annotations.core.models import EstimateSnapshot

    EstimateSnapshot.objects.create(study=study, n_answered=payload["n_answered"],
                                    duration_ms=1, payload=payload)
    html = client.get(reverse("dashboard", args=[study.pk])).content.decode()
    assert 'data-testid="approximate-note"' not in html and 'href="#approximate"' not in html
