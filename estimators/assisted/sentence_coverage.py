"""Coverage of the assisted dashboard's sentence intervals, by simulation with known truth
(issue 18; docs/coverage.md "Assisted: hybridization, sentence intervals" and "Assisted:
calibration").

    .venv/bin/python manage.py coverage_tables assisted --hybrid --write docs/coverage.md
    .venv/bin/python manage.py coverage_tables assisted --calibration --write docs/coverage.md

**Estimand.** Every figure resampled over sentences describes the study's protocol — this
AI, these raters, these arms — on the *population of sentences* the study's sentences are a
sample of: the accuracy one would see on new sentences from the same source, rated the same
way. So the sentences (their confidence, the AI's correctness, their difficulty, which
raters rate them and how) are redrawn in every simulated study; the raters of each arm are
held fixed within a cell (they are the study's raters: the rater-clustered reliance
intervals answer the question about other raters).

**Generator** (vectorised: every study of a cell at once). Sentence i has the AI's
confidence c_i ∈ {10/20, …, 20/20} (the share of 20 AI samples agreeing; probabilities π_c
of :class:`estimators.assisted.simulation.AssistedDesign` with Beta(2, 1.2)), the AI is
right with probability a(c_i) (``AI_CASES``: calibrated a = c; over-confident
a = −0.2 + 1.2 c; near ceiling a = 0.9 + 0.1 c), the gold is Accurate with probability 0.6,
and a difficulty u_i ~ N(0, τ²), τ = 1 (log-odds). Each arm has G = 8 raters with fixed
effects b_r = σ Φ⁻¹((r − ½)/G), σ = 0.5; each sentence gets m ratings per arm from m
distinct raters of the arm drawn at random, each right with probability
logistic(logit p_arm,AI + u_i + b_r), p_arm,AI the arm's typical accuracy when the AI is
right / wrong (baseline 0.75 / 0.65; assisted 0.90 / 0.45: over-reliance). A wrong rating
says the opposite of the gold. Human labels per sentence as the platform makes them
(:func:`estimators.assisted.factuality.item_human_correct`): individual = share of its
ratings right; majority = the majority verdict right, a tie counted Inaccurate (right when
the gold is Inaccurate). Sources: the assisted arm alone and both arms pooled (2m ratings).

**Truth.** Given the AI's status s ∈ {right, wrong}, a sentence's human correctness has
expectation H_s = E_u E_S f(k_S(u)), S a random m-subset of the arm's raters, k_S the number
right (a Poisson-binomial); the subset distribution is a dynamic programme over the G raters
and the integral over u a 60-point Gauss–Hermite rule. Then H(c) = a(c) H_right +
(1 − a(c)) H_wrong, and the population hybrid accuracy at threshold t is

    A(t) = Σ_c π_c [1{c ≤ t} H(c) + 1{c > t} a(c)],   AI alone ā = A(−∞),

the gain A(t) − ā, the best threshold t* = argmax A(t) (ties to the smaller human share),
a band assignment's accuracy Σ_bands Σ_{c in band} π_c x_source(c).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from estimators.assisted.calibration import reliability_stack, wilson_interval
from estimators.assisted.coverage_regression import _one_thread
from estimators.assisted.hybridization import (
    _TIE,
    _best_index,
    best_band_sources,
    calibration_split,
    curve_band,
    curve_bands,
    held_out_threshold,
)
from estimators.assisted.rater_simulation import _W, _X
from estimators.assisted.reliance import overall_accuracy
from estimators.assisted.simulation import AssistedDesign
from estimators.numerics.bootstrap import bootstrap_means, resampled_sums, shared_resamples
from estimators.numerics.coverage_doc import command
from estimators.numerics.proportion import blaker_accepts, covers
from estimators.numerics.units import difference_bounds, mean_bounds

N_AI_SAMPLES = 20
CONFIDENCE_BETA = (2.0, 1.2)
SHARE_ACCURATE = 0.6
SENTENCE_SD = 1.0
RATER_SD = 0.5
RATERS_PER_ARM = 8
ARMS = {"baseline": (0.75, 0.65), "assisted": (0.90, 0.45)}  # (AI right, AI wrong)
POOLED = "pooled"
SOURCES = ("assisted", POOLED)
RULES = ("individual", "majority")
SIZES = (50, 150, 500)
RATINGS = (1, 3, 5)
BAND_EDGES = (0.7, 0.9)  # the analysis' default bands
LIVE_THRESHOLD = 0.8  # a fixed (live) routing threshold for the results table
OTHER_RATERS = (3, 5, 8, 20)  # raters per arm drawn per study (the question not answered)


@dataclass(frozen=True)
class AiCase:
    """How often the AI is right at confidence c."""

    name: str
    accuracy: Callable[[np.ndarray], np.ndarray]


AI_CASES = (
    AiCase("calibrated", lambda c: np.asarray(c, dtype=float)),
    AiCase("over-confident", lambda c: np.clip(-0.2 + 1.2 * np.asarray(c, float), 0, 1)),
    AiCase("near ceiling", lambda c: np.clip(0.9 + 0.1 * np.asarray(c, float), 0, 1)),
)


def confidence_levels() -> tuple[np.ndarray, np.ndarray]:
    """(levels c, probabilities π_c) of the AI's confidence."""
    return AssistedDesign(n_samples=N_AI_SAMPLES,
                          confidence_beta=CONFIDENCE_BETA).confidence_levels()


def rater_effects(n_raters: int = RATERS_PER_ARM, sd: float = RATER_SD) -> np.ndarray:
    """The fixed rater effects of an arm: σ Φ⁻¹((r − ½)/G), r = 1…G."""
    return sd * stats.norm.ppf((np.arange(n_raters) + 0.5) / n_raters)




def subset_count_distribution(q: np.ndarray, m: int) -> np.ndarray:
    """P(k of a uniformly random m-subset of raters are right), raters with probabilities
    ``q`` on the last axis: (..., m + 1). Dynamic programme over the raters of
    Σ_{|S| = m} Π_{r∈S} (1 − q_r + q_r z), divided by C(G, m)."""
    q = np.asarray(q, dtype=float)
    g = q.shape[-1]
    if not 1 <= m <= g:
        raise ValueError(f"m: need 1 ≤ m ≤ {g}, got {m}")
    f = np.zeros(q.shape[:-1] + (m + 1, m + 1))  # [chosen, right]
    f[..., 0, 0] = 1.0
    for r in range(g):
        qr = q[..., r][..., None, None]
        new = f.copy()
        new[..., 1:, 1:] += f[..., :-1, :-1] * qr
        new[..., 1:, :] += f[..., :-1, :] * (1 - qr)
        f = new
    return f[..., m, :] / math.comb(g, m)


