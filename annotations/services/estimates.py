"""Recompute a study's estimates: one SQL aggregation → one vectorised estimators call →
one snapshot row. Dashboards and the API only ever read snapshots."""

from __future__ import annotations

import math
import time
from dataclasses import asdict

import numpy as np
from django.db import transaction

from annotations.models import EstimateSnapshot, Query, Study
from annotations.selectors import study_class_progress, study_label_counts
from assistants.models import AISystem
from estimators.partitioned import estimate
from estimators.planning import complementary_labels_for_width

METHODS = ("ord", "comp", "ivw", "ml")
CONFIDENCE = 0.95
# Max/min per-class completion rate above which the dashboard warns (METHODS.md M1).
IMBALANCE_WARNING_RATIO = 1.25
MIN_ROUTED_FOR_IMBALANCE = 20


def _clean(value):
    """JSON-safe scalar: numpy → Python, non-finite → None."""
    if value is None:
        return None
    if isinstance(value, np.generic | np.ndarray):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def system_counts(counts, k: int) -> dict[str, np.ndarray]:
    """Per-system (columns) and per-group sufficient statistics of METHODS.md M1.

    Ordinary ('yes' to class k): z = 1{ŷ = k}. Complementary ('no'): w = 1{ŷ ≠ k}, and a
    missing prediction scores w = (K−2)/(K−1) so it adds exactly 0 to Â_comp. With K = 2 a
    'no' to class k is an ordinary label of the other class and is counted as such."""
    yes = (counts.answer == Query.Answer.YES)[:, None]
    no = (counts.answer == Query.Answer.NO)[:, None]
    n = counts.n[:, None]
    if k == 2:
        n_ord = (yes * n) + (no * n)
        s_ord = yes * counts.match + no * (counts.present - counts.match)
        zeros = np.zeros_like(n_ord)
        return {"n_ord": n_ord, "s_ord": s_ord, "n_comp": zeros, "s_comp": zeros}
    missing_score = (k - 2) / (k - 1)
    n_ord = np.broadcast_to(yes * n, counts.match.shape)
    s_ord = yes * counts.match
    n_comp = np.broadcast_to(no * n, counts.match.shape)
    s_comp = no * ((counts.present - counts.match) + missing_score * (n - counts.present))
    return {"n_ord": n_ord, "s_ord": s_ord, "n_comp": n_comp, "s_comp": s_comp}


def _estimates_for(stats: dict[str, np.ndarray], k: int) -> dict[str, dict[str, list]]:
    out = {}
    for method in METHODS:
        est = estimate(stats["n_ord"], stats["s_ord"], stats["n_comp"], stats["s_comp"], k,
                       method=method, confidence=CONFIDENCE)
        fields = asdict(est)
        out[method] = {
            name: np.atleast_1d(np.asarray(fields[name], dtype=float)).tolist()
            if fields.get(name) is not None else None
            for name in ("accuracy", "accuracy_clipped", "se", "ci_low", "ci_high", "bound",
                         "weight")
        }
    return out


def study_recompute(*, study_id: int) -> EstimateSnapshot:
    """Compute every AI system's Â_ord, Â_comp, IVW and ML (with SE, 95 % interval and
    finite-sample bound), overall and per stratum, and store them as a snapshot."""
    started = time.perf_counter()
    study = Study.objects.get(pk=study_id)
    progress = study_class_progress(study=study)
    k = len(progress)
    systems = list(AISystem.objects.filter(study=study).order_by("ordinal"))
    counts = study_label_counts(study=study, ordinals=[s.ordinal for s in systems])
    per_group = system_counts(counts, k)
    totals = {name: arr.sum(axis=0) for name, arr in per_group.items()}
    strata = sorted(set(counts.strata.tolist()))
    payload: dict = {
        "k": k,
        "confidence": CONFIDENCE,
        "n_answered": int(sum(cp.answered for cp in progress)),
        "classes": [
            {"index": cp.index, "name": cp.name, "yes": cp.yes, "no": cp.no,
             "unsure": cp.unsure, "pending": cp.pending, "leased": cp.leased,
             "specialists": cp.specialists, "completion_rate": _clean(cp.completion_rate),
             "abstention_rate": _clean(cp.abstention_rate)}
            for cp in progress
        ],
        "systems": [],
        "strata": strata,
    }
    rates = [cp.completion_rate for cp in progress
             if cp.completion_rate is not None and cp.routed >= MIN_ROUTED_FOR_IMBALANCE]
    ratio = (max(rates) / min(rates)) if rates and min(rates) > 0 else None
    payload["completion_imbalance"] = {
        "ratio": _clean(ratio),
        "warning": bool(ratio is not None and ratio > IMBALANCE_WARNING_RATIO)
        or bool(rates and min(rates) == 0 and max(rates) > 0),
    }
    if systems:
        overall = _estimates_for(totals, k)
        by_stratum = {}
        for stratum in strata:
            mask = counts.strata == stratum
            stats = {name: arr[mask].sum(axis=0) for name, arr in per_group.items()}
            by_stratum[stratum] = (stats, _estimates_for(stats, k)["ml"])
        ml_acc = np.asarray(overall["ml"]["accuracy"])
        needed = complementary_labels_for_width(
            study.target_ci_width, np.clip(ml_acc, 0.05, 0.99) if k > 2 else ml_acc, k,
            n_ord=totals["n_ord"], n_comp=totals["n_comp"], confidence=CONFIDENCE,
        )
        for j, system in enumerate(systems):
            payload["systems"].append({
                "id": system.pk,
                "name": system.name,
                "counts": {name: _clean(float(arr[j])) for name, arr in totals.items()},
                "estimates": {
                    method: {f: (_clean(v[j]) if v is not None else None)
                             for f, v in values.items()}
                    for method, values in overall.items()
                },
                "labels_needed": _clean(float(np.atleast_1d(needed)[j])),
                "reference": {
                    "n": system.reference_n,
                    "accuracy": (system.reference_correct / system.reference_n)
                    if system.reference_n else None,
                },
                "strata": {
                    stratum: {
                        "n_ord": _clean(float(stats["n_ord"][j])),
                        "n_comp": _clean(float(stats["n_comp"][j])),
                        **{f: (_clean(v[j]) if v is not None else None)
                           for f, v in ml.items()},
                    }
                    for stratum, (stats, ml) in by_stratum.items()
                },
            })
    duration_ms = (time.perf_counter() - started) * 1000
    with transaction.atomic():
        return EstimateSnapshot.objects.create(
            study=study, n_answered=payload["n_answered"], duration_ms=duration_ms,
            payload=payload,
        )
