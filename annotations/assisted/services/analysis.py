"""The analysis of an assisted study (METHODS.md M2; paper 001's Figures 1–3 and its
results table), recomputed in the background into an ``EstimateSnapshot`` like the
partitioned estimates (``services/recompute.py`` schedules both; dashboards read the
snapshot, a request never recomputes).

One read of the study (:func:`assisted_rows`: sentences with their gold and AI rating,
ratings with the exposure they answered, the arms, skips and interactions per task: five
queries), then m2stats' pure functions on arrays (:func:`analysis_payload`):

* threshold curves with pointwise bands, per arm and pooled, for both human labels
  (individual ratings; the majority vote with ties counted as Inaccurate);
* the best threshold chosen on a calibration split of the sentences and reported on the
  held-out ones, under several budgets (maximum share sent to humans);
* multi-band hybridization (each confidence band to the best arm or to the AI, chosen on
  the calibration split);
* the AI's calibration (reliability bins, ECE with an interval) and the humans' accuracy
  by the AI's confidence;
* reliance per arm (accuracy when the AI was right / wrong, over- and under-reliance
  against the baseline, helpfulness, time, agreement with the AI) with rater-clustered
  small-sample intervals (``estimators.assisted.reliance``); engagement with the panel
  (sections opened, links followed) from the interaction log;
* the paper's regression test of each arm: a mixed-effects logistic regression of each
  rating's correctness on its arm (the baseline the reference) with a random intercept
  per sentence (``estimators.assisted.mixed_logit``);
* Krippendorff's α per arm and pooled, agreement with the AI's five-way label;
* the results table: AI alone, each arm alone, and hybridized with each arm at the live
  threshold (or, without one, at the held-out best threshold).

Scoring (estimators.assisted.factuality): only "accurate" is Accurate, "can't assess" is wrong,
skips
are not ratings. Sentences without a gold label or without an AI rating are left out of
every accuracy (counted in the payload). A rating is analysed under the arm and arm
version it was given in; an arm whose components changed while raters were in it is
reported per version ("Evidence v2")."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from django.db.models import Count, Q

from annotations.assisted.models import Arm, Interaction, Rating, RatingSkip, Sentence
from annotations.core.exclusion_models import answers_kept
from annotations.core.models import EstimateSnapshot, ItemFlag, Study
from annotations.core.services.recompute import snapshot_store
from annotations.core.words import counted
from estimators.assisted.agreement import agreement_with_ai, krippendorff_alpha_nominal
from estimators.assisted.calibration import reliability_bins
from estimators.assisted.factuality import (
    ACCURATE,
    CANT_ASSESS,
    INACCURATE,
    item_human_correct,
    ratings_correct,
    verdicts,
)
from estimators.assisted.hybridization import (
    best_band_sources,
    calibration_split,
    curve_band,
    held_out_threshold,
)
from estimators.assisted.mixed_logit import arm_effects
from estimators.assisted.reliance import (
    MIN_RELIABLE_RATERS,
    overall_accuracy,
    reliance_by_arm,
)

RULES = ("individual", "majority")
POOLED = "All arms"
BUDGETS = (1.0, 0.5, 0.3, 0.2, 0.1)  # maximum shares of sentences sent to humans
LEVEL = 0.95
CALIBRATION_SHARE = 0.5
DISTINCT_BINS_MAX = 12  # fewer distinct AI confidences than this: one bin per value
DEFAULT_BAND_EDGES = (0.7, 0.9)


@dataclass(frozen=True)
class ArmKey:
    """An arm as analysed: its id and version, the label shown, its components."""

    arm_id: int
    version: int
    label: str
    name: str
    components: tuple[str, ...]
    baseline: bool
    position: int


@dataclass(frozen=True)
class AssistedRows:
    """What the analysis reads, as arrays. Sentences on one axis (``sentence_*``), ratings
    on another (``rating_*``; ``rating_item`` indexes the sentences)."""

    sentence_id: np.ndarray
    gold: np.ndarray  # code or ""
    ai_verdict: np.ndarray  # code or ""
    ai_confidence: np.ndarray  # NaN without an AI rating
    rating_item: np.ndarray
    rating_arm: np.ndarray  # index into ``arms``
    rating_rater: np.ndarray
    rating_label: np.ndarray
    rating_helpfulness: np.ndarray  # NaN when not asked
    rating_seconds: np.ndarray  # NaN when unknown
    rating_expanded: np.ndarray  # sections expanded on the rating's task (count)
    rating_links: np.ndarray  # links opened (count)
    rating_exposed: np.ndarray  # bool: the rating records what it was shown
    arms: tuple[ArmKey, ...]
    skips_by_arm: dict[int, int]
    live: dict


def _arm_keys(arms: list[Arm], used: set[tuple[int, int]]) -> dict[tuple[int, int], ArmKey]:
    """One key per (arm, version) that has ratings; the version is named only when an arm
    has ratings under more than one. Arms without ratings still get a key (current
    version) so the dashboard lists them."""
    versions: dict[int, set[int]] = {}
    for arm_id, version in used:
        versions.setdefault(arm_id, set()).add(version)
    keys = {}
    for arm in arms:
        for version in sorted(versions.get(arm.pk, {arm.version})):
            several = len(versions.get(arm.pk, ())) > 1
            keys[(arm.pk, version)] = ArmKey(
                arm_id=arm.pk, version=version,
                label=f"{arm.name} v{version}" if several else arm.name, name=arm.name,
                components=tuple(arm.components), baseline=arm.is_baseline,
                position=arm.position)
    return keys


def assisted_rows(*, study: Study) -> AssistedRows:
    """Five queries: sentences, arms, ratings (with their exposure's components), skips per
    arm, interactions per task. Withdrawn sentences (flags) and their ratings and skips are
    left out, and so are rejected ratings (reviews) and excluded ones (``answers_kept``)."""
    withdrawn = ItemFlag.withdrawn_ids(study)
    sentences = list(Sentence.objects.filter(study=study).exclude(pk__in=withdrawn)
                     .order_by("pk").values_list("pk", "gold", "ai_verdict", "ai_confidence"))
    arms = list(Arm.objects.filter(study=study).order_by("position", "pk"))
    ratings = list(answers_kept(Rating.objects.filter(study=study), study)
                   .exclude(sentence_id__in=withdrawn).order_by("pk").values_list(
        "sentence_id", "arm_id", "arm_version", "rater_id", "label", "helpfulness",
        "time_on_task_ms", "task_id", "exposure_id"))
    skips = dict(RatingSkip.objects.filter(sentence__study=study)
                 .exclude(sentence_id__in=withdrawn).values("arm_id")
                 .annotate(n=Count("pk")).values_list("arm_id", "n").order_by())
    engaged = {task: (e, o) for task, e, o in Interaction.objects.filter(task__study=study)
               .values("task_id").annotate(
                   e=Count("pk", filter=Q(kind=Interaction.Kind.EXPAND)),
                   o=Count("pk", filter=Q(kind=Interaction.Kind.OPEN_LINK)))
               .values_list("task_id", "e", "o").order_by()}
    keys = _arm_keys(arms, {(r[1], r[2]) for r in ratings})
    order = list(keys)
    index = {pk: i for i, (pk, *_rest) in enumerate(sentences)}
    settings = getattr(study, "assisted", None)
    live = {"routing": getattr(settings, "routing", "all"),
            "threshold": getattr(settings, "threshold", None),
            "band_edges": list(getattr(settings, "band_edges", None) or []),
            "band_targets": list(getattr(settings, "band_targets", None) or []),
            "band_cutoffs": list(getattr(settings, "band_cutoffs", None) or [])}
    return AssistedRows(
        sentence_id=np.array([s[0] for s in sentences], dtype=np.int64),
        gold=np.array([s[1] or "" for s in sentences], dtype=object),
        ai_verdict=np.array([s[2] or "" for s in sentences], dtype=object),
        ai_confidence=np.array([np.nan if s[3] is None else s[3] for s in sentences], float),
        rating_item=np.array([index[r[0]] for r in ratings], dtype=np.int64),
        rating_arm=np.array([order.index((r[1], r[2])) for r in ratings], dtype=np.int64),
        rating_rater=np.array([r[3] for r in ratings], dtype=np.int64),
        rating_label=np.array([r[4] for r in ratings], dtype=object),
        rating_helpfulness=np.array([np.nan if r[5] is None else r[5] for r in ratings],
                                    float),
        rating_seconds=np.array([np.nan if r[6] is None else r[6] / 1000 for r in ratings],
                                float),
        rating_expanded=np.array([engaged.get(r[7], (0, 0))[0] for r in ratings], float),
        rating_links=np.array([engaged.get(r[7], (0, 0))[1] for r in ratings], float),
        rating_exposed=np.array([r[8] is not None for r in ratings], dtype=bool),
        arms=tuple(keys[k] for k in order),
        skips_by_arm={int(k): int(v) for k, v in skips.items()},
        live=live,
    )


# --- the payload -------------------------------------------------------------------------
def _f(value) -> float | None:
    """JSON-safe float (None for NaN / inf / None)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _interval(est) -> dict:
    return {"value": _f(est.value), "lower": _f(est.lower), "upper": _f(est.upper)}


def _binary(codes: np.ndarray) -> np.ndarray:
    """Verdict codes (0 Inaccurate / 1 Accurate / 2 can't assess) of labels; "" → −2."""
    out = np.full(codes.size, -2, dtype=np.int64)
    present = codes != ""
    if present.any():
        out[present] = verdicts(codes[present])
    return out


def _calibration_strategy(confidence: np.ndarray) -> str:
    return "distinct" if np.unique(confidence).size <= DISTINCT_BINS_MAX else "uniform"


def _band_edges(live: dict, confidence: np.ndarray) -> list[float]:
    edges = live.get("band_edges") or live.get("band_cutoffs") or list(DEFAULT_BAND_EDGES)
    return [float(e) for e in edges]


def analysis_payload(rows: AssistedRows, *, seed: int = 0) -> dict:
    """Every figure of the assisted dashboard from the arrays (module docstring). Pure:
    no database; deterministic given ``seed`` (the calibration split). No interval
    resamples: each is closed form or, for Krippendorff's α, a profile likelihood."""
    return _payload(rows, seed)


def _payload(rows: AssistedRows, seed: int) -> dict:
    gold_code = _binary(rows.gold)
    ai_code = _binary(rows.ai_verdict)
    scored = ((gold_code == ACCURATE) | (gold_code == INACCURATE)) & (ai_code >= 0) \
        & ~np.isnan(rows.ai_confidence)
    arms = rows.arms
    baseline = next((a for a in arms if a.baseline), None)
    verdict_all = _binary(rows.rating_label)
    payload: dict = {
        "kind": "assisted",
        "n_answered": int(rows.rating_item.size),
        "n_sentences": int(rows.sentence_id.size),
        "n_scored": int(scored.sum()),
        "n_without_gold": int(((gold_code != ACCURATE) & (gold_code != INACCURATE)).sum()),
        "n_without_ai": int(((ai_code < 0) | np.isnan(rows.ai_confidence)).sum()),
        "n_ratings_unexposed": int((~rows.rating_exposed).sum()),
        "baseline": baseline.label if baseline else None,
        "live": rows.live,
        "level": LEVEL,
        "arms": [],
    }
    for j, a in enumerate(arms):
        mine = rows.rating_arm == j
        assisted = bool(a.components)
        payload["arms"].append({
            "key": a.label, "arm_id": a.arm_id, "name": a.name, "version": a.version,
            "components": list(a.components), "baseline": a.baseline,
            "n_ratings": int(mine.sum()),
            "n_raters": int(np.unique(rows.rating_rater[mine]).size),
            "n_skips": rows.skips_by_arm.get(a.arm_id, 0) if a.version == max(
                b.version for b in arms if b.arm_id == a.arm_id) else None,
            "share_expanded": (_f((rows.rating_expanded[mine] > 0).mean())
                               if assisted and mine.any() else None),
            "share_opened_link": (_f((rows.rating_links[mine] > 0).mean())
                                  if assisted and mine.any() else None),
        })
    items = np.flatnonzero(scored)
    payload.update(_notes(payload))
    if items.size == 0 or rows.rating_item.size == 0:
        payload["empty"] = True
        return payload
    position = np.full(rows.sentence_id.size, -1)
    position[items] = np.arange(items.size)
    rated = position[rows.rating_item] >= 0
    r_item = position[rows.rating_item[rated]]
    r_arm = rows.rating_arm[rated]
    r_verdict = verdict_all[rated]
    conf = rows.ai_confidence[items]
    gold_acc = gold_code[items] == ACCURATE
    ai_acc_verdict = ai_code[items] == ACCURATE
    ai_correct = (ai_acc_verdict == gold_acc).astype(float)
    # the split hashes each sentence's ordinal in the study (its rank by id), not the
    # database id itself: the same study gives the same split on any database
    ordinals = np.argsort(np.argsort(rows.sentence_id, kind="stable"), kind="stable")
    ids = ordinals[items]
    calibration = calibration_split(ids, CALIBRATION_SHARE, seed=seed % 2**32)
    used_arms = [j for j in range(len(arms)) if (r_arm == j).any()]
    humans: dict[str, dict[str, np.ndarray]] = {}
    for rule in RULES:
        by_source = {arms[j].label: item_human_correct(
            r_item[r_arm == j], r_verdict[r_arm == j], gold_acc, n_items=items.size,
            rule=rule) for j in used_arms}
        if len(used_arms) > 1:
            by_source[POOLED] = item_human_correct(r_item, r_verdict, gold_acc,
                                                   n_items=items.size, rule=rule)
        humans[rule] = by_source
    for j, arm_row in enumerate(payload["arms"]):  # sentences this arm has not rated
        rated_here = np.zeros(items.size, dtype=bool)
        rated_here[r_item[r_arm == j]] = True
        arm_row["n_unrated"] = int((~rated_here).sum())
        arm_row["lowest_unrated"] = _f(conf[~rated_here].min()) if (~rated_here).any() \
            else None
    payload["ai"] = {"accuracy": _f(ai_correct.mean()), "n_items": int(items.size),
                     "mean_confidence": _f(conf.mean())}
    payload["calibration"] = _calibration(conf, ai_correct, humans)
    payload["rules"] = {rule: _rule_figures(conf, ai_correct, humans[rule], calibration,
                                            rows.live, arms, used_arms)
                        for rule in RULES}
    r_correct = ratings_correct(r_verdict, gold_acc[r_item]).astype(float)
    r_labels = np.array([arms[j].label for j in r_arm], dtype=object)
    payload["reliance"] = _reliance(rows, rated, r_labels, r_verdict, r_correct,
                                    ai_correct[r_item], ai_acc_verdict[r_item], arms,
                                    baseline)
    payload["regression"] = _regression(r_labels, r_correct, r_item, baseline)
    payload["agreement"] = _agreement(rows, rated, r_item, r_arm, r_verdict, items, arms,
                                      used_arms)
    return payload


def _notes(payload: dict) -> dict:
    notes = []
    if payload["n_without_gold"]:
        notes.append({"code": "without_gold",
                      "message": f"{counted(payload['n_without_gold'], 'sentence')} without a "
                                 "gold label: left out of every accuracy."})
    if payload["n_without_ai"]:
        notes.append({"code": "without_ai",
                      "message": f"{counted(payload['n_without_ai'], 'sentence')} without an "
                                 "AI rating yet: left out of the AI and hybrid figures."})
    if payload["n_ratings_unexposed"]:
        notes.append({"code": "unexposed",
                      "message": f"{counted(payload['n_ratings_unexposed'], 'rating')} "
                                 "without a record of what the rater was shown."})
    if payload["baseline"] is None:
        notes.append({"code": "no_baseline",
                      "message": "No unassisted baseline arm: over- and under-reliance "
                                 "cannot be measured."})
    return {"notes": notes}


def _calibration(conf, ai_correct, humans) -> dict:
    strategy = _calibration_strategy(conf)
    diagram = reliability_bins(conf, ai_correct, strategy=strategy, n_bins=10, level=LEVEL,
                               ece_interval=True)
    out = {"strategy": strategy, "rows": diagram.rows(), "ece": _f(diagram.ece),
           "mce": _f(diagram.mce), "n_items": diagram.n_items,
           "ece_lower": _f(diagram.ece_interval[0]) if diagram.ece_interval else None,
           "ece_upper": _f(diagram.ece_interval[1]) if diagram.ece_interval else None,
           "humans": {}}
    for rule, by_source in humans.items():
        pooled = by_source.get(POOLED, next(iter(by_source.values())))
        if np.isnan(pooled).all():
            continue
        out["humans"][rule] = reliability_bins(conf, pooled, strategy=strategy, n_bins=10,
                                               level=LEVEL).rows()
    return out


def _live_threshold(live: dict) -> float | None:
    if live.get("routing") == "threshold" and live.get("threshold") is not None:
        return float(live["threshold"])
    return None


def _rule_figures(conf, ai_correct, by_source, calibration, live, arms, used_arms) -> dict:
    curves, held = [], []
    chosen: dict[tuple[str, float], float] = {}  # (source, budget) → threshold chosen
    for source, h in by_source.items():
        band = curve_band(conf, ai_correct, h, level=LEVEL)
        curves.append({"source": source, "rows": band.rows(),
                       "best": band.best.as_dict(),
                       "best_threshold_interval": [_f(t) for t in
                                                   band.best_threshold_interval],
                       "ai_accuracy": _f(band.curve.ai_accuracy),
                       "human_accuracy": _f(band.curve.human_accuracy)})
        for budget in BUDGETS:
            try:
                choice = held_out_threshold(conf, ai_correct, h, calibration,
                                            max_human_share=budget, level=LEVEL)
            except ValueError:  # a side of the split is empty (a handful of sentences)
                continue
            held.append({"source": source, "budget": budget, **choice.rows()[0],
                         "max_human_share": budget})
            # the threshold itself (-inf, "all to the AI", is None in the JSON rows)
            chosen[source, budget] = choice.threshold
    arm_sources = {arms[j].label: by_source[arms[j].label] for j in used_arms}
    edges = [e for e in _band_edges(live, conf) if 0 < e < 1]
    bands = None
    if edges and arm_sources and calibration.any() and (~calibration).any():
        choice = best_band_sources(conf, ai_correct, arm_sources, edges,
                                   calibration=calibration, level=LEVEL)
        bands = {"edges": edges, "sources": list(choice.sources),
                 "calibration": choice.calibration.rows(),
                 "held_out": choice.held_out.rows() if choice.held_out else None,
                 "held_out_accuracy": _interval(choice.held_out_accuracy),
                 "held_out_ai_accuracy": _interval(choice.held_out_ai_accuracy),
                 "held_out_gain": _interval(choice.held_out_gain)}
    threshold = _live_threshold(live)
    threshold_source = "live"
    if threshold is None:
        threshold = chosen.get((POOLED if POOLED in by_source else next(iter(by_source)),
                                1.0))
        threshold_source = "held_out"
    overall = None
    if threshold is not None:
        table = overall_accuracy(conf, ai_correct, arm_sources, threshold, level=LEVEL)
        overall = {"threshold": _f(threshold), "threshold_source": threshold_source,
                   "rows": table.rows()}
    return {"curves": curves, "held_out": held, "bands": bands, "overall": overall}


def _reliance(rows, rated, labels, r_verdict, r_correct, r_ai_correct, r_ai_says_accurate,
              arms, baseline) -> dict | None:
    if not rated.any():
        return None
    agrees = np.where(r_verdict == CANT_ASSESS, False,
                      (r_verdict == ACCURATE) == r_ai_says_accurate)
    base = baseline.label if baseline is not None and baseline.label in set(labels) else None
    report = reliance_by_arm(
        rater=rows.rating_rater[rated], arm=labels, correct=r_correct,
        ai_correct=r_ai_correct, baseline=base or str(labels[0]),
        agrees_with_ai=agrees.astype(float), helpfulness=rows.rating_helpfulness[rated],
        seconds=rows.rating_seconds[rated], level=LEVEL)
    position = {a.label: (not a.baseline, a.position, j) for j, a in enumerate(arms)}
    out_rows = sorted(report.rows(), key=lambda row: position[row["arm"]])
    if base is None:  # no baseline: no contrasts to report
        for row in out_rows:
            for name in ("gain", "over_reliance", "under_reliance"):
                for suffix in ("", "_lower", "_upper"):
                    row[name + suffix] = None
    return {"rows": out_rows, "baseline": base, "stratified": report.stratified,
            "interval": "rater-clustered Wilson / t (small-sample), Newcombe for differences",
            "min_reliable_raters": MIN_RELIABLE_RATERS, "level": LEVEL}


def _regression(labels, r_correct, r_item, baseline) -> dict | None:
    """The paper's test of each arm: correct ~ arm + (1 | sentence), the baseline arm as
    reference (``estimators.assisted.mixed_logit.arm_effects``); None without a baseline."""
    if baseline is None or labels.size == 0:
        return None
    fit = arm_effects(r_correct, labels, r_item, baseline=baseline.label, level=LEVEL)
    return {"rows": fit.rows(), "baseline": fit.baseline,
            "baseline_accuracy": _f(1 / (1 + math.exp(-fit.baseline_log_odds)))
            if math.isfinite(fit.baseline_log_odds) else None,
            "tau": _f(fit.tau), "n_ratings": fit.n_obs, "n_sentences": fit.n_groups,
            "converged": fit.converged, "message": "" if fit.converged else fit.message,
            "level": LEVEL}


def _agreement(rows, rated, r_item, r_arm, r_verdict, items, arms, used_arms) -> list:
    ai_labels = rows.ai_verdict[items][r_item]
    labels = rows.rating_label[rated]
    out = []
    sources = [(arms[j].label, r_arm == j) for j in used_arms]
    if len(used_arms) > 1:
        sources.append((POOLED, np.ones(r_arm.size, dtype=bool)))
    for name, m in sources:
        alpha = krippendorff_alpha_nominal(r_item[m], r_verdict[m], interval=True,
                                           level=LEVEL)
        out.append({"source": name, **alpha.as_dict(),
                    "with_ai_label": _f(agreement_with_ai(labels[m], ai_labels[m]))})
    return out


# --- the service --------------------------------------------------------------------------
def assisted_recompute(*, study_id: int) -> EstimateSnapshot:
    """Read the study once, compute every figure, store them as a snapshot (the same
    ``EstimateSnapshot`` the partitioned dashboard reads)."""
    started = time.perf_counter()
    study = Study.objects.select_related("assisted").get(pk=study_id)
    rows = assisted_rows(study=study)
    payload = analysis_payload(rows, seed=int(study.seed) % 2**32)
    duration_ms = (time.perf_counter() - started) * 1000
    return snapshot_store(study=study, payload=payload, duration_ms=duration_ms)


def rating_recorded_receiver(sender, *, study_id: int, **kwargs) -> None:
    """A rating committed (``services.assisted.signals.rating_recorded``): schedule the
    study's recompute, debounced like the partitioned answers' (never raises)."""
    from annotations.core.services.recompute import study_recompute_schedule

    study_recompute_schedule(study_id)


def connect_signals() -> None:
    """Called from ``AnnotationsConfig.ready``: the analysis follows the ratings live."""
    from annotations.assisted.services.signals import rating_recorded

    rating_recorded.connect(rating_recorded_receiver, dispatch_uid="assisted-analysis")


def answered_counts(study_ids: list[int]) -> dict[int, int]:
    """Ratings per study (what a fresh snapshot's ``n_answered`` counts): the sweeper's
    check for answers whose on-commit hook never ran."""
    from django.db.models import Count

    from annotations.assisted.models import Rating

    return dict(Rating.objects.filter(study_id__in=study_ids).values_list("study_id")
                .annotate(n=Count("id")).values_list("study_id", "n"))
