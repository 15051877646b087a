"""Recompute a study's estimates: one SQL aggregation → one vectorised estimators call →
one snapshot row. Dashboards and the API only ever read snapshots."""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from dataclasses import asdict

import numpy as np
from django.db.models import Count
from scipy import stats

from annotations.core.models import EstimateSnapshot, Study
from annotations.core.services.recompute import snapshot_store
from annotations.partitioned.models import Query, RoutingDesign
from annotations.partitioned.selectors import (
    estimated_queries,
    study_class_progress,
    study_first_query_answers,
    study_has_targeted_answers,
    study_item_labels,
    study_label_counts,
    study_label_counts_banded,
    study_population,
    study_rejected_answers,
    uniform_part_only,
)
from annotations.partitioned.services.band_estimates import (
    band_payload,
    banded_systems,
    bands_scheme,
    n_bands_of,
)
from annotations.partitioned.services.design_estimates import design_payload
from annotations.partitioned.services.scope_estimates import (
    CONFIDENCE,
    _cell,
    _clean,
    _estimates_for,
    _method_cells,
    approximate_column,
    estimates_for_scopes,
    labels_moment_sums,
    system_counts,
)
from annotations.partitioned.services.tallies import tallies_current
from annotations.partitioned.tally_counts import Tallies
from assistants.models import AISystem
from estimators.partitioned.accuracy import estimate
from estimators.partitioned.adjust import (
    binomial_equivalent,
    ipw_class_weights,
    ipw_effective_counts,
    stratified_estimate,
)
from estimators.partitioned.checks import POWER, detectable_shares, yes_share_test
from estimators.partitioned.clustered import design_effects, estimate_clustered
from estimators.partitioned.moment_sums import MomentSums
from estimators.partitioned.planning import complementary_labels_for_width, plan_labels

# A finite-sample bound wider than this (± half-width) guarantees too little to be useful.
USEFUL_BOUND = 0.1
# Abstention rates differing by class: flagged when a chi-square test of homogeneity
# rejects at this level (with at least MIN_ANSWERS_FOR_ABSTENTION answers per class).
ABSTENTION_P_VALUE = 0.01
MIN_ANSWERS_FOR_ABSTENTION = 20
# Max/min per-class completion rate above which the dashboard warns (METHODS.md M1).
IMBALANCE_WARNING_RATIO = 1.25
MIN_ROUTED_FOR_IMBALANCE = 20


def _ipw_estimates(counts, per_group: dict, progress, k: int, interval: str,
                   sums: MomentSums | None) -> dict[str, list]:
    """ML on inverse-probability-weighted labels (per-class completion weights), the
    correction for unequal completion across classes: with several queries per item
    through the item-clustered variance of the weighted score (which includes Kish's
    loss); with one, from the per-class counts, the weighted totals over the larger of that
    score's sandwich and its model expectation (estimators.partitioned.adjust.
    ipw_effective_counts)."""
    answered = np.array([cp.answered for cp in progress], float)
    routed = np.array([cp.routed for cp in progress], float)
    w_class = ipw_class_weights(answered, routed)
    if sums is not None:
        est = estimate_clustered(sums.moments(weights=w_class), k, "ml", CONFIDENCE,
                                 interval=interval)
    else:
        w_group = w_class[counts.k] if len(counts.k) else np.zeros(0)
        missing = None  # "no" answers whose system gave no parseable prediction
        if k >= 3:
            n = counts.n[:, None] if counts.n.ndim == 1 else counts.n
            missing = (counts.answer == Query.Answer.NO)[:, None] * (n - counts.present)
        effective = ipw_effective_counts(per_group["n_ord"], per_group["s_ord"],
                                         per_group["n_comp"], per_group["s_comp"], w_group,
                                         k, n_comp_missing=missing)
        est = estimate(*effective, k, method="ml", confidence=CONFIDENCE, interval=interval)
    return {**{f: np.atleast_1d(np.asarray(getattr(est, f), float)).tolist()
               for f in ("accuracy", "se", "ci_low", "ci_high")},
            "approximate": approximate_column(est)}


