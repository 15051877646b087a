"""The evaluation service on a study with a targeted routing design: a candidate equal to a
routed AI system and one that disagrees with the routed systems are both scored near their
true accuracy on the items (the design-weighted estimate, from every answer); the paper's
figures come from the uniform part; the Ladder releases only moves of at least its margin;
the final report scores the holdout the same way."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import Client

from annotations.core.services.studies import study_open
from annotations.evaluation.models import EvaluationSettings
from annotations.evaluation.services.evaluate import holdout_mask
from annotations.evaluation.services.tokens import token_create
from annotations.models import Item, Query
from annotations.partitioned.services.designs import routing_design_set
from annotations.partitioned.services.simulation import study_simulate
from assistants.models import Prediction
from tests.factories import make_study

pytestmark = pytest.mark.django_db
K = 5
ROUTED = {"strong": 0.85, "middling": 0.7}


@pytest.fixture(scope="module")
def targeted(django_db_setup, django_db_blocker):
    """A targeted study (ε = 0.2) of 800 items, every query answered by truthful simulated
    specialists; kept for the module (its tests only read it, apart from their tokens)."""
    with django_db_blocker.unblock():
        study = make_study(k=K, n_items=800, systems=ROUTED, open_=False, seed=41)
        routing_design_set(study=study, kind="targeted", epsilon=0.2)
        study_open(study=study)
        study_simulate(study=study, seed=5, recompute_every=0)
        EvaluationSettings.objects.update_or_create(study=study,
                                                    defaults={"holdout_share": 0.0})
        yield study
        Query.objects.filter(study=study).delete()  # Query.design protects its design
        study.delete()


def _items(study):
    """Per routed item: external id, gold option, the routed systems' options."""
    picks: dict[int, set] = {}
    for item_id, option in Prediction.objects.filter(system__study=study).values_list(
            "item_id", "option"):
        picks.setdefault(item_id, set()).add(option)
    return [(it.external_id, it.gold_option, picks.get(it.pk, set()))
            for it in Item.objects.filter(study=study, is_quality_check=False).order_by("pk")]


def _system(study, name):
    rows = Prediction.objects.filter(system__study=study, system__name=name).select_related(
        "item")
    return {p.item.external_id: p.option for p in rows}


def _disagreeing(items, rng, accuracy=0.6):
    """Right with probability ``accuracy``; otherwise a class no routed system picked."""
    out = {}
    for ext, gold, routed in items:
        if rng.random() < accuracy:
            out[ext] = gold
        else:
            others = [c for c in range(K) if c != gold and c not in routed] or [
                c for c in range(K) if c != gold]
            out[ext] = int(rng.choice(others))
    return out


def _post(study, raw, name, options, final=False):
    client = Client(HTTP_AUTHORIZATION=f"Evaluation {raw}")
    url = f"/api/studies/{study.pk}/evaluations/" + ("final/" if final else "")
    body = {"candidate": name, "predictions": [{"item": ext, "index": int(o)}
                                               for ext, o in options.items()]}
    response = client.post(url, body, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def _truth(items, options):
    return float(np.mean([options[ext] == gold for ext, gold, _ in items]))


def test_agreeing_and_disagreeing_candidates_are_scored_near_their_true_accuracy(targeted):
    items = _items(targeted)
    assert Query.objects.filter(study=targeted, draw_uniform=False).exists()
    _, raw = token_create(study=targeted, name="loop", ladder=False, min_batch=1)
    candidates = {"strong": _system(targeted, "strong"),
                  "disagreeing": _disagreeing(items, np.random.default_rng(3))}
    uniform = Query.objects.filter(study=targeted, status="answered",
                                   draw_uniform=True).count()
    se = {}
    for name, options in candidates.items():
        body = _post(targeted, raw, name, options)
        truth = _truth(items, options)
        cell = body["estimates"]["design"]
        assert body["score_method"] == "design" and body["score"] == cell["accuracy"]
        assert abs(cell["accuracy"] - truth) < 3.5 * cell["se"], (name, cell, truth)
        assert cell["ci_low"] <= cell["accuracy"] <= cell["ci_high"]
        assert cell["answers"] == 800 and cell["items"] == 800
        # the paper's figures read the uniform part only (about ε of the items)
        assert body["estimates"]["n_o"] + body["estimates"]["n_c"] == uniform
        assert 100 <= uniform <= 230
        se[name] = cell["se"]
    # the routed system's picks are asked about often, the disagreeing one's seldom
    assert se["strong"] < se["disagreeing"]


def test_the_ladder_releases_only_moves_of_at_least_its_margin(targeted):
    items = _items(targeted)
    _, raw = token_create(study=targeted, name="ladder", min_batch=1)  # margin 0.02
    strong = _system(targeted, "strong")
    near = dict(strong)  # the strong system with 4 items changed: < 0.02 of 800 items
    for ext, _gold, _ in items[:4]:
        near[ext] = (strong[ext] + 1) % K
    weak = _disagreeing(items, np.random.default_rng(4), accuracy=0.5)
    released = [_post(targeted, raw, name, options) for name, options in
                (("weak", weak), ("strong", strong), ("near", near), ("weak again", weak))]
    assert [r["ladder"]["improved"] for r in released] == [True, True, False, False]
    assert all("estimates" in r and r["estimates"] is None for r in released)
    assert released[1]["score"] - released[0]["score"] >= 0.02
    assert released[2]["score"] == released[3]["score"] == released[1]["score"]
    assert all(r["score_method"] == "design" for r in released)
    # released values are multiples of the margin near the candidates' true accuracies
    for r, options in ((released[0], weak), (released[1], strong)):
        assert round(r["score"] / 0.02, 9) == round(r["score"] / 0.02)
        assert abs(r["score"] - _truth(items, options)) < 0.08


def test_the_final_report_scores_the_holdout_by_the_design(targeted):
    EvaluationSettings.objects.filter(study=targeted).update(holdout_share=0.5)
    try:
        _, raw = token_create(study=targeted, name="final", min_batch=1)
        strong = _system(targeted, "strong")
        search = _post(targeted, raw, "strong", strong)
        final = _post(targeted, raw, "strong", strong, final=True)
    finally:
        EvaluationSettings.objects.filter(study=targeted).update(holdout_share=0.0)
    pks = np.array([pk for pk, in Item.objects.filter(study=targeted, is_quality_check=False)
                    .order_by("pk").values_list("pk")])
    held = holdout_mask(pks, targeted.seed, 0.5)
    items = [it for it, h in zip(_items(targeted), held, strict=True) if h]
    assert final["items_used"] == held.sum() and search["items_used"] == (~held).sum()
    cell = final["estimates"]["design"]
    assert final["score_method"] == "design" and final["score"] == cell["accuracy"]
    assert cell["items"] == final["items_used"]
    assert abs(cell["accuracy"] - _truth(items, strong)) < 3.5 * cell["se"]


def test_a_uniform_study_is_scored_as_before():
    study = make_study(k=4, n_items=120, systems={"cand": 0.7}, seed=42)
    study_simulate(study=study)
    EvaluationSettings.objects.update_or_create(study=study, defaults={"holdout_share": 0.0})
    _, raw = token_create(study=study, name="loop", ladder=False, min_batch=1)
    body = _post(study, raw, "cand", _system(study, "cand"))
    assert "score_method" not in body and "design" not in body["estimates"]
    assert body["score"] == body["estimates"]["ml"]["accuracy"]
    assert body["estimates"]["n_o"] + body["estimates"]["n_c"] == 120
