"""Reliance on the AI assistant, per arm (METHODS.md M2 "Reliance"; paper 001, section 2.4,
Figures 2, 3, 7) and the overall accuracy of AI alone, humans alone and hybridized
(Figure 4).

Per arm, over its (non-skipped) ratings, with r = 1 when the AI's overall judgment of the
rating's item is correct:

    accuracy           = Σ correct / #ratings                 (mean individual rater accuracy)
    accuracy_ai_right  = Σ correct·r / Σ r                    (AI right)
    accuracy_ai_wrong  = Σ correct·(1−r) / Σ (1−r)            (AI wrong)
    error_ai_right     = 1 − accuracy_ai_right
    agreement_with_ai  = share of ratings whose verdict equals the AI's
    helpfulness        = mean of 0 / 1 / 2 (not at all / somewhat / extremely helpful)
    seconds            = mean time on task (times above ``max_seconds`` left out, as the
                         paper dropped tasks over one hour)

and against the unassisted baseline arm (positive = worse than baseline):

    over_reliance  = accuracy_ai_wrong(baseline) − accuracy_ai_wrong(arm)
    under_reliance = error_ai_right(arm) − error_ai_right(baseline)
    gain           = accuracy(arm) − accuracy(baseline).

Intervals: clustered by rater with a small-cluster correction
(:mod:`estimators.numerics.clustered`, CR2): a proportion gets Wilson's score interval at its
rater-clustered effective size from the bias-reduced CR2 variance, with the Student t
quantile on Bell–McCaffrey's degrees of freedom (at most G − 1, fewer when raters rated
unequal numbers of sentences; G = raters with a rating in the figure); helpfulness (0–2) the
CR2 t interval on the logit scale of helpfulness / 2, time the CR2 t interval on the log
scale (both on the same degrees of freedom; asymmetric, as bounded or right-skewed rater
means are); an arm − baseline difference
Newcombe's hybrid score (MOVER) interval from the two arms' intervals, both on the
Welch–Satterthwaite degrees of freedom of the difference when every rater belongs to one arm
(the arms are independent), with their rater-clustered correlation otherwise. The items are
held fixed (the quantities are "on these items"); arm − baseline differences on the same
items are little affected by item-to-item variation. Simulated coverage (docs/coverage.md,
``.venv/bin/python manage.py coverage_tables assisted --reliance`` and ``--reliance-columns``): from
``MIN_RELIABLE_RATERS`` (5) raters per arm 93.3–99.2 % with rater effects up to σ = 1 on the
log-odds scale; the first interval of issue 18 (CR1, t on G − 1) fell to 92.6 % with very
unequal raters, and the rater-clustered percentile bootstrap before it covered 79–94 %. Time
is the exception: approximate (88–91 % when raters' speeds differ several-fold). Below 5
raters the dashboard says the intervals are unreliable.

The paper's significance test — a mixed-effects logistic regression of rating correctness
on the arm with a random intercept per sentence — is :func:`estimators.assisted.mixed_logit.
arm_effects` (adaptive Gauss–Hermite quadrature, checked against lme4's glmer); the
analysis reports it beside the intervals here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from estimators.assisted.hybridization import check_confidence, check_share
from estimators.numerics.bootstrap import (
    UNDEFINED,
    IntervalEstimate,
    _json_float,
    check_level,
    cluster_sums,
    encode,
)
from estimators.numerics.clustered import (
    cr2_bounded_mean,
    cr2_difference,
    cr2_log_mean,
    cr2_proportion,
)
from estimators.numerics.units import unit_differences, unit_means

# From this many raters per arm the intervals cover at least 93 % of the time
# (docs/coverage.md "Assisted: reliance with few raters", ``manage.py coverage_tables assisted
# --reliance``: rater effects up to σ = 1 on the log-odds scale;
# tests/estimators/assisted/test_coverage.py checks 5); with fewer the dashboard says an
# arm's intervals are unreliable.
MIN_RELIABLE_RATERS = 5

_STATS = ("accuracy", "accuracy_ai_right", "accuracy_ai_wrong", "agreement_with_ai",
          "agreement_ai_wrong", "helpfulness", "seconds")
_S = len(_STATS)
_P = 5  # the first _P statistics are proportions (Wilson); then helpfulness, seconds


@dataclass(frozen=True)
class ArmReliance:
    """One arm's reliance figures (module docstring); contrasts are None for the baseline.
    ``reliable``: the arm (and, for its contrasts, the baseline) has at least
    ``MIN_RELIABLE_RATERS`` raters, the size from which the intervals keep their promise."""

    arm: str
    n_raters: int
    n_ratings: int
    n_ai_right: int
    n_ai_wrong: int
    accuracy: IntervalEstimate
    accuracy_ai_right: IntervalEstimate
    accuracy_ai_wrong: IntervalEstimate
    error_ai_right: IntervalEstimate
    agreement_with_ai: IntervalEstimate
    agreement_ai_wrong: IntervalEstimate
    helpfulness: IntervalEstimate
    helpfulness_shares: tuple[float, float, float]
    seconds: IntervalEstimate
    gain: IntervalEstimate | None
    over_reliance: IntervalEstimate | None
    under_reliance: IntervalEstimate | None
    reliable: bool = True

    def row(self) -> dict[str, float | int | str | None]:
        out: dict[str, float | int | str | None] = {
            "arm": self.arm, "n_raters": self.n_raters, "n_ratings": self.n_ratings,
            "n_ai_right": self.n_ai_right, "n_ai_wrong": self.n_ai_wrong,
            "reliable": self.reliable}
        for name in ("accuracy", "accuracy_ai_right", "accuracy_ai_wrong", "error_ai_right",
                     "agreement_with_ai", "agreement_ai_wrong", "helpfulness", "seconds",
                     "gain", "over_reliance", "under_reliance"):
            est = getattr(self, name)
            out.update((est or UNDEFINED).as_dict(name))
        for level, share in zip(("not_at_all", "somewhat", "extremely"),
                                self.helpfulness_shares, strict=True):
            out[f"helpfulness_{level}"] = _json_float(share)
        return out


@dataclass(frozen=True)
class RelianceReport:
    """Reliance per arm, baseline first; ``stratified``: every rater belongs to one arm (the
    arms are independent samples of raters)."""

    arms: tuple[ArmReliance, ...]
    baseline: str
    level: float
    stratified: bool

    def arm(self, name: str) -> ArmReliance:
        for a in self.arms:
            if a.arm == name:
                return a
        raise KeyError(name)

    def rows(self) -> list[dict[str, float | int | str | None]]:
        return [a.row() for a in self.arms]


def _per_rating(x: ArrayLike | None, n: int, field: str) -> np.ndarray | None:
    if x is None:
        return None
    arr = np.asarray(x, dtype=float)
    if arr.shape != (n,):
        raise ValueError(f"{field}: {arr.size} entries, expected {n} (one per rating)")
    return arr


def _zero_one(x: ArrayLike, n: int, field: str) -> np.ndarray:
    arr = _per_rating(x, n, field)
    assert arr is not None
    bad = ~np.isin(arr, (0.0, 1.0))
    if bad.any():
        raise ValueError(f"{field}[{int(np.argmax(bad))}]: need 0/1 (or a boolean), "
                         f"got {arr[int(np.argmax(bad))]}")
    return arr


def _columns(correct: np.ndarray, right: np.ndarray, agrees: np.ndarray | None,
             helpfulness: np.ndarray | None, seconds: np.ndarray | None,
             max_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-rating numerators and denominators (n, S) of the ratio statistics."""
    n = correct.size
    one, zero = np.ones(n), np.zeros(n)
    wrong = 1.0 - right
    if agrees is None:
        ag_num, ag_den, agw_den = zero, zero, zero
    else:
        ag_num, ag_den, agw_den = agrees, one, wrong
    if helpfulness is None:
        h_num, h_den = zero, zero
    else:
        ok = ~np.isnan(helpfulness)
        h_num, h_den = np.where(ok, helpfulness, 0.0), ok.astype(float)
    if seconds is None:
        s_num, s_den = zero, zero
    else:
        ok = np.isfinite(seconds) & (seconds <= max_seconds)
        s_num, s_den = np.where(ok, seconds, 0.0), ok.astype(float)
    num = np.c_[correct, correct * right, correct * wrong, ag_num, ag_num * agw_den, h_num,
                s_num]
    den = np.c_[one, right, wrong, ag_den, agw_den, h_den, s_den]
    return num, den