def _stratified(by_stratum: dict, strata: list, population: dict[str, int], k: int,
                interval: str, combine_intervals: bool = False) -> dict | None:
    """Per-stratum ML estimates combined with the strata's shares of the study's items
    (estimators.partitioned.adjust.stratified_estimate: the interval from binomial-equivalent
    counts, each stratum's design effect included; with ``combine_intervals`` — one query
    per item — the combination of the per-stratum ML intervals instead)."""
    if len(strata) < 2:
        return None
    weights = np.array([population.get(h, 0) for h in strata], float)
    if weights.sum() <= 0:
        return None
    acc = np.array([by_stratum[h][1]["ml"]["accuracy"] for h in strata], float)
    n_eq = np.array([binomial_equivalent(acc[i], by_stratum[h][0]["n_ord"],
                                         by_stratum[h][0]["n_comp"], k, by_stratum[h][2])
                     for i, h in enumerate(strata)], float)
    limits = None
    if combine_intervals:
        limits = tuple(np.array([by_stratum[h][1]["ml"][end] for h in strata], float)
                       for end in ("ci_low", "ci_high"))
    est = stratified_estimate(acc, n_eq, weights, k, CONFIDENCE, interval=interval,
                              stratum_intervals=limits)
    columns = {**{f: np.atleast_1d(np.asarray(getattr(est, f), float)).tolist()
                  for f in ("accuracy", "se", "ci_low", "ci_high")},
               "approximate": approximate_column(est)}
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


def _yes_share(study: Study, progress, k: int, first_queries_only: bool = False,
               tallies: Tallies | None = None) -> dict:
    """The yes-share check (estimators.partitioned.checks) on answered first queries (not
    rejected, as in the estimates), as contract 1 of issue 8 lays it out. With one query
    per item every query is a first one, so the class counts are reused (less the rejected
    answers); otherwise one more count over first queries."""
    first_only = study.queries_per_item > 1 or first_queries_only
    if first_only:
        first = (study_first_query_answers(study=study) if tallies is None
                 else tallies.first_query_answers())
        yes = [first.get(cp.index, {}).get(Query.Answer.YES, 0) for cp in progress]
        no = [first.get(cp.index, {}).get(Query.Answer.NO, 0) for cp in progress]
    else:  # the progress counts every answer given: less the rejected ones (reviews)
        rejected = (study_rejected_answers(study=study) if tallies is None
                    else tallies.rejected_answers())
        yes = [cp.yes - rejected.get(cp.index, {}).get(Query.Answer.YES, 0) for cp in progress]
        no = [cp.no - rejected.get(cp.index, {}).get(Query.Answer.NO, 0) for cp in progress]
    answered = [y + n for y, n in zip(yes, no, strict=True)]
    result = yes_share_test(yes, answered, k, uniform_classes=study.shuffle_options)
    o = result.overall
    low, high = detectable_shares(o.answered, result.expected, result.level)
    return {
        "expected": result.expected, "yes": o.yes, "answered": o.answered,
        "share": _clean(o.share), "p_value": _clean(o.p_value), "flag": o.flag,
        "level": result.level, "first_queries_only": first_only,
        # the shares the overall test detects with probability POWER at this size
        "detectable": {"low": _clean(low), "high": _clean(high), "power": POWER},
        "classes": [{"index": cp.index, "name": cp.name, "yes": t.yes,
                     "answered": t.answered, "share": _clean(t.share),
                     "p_value": _clean(t.p_value), "flag": t.flag}
                    for cp, t in zip(progress, result.classes, strict=True)],
    }


