"""Neyman allocation (a routing design): estimated from a pilot's per-stratum figures, the
study then answers the stratum whose answers vary more at a higher share of its items, with
uniform classes; the dashboard leads with the stratified estimate; what it refuses."""

from __future__ import annotations

import numpy as np
import pytest
from django.db.models import Count
from django.urls import reverse
from scipy import stats

from annotations.core.errors import InvalidStudy
from annotations.core.services.studies import study_open
from annotations.models import Query, RoutingDesign, User
from annotations.partitioned.services.designs import routing_design_set
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.predictions import predictions_import
from annotations.partitioned.services.simulation import study_simulate
from tests.factories import jsonl, make_items, make_study

pytestmark = pytest.mark.django_db

# the two systems are nearly always right in stratum s0 and often wrong in s1
ACCURACY = {"s0": {"a": 0.99, "b": 0.97}, "s1": {"a": 0.6, "b": 0.5}}
K, N_ITEMS = 4, 1200


def _study(seed: int = 5):
    study = make_study(k=K, n_items=N_ITEMS, strata=2, open_=False, seed=seed)
    rng = np.random.default_rng(seed)
    rows = []
    for it in make_items(N_ITEMS, K, seed=seed, strata=2):
        for name, acc in ACCURACY[it["stratum"]].items():
            right = rng.random() < acc
            pick = it["gold_index"] if right else int(rng.choice(
                [j for j in range(K) if j != it["gold_index"]]))
            rows.append({"item_id": it["id"], "system": name, "prediction_index": pick})
    predictions_import(study=study, source=jsonl(rows), name="p.jsonl", fmt="jsonl")
    study_open(study=study)
    return study


def _answered_share(study, design) -> dict[str, float]:
    """Per stratum: the share of its items answered under ``design``."""
    first = Query.objects.filter(study=study, sequence=0, is_quality_check=False)
    items = dict(first.values_list("stratum").annotate(n=Count("id")))
    answered = dict(first.filter(design=design, status=Query.Status.ANSWERED)
                    .values_list("stratum").annotate(n=Count("id")))
    return {h: answered.get(h, 0) / items[h] for h in items}


def test_a_pilot_sets_the_rates_and_the_spread_out_stratum_is_asked_more():
    # given an open study with two strata and a uniform pilot of 300 answers
    study = _study()
    study_simulate(study=study, answers=300, recompute_every=0)
    snapshot = study_recompute(study_id=study.pk)
    # when the researcher chooses Neyman allocation
    design = routing_design_set(study=study, kind="neyman")
    # then each stratum's spread is √(mean over systems of n·SE²) from the pilot's figures
    spreads = {}
    for h in ("s0", "s1"):
        cells = [row["strata"][h] for row in snapshot.payload["systems"]]
        spreads[h] = np.sqrt(np.mean([(c["n_ord"] + c["n_comp"]) * c["se"] ** 2
                                      for c in cells]))
    rates = design.allocation["rates"]
    assert rates["s1"] == 1.0
    assert rates["s0"] == pytest.approx(max(spreads["s0"] / spreads["s1"], 0.1), abs=1e-4)
    assert rates["s0"] < 0.6
    assert 0 < design.allocation["ratio"] < 1
    # and the queries no one was handed were given ranks that serve s1 first: after 400
    # more answers, s0's share of answered items over s1's is about the rates' ratio
    study_simulate(study=study, answers=400, seed=1, recompute_every=0)
    share = _answered_share(study, design)
    n_each = N_ITEMS / 2
    ratio = share["s0"] / share["s1"]
    spread = 3 * ratio * np.sqrt(1 / (share["s0"] * n_each) + 1 / (share["s1"] * n_each))
    assert ratio == pytest.approx(rates["s0"], abs=spread)
    # the classes stay uniform: every query says so, and a χ² test does not reject
    neyman = Query.objects.filter(study=study, design=design, sequence=0)
    assert set(neyman.values_list("draw_uniform", "draw_p")) == {(True, 1 / K)}
    ks = np.bincount(list(neyman.values_list("k", flat=True)), minlength=K)
    assert stats.chisquare(ks).pvalue > 0.001


def test_the_dashboard_leads_with_the_stratified_estimate_and_shows_the_rates(client):
    study = _study(seed=6)
    study_simulate(study=study, answers=300, recompute_every=0)
    study_recompute(study_id=study.pk)
    design = routing_design_set(study=study, kind="neyman")
    study_simulate(study=study, answers=200, seed=1, recompute_every=0)
    snapshot = study_recompute(study_id=study.pk)
    allocation = snapshot.payload["allocation"]
    assert allocation["design"] == design.number and allocation["answers"] == 200
    assert allocation["rates"] == design.allocation["rates"]
    manager = User.objects.get(username=f"{study.pk}-manager")
    client.force_login(manager)
    page = client.get(reverse("dashboard", args=[study.pk])).content.decode()
    assert "strata weighted by their items" in page
    assert 'data-testid="allocation"' in page
    stratified = snapshot.payload["systems"][0]["stratified"]
    assert f"{stratified['accuracy']:.3f}"[:4] in page


