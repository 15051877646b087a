"""Recompute: SQL counts equal a row-by-row recount; simulated truth is recovered."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from annotations.models import EstimateSnapshot, Item, Query
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.simulation import study_simulate
from assistants.models import AISystem, Prediction
from tests.factories import built_once, make_study

pytestmark = pytest.mark.django_db

TRUE = {"strong": 0.85, "middle": 0.6, "weak": 0.3}


def _simulated():
    study = make_study(k=5, n_items=2500, systems=TRUE, seed=41, strata=2)
    study_simulate(study=study, recompute_every=0)  # the tests recompute themselves
    return study


@pytest.fixture(scope="module")
def simulated(django_db_setup, django_db_blocker):
    with built_once(django_db_blocker, _simulated) as study:
        yield study


def _recount(study, system):
    """Row-by-row definition of METHODS.md M1's sufficient statistics."""
    k = study.classes.count()
    preds = dict(Prediction.objects.filter(system=system).values_list("item_id", "position"))
    n_o = s_o = n_c = s_c = 0.0
    for q in Query.objects.filter(study=study, status="answered", is_quality_check=False):
        pos = preds.get(q.item_id)
        if q.answer == "yes":
            n_o += 1
            s_o += pos == q.k
        elif q.answer == "no":
            n_c += 1
            s_c += (k - 2) / (k - 1) if pos is None else float(pos != q.k)
    return n_o, s_o, n_c, s_c


def test_sql_counts_equal_a_row_by_row_recount(simulated):
    snapshot = study_recompute(study_id=simulated.pk)
    for row in snapshot.payload["systems"]:
        system = AISystem.objects.get(pk=row["id"])
        expected = _recount(simulated, system)
        got = tuple(row["counts"][f] for f in ("n_ord", "s_ord", "n_comp", "s_comp"))
        assert got == pytest.approx(expected)


def test_complementary_labels_are_uniform_over_the_wrong_classes(simulated):
    k = 5
    offsets = []
    for q in Query.objects.filter(study=simulated, answer="no").select_related("item"):
        gold = q.item.position_of(q.item.gold_option)
        offsets.append((q.k - gold) % k)
    counts = np.bincount(offsets, minlength=k)
    assert counts[0] == 0  # perfect specialists never say "no" to the truth
    assert stats.chisquare(counts[1:]).pvalue > 0.001


def test_estimates_recover_the_true_accuracy_within_their_intervals(simulated):
    snapshot = EstimateSnapshot.objects.filter(study=simulated).latest()
    for row in snapshot.payload["systems"]:
        truth = row["reference"]["accuracy"]  # realised accuracy on all items
        assert abs(truth - TRUE[row["name"]]) < 0.05
        for method in ("ml", "ivw", "ord"):
            est = row["estimates"][method]
            assert abs(est["accuracy"] - truth) <= 3.3 * est["se"], (row["name"], method)
        ml = row["estimates"]["ml"]
        assert ml["ci_low"] <= truth <= ml["ci_high"]
        assert ml["ci_high"] - ml["ci_low"] < 0.1
        assert row["strata"].keys() == {"s0", "s1"}


def test_missing_predictions_add_nothing_to_the_complementary_estimate(simulated):
    # a system that never answers: its complementary score is (K−2)/(K−1) per label,
    # so Â_comp = (K−1)·(K−2)/(K−1) − (K−2) = 0 exactly
    from annotations.partitioned.services.predictions import system_create

    system_create(study=simulated, name="silent")
    snapshot = study_recompute(study_id=simulated.pk)
    silent = next(r for r in snapshot.payload["systems"] if r["name"] == "silent")
    assert silent["estimates"]["comp"]["accuracy"] == pytest.approx(0.0, abs=1e-12)
    assert silent["estimates"]["ord"]["accuracy"] == 0.0
    assert Item.objects.filter(study=simulated).count() == 2500
    AISystem.objects.filter(study=simulated, name="silent").delete()