def _yes_share_flag(yes_share: dict) -> dict | None:
    flagged = [c["name"] for c in yes_share["classes"] if c["flag"]]
    if not (yes_share["flag"] or flagged):
        return None
    expected = yes_share["expected"]
    where = (f"overall {100 * yes_share['share']:.1f} %" if yes_share["flag"] else
             "for " + ", ".join(flagged))
    return {"code": "yes_share_departs",
            "message": f"Specialists answer 'yes' to a first query {where} of the time "
                       f"(expected {100 * expected:.1f} %, one in {round(1 / expected)}). "
                       "Unless something is wrong, every class is asked equally often "
                       "whatever the answer, so this suggests that 'not sure' answers or "
                       "routing depend on the true answer: the estimates may be biased."}


def study_recompute(*, study_id: int) -> EstimateSnapshot:
    """Compute every AI system's Â_ord, Â_comp, IVW and ML (with SE, 95 % interval and
    finite-sample bound), overall and per stratum, and store them as a snapshot. With
    several queries per item every variance is clustered by item (estimators.partitioned.clustered).
    Cells without data are null (no figure is invented). The counts come from the study's
    maintained statistics (``services.tallies``: the log folded first), not its answers.

    A study with answers drawn by a targeted design's targeted component: those figures
    and checks come from the uniform part of the draws (``uniform_part_only``; payload
    ``uniform_part``), and every system also gets the design-weighted estimate from every
    answer (``services.design_estimates``; payload ``design`` and each system's
    ``design``). A uniform study's payload is what it always was, bit for bit."""
    started = time.perf_counter()
    study = Study.objects.get(pk=study_id)
    payload = recompute_payload(study, tallies_current(study_id=study.pk))
    duration_ms = (time.perf_counter() - started) * 1000
    return snapshot_store(study=study, payload=payload, duration_ms=duration_ms)


def recompute_payload(study: Study, tallies: Tallies | None) -> dict:
    """A snapshot's payload: the counts from ``tallies`` (the maintained statistics), or,
    with None, from the queries themselves — the full recompute, the reference
    ``services.tallies.tallies_check`` holds the statistics to."""
    if tallies is None:
        targeted = study_has_targeted_answers(study=study)
    else:
        targeted = tallies.answers(uniform=False) > 0
    with uniform_part_only() if targeted else nullcontext():
        payload, systems = _paper_payload(study, first_queries_only=targeted, tallies=tallies)
    if targeted:
        with uniform_part_only():
            payload["uniform_part"] = {"answers": (
                estimated_queries(study, Query.objects.filter(
                    study=study, status=Query.Status.ANSWERED, is_quality_check=False))
                .count() if tallies is None else tallies.estimated_answers())}
        design = design_payload(study=study, systems=systems, k=payload["k"],
                                confidence=CONFIDENCE,
                                kept=None if tallies is None else tallies.design)
        payload["design"] = {key: v for key, v in design.items() if key != "cells"}
        for row, cell in zip(payload["systems"], design["cells"], strict=False):
            row["design"] = cell
    allocation = _allocation_payload(study, tallies)
    if allocation:
        payload["allocation"] = allocation
    return payload


def _allocation_payload(study: Study, tallies: Tallies | None) -> dict | None:
    """A study answered under a Neyman allocation: its strata answered at unequal rates, so
    its figures for the whole study are the stratified ones (payload ``allocation``: the
    latest Neyman design's number, rates and ratio, and the answers drawn under one). None
    when no answer was (a study that never had a Neyman design: one read of the designs'
    table, as ``selectors.study_has_allocated_answers`` probes it)."""
    design = RoutingDesign.objects.filter(study=study, kind=RoutingDesign.Kind.NEYMAN
                                          ).order_by("-number").first()
    if design is None:
        return None
    answers = (tallies.answers(neyman=True) if tallies is not None else
               Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                    is_quality_check=False,
                                    design__kind=RoutingDesign.Kind.NEYMAN).count())
    if not answers:
        return None
    return {"design": design.number, "rates": design.allocation["rates"],
            "ratio": design.allocation["ratio"], "answers": answers}


