"""Recompute: SQL counts equal a row-by-row recount; simulated truth is recovered."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from annotations.models import EstimateSnapshot, Item, Query
from annotations.services.estimates import study_recompute
from annotations.services.simulation import study_simulate
from assistants.models import AISystem, Prediction
from tests.factories import make_study

pytestmark = pytest.mark.django_db

TRUE = {"strong": 0.85, "middle": 0.6, "weak": 0.3}


@pytest.fixture(scope="module")
def simulated(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        study = make_study(k=5, n_items=2500, systems=TRUE, seed=41, strata=2)
        study_simulate(study=study)
        yield study
        study.delete()


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
    from assistants.services import system_create

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
    from assistants.services import system_create

    first = study_recompute(study_id=simulated.pk).payload["systems"]
    again = study_recompute(study_id=simulated.pk).payload["systems"]
    assert [s["estimates"] for s in first] == [s["estimates"] for s in again]
    strong = AISystem.objects.get(study=simulated, name="strong")
    twin = system_create(study=simulated, name="strong, re-imported")
    Prediction.objects.bulk_create([
        Prediction(system=twin, item_id=p.item_id, raw=p.raw, option=p.option,
                   position=p.position)
        for p in Prediction.objects.filter(system=strong)])
    from assistants.services import query_masks_refresh

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


def test_k2_study_with_several_systems_recomputes():
    """K = 2: a "no" to class k is an ordinary label of the other class. With two or more
    systems the counts must broadcast to every system (it raised IndexError)."""
    study = make_study(k=2, n_items=60, systems={"a": 0.9, "b": 0.5, "c": 0.7}, seed=45)
    study_simulate(study=study)
    payload = study_recompute(study_id=study.pk).payload
    assert [s["name"] for s in payload["systems"]] == ["a", "b", "c"]
    for row in payload["systems"]:
        # every answered query is an ordinary label of the class it establishes
        yes_no = Query.objects.filter(study=study, answer__in=["yes", "no"]).count()
        assert row["counts"]["n_ord"] == yes_no == 60
        assert row["counts"]["n_comp"] == 0
        assert row["estimates"]["comp"] is None
        truth = row["reference"]["accuracy"]
        assert row["estimates"]["ml"]["accuracy"] == pytest.approx(truth)
        assert row["estimates"]["ord"]["accuracy"] == pytest.approx(truth)
