"""Per-band partitioned estimates: a simulated study whose AI systems have known accuracies
per confidence band (one calibrated, one whose confidence says nothing), answered by
simulated specialists through the real routing and submit services; the recompute must
recover each band's accuracy and the hybridization curve without reading a gold label,
and its per-band counts must equal a row-by-row recount."""

from __future__ import annotations

import numpy as np
import pytest

from annotations.core.services.studies import study_open
from annotations.models import Query
from annotations.partitioned.selectors import study_label_counts, study_label_counts_banded
from annotations.partitioned.services.banding import band_index
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.predictions import confidence_bands_set, predictions_import
from annotations.partitioned.services.simulation import study_simulate
from assistants.models import AISystem, Prediction
from estimators.partitioned.accuracy import estimate
from tests.factories import built_once, jsonl, make_items, make_study, predictions_for

pytestmark = pytest.mark.django_db

EDGES = [0.5, 0.8]
# planted accuracy per band (≤ 0.5, 0.5–0.8, > 0.8)
CALIBRATED = (0.4, 0.65, 0.9)
FLAT = 0.7
GARBLED = 0.03  # unparseable answers (with a confidence): wrong in every band


def _predictions(items: list[dict], k: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for it in items:
        if it["quality_check"]:
            continue
        band = rng.integers(0, 3)
        conf = rng.uniform(*((0.2, 0.5), (0.5001, 0.8), (0.8001, 1.0))[band])
        for name, acc, c in (("calibrated", CALIBRATED[band], conf),
                             ("flat", FLAT, rng.uniform(0, 1))):
            row = {"item_id": it["id"], "system": name, "confidence": round(float(c), 4)}
            if rng.random() < GARBLED:
                row["prediction"] = "garbled"
            elif rng.random() < acc:
                row["prediction_index"] = it["gold_index"]
            else:
                wrong = [j for j in range(k) if j != it["gold_index"]]
                row["prediction_index"] = int(rng.choice(wrong))
            rows.append(row)
    return rows


def _build(queries_per_item: int, n_items: int, seed: int):
    study = make_study(k=4, n_items=0, queries_per_item=queries_per_item, seed=seed,
                       open_=False)
    items = make_items(n_items, 4, seed=seed)
    items_import(study=study, source=jsonl(items), name="items.jsonl", fmt="jsonl")
    confidence_bands_set(study=study, scheme="fixed", edges=EDGES)
    predictions_import(study=study, source=jsonl(_predictions(items, 4, seed + 1)),
                       name="p.jsonl", fmt="jsonl")
    study_open(study=study)
    study_simulate(study=study, recompute_every=0)  # the tests read one recompute at the end
    return study


DESIGNS = {"single": (1, 2400, 51), "clustered": (2, 1500, 61)}


@pytest.fixture(scope="module", params=list(DESIGNS))
def built(request, django_db_setup, django_db_blocker):
    """The simulated study (one, or two queries per item) and its recompute."""
    with built_once(django_db_blocker, lambda: _build(*DESIGNS[request.param])) as study:
        yield study, study_recompute(study_id=study.pk)


def _truth(study, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(band 1..3, correct 0/1) per non-check item with a prediction (the realised truth)."""
    system = AISystem.objects.get(study=study, name=name)
    rows = (Prediction.objects.filter(system=system, item__is_quality_check=False)
            .values_list("confidence", "option", "item__gold_option"))
    band = np.array([band_index(c, system.band_edges) for c, _, _ in rows])
    correct = np.array([o is not None and o == g for _, o, g in rows], float)
    return band, correct


def _row(snapshot, name: str) -> dict:
    return next(s for s in snapshot.payload["systems"] if s["name"] == name)


@pytest.mark.parametrize("name", ["calibrated", "flat"])
def test_each_bands_accuracy_is_recovered_within_its_interval(built, name):
    study, snapshot = built
    bands = _row(snapshot, name)["bands"]
    band, correct = _truth(study, name)
    assert bands["edges"] == EDGES
    assert [r["label"] for r in bands["rows"]] == ["≤ 0.50", "0.50–0.80", "> 0.80"]
    for r in bands["rows"]:
        in_band = band == r["band"]
        realised = correct[in_band].mean()
        planted = CALIBRATED[r["band"] - 1] if name == "calibrated" else FLAT
        assert abs(realised - planted * (1 - GARBLED)) < 0.06
        assert r["n_items"] == in_band.sum()
        ml = r["estimates"]["ml"]
        assert ml["ci_low"] <= realised <= ml["ci_high"], (r["label"], realised, ml)
        assert ml["ci_high"] - ml["ci_low"] < 0.2


def test_the_curve_is_the_ai_accuracy_on_the_items_it_keeps(built):
    study, snapshot = built
    curve = _row(snapshot, "calibrated")["bands"]["curve"]
    band, correct = _truth(study, "calibrated")
    assert [p["threshold"] for p in curve] == [None, *EDGES]
    previous = -1.0
    for cut, point in enumerate(curve):
        kept = band > cut
        assert point["human_share"] == pytest.approx(1 - kept.mean())
        assert point["n_items_ai"] == kept.sum()
        ml = point["estimates"]["ml"]
        assert ml["ci_low"] <= correct[kept].mean() <= ml["ci_high"]
        assert ml["accuracy"] > previous  # a calibrated system keeps its best items
        previous = ml["accuracy"]
    # the all-AI end is the system's accuracy on every item with a confidence
    assert curve[0]["counts"] == pytest.approx(_row(snapshot, "calibrated")["counts"])


def _recount_by_band(study, name: str) -> dict[int, tuple[float, float, float, float]]:
    """METHODS.md M1's sufficient statistics per band, row by row."""
    system = AISystem.objects.get(study=study, name=name)
    preds = {p.item_id: p for p in Prediction.objects.filter(system=system)}
    out: dict[int, list[float]] = {}
    for q in Query.objects.filter(study=study, status="answered", is_quality_check=False):
        p = preds.get(q.item_id)
        b = band_index(p.confidence if p else None, system.band_edges)
        if not b or q.answer == "unsure":
            continue
        tally = out.setdefault(b, [0.0, 0.0, 0.0, 0.0])
        pos = p.position
        if q.answer == "yes":
            tally[0] += 1
            tally[1] += pos == q.k
        else:
            tally[2] += 1
            tally[3] += (4 - 2) / (4 - 1) if pos is None else float(pos != q.k)
    return {b: tuple(v) for b, v in out.items()}


def test_band_counts_equal_a_row_by_row_recount(built):
    study, snapshot = built
    for name in ("calibrated", "flat"):
        expected = _recount_by_band(study, name)
        for r in _row(snapshot, name)["bands"]["rows"]:
            got = tuple(r["counts"][f] for f in ("n_ord", "s_ord", "n_comp", "s_comp"))
            assert got == pytest.approx(expected[r["band"]])


@pytest.mark.parametrize("strategy", ["grouped", "sums", "arrays"])
def test_the_banded_aggregation_counts_what_the_plain_one_counts(built, strategy):
    study, _ = built
    ordinals = sorted(AISystem.objects.filter(study=study).values_list("ordinal", flat=True))
    plain = study_label_counts(study=study, ordinals=ordinals)
    banded, bands = study_label_counts_banded(study=study, ordinals=ordinals,
                                              banded=ordinals, n_bands=3, strategy=strategy)
    for field in ("strata", "k", "answer"):
        assert getattr(banded, field).tolist() == getattr(plain, field).tolist()
    for field in ("n", "match", "present"):
        assert np.array_equal(getattr(banded, field), getattr(plain, field))
    # both strategies give the same band counts; one system alone gives its own column
    _, other = study_label_counts_banded(
        study=study, ordinals=ordinals, banded=ordinals, n_bands=3,
        strategy="sums" if strategy == "grouped" else "grouped")
    _, alone = study_label_counts_banded(study=study, ordinals=ordinals,
                                         banded=ordinals[1:], n_bands=3, strategy=strategy)
    for field in ("n", "match", "present"):
        assert np.array_equal(getattr(bands, field), getattr(other, field))
        assert np.array_equal(getattr(bands, field)[..., 1:], getattr(alone, field))


def test_several_queries_per_item_cluster_the_band_variance_by_item(built):
    # with two queries per item a band's labels share their item's AI answer: the band
    # intervals carry the item-clustered variance (a design effect ≠ 1); with one, none
    study, snapshot = built

    row = _row(snapshot, "calibrated")
    for r in row["bands"]["rows"]:
        c = r["counts"]
        naive = estimate(c["n_ord"], c["s_ord"], c["n_comp"], c["s_comp"], 4, method="ml",
                         interval=study.interval_method)
        ml = r["estimates"]["ml"]
        assert ml["accuracy"] == pytest.approx(float(naive.accuracy))
        if study.queries_per_item > 1:
            assert ml["se"] != pytest.approx(float(naive.se), rel=1e-3)
        else:
            assert ml["se"] == pytest.approx(float(naive.se))


def _mixed_study():
    """Strata whose order differs by code point and by a linguistic collation (and the
    empty one), quality checks, 'unsure' answers, ten systems (ordinals past one byte) and
    random band bits on every answered query: band indices 0..7, some rows NULL."""
    study = make_study(k=4, n_items=0, open_=False, seed=97)
    items = make_items(360, 4, seed=97, checks=6)
    for i, item in enumerate(items):
        item["stratum"] = ("a", "B", "c", "")[i % 4]
    items_import(study=study, source=jsonl(items), name="items.jsonl", fmt="jsonl")
    accuracies = {f"sys{j}": 0.3 + 0.06 * j for j in range(10)}
    predictions_import(study=study, source=jsonl(predictions_for(items, accuracies, 4,
                                                                 missing=0.05)),
                       name="p.jsonl", fmt="jsonl")
    study_open(study=study)
    study_simulate(study=study, unsure_rate=0.1, error_rate=0.1)
    rng = np.random.default_rng(98)
    queries = list(Query.objects.filter(study=study, status="answered"))
    for q in queries:
        planes = rng.integers(0, 1 << 10, size=3)
        q.band_bit0, q.band_bit1, q.band_bit2 = (
            (None, None, None) if rng.random() < 0.05 else (int(p) for p in planes))
    Query.objects.bulk_update(queries, ["band_bit0", "band_bit1", "band_bit2"])
    return study


def _assert_same(left, right):
    for a, b in zip(left, right, strict=True):
        for field in vars(a):
            assert getattr(a, field).tolist() == getattr(b, field).tolist(), field


def test_the_three_banded_strategies_give_the_same_numbers():
    study = _mixed_study()
    ordinals = sorted(AISystem.objects.filter(study=study).values_list("ordinal", flat=True))
    assert ordinals[-1] >= 8
    plain = study_label_counts(study=study, ordinals=ordinals)
    assert len(set(plain.strata.tolist())) == 4 and "unsure" in plain.answer.tolist()
    for banded, n_bands in ((ordinals, 3), ([1, 3, 8, 9], 7), ([9], 2), ([], 3)):
        sums = study_label_counts_banded(study=study, ordinals=ordinals, banded=banded,
                                         n_bands=n_bands, strategy="sums")
        arrays = study_label_counts_banded(study=study, ordinals=ordinals, banded=banded,
                                           n_bands=n_bands, strategy="arrays")
        _assert_same(sums, arrays)
        for field in ("strata", "k", "answer", "n", "match", "present"):
            assert getattr(arrays[0], field).tolist() == getattr(plain, field).tolist()
        if len(banded) <= 2:
            _assert_same(sums, study_label_counts_banded(
                study=study, ordinals=ordinals, banded=banded, n_bands=n_bands,
                strategy="grouped"))
    # a query whose stratum its items no longer have (the hint misses): still counted
    Query.objects.filter(pk=Query.objects.filter(study=study, status="answered")
                         .order_by("pk").values("pk")[:1]).update(stratum="Ä new")
    _assert_same(study_label_counts_banded(study=study, ordinals=ordinals, banded=ordinals,
                                           n_bands=3, strategy="sums"),
                 study_label_counts_banded(study=study, ordinals=ordinals, banded=ordinals,
                                           n_bands=3, strategy="arrays"))