def _paper_payload(study: Study, *, first_queries_only: bool,
                   tallies: Tallies | None = None) -> tuple[dict, list]:
    """The paper's figures and the checks (every method, overall, per stratum and band,
    IPW, the plan) and the study's AI systems; under :func:`uniform_part_only` those of the
    uniform part. ``first_queries_only``: the yes-share check reads first queries even with
    one query per item (a targeted study's class counts mix both parts). Counts from
    ``tallies`` (None: from the queries)."""
    progress = (study_class_progress(study=study) if tallies is None
                else tallies.class_progress(study))
    k = len(progress)
    systems = list(AISystem.objects.filter(study=study).order_by("ordinal"))
    ordinals = [s.ordinal for s in systems]
    n_bands = n_bands_of(systems)
    band_counts = None
    banded_columns = banded_systems(systems) if n_bands else None
    banded = [systems[j].ordinal for j in banded_columns] if n_bands else None
    if tallies is not None:
        counts, band_counts = tallies.label_counts(ordinals, banded, n_bands)
    elif n_bands:  # confidences: the per-band counts come out of the same aggregation
        counts, band_counts = study_label_counts_banded(
            study=study, ordinals=ordinals, n_bands=n_bands, banded=banded)
    else:
        counts = study_label_counts(study=study, ordinals=ordinals)
    per_group = system_counts(counts, k)
    totals = {name: arr.sum(axis=0) for name, arr in per_group.items()}
    # one label per item: each item is its own cluster and the sandwich is the model
    # variance, so the clustered variance's sums are only needed with several queries per
    # item — kept with the statistics, else (the reference recompute) from the labels
    sums = None
    if study.queries_per_item > 1 and systems:
        sums = tallies.moment_sums() if tallies is not None else None
        if sums is not None and not sums.fits(len(systems), len(banded or ())):
            sums = None  # a system added or banded since the fold: read the labels
        if sums is None:
            sums = labels_moment_sums(
                study_item_labels(study=study, ordinals=ordinals, bands=bool(n_bands)), k,
                banded_columns)
    clusters = sums.moments() if sums is not None else None
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
    payload["yes_share"] = (_yes_share(study, progress, k, first_queries_only, tallies)
                            if k >= 2 else None)
    if payload["yes_share"] is not None:
        flag = _yes_share_flag(payload["yes_share"])
        if flag is not None:
            payload["assumptions"].append(flag)
    pilots = []
    if systems:
        interval = study.interval_method
        effects = design_effects(clusters, k) if clusters is not None else None
        overall = _estimates_for(totals, k, interval, clusters, effects)
        # shown and planned with as it is: the small-sample factor is the intervals' own
        design_effect = effects.joint / effects.small_sample if effects is not None else None
        ipw = _ipw_estimates(counts, per_group, progress, k, interval, sums)
        stratum_stats = [{name: arr[counts.strata == stratum].sum(axis=0)
                          for name, arr in per_group.items()} for stratum in strata]
        if clusters is None:
            stratum_estimates = estimates_for_scopes(stratum_stats, k, interval)
            joints = [1.0] * len(strata)
        else:
            stratum_estimates, joints = [], []
            for stratum, stats in zip(strata, stratum_stats, strict=True):
                scope = sums.moments(stratum)
                scope_effects = design_effects(scope, k)
                stratum_estimates.append(_estimates_for(stats, k, interval, scope,
                                                        scope_effects))
                joints.append(scope_effects.joint)
        by_stratum = {stratum: row for stratum, *row in zip(
            strata, stratum_stats, stratum_estimates, joints, strict=True)}
        stratified = _stratified(by_stratum, strata, study_population(study=study), k,
                                 interval, combine_intervals=sums is None)
        bands = (band_payload(systems=systems, counts=counts, band_counts=band_counts,
                              sums=sums, k=k, interval=interval)
                 if band_counts is not None else {})
        ml_acc = np.asarray(overall["ml"]["accuracy"])
        needed = (_labels_needed(study, ml_acc, totals, k, design_effect)
                  if k > 2 else None)
        for j, system in enumerate(systems):
            n_o, n_c = float(totals["n_ord"][j]), float(totals["n_comp"][j])
            has = n_o + n_c > 0
            if has:
                pilots.append(float(ml_acc[j]))
            payload["systems"].append({
                "id": system.pk,
                "name": system.name,
                "counts": {name: _clean(float(arr[j])) for name, arr in totals.items()},
                "estimates": _method_cells(overall, j, n_o, n_c, k),
                # complementary labels still needed for the target width: only from an
                # estimate of this system's own labels (none with K = 2)
                "labels_needed": (_clean(float(np.atleast_1d(needed)[j]))
                                  if needed is not None and has else None),
                "ipw": _cell(ipw, j) if has else None,
                "stratified": ({**_cell(stratified["columns"], j),
                                "weights": stratified["weights"]}
                               if stratified and has else None),
                "design_effect": (_clean(float(design_effect[j]))
                                  if design_effect is not None and has else None),
                "flags": _system_flags(overall, j),
                "reference": {
                    "n": system.reference_n,
                    "accuracy": (system.reference_correct / system.reference_n)
                    if system.reference_n else None,
                },
                "strata": {
                    stratum: _stratum_cell(stats, per_method, j, k)
                    for stratum, (stats, per_method, _) in by_stratum.items()
                },
                "bands": bands.get(system.pk),
            })
    payload["confidence_bands"] = bands_scheme(study) if n_bands else None
    payload["plan"] = None
    if study.target_ci_width and pilots:
        # pilot: the typical system's ML estimate — only once a system has labels
        pilot = float(np.clip(np.median(pilots), 0.05, 0.99))
        payload["plan"] = {"target_width": study.target_ci_width, "pilot_accuracy": pilot,
                           **asdict(plan_labels(study.target_ci_width, pilot, k,
                                                CONFIDENCE, study.queries_per_item))}
    return payload, systems


