"""Uniform studies' estimates are bit-identical to those of the platform before routing
designs existed (issue 28): the snapshot payloads of seeded simulated studies, written by
the code of commit 2f8834f on SQLite and on PostgreSQL (``OVERSIGHT_GOLDEN_WRITE=1`` writes
them again, on that code) — with the one change to its numerics made since, which makes an
interval's ends the same bits whatever other cells share its batch (``exact._series_table``
summed by einsum, ``binom_ge_rows`` choosing its way per row; issue 30's session: 56 ends
moved by at most 1.1e-16),
are compared exactly — every float to the last bit — with today's. Exact floats hold on
one floating-point environment: the references were written, and the suite runs, with
OpenBLAS's Haswell kernels and numpy's dispatch up to AVX2 (``dev.py``'s PINNED_FLOATS; on
an AVX-512 machine the unpinned interval ends move in the last bit, old code and new
alike)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from django.db import connection

from annotations.core.services.studies import study_create, study_open
from annotations.partitioned.services.demo import demo_items
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.predictions import predictions_import
from annotations.partitioned.services.simulation import study_simulate

GOLDEN = Path(__file__).parent / "data" / "uniform_payloads.json"
CASES = {
    # one query per item, quality checks, strata, confidences (bands), unsure answers
    "one_query": {"queries_per_item": 1, "gold_rate": 0.05, "n_items": 250, "answers": 200,
                  "unsure_rate": 0.05},
    # several queries per item: the item-clustered variances
    "three_queries": {"queries_per_item": 3, "gold_rate": 0.0, "n_items": 150,
                      "answers": 250, "unsure_rate": 0.02},
}


def _floats_pinned() -> None:
    """Fail, saying how to fix it, unless numpy and OpenBLAS run as dev.py test pins them."""
    import platform

    from numpy._core._multiarray_umath import __cpu_features__
    from threadpoolctl import threadpool_info

    if platform.machine() not in ("x86_64", "AMD64"):
        return
    blas = {i.get("architecture") for i in threadpool_info() if i.get("user_api") == "blas"}
    assert not __cpu_features__.get("X86_V4") and blas <= {"Haswell"}, (
        "run the suite with `python3.11 dev.py test`, or set OPENBLAS_CORETYPE=Haswell and "
        "NPY_DISABLE_CPU_FEATURES='X86_V4 AVX512_ICL AVX512_SPR' (dev.py's PINNED_FLOATS): "
        f"numpy's X86_V4 (AVX-512) dispatch: {__cpu_features__.get('X86_V4')}, "
        f"OpenBLAS kernels: {blas}")


def _fresh_database() -> None:
    """An empty database with primary keys from 1, as in the fresh database the references
    were written in: the routing's draws read item ids (quality checks' order, follow-ups'
    queue ranks) and the lease order reads user ids. Other tests of the process leave rows
    (module fixtures build studies outside the per-test transaction) and advance the
    sequences (PostgreSQL's are not rolled back; SQLite's after a transactional test's
    flush). The rows are deleted inside this test's transaction, so they are back after
    it (foreign keys are checked at commit, which never comes)."""
    from django.apps import apps

    with connection.cursor() as cursor:
        for model in apps.get_models(include_auto_created=True):
            if not model._meta.managed or model._meta.proxy:
                continue
            table = model._meta.db_table
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_get_serial_sequence(%s, %s)",
                               [table, model._meta.pk.column])
                sequence = cursor.fetchone()[0]
                if sequence:
                    cursor.execute("SELECT setval(%s, 1, false)", [sequence])
            else:
                cursor.execute("DELETE FROM sqlite_sequence WHERE name = %s", [table])


def _payload(name: str, case: dict) -> dict:
    _fresh_database()
    study = study_create(name=f"golden {name}", classes=["A", "B", "C", "D", "E"],
                         queries_per_item=case["queries_per_item"], gold_rate=case["gold_rate"],
                         seed=20261129)
    items, predictions = demo_items(case["n_items"], 10, np.random.default_rng(7))
    items_import(study=study, source=io.StringIO("\n".join(map(json.dumps, items))),
                 name="items.jsonl", fmt="jsonl")
    predictions_import(study=study, name="predictions.jsonl", fmt="jsonl",
                       source=io.StringIO("\n".join(map(json.dumps, predictions))))
    study_open(study=study)
    study_simulate(study=study, answers=case["answers"], unsure_rate=case["unsure_rate"],
                   seed=3, recompute_every=0)
    payload = study.snapshots.order_by("-pk").first().payload
    for system in payload["systems"]:
        system.pop("id")  # database ids differ between runs
    return payload


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_uniform_studys_estimates_are_bit_identical_to_before_designs(name):
    _floats_pinned()
    payload = json.loads(json.dumps(_payload(name, CASES[name])))
    name = f"{connection.vendor}:{name}"  # the lease order, so the answers, differ by vendor
    if os.environ.get("OVERSIGHT_GOLDEN_WRITE"):
        stored = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        stored[name] = payload
        GOLDEN.write_text(json.dumps(stored, indent=1, sort_keys=True))
        pytest.skip("golden payload written")
    expected = json.loads(GOLDEN.read_text())[name]
    assert payload["n_answered"] == expected["n_answered"] > 100
    if CASES[name.split(":")[1]]["queries_per_item"] == 1:
        assert payload == expected
    else:
        differences = _differences(payload, expected)
        assert not [d for d in differences if d[1] > CLUSTERED_RTOL], (len(differences), max(d[1] for d in differences))


# Since the item-clustered variance is computed from the clusters' second moments (issue
# 29: the form maintained statistics can keep, estimators.partitioned.clustered.
# ClusterMoments), its sums of squares are added in another order: the several-queries
# payload is held to this relative difference per float (everything else exactly).
CLUSTERED_RTOL = 1e-12


def _differences(got, want, path=()) -> list[tuple]:
    """(path, relative difference) of every float that differs; other values must be equal
    (an unequal one is reported with difference inf)."""
    if isinstance(want, dict) and isinstance(got, dict) and got.keys() == want.keys():
        return [d for key in want for d in _differences(got[key], want[key], (*path, key))]
    if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True))
                for d in _differences(g, w, (*path, i))]
    if isinstance(want, float) and isinstance(got, float):
        return ([] if got == want else
                [(path, abs(got - want) / max(abs(got), abs(want)), got, want)])
    return [] if got == want else [(path, float("inf"), got, want)]
