"""Routing designs (issue 28): targeted draws stored with their probabilities, follow-ups,
design changes (and what they refuse), redraws of never-handed queries, and nothing new for
specialists."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re

import numpy as np
import pytest
from django.urls import reverse
from django.utils import timezone
from scipy import stats

from annotations.core.errors import InvalidStudy
from annotations.core.events import StudyEvent
from annotations.models import Item, Query, RoutingDesign
from annotations.partitioned.services.designs import routing_design_set
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import leases_reclaim, query_lease_next
from assistants.models import Prediction
from tests.factories import make_study, specialist

pytestmark = pytest.mark.django_db

SYSTEMS = {"strong": 0.9, "weak": 0.6}


def _picks(study) -> dict[int, list[int]]:
    """Each item's predicted classes (positions), read straight from the predictions."""
    out: dict[int, list[int]] = {}
    for item_id, position in Prediction.objects.filter(
            system__study=study, position__isnull=False).values_list("item_id", "position"):
        out.setdefault(item_id, []).append(position)
    return out


def _order_probability(order, picks, k, eps) -> float:
    """Brute force: the probability of a full class order under the targeted design — ε ×
    the uniform permutation's 1/K! + (1 − ε) × the targeted component's (successive
    sampling ∝ m over the predicted classes, then the others uniformly)."""
    m = np.bincount(picks, minlength=k).astype(float) if picks else np.zeros(k)
    uniform = 1.0
    for j in range(k):
        uniform /= k - j
    targeted, left = 1.0, m.copy()
    for j, c in enumerate(order):
        targeted *= left[c] / left.sum() if left.sum() > 0 else 1.0 / (k - j)
        left[c] = 0.0
    return eps * uniform + (1 - eps) * targeted


def _step_probability(order, step, picks, k, eps) -> float:
    """π_j(k_j | prefix) by summing full orders (independent of the estimators' formula)."""
    def mass(prefix):
        return sum(_order_probability(o, picks, k, eps)
                   for o in itertools.permutations(range(k)) if list(o[:len(prefix)]) == prefix)
    return mass(list(order[:step + 1])) / mass(list(order[:step]))


def test_a_targeted_design_asks_mostly_the_picked_classes_and_stores_each_probability():
    # given a draft study whose two systems predicted every item, with a targeted design
    study = make_study(k=4, n_items=800, systems=SYSTEMS, open_=False, seed=21)
    routing_design_set(study=study, kind="targeted", epsilon=0.3)
    # when it opens
    from annotations.core.services.studies import study_open
    study_open(study=study)
    # then every first query stores π(k) = ε/K + (1 − ε) m_k / M, the targets and the coin
    picks = _picks(study)
    first = list(Query.objects.filter(study=study, sequence=0, is_quality_check=False))
    assert len(first) == 800
    expected_counts = np.zeros(4)
    for q in first:
        m = np.bincount(picks[q.item_id], minlength=4)
        pi = 0.3 / 4 + 0.7 * m / m.sum()
        assert q.draw_p == pytest.approx(pi[q.k], abs=1e-12)
        assert sorted(map(tuple, q.draw_targets)) == [(c, int(n)) for c, n in enumerate(m) if n]
        assert q.design.kind == "targeted" and q.design.epsilon == 0.3
        expected_counts += pi
    observed = np.bincount([q.k for q in first], minlength=4)
    assert stats.chisquare(observed, expected_counts).pvalue > 1e-3
    # each item's coin chose the uniform component with probability ε
    coins = sum(q.draw_uniform for q in first)
    assert stats.binomtest(coins, 800, 0.3).pvalue > 1e-3
    # and the picked classes are asked far more often than under the uniform design
    asked_picked = np.mean([q.k in picks[q.item_id] for q in first])
    assert asked_picked > 0.75