def _labels_needed(study: Study, ml_acc: np.ndarray, totals: dict[str, np.ndarray], k: int,
                   design_effect: np.ndarray | None) -> np.ndarray:
    """Further "no" answers until each system's ML interval reaches the study's target
    width. With several queries per item, in effective counts (÷ the system's design
    effect), the further "no" answers coming with the "yes" answers of their items at the
    collected ratio."""
    ratio = 0.0
    if design_effect is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(totals["n_comp"] > 0, totals["n_ord"]
                             / np.where(totals["n_comp"] > 0, totals["n_comp"], 1.0), 0.0)
    return complementary_labels_for_width(
        study.target_ci_width, np.clip(ml_acc, 0.05, 0.99), k, n_ord=totals["n_ord"],
        n_comp=totals["n_comp"], confidence=CONFIDENCE,
        design_effect=1.0 if design_effect is None else design_effect,
        ordinary_per_complementary=ratio)


def _stratum_cell(stats: dict, per_method: dict, j: int, k: int) -> dict:
    """System j within one stratum: its counts, the ML fields flat (as the dashboard reads
    them; null without labels) and every method (null where it has no data)."""
    n_o, n_c = float(stats["n_ord"][j]), float(stats["n_comp"][j])
    ml = _cell(per_method["ml"], j) if n_o + n_c > 0 else dict.fromkeys(per_method["ml"])
    return {"n_ord": _clean(n_o), "n_comp": _clean(n_c), **ml,
            "estimates": _method_cells(per_method, j, n_o, n_c, k)}


def answered_counts(study_ids: list[int]) -> dict[int, int]:
    """Answered routed queries per study (not quality checks; a snapshot's ``n_answered``),
    counted from the queries (``recompute.answered_counts_of``: benches that wait for fresh
    dashboards; the sweeper probes the statistics' log instead)."""
    return dict(Query.objects.filter(study_id__in=study_ids, status=Query.Status.ANSWERED,
                                     is_quality_check=False)
                .values_list("study_id").annotate(n=Count("id")).values_list("study_id", "n"))