def test_intervals_depend_only_on_the_counts_not_on_a_coin_or_a_name(simulated):
    """Recomputing reproduces every interval; a system re-imported under another name with
    the same predictions gets exactly the same intervals (no per-system tie-break left)."""
    from annotations.partitioned.services.predictions import system_create

    first = study_recompute(study_id=simulated.pk).payload["systems"]
    again = study_recompute(study_id=simulated.pk).payload["systems"]
    assert [s["estimates"] for s in first] == [s["estimates"] for s in again]
    strong = AISystem.objects.get(study=simulated, name="strong")
    twin = system_create(study=simulated, name="strong, re-imported")
    Prediction.objects.bulk_create([
        Prediction(system=twin, item_id=p.item_id, raw=p.raw, option=p.option,
                   position=p.position)
        for p in Prediction.objects.filter(system=strong)])
    from annotations.partitioned.services.predictions import query_masks_refresh

    query_masks_refresh(study=simulated)
    rows = {s["name"]: s for s in study_recompute(study_id=simulated.pk).payload["systems"]}
    assert rows["strong"]["counts"] == rows["strong, re-imported"]["counts"]
    assert rows["strong"]["estimates"] == rows["strong, re-imported"]["estimates"]
    assert rows["strong"]["strata"] == rows["strong, re-imported"]["strata"]
    twin.delete()


def test_a_conservative_study_gets_the_wider_non_randomised_intervals():
    """Few labels → exact intervals. The conservative study's interval contains the
    default (mid-p) one for every system and method, and is wider somewhere."""
    from annotations.models import Study

    study = make_study(k=5, n_items=120, systems={"a": 0.95, "b": 0.6}, seed=43)
    study_simulate(study=study)
    randomised = study_recompute(study_id=study.pk).payload
    Study.objects.filter(pk=study.pk).update(interval_method="conservative")
    conservative = study_recompute(study_id=study.pk).payload
    assert (randomised["interval_method"], conservative["interval_method"]) == (
        "auto", "conservative")
    wider = 0
    for r, c in zip(randomised["systems"], conservative["systems"], strict=True):
        for method, est in r["estimates"].items():
            other = c["estimates"][method]
            assert other["ci_low"] <= est["ci_low"] + 1e-12
            assert other["ci_high"] >= est["ci_high"] - 1e-12
            wider += (other["ci_high"] - other["ci_low"]) > (est["ci_high"] - est["ci_low"]) + 1e-6
    assert wider > 0


@pytest.mark.parametrize("queries", [1, 2])
def test_k2_study_with_several_systems_recomputes(queries):
    """K = 2: a "no" to class k is an ordinary label of the other class. With two or more
    systems the counts must broadcast to every system (it raised IndexError); with two
    queries per item too (through the item-clustered path)."""
    study = make_study(k=2, n_items=60, systems={"a": 0.9, "b": 0.5, "c": 0.7}, seed=45,
                       queries_per_item=queries)
    study_simulate(study=study)
    payload = study_recompute(study_id=study.pk).payload
    assert [s["name"] for s in payload["systems"]] == ["a", "b", "c"]
    yes_no = Query.objects.filter(study=study, answer__in=["yes", "no"]).count()
    for row in payload["systems"]:
        # every answered query is an ordinary label of the class it establishes
        assert row["counts"]["n_ord"] == yes_no
        assert row["counts"]["n_comp"] == 0
        assert row["estimates"]["comp"] is None and row["labels_needed"] is None
        truth = row["reference"]["accuracy"]
        if queries == 1:
            assert yes_no == 60
            assert row["estimates"]["ml"]["accuracy"] == pytest.approx(truth)
            assert row["estimates"]["ord"]["accuracy"] == pytest.approx(truth)
        else:
            assert row["design_effect"] is not None
            ml = row["estimates"]["ml"]
            assert ml["ci_low"] <= truth <= ml["ci_high"]


def _answer_all(study, answer_for):
    """Lease and answer every pending query through the real services; ``answer_for(query)``
    gives the specialist's answer."""
    from annotations.models import StudyMembership
    from annotations.partitioned.services.labels import label_submit, recompute_deferred
    from annotations.partitioned.services.routing import query_lease_next

    specialists = [m.user for m in StudyMembership.objects.filter(
        study=study, role="specialist").select_related("user")]
    with recompute_deferred():
        progressed = True
        while progressed:
            progressed = False
            for user in specialists:
                query = query_lease_next(study=study, user=user)
                if query is not None:
                    label_submit(query_id=query.pk, user=user, answer=answer_for(query))
                    progressed = True