def test_follow_ups_store_their_conditional_probability_equal_to_brute_force():
    study = make_study(k=4, n_items=60, queries_per_item=3, systems=SYSTEMS, open_=False,
                       seed=22)
    routing_design_set(study=study, kind="targeted", epsilon=0.25)
    from annotations.core.services.studies import study_open
    study_open(study=study)
    picks = _picks(study)
    # answer "no" to every query until none is left: every item gets its three queries
    while True:
        progressed = False
        for c in range(4):
            query = query_lease_next(study=study, user=specialist(study, c))
            if query is not None:
                label_submit(query_id=query.pk, user=specialist(study, c), answer="no",
                             undoable=False)
                progressed = True
        if not progressed:
            break
    checked = 0
    for item in Item.objects.filter(study=study, is_quality_check=False):
        queries = list(item.queries.order_by("sequence"))
        assert [q.k for q in queries] == item.class_order[:3]
        assert len({(q.design_id, q.draw_uniform, json.dumps(q.draw_targets))
                    for q in queries}) == 1
        for q in queries:
            brute = _step_probability(item.class_order, q.sequence, picks[item.pk], 4, 0.25)
            assert q.draw_p == pytest.approx(brute, rel=1e-12)
            checked += 1
    assert checked == 180


def test_bad_designs_are_refused_naming_the_field_and_change_nothing():
    study = make_study(k=3, n_items=10, systems=SYSTEMS, seed=23)
    before = list(Query.objects.filter(study=study).order_by("pk").values_list("pk", "k"))
    cases = [
        ({"kind": "greedy"}, "kind", "unknown routing design"),
        ({"kind": "targeted"}, "epsilon", "needs ε"),
        ({"kind": "targeted", "epsilon": 0.01}, "epsilon", "[0.05, 1]"),
        ({"kind": "targeted", "epsilon": 1.5}, "epsilon", "[0.05, 1]"),
        ({"kind": "targeted", "epsilon": "half"}, "epsilon", "must be a number"),
        ({"kind": "targeted", "epsilon": float("nan")}, "epsilon", "[0.05, 1]"),
        ({"kind": "uniform", "epsilon": 0.2}, "epsilon", "only a targeted design"),
        ({"kind": "uniform"}, "kind", "already routes with this design"),
    ]
    for kwargs, field, words in cases:
        with pytest.raises(InvalidStudy) as refused:
            routing_design_set(study=study, **kwargs)
        assert refused.value.field == field and words in str(refused.value), kwargs
    assert not RoutingDesign.objects.filter(study=study).exists()
    assert list(Query.objects.filter(study=study).order_by("pk").values_list("pk", "k")) == before


def test_a_design_change_while_a_query_is_leased_is_refused_and_the_lease_finishes_under_its_design():
    study = make_study(k=3, n_items=30, systems=SYSTEMS, seed=24)
    held = query_lease_next(study=study, user=specialist(study, 0))
    with pytest.raises(InvalidStudy, match="1 query is being answered right now"):
        routing_design_set(study=study, kind="targeted", epsilon=0.2)
    assert not RoutingDesign.objects.filter(study=study).exists()
    assert not Query.objects.filter(study=study, design__isnull=False).exists()
    # the held query is answered under the design it was drawn with (the uniform default)
    label_submit(query_id=held.pk, user=specialist(study, 0), answer="no", undoable=False)
    held.refresh_from_db()
    assert held.design_id is None and held.draw_p is None
    # then, with nothing leased, the change goes through
    design = routing_design_set(study=study, kind="targeted", epsilon=0.2)
    assert design.number == 1
    event = StudyEvent.objects.get(study=study, kind="design_changed")
    assert event.detail["kind"] == "targeted" and event.detail["redrawn"] == 29