def _label_correct(k: np.ndarray, m: int, rule: str) -> np.ndarray:
    """E[human correctness | k of m ratings right] per k (majority: ties right when the gold
    is Inaccurate, probability 1 − SHARE_ACCURATE)."""
    k = np.asarray(k, dtype=float)
    if rule == "individual":
        return k / m
    return (2 * k > m) + (2 * k == m) * (1 - SHARE_ACCURATE)


def human_truth(m: int, rule: str, source: str, raters: np.ndarray | None = None
                ) -> tuple[float, float]:
    """(H_right, H_wrong): expected human correctness of a sentence the AI got right /
    wrong, for ``source`` (an arm of ``ARMS`` or ``POOLED``) with m ratings per arm."""
    b = rater_effects() if raters is None else raters
    out = []
    for s in (0, 1):  # AI right, AI wrong
        dists = []
        for arm in (("baseline", "assisted") if source == POOLED else (source,)):
            q = special.expit(special.logit(ARMS[arm][s]) + SENTENCE_SD * _X[:, None]
                              + b[None, :])
            dists.append(subset_count_distribution(q, m))
        if len(dists) == 2:  # the two arms' counts are independent given u: convolve
            d = np.stack([np.convolve(x, y) for x, y in zip(*dists, strict=True)])
            mm = 2 * m
        else:
            d, mm = dists[0], m
        out.append(float((_W @ d) @ _label_correct(np.arange(mm + 1), mm, rule)))
    return out[0], out[1]


@dataclass(frozen=True)
class Truth:
    """The population values of one cell (module docstring)."""

    levels: np.ndarray
    probs: np.ndarray
    ai: np.ndarray  # a(c) per level
    human: dict  # (rule, source) → H(c) per level
    ai_accuracy: float

    def curve(self, rule: str, source: str) -> np.ndarray:
        """A(t) at t = −∞ and every level."""
        h = self.human[rule, source]
        return self.ai_accuracy + np.r_[0.0, np.cumsum(self.probs * (h - self.ai))]

    def at(self, rule: str, source: str, threshold: float) -> float:
        """A(threshold) for any threshold (−∞: the AI alone)."""
        low = self.levels <= threshold
        h = self.human[rule, source]
        return float((self.probs * np.where(low, h, self.ai)).sum())

    def best_threshold(self, rule: str, source: str) -> float:
        acc = self.curve(rule, source)
        return float(np.r_[-np.inf, self.levels][int(np.argmax(acc >= acc.max() - 1e-12))])

    def bands(self, rule: str, edges, sources) -> float:
        band = np.searchsorted(np.asarray(edges, float), self.levels, side="left")
        x = np.empty_like(self.ai)
        for j, src in enumerate(sources):
            m = band == j
            x[m] = self.ai[m] if src == "ai" else self.human[rule, src][m]
        return float((self.probs * x).sum())

    @property
    def ece(self) -> float:
        return float((self.probs * np.abs(self.ai - self.levels)).sum())


def cell_truth(ai: AiCase, m: int) -> Truth:
    c, pi = confidence_levels()
    a = ai.accuracy(c)
    human = {}
    for rule in RULES:
        for source in ("baseline", "assisted", POOLED):
            right, wrong = human_truth(m, rule, source)
            human[rule, source] = a * right + (1 - a) * wrong
    return Truth(c, pi, a, human, float((pi * a).sum()))


@dataclass(frozen=True)
class Studies:
    """S simulated studies of n sentences: (S, n) arrays; ``human`` maps (rule, source) to
    per-sentence human correctness."""

    confidence: np.ndarray
    ai_correct: np.ndarray
    human: dict


def simulate_studies(rng: np.random.Generator, ai: AiCase, n: int, m: int, n_studies: int
                     ) -> Studies:
    """The generator of the module docstring, ``n_studies`` studies at once."""
    c_levels, pi = confidence_levels()
    shape = (n_studies, n)
    conf = c_levels[rng.choice(c_levels.size, size=shape, p=pi / pi.sum())]
    right = rng.random(shape) < ai.accuracy(conf)
    gold_inaccurate = rng.random(shape) >= SHARE_ACCURATE
    u = SENTENCE_SD * rng.standard_normal(shape)
    b = rater_effects()
    counts = {}
    for arm, (p_right, p_wrong) in ARMS.items():
        who = np.argsort(rng.random(shape + (b.size,)), axis=-1)[..., :m]
        base = special.logit(np.where(right, p_right, p_wrong))
        p = special.expit(base[..., None] + u[..., None] + b[who])
        counts[arm] = (rng.random(p.shape) < p).sum(axis=-1)
    counts[POOLED] = counts["baseline"] + counts["assisted"]
    human = {}
    for source in ("baseline", "assisted", POOLED):
        mm = 2 * m if source == POOLED else m
        k = counts[source]
        human["individual", source] = k / mm
        human["majority", source] = ((2 * k > mm) | ((2 * k == mm) & gold_inaccurate)
                                     ).astype(float)
    return Studies(conf, right.astype(float), human)


# --- measuring coverage ------------------------------------------------------------------
BUDGETS = (1.0, 0.5, 0.3, 0.2, 0.1)  # as the analysis (annotations.assisted.services.analysis)
FORMER_RESAMPLES = 1000  # the former sentence bootstraps (500 for the curve's bars)
FORMER_CURVE_RESAMPLES = 500


class Tally:
    """Per figure key: (studies showing it, covered by the interval, studies where the
    former interval was computed, covered by it)."""

    def __init__(self) -> None:
        self.counts: dict[tuple, np.ndarray] = {}

    def add(self, key: tuple, new: bool, former: bool | None = None) -> None:
        row = self.counts.setdefault(key, np.zeros(4))
        row += (1, new, former is not None, bool(former))

    def add_studies(self, key: tuple, shown: np.ndarray, covered: np.ndarray) -> None:
        """The new interval over many studies at once (boolean arrays)."""
        row = self.counts.setdefault(key, np.zeros(4))
        row[:2] += (int(shown.sum()), int((shown & covered).sum()))


def _covers(lower: float, upper: float, truth: float) -> bool:
    return bool(lower - 1e-12 <= truth <= upper + 1e-12)


def _former(values: np.ndarray, n_resamples: int, seed: int) -> list:
    """The former intervals: percentile sentence bootstrap of column means."""
    return bootstrap_means(values, n_resamples=n_resamples, level=0.95, seed=seed)