def reliance_by_arm(*, rater: ArrayLike, arm: ArrayLike, correct: ArrayLike,
                    ai_correct: ArrayLike, baseline: str | int,
                    agrees_with_ai: ArrayLike | None = None,
                    helpfulness: ArrayLike | None = None, seconds: ArrayLike | None = None,
                    max_seconds: float = 3600.0, level: float = 0.95) -> RelianceReport:
    """Reliance figures per arm with rater-clustered small-sample intervals (module
    docstring). Deterministic (closed form).

    One entry per non-skipped rating: ``rater`` and ``arm`` labels, ``correct`` (0/1),
    ``ai_correct`` (0/1: the AI's judgment of that rating's item was correct),
    ``agrees_with_ai`` (0/1: the rating's verdict equals the AI's), ``helpfulness``
    (0/1/2 or NaN when not asked), ``seconds`` (time on task, NaN when unknown).
    ``baseline`` names the unassisted arm (arms are reported by their ``str``: integer arm
    ids work, ``baseline=3`` or ``"3"``)."""
    check_level(level)
    raters, rcode = encode(rater, "rater")
    arms, acode = encode(arm, "arm")
    n = rcode.size
    if n == 0:
        raise ValueError("rater: no ratings")
    arm_names = [str(a) for a in arms]
    baseline = str(baseline)
    if baseline not in arm_names:
        raise ValueError(f"baseline: {baseline!r} is not one of the arms "
                         f"({', '.join(arm_names)})")
    x = _zero_one(correct, n, "correct")
    r = _zero_one(ai_correct, n, "ai_correct")
    ag = None if agrees_with_ai is None else _zero_one(agrees_with_ai, n, "agrees_with_ai")
    hp = _per_rating(helpfulness, n, "helpfulness")
    if hp is not None:
        bad = ~(np.isnan(hp) | np.isin(hp, (0.0, 1.0, 2.0)))
        if bad.any():
            raise ValueError(f"helpfulness[{int(np.argmax(bad))}]: need 0, 1, 2 or missing")
    sec = _per_rating(seconds, n, "seconds")
    if sec is not None and (sec < 0).any():
        raise ValueError(f"seconds[{int(np.argmax(sec < 0))}]: negative time")
    num, den = _columns(x, r, ag, hp, sec, max_seconds)
    n_arms, n_raters = arms.size, raters.size
    stratified = np.unique(rcode * n_arms + acode).size == n_raters
    # Per rater and arm: numerator and denominator sums of every statistic (a rater without
    # ratings in an arm has zeros there and does not count for that arm).
    cols = np.zeros((n, n_arms, 2 * _S))
    cols[np.arange(n), acode] = np.c_[num, den]
    sums = cluster_sums(rcode, cols.reshape(n, -1), n_raters).reshape(n_raters, n_arms, 2 * _S)
    s_, d_ = sums[..., :_S], sums[..., _S:]
    props = cr2_proportion(d_[..., :_P], s_[..., :_P], interval_level=level)
    helpful = cr2_bounded_mean(d_[..., _P], s_[..., _P], top=2.0, interval_level=level)
    timed = cr2_log_mean(d_[..., _P + 1], s_[..., _P + 1], interval_level=level)
    value = np.c_[props.value, helpful.value, timed.value]
    lower = np.c_[props.lower, helpful.lower, timed.lower]
    upper = np.c_[props.upper, helpful.upper, timed.upper]
    b = arm_names.index(baseline)
    counts = (d_[..., 0] > 0).sum(axis=0)  # raters per arm

    def estimate(v: float, lo: float, hi: float) -> IntervalEstimate:
        return IntervalEstimate(float(v), float(lo), float(hi)) if math.isfinite(v) \
            else UNDEFINED

    def difference(i: int, j: int, k: int) -> IntervalEstimate:
        """θ_i − θ_j of proportion k, arms i and j, clustered by rater."""
        d = cr2_difference(d_[:, i, k], s_[:, i, k], d_[:, j, k], s_[:, j, k],
                           interval_level=level)
        return estimate(d.value, d.lower, d.upper)

    out = []
    order = [b] + [a for a in range(n_arms) if a != b]
    for a in order:
        m = acode == a
        ests = [estimate(value[a, k], lower[a, k], upper[a, k]) for k in range(_S)]
        shares = (math.nan, math.nan, math.nan)
        if hp is not None and not np.isnan(hp[m]).all():
            h = hp[m][~np.isnan(hp[m])]
            shares = (float((h == 0).mean()), float((h == 1).mean()), float((h == 2).mean()))
        contrasts: list[IntervalEstimate | None] = [None, None, None]
        if a != b:
            contrasts = [difference(a, b, 0), difference(b, a, 2), difference(b, a, 1)]
        reliable = min(counts[a], counts[b]) >= MIN_RELIABLE_RATERS
        out.append(ArmReliance(
            arm=arm_names[a], n_raters=int(counts[a]), n_ratings=int(m.sum()),
            n_ai_right=int(r[m].sum()), n_ai_wrong=int((1 - r[m]).sum()),
            accuracy=ests[0], accuracy_ai_right=ests[1], accuracy_ai_wrong=ests[2],
            error_ai_right=ests[1].shifted(-1.0, 1.0) if ests[1].defined else UNDEFINED,
            agreement_with_ai=ests[3], agreement_ai_wrong=ests[4], helpfulness=ests[5],
            helpfulness_shares=shares,
            seconds=ests[6], gain=contrasts[0], over_reliance=contrasts[1],
            under_reliance=contrasts[2], reliable=bool(reliable)))
    return RelianceReport(tuple(out), baseline, level, bool(stratified))