def test_a_design_change_redraws_only_queries_no_one_was_handed():
    study = make_study(k=3, n_items=40, systems=SYSTEMS, seed=25)
    answered = query_lease_next(study=study, user=specialist(study, 0))
    label_submit(query_id=answered.pk, user=specialist(study, 0), answer="yes",
                 undoable=False)
    returned = query_lease_next(study=study, user=specialist(study, 1))
    leases_reclaim(now=timezone.now() + dt.timedelta(days=1), study=study)
    returned.refresh_from_db()
    assert returned.status == Query.Status.PENDING and returned.times_issued == 1
    untouched = {q.pk: q.k for q in Query.objects.filter(pk__in=[answered.pk, returned.pk])}

    routing_design_set(study=study, kind="targeted", epsilon=0.2)

    for q in Query.objects.filter(study=study, is_quality_check=False):
        if q.pk in untouched:
            assert (q.k, q.design_id, q.draw_p) == (untouched[q.pk], None, None)
        else:
            assert q.design.kind == "targeted" and q.draw_p > 0
            assert q.k == q.item.class_order[0]
    # and back to uniform: the never-handed queries are drawn uniformly again
    routing_design_set(study=study, kind="uniform")
    redrawn = Query.objects.filter(study=study, design__number=2)
    assert redrawn.count() == 38
    assert {q.draw_p for q in redrawn} == {1 / 3}


def test_predictions_that_arrive_after_routing_redraw_a_targeted_studys_unhanded_queries():
    study = make_study(k=4, n_items=50, seed=26)  # open, routed uniformly, no predictions
    routing_design_set(study=study, kind="targeted", epsilon=0.2)
    assert all(q.draw_targets == [] for q in Query.objects.filter(study=study))
    from annotations.partitioned.services.predictions import predictions_import
    from tests.factories import jsonl, make_items, predictions_for
    items = make_items(50, 4, seed=26)
    predictions_import(study=study, source=jsonl(predictions_for(items, SYSTEMS, 4)),
                       name="predictions.jsonl", fmt="jsonl")
    picks = _picks(study)
    for q in Query.objects.filter(study=study, is_quality_check=False):
        assert sum(m for _, m in q.draw_targets) == len(picks[q.item_id]) == 2


def test_specialists_see_nothing_new_under_a_targeted_design(client):
    def seen(study):
        user = specialist(study, 1)
        client.force_login(user)
        page = client.get(reverse("label", args=[study.pk]))
        nxt = client.post(reverse("label-next", args=[study.pk]), follow=True)
        api = client.post(f"/api/studies/{study.pk}/queries/next/")
        client.logout()
        return page.content.decode() + nxt.content.decode(), api.json()

    uniform = make_study(k=3, n_items=30, systems=SYSTEMS, seed=27)
    targeted = make_study(k=3, n_items=30, systems=SYSTEMS, seed=27, open_=False)
    routing_design_set(study=targeted, kind="targeted", epsilon=0.2)
    from annotations.core.services.studies import study_open
    study_open(study=targeted)
    html_u, api_u = seen(uniform)
    html_t, api_t = seen(targeted)
    def shape(value):  # the keys at every level, not the values
        if isinstance(value, dict):
            return {key: shape(v) for key, v in value.items()}
        return type(value).__name__

    assert api_t.get("id") and api_u.get("id") and shape(api_t) == shape(api_u)
    # the random values a page carries (CSRF tokens, the query's public id) are not words:
    # a token that happens to hold "draw" says nothing about the design
    random_values = re.findall(r'(?:csrfmiddlewaretoken" value=|"X-CSRFToken": |'
                               r'data-query-id=)"([^"]+)"', html_t) + [str(api_t["id"])]
    for value in random_values:
        html_t = html_t.replace(value, "")
    api_t = {key: v for key, v in api_t.items() if key != "id"}
    for text in (html_t, json.dumps(api_t)):
        for word in ("draw", "design", "epsilon", "ε", "targeted", "probab", "uniform"):
            assert word not in text.lower()