def _curve_study(tally: Tally, key: tuple, truth: Truth, rule: str, source: str,
                 c: np.ndarray, a: np.ndarray, h: np.ndarray, seed: int | None) -> None:
    band = curve_band(c, a, h)
    t = band.curve.thresholds
    levels = np.r_[-np.inf, truth.levels]
    idx = np.searchsorted(levels, t)
    true_curve = truth.curve(rule, source)[idx]
    former = former_gain = None
    if seed is not None:
        y = np.where(c[:, None] <= t[None, :], h[:, None], a[:, None])
        former = _former(y, FORMER_CURVE_RESAMPLES, seed)
        former_gain = _former(y - a[:, None], FORMER_CURVE_RESAMPLES, seed)
        diff = _former(y - y[:, [band.best.index]], FORMER_CURVE_RESAMPLES, seed)
        near = np.array([d.upper >= -1e-9 for d in diff])
        near[band.best.index] = True
        former_range = (t[near].min(), t[near].max())
    for j, level in enumerate(idx):
        tally.add(key + ("curve", level), _covers(band.lower[j], band.upper[j], true_curve[j]),
                  None if former is None else _covers(former[j].lower, former[j].upper,
                                                      true_curve[j]))
        if level > 0:  # the all-AI point's gain is 0 by definition
            g = true_curve[j] - truth.ai_accuracy
            tally.add(key + ("curve gain", level),
                      _covers(band.gain_lower[j], band.gain_upper[j], g),
                      None if former_gain is None else _covers(
                          former_gain[j].lower, former_gain[j].upper, g))
    best = truth.best_threshold(rule, source)
    tally.add(key + ("best range",), _covers(*band.best_threshold_interval, best),
              None if seed is None else _covers(*former_range, best))


def _held_out_study(tally: Tally, key: tuple, truth: Truth, rule: str, source: str,
                    c: np.ndarray, a: np.ndarray, h: np.ndarray, cal: np.ndarray,
                    seed: int | None) -> None:
    done: dict[float, tuple] = {}
    for budget in BUDGETS:
        res = held_out_threshold(c, a, h, cal, max_human_share=budget)
        if res.threshold in done:  # a budget that does not bind: the same figures
            for k, covered in done[res.threshold]:
                tally.add(key + ("held-out", budget, k), *covered)
            continue
        at = truth.at(rule, source, res.threshold)
        former = None
        if seed is not None:
            ho = ~cal
            y = np.where(c[ho] <= res.threshold, h[ho], a[ho])
            former = _former(np.c_[y, a[ho], y - a[ho]], FORMER_RESAMPLES, seed)
        results = []
        for j, (what, est, value) in enumerate((
                ("accuracy", res.held_out_accuracy, at),
                ("AI alone", res.held_out_ai_accuracy, truth.ai_accuracy),
                ("gain", res.held_out_gain, at - truth.ai_accuracy))):
            covered = (_covers(est.lower, est.upper, value),
                       None if former is None else _covers(former[j].lower, former[j].upper,
                                                           value))
            tally.add(key + ("held-out", budget, what), *covered)
            results.append((what, covered))
        done[res.threshold] = tuple(results)


def _results_study(tally: Tally, key: tuple, truth: Truth, rule: str, arms: dict,
                   c: np.ndarray, a: np.ndarray, threshold: float, kind: str,
                   seed: int | None) -> None:
    table = overall_accuracy(c, a, arms, threshold)
    former = None
    if seed is not None:
        cols = [a]
        for h in arms.values():
            cols += [h, np.where(c <= threshold, h, a)]
        vals = np.stack(cols, axis=1)
        former = _former(np.c_[vals, vals - a[:, None]], FORMER_RESAMPLES, seed)
    k = len(table.entries)
    for j, row in enumerate(table.entries):
        value = (truth.ai_accuracy if row.protocol == "ai" else
                 truth.at(rule, row.arm, math.inf if row.protocol == "humans" else threshold))
        label = "AI alone" if row.protocol == "ai" else row.protocol
        tally.add(key + ("results", kind, label, "accuracy"),
                  _covers(row.accuracy.lower, row.accuracy.upper, value),
                  None if former is None else _covers(former[j].lower, former[j].upper,
                                                      value))
        if row.protocol != "ai":
            gain = value - truth.ai_accuracy
            tally.add(key + ("results", kind, label, "gain"),
                      _covers(row.gain_over_ai.lower, row.gain_over_ai.upper, gain),
                      None if former is None else _covers(
                          former[k + j].lower, former[k + j].upper, gain))


def _bands_study(tally: Tally, key: tuple, truth: Truth, rule: str, arms: dict,
                 c: np.ndarray, a: np.ndarray, cal: np.ndarray, seed: int | None) -> None:
    choice = best_band_sources(c, a, arms, BAND_EDGES, calibration=cal)
    value = truth.bands(rule, BAND_EDGES, choice.sources)
    former = None
    if seed is not None:
        ho = ~cal
        band = np.searchsorted(np.asarray(BAND_EDGES), c[ho], side="left")
        y = a[ho].copy()
        for j, src in enumerate(choice.sources):
            if src != "ai":
                y[band == j] = arms[src][ho][band == j]
        former = _former(np.c_[y, a[ho], y - a[ho]], FORMER_RESAMPLES, seed)
    for j, (what, est, v) in enumerate((
            ("accuracy", choice.held_out_accuracy, value),
            ("AI alone", choice.held_out_ai_accuracy, truth.ai_accuracy),
            ("gain", choice.held_out_gain, value - truth.ai_accuracy))):
        tally.add(key + ("bands", what), _covers(est.lower, est.upper, v),
                  None if former is None else _covers(former[j].lower, former[j].upper, v))


def hybrid_cell(ai: AiCase, n: int, m: int, n_studies: int, *, seed: int = 0,
                n_former: int = 0) -> Tally:
    """Coverage of every sentence figure of the dashboard in one cell (AI case, n sentences,
    m ratings per sentence per arm): keys (rule, source, figure, …) or (rule, figure, …).
    The intervals of all studies at once (Figure 1 through the analysis' own
    :func:`curve_bands`; :func:`held_out_at_once`, …: the same numbers the analysis'
    functions give, a test checks); the former bootstrap intervals, study by
    study through those functions, on the first ``n_former`` studies."""
    rng = np.random.default_rng([seed, n, m, AI_CASES.index(ai) if ai in AI_CASES else 99])
    truth = cell_truth(ai, m)
    studies = simulate_studies(rng, ai, n, m, n_studies)
    cal = calibration_split(np.arange(n), 0.5, seed=0)
    tally = Tally()
    _new_intervals(tally, truth, studies, cal)
    if n_former:
        former = Tally()
        with _one_thread():
            _hybrid_studies(former, truth, studies, cal, min(n_former, n_studies), n_former)
        for k, v in former.counts.items():
            tally.counts.setdefault(k, np.zeros(4))[2:] += v[2:]
    return tally


