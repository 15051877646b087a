"""Recompute a study's estimates: one SQL aggregation → one vectorised estimators call →
one snapshot row. Dashboards and the API only ever read snapshots."""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import asdict

import numpy as np
from django.db import transaction
from scipy import stats

from annotations.models import EstimateSnapshot, Query, Study
from annotations.selectors import (
    study_class_progress,
    study_complementary_by_item,
    study_label_counts,
)
from assistants.models import AISystem
from estimators.adjust import (
    cluster_ratio_variance,
    effective_counts,
    ipw_class_weights,
    stratified_combine,
    weighted_effective_counts,
)
from estimators.partitioned import estimate
from estimators.planning import complementary_labels_for_width, plan_labels

METHODS = ("ord", "comp", "ivw", "ivw_pilot", "ivw_fixed", "ml")
ESTIMATE_FIELDS = ("accuracy", "accuracy_clipped", "se", "ci_low", "ci_high", "bound",
                   "weight")
CONFIDENCE = 0.95
# A finite-sample bound wider than this (± half-width) guarantees too little to be useful.
USEFUL_BOUND = 0.1
# Abstention rates differing by class: flagged when a chi-square test of homogeneity
# rejects at this level (with at least MIN_ANSWERS_FOR_ABSTENTION answers per class).
ABSTENTION_P_VALUE = 0.01
MIN_ANSWERS_FOR_ABSTENTION = 20
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


def tie_breaks(study: Study, systems: list[AISystem], scope: str) -> np.ndarray:
    """One uniform per system for the randomised exact intervals of ``scope`` ("overall",
    "ipw" or a stratum), drawn from the study's interval seed: independent of the data
    (the seed is drawn at the study's creation and cannot be edited), and fixed, so an
    interval moves only when its data do."""
    tag = zlib.crc32(scope.encode())
    return np.array([np.random.default_rng([study.interval_seed, tag, system.pk]).random()
                     for system in systems])


def _estimates_for(stats: dict[str, np.ndarray], k: int, u: np.ndarray,
                   interval: str) -> dict[str, dict[str, list]]:
    out = {}
    for method in METHODS:
        est = estimate(stats["n_ord"], stats["s_ord"], stats["n_comp"], stats["s_comp"], k,
                       method=method, confidence=CONFIDENCE, u=u, interval=interval)
        fields = asdict(est)
        out[method] = {
            name: np.atleast_1d(np.asarray(fields[name], dtype=float)).tolist()
            if fields.get(name) is not None else None
            for name in ESTIMATE_FIELDS
        }
        # False only where Theorem 4's bound got a weight taken from the data
        n_cells = len(out[method]["accuracy"])
        out[method]["bound_valid"] = [bool(est.bound_valid)] * n_cells
    return out


def _ipw_estimates(counts, per_group: dict, progress, k: int, u: np.ndarray,
                   interval: str) -> dict[str, list]:
    """ML on inverse-probability-weighted counts (per-class completion weights, Kish
    effective sizes), the correction for unequal completion across classes."""
    answered = np.array([cp.answered for cp in progress], float)
    routed = np.array([cp.routed for cp in progress], float)
    w_class = ipw_class_weights(answered, routed)
    w_group = w_class[counts.k] if len(counts.k) else np.zeros(0)
    n_o, s_o = weighted_effective_counts(per_group["n_ord"], per_group["s_ord"], w_group)
    n_c, s_c = weighted_effective_counts(per_group["n_comp"], per_group["s_comp"], w_group)
    est = estimate(n_o, s_o, n_c, s_c, k, method="ml", confidence=CONFIDENCE, u=u,
                   interval=interval)
    return {f: np.atleast_1d(np.asarray(getattr(est, f), float)).tolist()
            for f in ("accuracy", "se", "ci_low", "ci_high")}


def _cell(values: dict[str, list | None], j: int) -> dict:
    """System j's fields out of per-method column lists."""
    return {f: (_clean(v[j]) if v is not None else None) for f, v in values.items()}


def _stratified(by_stratum: dict, strata: list, population: dict[str, int]) -> dict | None:
    """Per-stratum ML estimates combined with the strata's shares of the study's items."""
    if len(strata) < 2:
        return None
    weights = np.array([population.get(h, 0) for h in strata], float)
    if weights.sum() <= 0:
        return None
    acc = np.array([by_stratum[h][1]["ml"]["accuracy"] for h in strata], float)
    se = np.array([by_stratum[h][1]["ml"]["se"] for h in strata], float)
    combined, combined_se = stratified_combine(acc, se, weights)
    z = stats.norm.ppf(0.5 + CONFIDENCE / 2)
    columns = {"accuracy": combined.tolist(), "se": combined_se.tolist(),
               "ci_low": np.clip(combined - z * combined_se, 0, 1).tolist(),
               "ci_high": np.clip(combined + z * combined_se, 0, 1).tolist()}
    return {"columns": columns,
            "weights": {h: float(w) for h, w in zip(strata, weights / weights.sum(),
                                                    strict=True)}}