def test_the_researcher_changes_the_design_on_its_admin_page(client):
    from tests.factories import role_user
    study = make_study(k=3, n_items=20, systems=SYSTEMS, seed=28)
    client.force_login(role_user(study, "researcher"))
    url = reverse("admin:annotations_study_routing_design", args=[study.pk])
    page = client.get(url).content.decode()
    assert "Uniform (every class equally often" in page and "(current)" in page
    refused = client.post(url, {"kind": "targeted", "epsilon": "0.001"}).content.decode()
    assert "epsilon: must lie in [0.05, 1]" in refused
    assert not RoutingDesign.objects.filter(study=study).exists()
    done = client.post(url, {"kind": "targeted", "epsilon": "0.2"})
    assert done.status_code == 302
    page = client.get(url).content.decode()
    assert "Targeted (mostly the classes" in page and "0.2" in page
    # a researcher of another study gets nothing
    other = make_study(k=3, n_items=5, seed=29)
    client.force_login(role_user(other, "researcher"))
    assert client.get(url).status_code in (403, 404)


def test_the_label_export_carries_each_querys_design_and_probability():
    import io

    from annotations.partitioned.services.exports import labels_export
    study = make_study(k=4, n_items=40, systems=SYSTEMS, seed=30, queries_per_item=2)
    for c in range(4):  # a few answers under the uniform default
        query = query_lease_next(study=study, user=specialist(study, c))
        if query is not None:
            label_submit(query_id=query.pk, user=specialist(study, c), answer="no",
                         undoable=False)
    routing_design_set(study=study, kind="targeted", epsilon=0.4)
    for c in range(4):
        for _ in range(3):
            query = query_lease_next(study=study, user=specialist(study, c))
            if query is not None:
                label_submit(query_id=query.pk, user=specialist(study, c), answer="no",
                             undoable=False)
    out = io.StringIO()
    labels_export(study=study, out=out, fmt="jsonl")
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    stored = {q.pk: q for q in Query.objects.filter(study=study, status="answered")}
    kinds = set()
    for row in rows:
        q = stored[row["query_id"]]
        kinds.add(row["design_kind"])
        if q.design_id is None:
            assert (row["design"], row["design_kind"], row["draw_uniform"]) == (0, "uniform", True)
            assert row["draw_p"] == pytest.approx(1 / (4 - q.sequence))
        else:
            assert (row["design"], row["design_epsilon"]) == (1, 0.4)
            assert row["draw_p"] == q.draw_p and row["draw_targets"] == q.draw_targets
    assert kinds == {"uniform", "targeted"}


def test_the_api_lists_and_changes_the_design_for_researchers_only(client):
    from tests.factories import role_user
    study = make_study(k=3, n_items=12, systems=SYSTEMS, seed=31)
    url = f"/api/studies/{study.pk}/routing-designs/"
    client.force_login(specialist(study, 0))
    assert client.get(url).status_code == 403
    client.force_login(role_user(study, "researcher"))
    listed = client.get(url).json()
    assert [(d["number"], d["kind"], d["pending"]) for d in listed] == [(0, "uniform", 12)]
    bad = client.post(url, {"kind": "targeted", "epsilon": 2}, content_type="application/json")
    assert bad.status_code == 400 and "epsilon" in json.dumps(bad.json())
    done = client.post(url, {"kind": "targeted", "epsilon": 0.25},
                       content_type="application/json")
    assert done.status_code == 201
    assert [(d["number"], d["kind"], d["epsilon"]) for d in done.json()] == [
        (1, "targeted", 0.25)]  # every query was drawn again: the default drew none left


def test_a_lease_that_ran_out_no_longer_holds_a_design_change_back():
    study = make_study(k=3, n_items=10, systems=SYSTEMS, seed=33)
    held = query_lease_next(study=study, user=specialist(study, 0))
    Query.objects.filter(pk=held.pk).update(
        lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
    routing_design_set(study=study, kind="targeted", epsilon=0.2)
    held.refresh_from_db()
    assert held.design_id is None  # it was handed out: it keeps its class and design
    assert Query.objects.filter(study=study, design__kind="targeted").count() == 9