def _covered(bounds: tuple[np.ndarray, np.ndarray], truth) -> np.ndarray:
    lo, hi = bounds
    return (lo - 1e-12 <= truth) & (truth <= hi + 1e-12)


def _new_intervals(tally: Tally, truth: Truth, studies: Studies, cal: np.ndarray) -> None:
    levels = truth.levels
    n_levels = levels.size
    n = studies.confidence.shape[1]
    lv = np.searchsorted(levels, studies.confidence - 1e-9)
    a = studies.ai_correct
    every = np.ones(a.shape[0], dtype=bool)
    j_live = np.full(a.shape[0], int(np.searchsorted(levels, LIVE_THRESHOLD + 1e-9, "right")))
    level_band = np.searchsorted(np.asarray(BAND_EDGES), levels, side="left")
    arms = tuple(ARMS)
    for rule in RULES:
        whole, cal_mo, ho_mo = {}, {}, {}
        for source in (*arms, POOLED):
            h = studies.human[rule, source]
            whole[source] = level_moments(lv, a, h, n_levels)
            cal_mo[source] = level_moments(lv, a, h, n_levels, cal)
            ho_mo[source] = level_moments(lv, a, h, n_levels, ~cal)
        j_held = {}
        for source in SOURCES:
            key, curve = (rule, source), truth.curve(rule, source)
            got = _curves(studies.confidence, a, studies.human[rule, source], levels)
            for j in range(n_levels + 1):
                shown = got["shown"][:, j]
                tally.add_studies(key + ("curve", j), shown,
                                  _covered((got["lower"][:, j], got["upper"][:, j]), curve[j]))
                if j:
                    tally.add_studies(key + ("curve gain", j), shown, _covered(
                        (got["gain_lower"][:, j], got["gain_upper"][:, j]),
                        curve[j] - truth.ai_accuracy))
            tally.add_studies(key + ("best range",), every, _covered(
                (got["range"][:, 0], got["range"][:, 1]), truth.best_threshold(rule, source)))
            for budget in BUDGETS:
                j, bounds = held_out_at_once(cal_mo[source], ho_mo[source], budget)
                j_held[source, budget] = j
                for what, b, value in zip(("accuracy", "AI alone", "gain"), bounds, (
                        curve[j], truth.ai_accuracy, curve[j] - truth.ai_accuracy),
                        strict=True):
                    tally.add_studies(key + ("held-out", budget, what), every,
                                      _covered(b, value))
        for kind, j in (("live threshold", j_live), ("held-out threshold",
                                                     j_held[POOLED, 1.0])):
            key = (rule, "results", kind)
            tally.add_studies(key + ("AI alone", "accuracy"), every, _covered(
                mean_bounds(n, whole[arms[0]].a[:, -1], whole[arms[0]].aa[:, -1])[1:],
                truth.ai_accuracy))
            for arm in arms:
                mo, curve = whole[arm], truth.curve(rule, arm)
                for label, (sy, syy, sya), value in (
                        ("humans", (mo.h[:, -1], mo.hh[:, -1], mo.ha[:, -1]), curve[-1]),
                        ("hybrid", mo.hybrid(j), curve[j])):
                    tally.add_studies(key + (label, "accuracy"), every,
                                      _covered(mean_bounds(n, sy, syy)[1:], value))
                    tally.add_studies(key + (label, "gain"), every, _covered(
                        difference_bounds(n, sy, syy, mo.a[:, -1], mo.aa[:, -1], sya)[1:],
                        value - truth.ai_accuracy))
        chosen, bounds = bands_at_once(level_band, cal_mo, ho_mo, arms)
        value = _band_truth(truth, rule, level_band, chosen, arms)
        for what, b, v in zip(("accuracy", "AI alone", "gain"), bounds,
                              (value, truth.ai_accuracy, value - truth.ai_accuracy),
                              strict=True):
            tally.add_studies((rule, "bands", what), every, _covered(b, v))


def _band_truth(truth: Truth, rule: str, level_band: np.ndarray, chosen: np.ndarray,
                arms: tuple[str, ...]) -> np.ndarray:
    """Per study the population accuracy of its band assignment (``chosen``: per band the
    index into ("ai",) + arms)."""
    value = np.zeros(chosen.shape[0])
    for k in range(chosen.shape[1]):
        m = level_band == k
        options = np.array([(truth.probs[m] * truth.ai[m]).sum()] + [
            (truth.probs[m] * truth.human[rule, arm][m]).sum() for arm in arms])
        value += options[chosen[:, k]]
    return value


def _hybrid_studies(tally: Tally, truth: Truth, studies: Studies, cal: np.ndarray,
                    n_studies: int, n_former: int) -> None:
    """Study by study through the analysis' own functions, with the former intervals on the
    first ``n_former`` studies."""
    for i in range(n_studies):
        c, a = studies.confidence[i], studies.ai_correct[i]
        s = i if i < n_former else None
        with shared_resamples():
            for rule in RULES:
                for source in SOURCES:
                    h = studies.human[rule, source][i]
                    _curve_study(tally, (rule, source), truth, rule, source, c, a, h, s)
                    _held_out_study(tally, (rule, source), truth, rule, source, c, a, h, cal,
                                    s)
                arms = {arm: studies.human[rule, arm][i] for arm in ARMS}
                _results_study(tally, (rule,), truth, rule, arms, c, a, LIVE_THRESHOLD,
                               "live threshold", s)
                chosen = held_out_threshold(c, a, studies.human[rule, POOLED][i], cal)
                _results_study(tally, (rule,), truth, rule, arms, c, a, chosen.threshold,
                               "held-out threshold", s)
                _bands_study(tally, (rule,), truth, rule, arms, c, a, cal, s)