@dataclass(frozen=True)
class AccuracyRow:
    """One protocol's accuracy on all items: "ai" (AI alone), "humans" (one arm alone) or
    "hybrid" (that arm below the threshold, the AI above); gain = accuracy − AI alone."""

    protocol: str
    arm: str | None
    accuracy: IntervalEstimate
    gain_over_ai: IntervalEstimate
    human_share: float
    n_items: int
    n_unlabelled: int

    def row(self) -> dict[str, float | int | str | None]:
        return {"protocol": self.protocol, "arm": self.arm,
                **self.accuracy.as_dict("accuracy"), **self.gain_over_ai.as_dict("gain_over_ai"),
                "human_share": self.human_share, "n_items": self.n_items,
                "n_unlabelled": self.n_unlabelled}


@dataclass(frozen=True)
class OverallAccuracy:
    """The results table: AI alone, each arm alone and hybridized with each arm at
    ``threshold``; undefined rows where the arm left a needed item unlabelled."""

    threshold: float
    entries: tuple[AccuracyRow, ...]
    level: float

    def rows(self) -> list[dict[str, float | int | str | None]]:
        return [{"threshold": _json_float(self.threshold), **r.row()} for r in self.entries]


def overall_accuracy(confidence: ArrayLike, ai_correct: ArrayLike,
                     human_correct_by_arm: Mapping[str, ArrayLike], threshold: float, *,
                     level: float = 0.95) -> OverallAccuracy:
    """Accuracy over all items of the AI alone (mean a_i), each arm alone (mean h_arm,i) and
    hybridized with each arm (mean of h_arm,i where c_i ≤ threshold, a_i elsewhere); gains
    over the AI alone. Items are the unit: Clopper–Pearson at the items' effective size for
    the accuracies, Newcombe's paired interval for the gains (:mod:`estimators.numerics.
    units`; coverage in docs/coverage.md "Assisted: hybridization, intervals over
    sentences"). ``human_correct_by_arm``: per-item correctness of each arm (NaN: no rating;
    :func:`estimators.assisted.factuality.item_human_correct`)."""
    check_level(level)
    c = check_confidence(confidence)
    a = check_share(ai_correct, "ai_correct", c.size, allow_nan=False)
    if not math.isfinite(threshold) and threshold != -math.inf:
        raise ValueError(f"threshold: need a number or -inf (all AI), got {threshold}")
    low = c <= threshold
    cols, meta = [a], [("ai", None, 0.0, 0)]
    for name, values in human_correct_by_arm.items():
        h = check_share(values, f"human_correct_by_arm[{name!r}]", c.size, allow_nan=True)
        cols.append(h)
        meta.append(("humans", name, 1.0, int(np.isnan(h).sum())))
        hyb = np.where(low, h, a)
        cols.append(hyb)
        meta.append(("hybrid", name, float(low.mean()), int(np.isnan(hyb).sum())))
    vals = np.stack(cols, axis=1)
    accuracy = unit_means(vals, level=level)
    gain = unit_differences(vals, a, level=level)
    rows = tuple(AccuracyRow(p, arm_name, accuracy[j], gain[j], share, c.size, miss)
                 for j, (p, arm_name, share, miss) in enumerate(meta))
    return OverallAccuracy(float(threshold), rows, level)