@pytest.mark.parametrize("queries", [1, 2])
def test_no_figure_is_invented_where_there_is_no_data(queries):
    """Before any answer: every method of every system (overall and per stratum) is null,
    as are IPW, stratified, labels needed and the plan. With only "yes" answers: the
    ordinary and ML estimates exist, the complementary one is null."""
    study = make_study(k=4, n_items=40, systems={"a": 0.8, "b": 0.5}, seed=46,
                       queries_per_item=queries)
    empty = study_recompute(study_id=study.pk).payload
    for row in empty["systems"]:
        assert set(row["estimates"]) == {"ord", "comp", "ivw", "ivw_pilot", "ivw_fixed", "ml"}
        assert all(v is None for v in row["estimates"].values())
        assert (row["labels_needed"], row["ipw"], row["stratified"]) == (None, None, None)
    assert empty["plan"] is None
    assert empty["yes_share"]["share"] is None and empty["yes_share"]["flag"] is False

    def yes_only(query):  # "yes" where the class is the truth, else "not sure"
        truth = query.item.position_of(query.item.gold_option)
        return "yes" if query.k == truth else "unsure"

    _answer_all(study, yes_only)
    payload = study_recompute(study_id=study.pk).payload
    for row in payload["systems"]:
        assert row["counts"]["n_comp"] == 0 and row["counts"]["n_ord"] > 0
        assert row["estimates"]["comp"] is None
        for method in ("ord", "ml", "ivw"):
            assert row["estimates"][method]["accuracy"] == pytest.approx(
                row["counts"]["s_ord"] / row["counts"]["n_ord"])
        assert row["labels_needed"] is not None  # from the system's own estimate
        for cell in row["strata"].values():
            assert cell["estimates"]["comp"] is None
    assert payload["plan"] is not None


def test_yes_share_is_reported_and_flags_truth_dependent_abstention():
    """Every "yes" turned into "not sure": the yes share of answered first queries is 0
    against 1/K, flagged overall and named in the assumptions; the counts in the payload
    are the class counts of answered queries."""
    study = make_study(k=3, n_items=150, systems={"a": 0.8}, seed=47)

    def never_yes(query):
        truth = query.item.position_of(query.item.gold_option)
        return "unsure" if query.k == truth else "no"

    _answer_all(study, never_yes)
    payload = study_recompute(study_id=study.pk).payload
    share = payload["yes_share"]
    assert share["expected"] == pytest.approx(1 / 3)
    assert share["yes"] == 0 and share["answered"] == sum(c["no"] for c in payload["classes"])
    assert share["share"] == 0.0 and share["flag"] is True and share["p_value"] < 1e-6
    assert [c["answered"] for c in share["classes"]] == [c["no"] for c in payload["classes"]]
    codes = [a["code"] for a in payload["assumptions"]]
    assert "yes_share_departs" in codes


def test_uniform_answers_raise_no_yes_share_flag(simulated):
    payload = EstimateSnapshot.objects.filter(study=simulated).latest().payload
    share = payload["yes_share"]
    assert share["answered"] == sum(c["yes"] + c["no"] for c in payload["classes"])
    assert share["share"] == pytest.approx(share["yes"] / share["answered"])
    assert not share["flag"] and not any(c["flag"] for c in share["classes"])
    assert "yes_share_departs" not in [a["code"] for a in payload["assumptions"]]