def other_raters_coverage(n_raters: int, n: int, n_studies: int, *, m: int = 3,
                          seed: int = 0, ai: AiCase = AI_CASES[0]) -> float:
    """How often the interval of "humans alone" (the assisted arm, individual ratings)
    holds the value over *the population of raters* when each study draws its own
    ``n_raters`` raters (effects N(0, σ²)): the question the sentence intervals do not
    answer. Truth: Σ_c π_c [a(c) H_right + (1 − a(c)) H_wrong] with H = E logistic(logit p
    + u + b) over u ~ N(0, τ²) and b ~ N(0, σ²) together."""
    rng = np.random.default_rng([seed, n_raters, n, m, 11])
    c, pi = confidence_levels()
    a = ai.accuracy(c)
    sd = math.hypot(SENTENCE_SD, RATER_SD)
    p_right, p_wrong = ARMS["assisted"]
    h_right, h_wrong = ((_W * special.expit(special.logit(p) + sd * _X)).sum()
                        for p in (p_right, p_wrong))
    truth = float((pi * (a * h_right + (1 - a) * h_wrong)).sum())
    conf = c[rng.choice(c.size, size=(n_studies, n), p=pi / pi.sum())]
    right = rng.random(conf.shape) < ai.accuracy(conf)
    u = SENTENCE_SD * rng.standard_normal(conf.shape)
    b = RATER_SD * rng.standard_normal((n_studies, 1, n_raters))
    who = np.argsort(rng.random(conf.shape + (n_raters,)), axis=-1)[..., :min(m, n_raters)]
    prob = special.expit(special.logit(np.where(right, p_right, p_wrong))[..., None]
                         + u[..., None] + np.take_along_axis(
                             np.broadcast_to(b, who.shape[:2] + (n_raters,)), who, axis=2))
    h = (rng.random(prob.shape) < prob).mean(axis=-1)
    _, lo, hi = mean_bounds(n, h.sum(axis=1), (h * h).sum(axis=1))
    return float(((lo <= truth) & (truth <= hi)).mean())


# --- the tables ---------------------------------------------------------------------------
HYBRID_HEADING = "## Assisted: hybridization, intervals over sentences"
CALIBRATION_HEADING = "## Assisted: calibration (reliability bins, ECE)"
GOAL_FLOOR = 0.935
MIN_SHOWN = 50  # a figure shown in fewer of a cell's studies is left out of the summaries

_CP = "Clopper–Pearson, effective n"
# (label, interval now, predicate on a tally key)
FIGURES = (
    ("Figure 1: hybrid accuracy at each threshold (bars)", _CP,
     lambda k: k[2] == "curve"),
    ("Figure 1: gain over the AI at each threshold (CSV, API)", "Newcombe",
     lambda k: k[2] == "curve gain"),
    ("Thresholds as good (95 %): holds the best threshold", "Newcombe test vs the best",
     lambda k: k[2] == "best range"),
    ("Held out: accuracy at the chosen threshold", _CP,
     lambda k: k[2] == "held-out" and k[-1] == "accuracy"),
    ("Held out: AI alone", _CP, lambda k: k[2] == "held-out" and k[-1] == "AI alone"),
    ("Held out: gain", "Newcombe", lambda k: k[2] == "held-out" and k[-1] == "gain"),
    ("Results, live threshold: AI alone, humans, hybrid (accuracy)", _CP,
     lambda k: k[1] == "results" and k[2] == "live threshold" and k[-1] == "accuracy"),
    ("Results, live threshold: gains", "Newcombe",
     lambda k: k[1] == "results" and k[2] == "live threshold" and k[-1] == "gain"),
    ("Results, held-out threshold: AI alone, humans, hybrid (accuracy)", _CP,
     lambda k: k[1] == "results" and k[2] == "held-out threshold" and k[-1] == "accuracy"),
    ("Results, held-out threshold: gains", "Newcombe",
     lambda k: k[1] == "results" and k[2] == "held-out threshold" and k[-1] == "gain"),
    ("Bands: held-out accuracy, AI alone", _CP,
     lambda k: k[1] == "bands" and k[-1] != "gain"),
    ("Bands: held-out gain", "Newcombe", lambda k: k[1] == "bands" and k[-1] == "gain"),
)