def test_what_neyman_allocation_refuses_changes_nothing():
    one = make_study(k=K, n_items=60, seed=8)
    study_simulate(study=one, answers=40, recompute_every=0)
    study_recompute(study_id=one.pk)
    with pytest.raises(InvalidStudy, match="in one") as one_stratum:
        routing_design_set(study=one, kind="neyman")
    assert one_stratum.value.field == "kind"
    two = _study(seed=9)
    with pytest.raises(InvalidStudy, match="needs a pilot"):
        routing_design_set(study=two, kind="neyman")
    with pytest.raises(InvalidStudy, match="only a targeted design"):
        routing_design_set(study=two, kind="neyman", epsilon=0.2)
    assert not RoutingDesign.objects.filter(study__in=[one, two]).exists()
    # a study with targeted answers cannot switch to Neyman, nor the other way round
    routing_design_set(study=two, kind="targeted", epsilon=0.2)
    study_simulate(study=two, answers=300, recompute_every=0)
    study_recompute(study_id=two.pk)
    with pytest.raises(InvalidStudy, match="do not combine"):
        routing_design_set(study=two, kind="neyman")
    three = _study(seed=10)
    study_simulate(study=three, answers=300, recompute_every=0)
    study_recompute(study_id=three.pk)
    routing_design_set(study=three, kind="neyman")
    with pytest.raises(InvalidStudy, match="already routes with this allocation"):
        routing_design_set(study=three, kind="neyman")
    study_simulate(study=three, answers=20, seed=1, recompute_every=0)
    with pytest.raises(InvalidStudy, match="do not combine"):
        routing_design_set(study=three, kind="targeted", epsilon=0.2)
    assert RoutingDesign.objects.filter(study=three).count() == 1


def test_the_routing_design_page_and_the_api_offer_neyman_allocation(client):
    from tests.factories import role_user
    study = _study(seed=12)
    client.force_login(role_user(study, "researcher"))
    page_url = reverse("admin:annotations_study_routing_design", args=[study.pk])
    api_url = f"/api/studies/{study.pk}/routing-designs/"
    page = client.get(page_url).content.decode()
    assert "Not yet: Neyman allocation needs a pilot" in page
    refused = client.post(api_url, {"kind": "neyman"}, content_type="application/json")
    assert refused.status_code == 400 and refused.json()["field"] == "kind"
    study_simulate(study=study, answers=300, recompute_every=0)
    study_recompute(study_id=study.pk)
    preview = client.get(page_url).content.decode().split('data-testid="neyman-preview">')[1]
    assert preview.startswith("From the 300 answers so far") and "s1 1.00" in preview
    done = client.post(api_url, {"kind": "neyman"}, content_type="application/json")
    assert done.status_code == 201
    current = done.json()[-1]
    assert current["kind"] == "neyman" and current["allocation"]["rates"]["s1"] == 1.0
    assert set(current["allocation"]) == {"rates", "spreads", "weights", "ratio", "pilot"}
    history = client.get(page_url).content.decode()
    assert "Neyman allocation: s0 " in history


def test_several_queries_per_item_keep_working_under_neyman_allocation():
    study = make_study(k=K, n_items=300, strata=2, queries_per_item=2, seed=13,
                       systems={"a": 0.8, "b": 0.6})
    study_simulate(study=study, answers=200, recompute_every=0)
    study_recompute(study_id=study.pk)
    design = routing_design_set(study=study, kind="neyman")
    study_simulate(study=study, answers=200, seed=1, recompute_every=0)
    follow_ups = Query.objects.filter(study=study, design=design, sequence=1)
    assert follow_ups.exists()
    # a follow-up's class is uniform over the classes not asked yet
    assert set(follow_ups.values_list("draw_uniform", "draw_p")) == {(True, 1 / (K - 1))}
    for q in follow_ups.select_related("item")[:50]:
        first = Query.objects.get(item=q.item, sequence=0)
        assert q.k != first.k and q.k == q.item.class_order[1]
    payload = study_recompute(study_id=study.pk).payload
    assert payload["allocation"]["answers"] > 0
    assert all(row["stratified"]["accuracy"] is not None for row in payload["systems"])