def test_several_queries_per_item_cluster_every_estimator_by_item():
    """queries_per_item = 3: the payload's design effect equals the sandwich computed here
    from the stored queries item by item; every estimator's SE is at least as large as
    with the labels taken as independent, the ML one by √d; IPW with equal completion
    equals ML; the point estimates are unchanged."""
    from estimators.partitioned.accuracy import estimate
    from estimators.partitioned.clustered import (
        Clusters,
        ml_design_effect,
        small_sample_factor,
    )
    from estimators.partitioned.planning import complementary_labels_for_width, plan_labels

    study = make_study(k=4, n_items=400, queries_per_item=3, systems={"a": 0.85, "b": 0.5},
                       seed=48, strata=2)
    study_simulate(study=study)
    payload = study_recompute(study_id=study.pk).payload
    items = list(Item.objects.filter(study=study, is_quality_check=False).order_by("pk"))
    index = {item.pk: i for i, item in enumerate(items)}
    for row in payload["systems"]:
        system = AISystem.objects.get(pk=row["id"])
        preds = dict(Prediction.objects.filter(system=system).values_list("item_id",
                                                                          "position"))
        sums = np.zeros((len(items), 4))
        for q in Query.objects.filter(study=study, status="answered",
                                      is_quality_check=False):
            pos = preds.get(q.item_id)
            i = index[q.item_id]
            if q.answer == "yes":
                sums[i, 0] += 1
                sums[i, 1] += pos == q.k
            elif q.answer == "no":
                sums[i, 2] += 1
                sums[i, 3] += (4 - 2) / 3 if pos is None else float(pos != q.k)
        c = Clusters(*(sums[:, [j]] for j in range(4)))
        totals = [float(t[0]) for t in c.totals()]
        ml = row["estimates"]["ml"]
        want = ml_design_effect(c, 4, ml["accuracy"])[0]
        assert row["design_effect"] == pytest.approx(want, rel=1e-9)
        assert want > 1.05
        plain = {m: estimate(*totals, 4, m) for m in ("ord", "comp", "ivw", "ml")}
        # the intervals take it with the small-sample factor of the items with labels
        factor = small_sample_factor(((c.n_ord + c.n_comp) > 0).sum())
        assert ml["se"] == pytest.approx(float(plain["ml"].se) * np.sqrt(want * factor),
                                         rel=1e-9)
        for method, est in plain.items():
            assert row["estimates"][method]["accuracy"] == pytest.approx(float(est.accuracy))
        assert row["estimates"]["ivw"]["se"] > float(plain["ivw"].se)
        assert row["ipw"]["se"] == pytest.approx(ml["se"], rel=1e-6)
        assert row["stratified"]["se"] > 0
        # labels to target in effective counts: the collected labels and each further
        # "no" (with the "yes" answers of its items at the collected ratio) count 1/d
        n_o, _, n_c, _ = totals
        effective = complementary_labels_for_width(
            study.target_ci_width, min(max(ml["accuracy"], 0.05), 0.99), 4, n_ord=n_o,
            n_comp=n_c, design_effect=want, ordinary_per_complementary=n_o / n_c)
        raw = complementary_labels_for_width(study.target_ci_width,
                                             min(max(ml["accuracy"], 0.05), 0.99), 4,
                                             n_ord=n_o, n_comp=n_c)
        assert row["labels_needed"] == pytest.approx(effective) and effective != raw
    plan = payload["plan"]
    expected = plan_labels(study.target_ci_width, plan["pilot_accuracy"], 4,
                           queries_per_item=3)
    assert plan["items"] == expected.items and plan["design_effect"] > 1.05
    assert plan["routed_queries"] == expected.routed_queries


def test_item_labels_are_every_answered_label_with_its_item_stratum_and_bits():
    """study_item_labels (binary COPY on PostgreSQL, fetched rows elsewhere) against the
    stored queries read one by one: 'yes'/'no' answers only, quality checks excluded, each
    label's item, stratum, class, answer, mask and band bits."""
    from annotations.partitioned.selectors import study_item_labels

    study = make_study(k=4, n_items=120, queries_per_item=3, checks=4,
                       systems={"a": 0.8, "b": 0.5, "c": 0.4}, seed=53, strata=3)
    study_simulate(study=study)
    rng = np.random.default_rng(53)
    answered = list(Query.objects.filter(study=study, status="answered").order_by("pk"))
    for q in answered[::3]:
        Query.objects.filter(pk=q.pk).update(
            band_bit0=int(rng.integers(8)), band_bit1=int(rng.integers(8)), band_bit2=None)
    # rows the reader must leave out: an abstention, an answered check
    Query.objects.filter(pk=answered[1].pk).update(answer="unsure")
    Query.objects.filter(pk=answered[2].pk).update(is_quality_check=True)
    ordinals = sorted(AISystem.objects.filter(study=study).values_list("ordinal", flat=True))
    labels = study_item_labels(study=study, ordinals=ordinals, bands=True)

    expected = []
    queries = Query.objects.filter(study=study, status="answered").select_related("item")
    for q in queries:
        if q.is_quality_check or q.answer not in ("yes", "no"):
            continue
        bands = [sum(((getattr(q, f"band_bit{p}") or 0) >> o & 1) << p for p in range(3))
                 for o in ordinals]
        expected.append((q.item.external_id, q.item.stratum, q.k, q.answer == "yes",
                         *[q.match_mask >> o & 1 for o in ordinals],
                         *[q.present_mask >> o & 1 for o in ordinals], *bands))
    external = dict(Item.objects.filter(study=study).values_list("pk", "external_id"))
    item_ids = sorted(Query.objects.filter(study=study, status="answered",
                                           is_quality_check=False,
                                           answer__in=["yes", "no"])
                      .values_list("item_id", flat=True).distinct())
    assert labels.n_items == len(item_ids) and len(labels.yes) == len(expected)
    got = [(external[item_ids[i]], labels.item_strata[i], int(labels.k[n]), bool(labels.yes[n]),
            *labels.match[n].tolist(), *labels.present[n].tolist(), *labels.band[n].tolist())
           for n, i in enumerate(labels.item)]
    assert sorted(got) == sorted(expected)
    assert len(set(labels.item_strata)) == 3


