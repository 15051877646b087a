"""The design-weighted estimates of a study (issue 28): the step arrays read back from what
each query stores equal a brute force over full class orders; a simulated targeted study's
estimate finds the systems' true accuracies; the recompute, the dashboard and the figures
CSV carry it, and the paper's figures read only the uniform part."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from annotations.core.services.studies import study_open
from annotations.models import Item, Query
from annotations.partitioned.selectors import study_design_rows
from annotations.partitioned.services.design_estimates import design_step_arrays
from annotations.partitioned.services.designs import routing_design_set
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.simulation import study_simulate
from assistants.models import AISystem, Prediction
from tests.annotations.partitioned.test_designs import _picks, _step_probability
from tests.factories import make_study, role_user

pytestmark = pytest.mark.django_db
SYSTEMS = {"strong": 0.9, "middling": 0.7, "weak": 0.5}


def _targeted_study(*, k, n_items, queries_per_item=1, epsilon=0.2, seed=31):
    study = make_study(k=k, n_items=n_items, queries_per_item=queries_per_item,
                       systems=SYSTEMS, open_=False, seed=seed)
    routing_design_set(study=study, kind="targeted", epsilon=epsilon)
    study_open(study=study)
    return study


def _true_accuracies(study) -> dict[str, float]:
    """Each system's share of right answers on the study's routed items (gold known)."""
    out = {}
    for system in AISystem.objects.filter(study=study):
        items = Item.objects.filter(study=study, is_quality_check=False)
        right = sum(1 for item in items
                    if Prediction.objects.filter(system=system, item=item,
                                                 position=item.position_of(item.gold_option))
                    .exists())
        out[system.name] = right / items.count()
    return out


def test_the_step_arrays_equal_a_brute_force_over_full_class_orders():
    study = _targeted_study(k=4, n_items=25, queries_per_item=2, epsilon=0.3, seed=32)
    study_simulate(study=study, seed=1, recompute_every=0)
    ordinals = list(AISystem.objects.filter(study=study).order_by("ordinal")
                    .values_list("ordinal", flat=True))
    rows = study_design_rows(study=study, ordinals=ordinals)
    arrays = design_step_arrays(rows, 4, depth=2)
    picks = _picks(study)
    predicted = {(item, o): pos for item, o, pos in Prediction.objects.filter(
        system__study=study, position__isnull=False).values_list(
        "item_id", "system__ordinal", "position")}
    checked = 0
    for r, (i, j) in enumerate(zip(arrays["item"], arrays["step"], strict=True)):
        item = Item.objects.get(pk=rows.item_ids[i])
        order = item.class_order
        assert arrays["p_asked"][r] == pytest.approx(
            _step_probability(order, j, picks[item.pk], 4, 0.3), rel=1e-12)
        for s, ordinal in enumerate(ordinals):
            pick = predicted.get((item.pk, ordinal))
            if pick is None or pick in order[:j]:
                expected = 0.0
            else:  # the probability of the order's prefix followed by the pick
                expected = _step_probability(order[:j] + [pick], j, picks[item.pk], 4, 0.3)
            assert arrays["p_own"][r, s] == pytest.approx(expected, rel=1e-12, abs=1e-15)
            checked += 1
    assert checked >= 75


def test_a_targeted_study_estimates_every_system_near_its_true_accuracy():
    study = _targeted_study(k=5, n_items=600, seed=33)
    study_simulate(study=study, seed=2, recompute_every=0)
    payload = study.snapshots.order_by("-pk").first().payload
    truth = _true_accuracies(study)
    assert payload["design"]["answers"] == 600 and payload["design"]["items"] == 600
    assert [d["kind"] for d in payload["design"]["designs"]] == ["targeted"]
    for system in payload["systems"]:
        cell = system["design"]
        # within 3.5 standard errors of the truth, and inside its interval's reach
        assert abs(cell["accuracy"] - truth[system["name"]]) < 3.5 * cell["se"] + 1e-9
        assert cell["ci_low"] <= cell["accuracy"] <= cell["ci_high"]
        assert cell["uniform_answers"] > 600  # the routed systems needed fewer answers
    # the paper's figures read the uniform part only: about ε of the items
    uniform = Query.objects.filter(study=study, status="answered", draw_uniform=True).count()
    assert payload["uniform_part"]["answers"] == uniform
    assert 60 <= uniform <= 180
    assert sum(c["yes"] + c["no"] + c["unsure"] for c in payload["classes"]) == 600
    ml_counts = payload["systems"][0]["counts"]
    assert ml_counts["n_ord"] + ml_counts["n_comp"] == uniform


def test_the_dashboard_shows_the_design_weighted_estimate_first():
    study = _targeted_study(k=4, n_items=120, seed=34)
    study_simulate(study=study, seed=3, recompute_every=0)
    study_recompute(study_id=study.pk)
    client = Client()
    client.force_login(role_user(study, "manager"))
    html = client.get(f"/studies/{study.pk}/dashboard/").content.decode()
    assert "every answer, weighted by its routing design" in html
    section = html.split('<table class="design-estimates">')[1].split("</table>")[0]
    assert section.count("<tr data-system=") == 3
    flagged = [s["name"] for s in study.snapshots.order_by("-pk").first().payload["systems"]
               if s["design"]["approximate"]]
    assert ("design-approximate-note" in html) == bool(flagged)
    assert 'data-testid="uniform-part"' in html
    csv = client.get(reverse("figure-csv", args=[study.pk, "design"]))
    body = b"".join(csv.streaming_content) if csv.streaming else csv.content
    assert csv.status_code == 200 and b"uniform_answers" in body
    assert body.count(b"\n") == 4  # a header and one row per system


def test_a_uniform_study_has_no_design_section():
    study = make_study(k=4, n_items=40, systems=SYSTEMS, seed=35)
    study_simulate(study=study, seed=4, recompute_every=0)
    payload = study.snapshots.order_by("-pk").first().payload
    assert "design" not in payload and "uniform_part" not in payload
    assert np.isfinite(payload["systems"][0]["estimates"]["ml"]["accuracy"])


def test_the_routing_design_page_recommends_a_design_from_the_pilot_answers():
    study = make_study(k=6, n_items=300, systems=SYSTEMS, seed=36)  # uniform pilot
    client = Client()
    client.force_login(role_user(study, "researcher"))
    url = reverse("admin:annotations_study_routing_design", args=[study.pk])
    assert "answer a pilot" in client.get(url).content.decode()
    study_simulate(study=study, answers=200, seed=5, recompute_every=0)
    page = client.get(url).content.decode()
    table = page.split('data-testid="design-plan"')[1].split("</table>")[0]
    assert table.count("<tr") == 6  # a header, uniform and four targeted designs
    assert table.count("(recommended)") == 1
    assert "fewer answers than the uniform design" in page


@pytest.mark.parametrize("whole", [False, True])
def test_item_picks_are_the_predictions_asked_for(monkeypatch, whole):
    """``selectors.item_picks`` — the design rows' picks — give each asked item's and
    system's predicted class (−1: none, or a missing prediction) in the order asked, and
    nothing of another study or an item not asked; on PostgreSQL read by probe (few items)
    or by the study's every prediction (``whole``: many items)."""
    from annotations.partitioned import selectors

    if whole:
        monkeypatch.setattr(selectors, "PICKS_WHOLE", 0)
    study = make_study(k=3, n_items=12, systems=SYSTEMS, seed=41)
    make_study(k=3, n_items=12, systems=SYSTEMS, seed=42)  # another study's predictions
    item_ids = list(Item.objects.filter(study=study, is_quality_check=False)
                    .order_by("-pk").values_list("pk", flat=True))[:7]
    ordinals = sorted(AISystem.objects.filter(study=study).values_list("ordinal", flat=True),
                      reverse=True)
    first = Prediction.objects.filter(item_id=item_ids[0], system__study=study)
    first.filter(system__ordinal=ordinals[0]).delete()
    first.filter(system__ordinal=ordinals[1]).update(position=None, option=None)
    picks = selectors.item_picks(study=study, item_ids=item_ids, ordinals=ordinals)
    known = {(i, o): p for i, o, p in Prediction.objects.filter(system__study=study)
             .values_list("item_id", "system__ordinal", "position")}
    expected = [[-1 if known.get((i, o)) is None else known[(i, o)] for o in ordinals]
                for i in item_ids]
    assert picks.tolist() == expected
    assert picks[0, 0] == picks[0, 1] == -1 and (picks[1:] >= 0).all()