def _assumption_flags(progress, imbalance: dict) -> list[dict]:
    """Study-level warnings that the estimates' assumptions are at risk."""
    flags = []
    if imbalance["warning"]:
        flags.append({"code": "completion_imbalance",
                      "message": "Classes complete their queries at different rates; read "
                                 "the IPW-corrected estimate."})
    rows = [(cp.unsure, cp.answered - cp.unsure) for cp in progress
            if cp.answered >= MIN_ANSWERS_FOR_ABSTENTION]
    if len(rows) >= 2 and sum(r[0] for r in rows) > 0:
        table = np.array(rows, float)
        if (table.sum(axis=0) > 0).all():
            p_value = stats.chi2_contingency(table)[1]
            if p_value < ABSTENTION_P_VALUE:
                flags.append({"code": "abstention_differs",
                              "message": f"'Not sure' rates differ between classes "
                                         f"(chi-square p = {p_value:.3g}): abstentions are "
                                         "not ignorable if they depend on the answer."})
    return flags


def _system_flags(overall: dict, j: int) -> list[str]:
    """Per system: too few labels for the finite-sample guarantee to say much."""
    bound = overall["ivw"]["bound"][j] if overall["ivw"]["bound"] else None
    if bound is None or not math.isfinite(bound) or bound > USEFUL_BOUND:
        return ["few_labels_for_guarantee"]
    return []


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
    design_effect = None
    if study.queries_per_item > 1 and k > 2 and systems:
        # several complementary labels per item share the item's AI answer: use the
        # item-clustered variance through effective counts
        u, m = study_complementary_by_item(study=study, ordinals=[s.ordinal for s in systems],
                                           k=k)
        n_eff, s_eff = effective_counts(totals["n_comp"], totals["s_comp"],
                                        cluster_ratio_variance(u, m[:, None]))
        with np.errstate(divide="ignore", invalid="ignore"):
            design_effect = np.where(n_eff > 0, totals["n_comp"] / n_eff, 1.0)
        totals = {**totals, "n_comp": n_eff, "s_comp": s_eff}
    strata = sorted(set(counts.strata.tolist()))
    payload: dict = {
        "k": k,
        "confidence": CONFIDENCE,
        "interval_method": study.interval_method,
        "n_answered": int(sum(cp.answered for cp in progress)),
        "classes": [
            {"index": cp.index, "name": cp.name, "yes": cp.yes, "no": cp.no,
             "unsure": cp.unsure, "pending": cp.pending, "leased": cp.leased,
             "specialists": cp.specialists, "completion_rate": _clean(cp.completion_rate),
             "abstention_rate": _clean(cp.abstention_rate),
             "skipped": cp.skipped, "skip_rate": _clean(cp.skip_rate)}
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
    payload["assumptions"] = _assumption_flags(progress, payload["completion_imbalance"])
    ml_acc = np.zeros(0)
    if systems:
        interval = study.interval_method
        overall = _estimates_for(totals, k, tie_breaks(study, systems, "overall"), interval)
        ipw = _ipw_estimates(counts, per_group, progress, k,
                             tie_breaks(study, systems, "ipw"), interval)
        by_stratum = {}
        for stratum in strata:
            mask = counts.strata == stratum
            stats = {name: arr[mask].sum(axis=0) for name, arr in per_group.items()}
            by_stratum[stratum] = (stats, _estimates_for(
                stats, k, tie_breaks(study, systems, f"stratum:{stratum}"), interval))
        stratified = _stratified(by_stratum, strata, study.stratum_sizes)
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
                "estimates": {method: _cell(values, j) for method, values in overall.items()},
                "labels_needed": _clean(float(np.atleast_1d(needed)[j])),
                "ipw": _cell(ipw, j),
                "stratified": ({**_cell(stratified["columns"], j),
                                "weights": stratified["weights"]} if stratified else None),
                "design_effect": (_clean(float(design_effect[j]))
                                  if design_effect is not None else None),
                "flags": _system_flags(overall, j),
                "reference": {
                    "n": system.reference_n,
                    "accuracy": (system.reference_correct / system.reference_n)
                    if system.reference_n else None,
                },
                "strata": {
                    stratum: {
                        "n_ord": _clean(float(stats["n_ord"][j])),
                        "n_comp": _clean(float(stats["n_comp"][j])),
                        **_cell(per_method["ml"], j),  # ML flat, as the dashboard reads it
                        "estimates": {m: _cell(v, j) for m, v in per_method.items()},
                    }
                    for stratum, (stats, per_method) in by_stratum.items()
                },
            })
    if study.target_ci_width:
        # pilot: the typical system's ML estimate (0.8 before there is any system)
        pilot = float(np.clip(np.median(ml_acc), 0.05, 0.99)) if len(ml_acc) else 0.8
        payload["plan"] = {"target_width": study.target_ci_width, "pilot_accuracy": pilot,
                           **asdict(plan_labels(study.target_ci_width, pilot, k))}
    duration_ms = (time.perf_counter() - started) * 1000
    with transaction.atomic():
        return EstimateSnapshot.objects.create(
            study=study, n_answered=payload["n_answered"], duration_ms=duration_ms,
            payload=payload,
        )