def _recount_by_class(study, system, k: int) -> np.ndarray:
    """Row by row, per class asked: (n_o, S_o, n_c, S_c, complementary labels without a
    prediction) of one system — METHODS.md M1's sufficient statistics, by class."""
    preds = dict(Prediction.objects.filter(system=system).values_list("item_id", "position"))
    out = np.zeros((k, 5))
    for q in Query.objects.filter(study=study, status="answered", is_quality_check=False):
        pos = preds.get(q.item_id)
        if q.answer == "yes":
            out[q.k, 0] += 1
            out[q.k, 1] += pos == q.k
        elif q.answer == "no":
            out[q.k, 2] += 1
            out[q.k, 3] += (k - 2) / (k - 1) if pos is None else float(pos != q.k)
            out[q.k, 4] += pos is None
    return out


def test_one_query_ipw_weighs_the_classes_that_complete_less():
    """Class 0's specialists fell behind (half its answered queries back to pending): the
    IPW column is the ML estimate of the labels weighted by r̄/r_k, with the effective
    counts of estimators.partitioned.adjust.ipw_effective_counts — from a row-by-row
    recount per class."""
    from estimators.partitioned.accuracy import estimate
    from estimators.partitioned.adjust import ipw_class_weights, ipw_effective_counts

    k = 4
    study = make_study(k=k, n_items=400, systems={"a": 0.8, "b": 0.5}, seed=48)
    study_simulate(study=study)
    slow = list(Query.objects.filter(study=study, k=0, status="answered",
                                     is_quality_check=False).values_list("pk", flat=True))
    Query.objects.filter(pk__in=slow[::2]).update(status="pending", answer="",
                                                  answered_at=None)
    payload = study_recompute(study_id=study.pk).payload
    assert payload["completion_imbalance"]["warning"] is True
    routed = np.array([Query.objects.filter(study=study, k=c, is_quality_check=False)
                       .count() for c in range(k)], float)
    answered = np.array([Query.objects.filter(study=study, k=c, status="answered",
                                              is_quality_check=False).count()
                         for c in range(k)], float)
    w = ipw_class_weights(answered, routed)
    assert w[0] > 1.5 > w[1]
    for row in payload["systems"]:
        by_class = _recount_by_class(study, AISystem.objects.get(pk=row["id"]), k)
        n_o, s_o, n_c, s_c, missing = by_class.T
        want = estimate(*ipw_effective_counts(n_o, s_o, n_c, s_c, w, k,
                                              n_comp_missing=missing), k, "ml")
        for field in ("accuracy", "se", "ci_low", "ci_high"):
            assert row["ipw"][field] == pytest.approx(float(getattr(want, field)), rel=1e-9)
        assert row["ipw"]["accuracy"] != pytest.approx(row["estimates"]["ml"]["accuracy"])


def test_one_query_stratified_interval_combines_the_strata_intervals(simulated):
    """Σ W_h Â_h ∓ √Σ W_h² (Â_h − bound_h)², from the per-stratum ML figures the dashboard
    shows and the strata's population shares."""
    payload = study_recompute(study_id=simulated.pk).payload
    for row in payload["systems"]:
        strat = row["stratified"]
        weights = strat["weights"]
        assert set(weights) == {"s0", "s1"}
        acc = {h: row["strata"][h]["accuracy"] for h in weights}
        centre = sum(weights[h] * acc[h] for h in weights)
        low = centre - np.sqrt(sum((weights[h] * (acc[h] - row["strata"][h]["ci_low"])) ** 2
                                   for h in weights))
        high = centre + np.sqrt(sum((weights[h] * (row["strata"][h]["ci_high"] - acc[h]))
                                    ** 2 for h in weights))
        assert strat["accuracy"] == pytest.approx(centre, rel=1e-12)
        assert (strat["ci_low"], strat["ci_high"]) == pytest.approx((low, high), rel=1e-12)