def _coverages(tallies: list[Tally], pick: Callable[[tuple], bool], former: bool
               ) -> np.ndarray:
    """Coverage of every cell (one tally per setting) of the figures ``pick`` selects,
    where shown in at least ``MIN_SHOWN`` studies (former: a quarter of that)."""
    col, den = (3, 2) if former else (1, 0)
    least = max(MIN_SHOWN // 4, 1) if former else MIN_SHOWN
    return np.array([v[col] / v[den] for t in tallies for k, v in t.counts.items()
                     if pick(k) and v[den] >= least])


def _summary(cov: np.ndarray) -> str:
    if cov.size == 0:
        return "– | – | – | –"
    return (f"{100 * cov.min():.1f} | {100 * np.median(cov):.1f} | {100 * cov.max():.1f} | "
            f"{int((cov < GOAL_FLOOR).sum())} of {cov.size}")


def hybrid_table(n_studies: int = 600, n_former: int = 200, seed: int = 0,
                 sizes: tuple[int, ...] = SIZES, ratings: tuple[int, ...] = RATINGS,
                 ai_cases: tuple[AiCase, ...] = AI_CASES) -> str:
    """The Markdown section of docs/coverage.md for the hybridization figures."""
    t0 = time.time()
    cells = {(ai.name, n, m): hybrid_cell(ai, n, m, n_studies, seed=seed, n_former=n_former)
             for ai in ai_cases for n in sizes for m in ratings}
    everything = list(cells.values())
    se = 100 * math.sqrt(0.95 * 0.05 / n_studies)
    se_former = 100 * math.sqrt(0.95 * 0.05 / max(n_former, 1))
    lines = [
        HYBRID_HEADING,
        "",
        f"Generated by `{command('assisted')} --hybrid --studies {n_studies} "
        f"--former {n_former} --seed {seed} --write docs/coverage.md` "
        f"({time.time() - t0:.0f} s). Simulated studies with known truth: {n_studies} per "
        f"cell (Monte-Carlo SE ≈ {se:.1f} points at 95 %), the former intervals on the "
        f"first {n_former} of them (SE ≈ {se_former:.1f}). Generator and truth: the docstring "
        "of `estimators/assisted/sentence_coverage.py` — sentences with the AI's confidence "
        "(20 samples), the AI right with probability a(c) (calibrated, over-confident, near "
        "ceiling), a difficulty per sentence, m ratings per sentence and arm from 8 raters "
        "of unequal skill, the study's raters held fixed. **The estimand is the population "
        "of sentences**: the accuracy these raters and this AI would reach on new sentences "
        "from the same source (not the study's own sentences, on which the AI's accuracy "
        "is known exactly). Grid: "
        f"n ∈ {{{', '.join(map(str, sizes))}}} sentences × m ∈ "
        f"{{{', '.join(map(str, ratings))}}} ratings per sentence per arm × "
        f"{len(ai_cases)} AI cases; in each, both rules (individual ratings, majority "
        "vote), the assisted arm and both arms pooled, every threshold of the curve, every "
        "budget (100, 50, 30, 20, 10 %), the results table at a live threshold (0.8) and "
        "at the held-out one. A cell is one figure in one setting (one threshold, one "
        f"budget, …), counted where the figure was shown in at least {MIN_SHOWN} studies. "
        "**Now**: Clopper–Pearson at the sentences' effective size for accuracies "
        "(Korn–Graubard), Newcombe's paired interval for gains (Wilson–t components), "
        "Newcombe's test against the best threshold for the thresholds as good "
        "(`estimators/numerics/units.py`; closed form). **Former**: percentile bootstrap "
        "of sentences (1000 resamples; 500 for the curve).",
        "",
        "| figure | interval now | min | median | max | cells < 93.5 % | former min | "
        "former median | former max | former cells < 93.5 % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, method, pick in FIGURES:
        lines.append(f"| {label} | {method} | {_summary(_coverages(everything, pick, False))}"
                     f" | {_summary(_coverages(everything, pick, True))} |")
    lines += ["", "Per setting: the lowest coverage over its cells (the former interval's in "
              "parentheses).", "",
              "| AI | n | m | " + " | ".join(f"{j + 1}" for j in range(len(FIGURES))) + " |",
              "|---|---|---|" + "---|" * len(FIGURES)]
    for (name, n, m), t in cells.items():
        vals = []
        for _, _, pick in FIGURES:
            new, old = _coverages([t], pick, False), _coverages([t], pick, True)
            vals.append(("–" if new.size == 0 else f"{100 * new.min():.1f}")
                        + ("" if old.size == 0 else f" ({100 * old.min():.1f})"))
        lines.append(f"| {name} | {n} | {m} | " + " | ".join(vals) + " |")
    lines += ["", "Columns: " + "; ".join(f"{j + 1} = {label}"
                                          for j, (label, _, _) in enumerate(FIGURES)) + ".",
              "", "What each figure promises. A bar of Figure 1, a held-out figure, a band "
              "figure and a results-table row: the population value at that threshold (or band "
              "assignment), 95 % of the time. A held-out threshold is chosen on the other half "
              "of the sentences, so on the held-out half it is a fixed threshold and these "
              "intervals are exact in kind; the results table at the held-out threshold "
              "measures it on all sentences, half of which chose it — the selection moved its "
              "coverage by less than a point here (compare the live-threshold rows). "
              "**Thresholds as good (95 %)**: the smallest and largest threshold whose accuracy "
              "is not significantly below the best one's (Newcombe's one-sided test at 2.5 %); "
              "it promises to hold the population's best threshold in at least 95 % of "
              "studies and holds it in 98–100 % (a range, not a point estimate: it is wide on "
              "purpose where the curve is flat). The accuracies use Clopper–Pearson's "
              "interval at the effective size, which never falls below 95 % for 0/1 labels; "
              "it over-covers with few sentences (25 held out), and the gains over-cover "
              "where few held-out sentences go to humans (a gain of a handful of sentences; "
              "Newcombe's interval keeps the width of the accuracies it compares). The "
              "raters are held fixed: for raters like these rather than these raters, the "
              "rater-clustered reliance intervals are the ones to read (the dashboard says "
              "so beside Figure 1 and the results table). How far the sentence interval "
              "of \"humans alone\" (assisted arm, individual ratings, 3 ratings per "
              "sentence, rater effects σ = 0.5) is from answering that other question — "
              "its coverage of the value over the population of raters when each study "
              f"draws its own raters ({n_studies} studies each):", "",
              "| raters per arm | " + " | ".join(f"n = {n}" for n in sizes) + " |",
              "|---|" + "---|" * len(sizes)]
    for g in OTHER_RATERS:
        lines.append(f"| {g} | " + " | ".join(
            f"{100 * other_raters_coverage(g, n, n_studies, seed=seed):.1f}" for n in sizes)
            + " |")
    return "\n".join(lines) + "\n"


# --- calibration -------------------------------------------------------------------------
BIN_SIZES = (1, 2, 3, 5, 10, 20, 30, 50, 100)
BIN_ACCURACIES = np.round(np.r_[np.arange(0.40, 0.951, 0.05), 0.97, 0.98, 0.99], 4)


def _wilson(s: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return wilson_interval(s, n, 0.95)


def dashboard_bars(s: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bar the dashboard draws for a bin of n items s of which are right, for each
    (s, n) of equal n: one study per outcome (a bin of n items of one confidence, s labels
    1), all binned at once by :func:`estimators.assisted.calibration.reliability_stack` —
    what ``reliability_bins`` computes for the study — as the analysis calls it
    ("distinct" bins, level 0.95)."""
    s, n = np.asarray(s, dtype=int), np.asarray(n, dtype=int)
    k = int(n[0])
    if (n != k).any():
        raise ValueError("n: one bin size at a time")
    correct = (np.arange(k)[None, :] < s[:, None]).astype(float)
    got = reliability_stack(np.full(correct.shape, 0.75), correct, strategy="distinct",
                            level=0.95)
    return got.accuracy_lower[:, 0], got.accuracy_upper[:, 0]


BIN_INTERVALS = (("Wilson (former)", _wilson), ("Blaker (now)", dashboard_bars))
# The test each bar inverts, deciding a truth at one of its ends (``covers``), as
# ``proportion.exact_coverage`` decides it (its ACCEPTS): the dashboard's bars for 0/1
# labels are Blaker's; Wilson's ends are taken as inside.
BAR_TESTS = {dashboard_bars: blaker_accepts}


def bin_coverage(k: int, p: np.ndarray, interval, cache: dict | None = None) -> np.ndarray:
    """Exact coverage of a bin of k items at true accuracies p: Σ_s P_p(S = s) 1{p ∈
    interval(s, k)} over every s = 0…k (the intervals of each k computed once; a p at an
    end decided by the interval's own test, ``BAR_TESTS``, as
    :func:`estimators.numerics.proportion.exact_coverage` decides it)."""
    cache = {} if cache is None else cache
    key = (k, interval)
    if key not in cache:
        s = np.arange(k + 1)
        cache[key] = interval(s, np.full(k + 1, k))
    lo, hi = cache[key]
    p = np.atleast_1d(np.asarray(p, dtype=float))
    pmf = stats.binom.pmf(np.arange(k + 1)[None, :], k, p[:, None])
    test = BAR_TESTS.get(interval)
    accepts = None if test is None else test(np.arange(k + 1)[None, :], k, 0.95)
    return (pmf * covers(lo[None, :], hi[None, :], p[:, None], accepts)).sum(axis=1)


def study_bin_coverage(n: int, prob: float, p: float, interval, cache: dict) -> float:
    """Exact coverage of the bar of a bin holding each of n sentences with probability
    ``prob`` (its count k ~ Binomial(n, prob), shown when k ≥ 1) at true accuracy p:
    Σ_{k ≥ 1} P(k) cov_k(p) / P(k ≥ 1), k over its range of probability ≥ 1e-12."""
    ks = np.arange(max(1, int(stats.binom.ppf(1e-12, n, prob))),
                   int(stats.binom.isf(1e-12, n, prob)) + 1)
    w = stats.binom.pmf(ks, n, prob)
    cov = np.array([bin_coverage(int(k), p, interval, cache)[0] for k in ks])
    return float((w * cov).sum() / w.sum())


def _former_ece(c: np.ndarray, x: np.ndarray, n_resamples: int, seed: int
                ) -> tuple[float, float]:
    """The former ECE interval: percentile bootstrap of sentences with the study's bins."""
    levels, bins = np.unique(c, return_inverse=True)
    k = levels.size
    cols = np.zeros((c.size, 2 * k))
    rows = np.arange(c.size)
    cols[rows, bins], cols[rows, k + bins] = c, x
    rs = resampled_sums(cols, n_resamples, seed)
    reps = np.abs(rs[:, k:] - rs[:, :k]).sum(axis=1) / c.size
    lo, hi = np.quantile(reps, [0.025, 0.975])
    return float(lo), float(hi)


def ece_cell(ai: AiCase, n: int, n_studies: int, *, seed: int = 0, n_former: int = 0
             ) -> dict[str, float]:
    """Coverage and mean width of the ECE interval (now: every study at once through
    :func:`estimators.assisted.calibration.reliability_stack`, what ``reliability_bins``
    reports for one study, with the analysis' "distinct" bins — one per confidence; former
    on the first ``n_former`` studies) over simulated studies; truth Σ_c π_c |a(c) − c|."""
    rng = np.random.default_rng([seed, n, AI_CASES.index(ai) if ai in AI_CASES else 99, 7])
    truth = cell_truth(ai, 1)
    studies = simulate_studies(rng, ai, n, 1, n_studies)
    got = reliability_stack(studies.confidence, studies.ai_correct, strategy="distinct",
                            level=0.95, ece_interval=True)
    lo, hi = got.ece_lower, got.ece_upper
    old_hit = old_width = 0.0
    k = min(n_former, n_studies)
    with _one_thread():
        for i in range(k):
            a, b = _former_ece(studies.confidence[i], studies.ai_correct[i], FORMER_RESAMPLES,
                               i)
            old_hit += _covers(a, b, truth.ece)
            old_width += b - a
    return {"truth": truth.ece, "coverage": float(_covered((lo, hi), truth.ece).mean()),
            "width": float((hi - lo).mean()),
            "former": old_hit / k if k else math.nan,
            "former_width": old_width / k if k else math.nan}


def calibration_table(n_studies: int = 1000, n_former: int = 300, seed: int = 0) -> str:
    """The Markdown section of docs/coverage.md for the calibration figure."""
    t0 = time.time()
    levels, probs = confidence_levels()
    cache: dict = {}
    lines = [CALIBRATION_HEADING, "",
             f"Generated by `{command('assisted')} --calibration --studies "
             f"{n_studies} --former {n_former} --seed {seed} --write docs/coverage.md` "
             "(TIME s). **The bars** (the AI's accuracy per confidence bin) are computed "
             "**exactly**: given its count k a bin's number of right verdicts is "
             "Binomial(k, p) (p the bin's accuracy in the population of sentences), so "
             "coverage is a sum over every outcome. **The ECE's interval** is simulated "
             f"({n_studies} studies per cell, SE ≈ "
             f"{100 * math.sqrt(0.95 * 0.05 / n_studies):.1f} points; the former bootstrap "
             f"on {n_former}), with the generator of `estimators/assisted/sentence_coverage.py` "
             "(one bin per confidence level k/20, as the dashboard bins when there are at most "
             "12 levels) and truth ECE = Σ_c π_c |a(c) − c|.",
             "", "By bin size (every accuracy p in "
             f"{{{', '.join(f'{p:g}' for p in BIN_ACCURACIES)}}}):", "",
             "| items in the bin | " + " | ".join(f"{name} min | {name} median"
                                                  for name, _ in BIN_INTERVALS) + " |",
             "|---|" + "---|---|" * len(BIN_INTERVALS)]
    for k in BIN_SIZES:
        row = f"| {k} |"
        for _, interval in BIN_INTERVALS:
            cov = bin_coverage(k, BIN_ACCURACIES, interval, cache)
            row += f" {100 * cov.min():.1f} | {100 * np.median(cov):.1f} |"
        lines.append(row)
    lines += ["", "In studies of n sentences (each bin's count drawn with the study; the bar "
              "shown when the bin holds a sentence): lowest and median coverage over the 11 "
              "confidence levels.", "",
              "| AI | n | " + " | ".join(f"{name} min | {name} median"
                                         for name, _ in BIN_INTERVALS) + " |",
              "|---|---|" + "---|---|" * len(BIN_INTERVALS)]
    for ai in AI_CASES:
        a = ai.accuracy(levels)
        for n in SIZES:
            row = f"| {ai.name} | {n} |"
            for _, interval in BIN_INTERVALS:
                cov = np.array([study_bin_coverage(n, pr, float(p), interval, cache)
                                for pr, p in zip(probs, a, strict=True)])
                row += f" {100 * cov.min():.1f} | {100 * np.median(cov):.1f} |"
            lines.append(row)
    lines += ["", "The ECE's interval:", "",
              "| AI | n | true ECE | now: coverage | now: mean width | former: coverage | "
              "former: mean width |", "|---|---|---|---|---|---|---|"]
    for ai in AI_CASES:
        for n in SIZES:
            r = ece_cell(ai, n, n_studies, seed=seed, n_former=n_former)
            lines.append(f"| {ai.name} | {n} | {r['truth']:.3f} | {100 * r['coverage']:.1f} | "
                         f"{r['width']:.3f} | {100 * r['former']:.1f} | "
                         f"{r['former_width']:.3f} |")
    lines += ["", "The bars: Blaker's interval (now) holds the bin's accuracy at least 95 % of "
              "the time whatever the accuracy and however few sentences the bin holds; "
              "Wilson's (former) fell to 80–86 % in bins of 1–10 sentences and stayed below "
              "93.5 % at accuracies 0.97–0.99 up to 100 sentences. A bin of a handful of "
              "sentences gets a bar spanning most of [0, 1]: that is what a handful of "
              "sentences can say. The ECE: the former percentile bootstrap never held the "
              "ECE of a calibrated AI (0 %: the estimate is biased upwards — |noise| > 0 in "
              "every bin — and so was every resample) nor of a slightly over-confident one. "
              "No interval centred on the ECE can keep the promise there; the interval now "
              "is the range of the ECE over the bins' simultaneous intervals (Šidák–Blaker), "
              "which holds it in at least 95 % of studies by construction and is wide "
              "(0.19 at 500 sentences): read its upper end as \"no worse than\". The "
              "dashboard says this beside the ECE."]
    text = "\n".join(lines) + "\n"
    return text.replace("(TIME s)", f"({time.time() - t0:.0f} s)")


# --- the intervals of every study at once ------------------------------------------------
@dataclass(frozen=True)
class Moments:
    """Per study, cumulative sums over the confidence levels (column 0: t = −∞, nothing;
    column j: every sentence with c ≤ level j) of the count and of h, h², a, a², h·a; and
    their totals. Arrays (S, L + 1)."""

    count: np.ndarray
    h: np.ndarray
    hh: np.ndarray
    a: np.ndarray
    aa: np.ndarray
    ha: np.ndarray

    def hybrid(self, j: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Σ y, Σ y², Σ y·a) at level index j (per study) for y = h below, a above."""
        take = lambda x: np.take_along_axis(x, j[:, None], axis=1)[:, 0]  # noqa: E731
        ta, taa = self.a[:, -1], self.aa[:, -1]
        return (take(self.h) + ta - take(self.a), take(self.hh) + taa - take(self.aa),
                take(self.ha) + taa - take(self.aa))


def level_moments(level: np.ndarray, a: np.ndarray, h: np.ndarray, n_levels: int,
                  mask: np.ndarray | None = None) -> Moments:
    """:class:`Moments` of (S, n) studies (``level``: each sentence's confidence level
    index; ``mask``: the sentences counted)."""
    s, n = level.shape
    w = np.ones(level.shape) if mask is None else np.broadcast_to(mask, level.shape) * 1.0
    flat = (np.arange(s)[:, None] * n_levels + level).ravel()

    def per_level(x: np.ndarray) -> np.ndarray:
        sums = np.bincount(flat, weights=(x * w).ravel(), minlength=s * n_levels)
        return np.c_[np.zeros(s), np.cumsum(sums.reshape(s, n_levels), axis=1)]

    return Moments(per_level(np.ones(level.shape)), per_level(h), per_level(h * h),
                   per_level(a), per_level(a * a), per_level(h * a))


def _curves(confidence: np.ndarray, a: np.ndarray, h: np.ndarray, levels: np.ndarray
            ) -> dict[str, np.ndarray]:
    """The dashboard's Figure 1 for every study at once — :func:`curve_bands`, the function
    :func:`curve_band` calls for one study — laid out on the confidence levels (column j:
    t = level j − 1, column 0: t = −∞; a level no study saw is never shown): per point
    (S, L + 1) ``shown``, ``lower``/``upper``, ``gain_lower``/``gain_upper``; per study
    ``range`` (S, 2), the thresholds as good."""
    band = curve_bands(confidence, a, h)
    column = np.searchsorted(np.r_[-np.inf, levels], band.thresholds)
    out = {"shown": np.zeros((confidence.shape[0], levels.size + 1), dtype=bool)}
    out["shown"][:, column] = band.shown
    for name in ("lower", "upper", "gain_lower", "gain_upper"):
        out[name] = np.full(out["shown"].shape, np.nan)
        out[name][:, column] = getattr(band, name)
    out["range"] = band.best_threshold_interval
    return out


def held_out_at_once(cal_mo: Moments, ho_mo: Moments, budget: float
                     ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Per study the level index of the threshold chosen on the calibration sentences under
    ``budget`` and the held-out (lower, upper) of accuracy, AI alone and gain."""
    n_cal, n_ho = cal_mo.count[:, -1:], ho_mo.count[:, -1]
    shown = np.diff(cal_mo.count, prepend=0, axis=1) > 0
    shown[:, 0] = True
    acc = (cal_mo.h + cal_mo.a[:, -1:] - cal_mo.a) / n_cal
    j = _best_index(acc, np.where(shown, cal_mo.count / n_cal, np.inf), budget)
    return j, _three(ho_mo, j, n_ho)


def _three(mo: Moments, j: np.ndarray, n: np.ndarray
           ) -> list[tuple[np.ndarray, np.ndarray]]:
    """(lower, upper) of the hybrid accuracy at level index j, of the AI alone and of the
    gain, on the sentences of ``mo``."""
    sy, syy, sya = mo.hybrid(j)
    ta, taa = mo.a[:, -1], mo.aa[:, -1]
    _, lo, hi = mean_bounds(n, sy, syy)
    _, alo, ahi = mean_bounds(n, ta, taa)
    _, glo, ghi = difference_bounds(n, sy, syy, ta, taa, sya)
    return [(lo, hi), (alo, ahi), (glo, ghi)]


def bands_at_once(level_band: np.ndarray, cal_mo: dict, ho_mo: dict, sources: tuple[str, ...]
                  ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Per study and band the chosen source (index into ("ai",) + ``sources``) and the
    held-out (lower, upper) of accuracy, AI alone and gain (``best_band_sources``).
    ``cal_mo``/``ho_mo``: :class:`Moments` per arm (same AI sums in each)."""
    first = cal_mo[sources[0]]
    edges = np.r_[0, np.flatnonzero(np.diff(level_band)) + 1, level_band.size]

    def band_sum(x: np.ndarray, k: int) -> np.ndarray:  # sums of band k (cumulative arrays)
        return x[:, edges[k + 1]] - x[:, edges[k]]

    n_bands = edges.size - 1
    s = first.count.shape[0]
    chosen = np.zeros((s, n_bands), dtype=int)
    sy = np.zeros(s)
    syy = np.zeros(s)
    sya = np.zeros(s)
    for k in range(n_bands):
        cnt = band_sum(first.count, k)
        with np.errstate(divide="ignore", invalid="ignore"):
            best = np.where(cnt > 0, band_sum(first.a, k) / cnt, -np.inf)
            for i, src in enumerate(sources):
                acc = band_sum(cal_mo[src].h, k) / cnt
                better = (cnt > 0) & (acc > best + _TIE)
                chosen[better, k] = i + 1
                best = np.where(better, acc, best)
        ho_first = ho_mo[sources[0]]
        part = [band_sum(ho_first.a, k), band_sum(ho_first.aa, k), band_sum(ho_first.aa, k)]
        for i, src in enumerate(sources):
            mo = ho_mo[src]
            use = chosen[:, k] == i + 1
            for p, x in zip(part, (mo.h, mo.hh, mo.ha), strict=True):
                p[use] = band_sum(x, k)[use]
        sy, syy, sya = sy + part[0], syy + part[1], sya + part[2]
    n = ho_first.count[:, -1]
    ta, taa = ho_first.a[:, -1], ho_first.aa[:, -1]
    _, lo, hi = mean_bounds(n, sy, syy)
    _, alo, ahi = mean_bounds(n, ta, taa)
    _, glo, ghi = difference_bounds(n, sy, syy, ta, taa, sya)
    return chosen, [(lo, hi), (alo, ahi), (glo, ghi)]
