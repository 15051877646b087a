"""Simulated assisted study with known truth (METHODS.md M2; issue 9 "A simulated study with
known AI and rater behaviour recovers the planted accuracies, reliance effects and best
threshold within their intervals"). Used by the tests and by the demo seeding.

Items. Gold is Accurate with probability ``share_accurate``. The AI is sampled
``n_samples`` times; the share agreeing with its mode is the confidence c = k / N, drawn as
k = ⌊N (½ + ½ U) + ½⌋ clipped to [⌈N/2⌉, N], U ~ Beta(``confidence_beta``). The AI's verdict
is right with the planted probability

    a(c) = clip(ai_accuracy_intercept + ai_accuracy_slope · c, 0, 1)

(intercept 0, slope 1: perfectly calibrated; the default −0.2 + 1.2 c is over-confident at
low confidence, as the paper's AI was: 60 % right where c ≤ 0.62), else it is the opposite
verdict.

Raters. ``raters_per_arm`` raters per arm, randomised to arms (balanced, seeded); rater r
has an effect δ_r ~ Uniform(−s, s), s = ``rater_spread``. Each rater rates
``items_per_rater`` distinct items among those with c ≤ ``rated_max_confidence``, in a
random order, dealt round-robin from a permutation per arm so every item gets ⌊·⌋ or ⌈·⌉
ratings. A rating is skipped with probability ``skip_rate``; otherwise it is correct with
probability p_arm + δ_r, p_arm = ``accuracy_ai_right`` when the AI is right on the item,
``accuracy_ai_wrong`` when it is wrong (this is what the reliance figures must recover:
E δ = 0, so the planted values are the population means over raters). A wrong rating is
"can't assess" with probability ``cant_assess_share``, otherwise the opposite verdict (an
Inaccurate verdict is drawn among inaccurate / unsupported / disputed / no_attribution).
Rater confidence (0–3) is drawn higher for correct ratings; helpfulness (0–2) from the arm's
``helpfulness_probs`` (None: not asked, NaN); time on task log-normal around
``median_seconds``.

Truth for hybridization with individual ratings: an item with confidence c routed to arm
humans is right with probability h(c) = a(c) p_right + (1 − a(c)) p_wrong, so the population
hybrid accuracy is A(t) = Σ_c π(c) a(c) + Σ_{c ≤ t} π(c) (h(c) − a(c)) with π(c) the
probability of confidence c (:meth:`AssistedDesign.true_curve`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

_INACCURATE_LABELS = ("inaccurate", "unsupported", "disputed", "no_attribution")
_INACCURATE_PROBS = (0.55, 0.2, 0.15, 0.1)
_CONFIDENCE_IF_RIGHT = (0.05, 0.2, 0.4, 0.35)
_CONFIDENCE_IF_WRONG = (0.15, 0.35, 0.35, 0.15)


@dataclass(frozen=True)
class ArmBehaviour:
    """Planted behaviour of one arm's raters (see the module docstring)."""

    name: str
    accuracy_ai_right: float
    accuracy_ai_wrong: float
    helpfulness_probs: tuple[float, float, float] | None = None
    median_seconds: float = 120.0


BASELINE = ArmBehaviour("baseline", 0.75, 0.65, None, 100.0)
EVIDENCE = ArmBehaviour("evidence", 0.80, 0.66, (0.2, 0.5, 0.3), 160.0)
FULL_TRACE = ArmBehaviour("full_trace", 0.90, 0.45, (0.1, 0.4, 0.5), 140.0)


@dataclass(frozen=True)
class AssistedDesign:
    """Parameters of a simulated assisted study (plain numbers: JSON-able)."""

    arms: tuple[ArmBehaviour, ...] = (BASELINE, EVIDENCE, FULL_TRACE)
    n_items: int = 400
    n_samples: int = 20
    confidence_beta: tuple[float, float] = (2.0, 1.2)
    ai_accuracy_intercept: float = -0.2
    ai_accuracy_slope: float = 1.2
    share_accurate: float = 0.6
    raters_per_arm: int = 20
    items_per_rater: int = 60
    rated_max_confidence: float = 1.0
    rater_spread: float = 0.05
    skip_rate: float = 0.02
    cant_assess_share: float = 0.2
    seconds_sigma: float = 0.5

    def __post_init__(self) -> None:
        names = [a.name for a in self.arms]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"arms: need at least one arm and distinct names, got {names}")
        for a in self.arms:
            for fld in ("accuracy_ai_right", "accuracy_ai_wrong"):
                p = getattr(a, fld)
                if not (self.rater_spread <= p <= 1 - self.rater_spread):
                    raise ValueError(f"arms[{a.name!r}].{fld}: {p} ± rater_spread "
                                     f"{self.rater_spread} leaves [0, 1]")
            if a.helpfulness_probs is not None and (
                    len(a.helpfulness_probs) != 3 or min(a.helpfulness_probs) < 0
                    or not math.isclose(sum(a.helpfulness_probs), 1.0)):
                raise ValueError(f"arms[{a.name!r}].helpfulness_probs: need 3 probabilities "
                                 f"summing to 1, got {a.helpfulness_probs}")
        for fld in ("share_accurate", "skip_rate", "cant_assess_share"):
            if not 0 <= getattr(self, fld) <= 1:
                raise ValueError(f"{fld}: must lie in [0, 1], got {getattr(self, fld)}")
        if self.n_items < 1 or self.n_samples < 1 or self.raters_per_arm < 1:
            raise ValueError("n_items, n_samples and raters_per_arm must be positive")
        if self.items_per_rater < 1 or self.items_per_rater > self.n_items:
            raise ValueError(f"items_per_rater: {self.items_per_rater} must lie in "
                             f"1..n_items ({self.n_items})")

    def arm(self, name: str) -> ArmBehaviour:
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(name)

    def confidence_levels(self) -> tuple[np.ndarray, np.ndarray]:
        """(possible confidences k/N, their probabilities π) of the design."""
        n = self.n_samples
        k = np.arange(math.ceil(n / 2), n + 1)
        # k = floor(N(½ + ½U) + ½)  ⇔  (2(k − ½)/N − 1) ≤ U < (2(k + ½)/N − 1)
        lo = np.clip(2 * (k - 0.5) / n - 1, 0, 1)
        hi = np.clip(2 * (k + 0.5) / n - 1, 0, 1)
        lo[0], hi[-1] = 0.0, 1.0
        cdf = stats.beta(*self.confidence_beta).cdf
        return k / n, cdf(hi) - cdf(lo)

    def ai_accuracy(self, confidence: np.ndarray) -> np.ndarray:
        """The planted a(c)."""
        return np.clip(self.ai_accuracy_intercept + self.ai_accuracy_slope
                       * np.asarray(confidence, dtype=float), 0.0, 1.0)

    def true_curve(self, arm: str) -> tuple[np.ndarray, np.ndarray]:
        """Population hybrid accuracy A(t) with individual ratings of ``arm`` at every
        possible confidence t (first point: −∞, all AI)."""
        c, pi = self.confidence_levels()
        a = self.ai_accuracy(c)
        beh = self.arm(arm)
        h = a * beh.accuracy_ai_right + (1 - a) * beh.accuracy_ai_wrong
        return np.r_[-np.inf, c], float((pi * a).sum()) + np.r_[0.0, np.cumsum(pi * (h - a))]

    def true_best_threshold(self, arm: str) -> float:
        t, acc = self.true_curve(arm)
        return float(t[int(np.argmax(acc >= acc.max() - 1e-12))])


@dataclass(frozen=True)
class SimulatedAssistedStudy:
    """Items (arrays of length n_items) and ratings (arrays of length n_ratings)."""

    design: AssistedDesign
    confidence: np.ndarray
    n_samples: np.ndarray
    n_agree: np.ndarray
    ai_label: np.ndarray
    gold: np.ndarray
    ai_correct: np.ndarray
    ai_accuracy_true: np.ndarray
    rater: np.ndarray
    arm: np.ndarray
    item: np.ndarray
    position: np.ndarray
    label: np.ndarray
    rater_confidence: np.ndarray
    helpfulness: np.ndarray
    seconds: np.ndarray
    rater_arm: np.ndarray
    rater_effect: np.ndarray
    arm_names: tuple[str, ...] = field(default=())

    def item_records(self) -> list[dict[str, object]]:
        """One dict per item: item index, confidence, n_samples, n_agree, ai_label, gold,
        ai_correct."""
        return [{"item": i, "confidence": float(self.confidence[i]),
                 "n_samples": int(self.n_samples[i]), "n_agree": int(self.n_agree[i]),
                 "ai_label": str(self.ai_label[i]), "gold": str(self.gold[i]),
                 "ai_correct": bool(self.ai_correct[i])} for i in range(self.confidence.size)]

    def rating_records(self) -> list[dict[str, object]]:
        """One dict per rating: rater, arm, item, position (order within the rater's
        sequence), label, rater_confidence (0–3), helpfulness (0–2 or None), seconds."""
        return [{"rater": int(self.rater[j]), "arm": str(self.arm[j]), "item": int(self.item[j]),
                 "position": int(self.position[j]), "label": str(self.label[j]),
                 "rater_confidence": int(self.rater_confidence[j]),
                 "helpfulness": None if math.isnan(self.helpfulness[j])
                 else int(self.helpfulness[j]),
                 "seconds": float(self.seconds[j])} for j in range(self.rater.size)]


def simulate_assisted(design: AssistedDesign, seed: int = 0) -> SimulatedAssistedStudy:
    """Draw one study of ``design`` (module docstring); deterministic given ``seed``."""
    rng = np.random.default_rng(seed)
    d = design
    n, big_n = d.n_items, d.n_samples
    u = rng.beta(*d.confidence_beta, size=n)
    k = np.clip(np.floor(big_n * (0.5 + 0.5 * u) + 0.5), math.ceil(big_n / 2), big_n)
    k = k.astype(int)
    conf = k / big_n
    a_true = d.ai_accuracy(conf)
    ai_right = rng.random(n) < a_true
    gold_acc = rng.random(n) < d.share_accurate
    ai_acc_verdict = np.where(ai_right, gold_acc, ~gold_acc)
    gold = np.where(gold_acc, "accurate", "inaccurate")
    ai_label = np.where(ai_acc_verdict, "accurate", "inaccurate")

    eligible = np.flatnonzero(conf <= d.rated_max_confidence)
    if eligible.size < d.items_per_rater:
        raise ValueError(f"rated_max_confidence: only {eligible.size} items at or below "
                         f"{d.rated_max_confidence}, fewer than items_per_rater "
                         f"({d.items_per_rater})")
    n_arms, per_arm, kk = len(d.arms), d.raters_per_arm, d.items_per_rater
    rater_arm = rng.permutation(np.repeat(np.arange(n_arms), per_arm))
    effect = rng.uniform(-d.rater_spread, d.rater_spread, size=rater_arm.size)
    raters, items, positions = [], [], []
    for a in range(n_arms):
        members = np.flatnonzero(rater_arm == a)
        perm = rng.permutation(eligible)
        for j, r in enumerate(members):
            chosen = perm[(j * kk + np.arange(kk)) % eligible.size]
            raters.append(np.full(kk, r))
            items.append(rng.permutation(chosen))
            positions.append(np.arange(kk))
    rater = np.concatenate(raters)
    item = np.concatenate(items)
    position = np.concatenate(positions)
    m = rater.size
    arm_idx = rater_arm[rater]
    p_right = np.array([b.accuracy_ai_right for b in d.arms])
    p_wrong = np.array([b.accuracy_ai_wrong for b in d.arms])
    p = np.where(ai_right[item], p_right[arm_idx], p_wrong[arm_idx]) + effect[rater]
    correct = rng.random(m) < p
    skipped = rng.random(m) < d.skip_rate
    cant = rng.random(m) < d.cant_assess_share
    inacc_label = np.asarray(_INACCURATE_LABELS)[rng.choice(4, size=m, p=_INACCURATE_PROBS)]
    g = gold_acc[item]
    says_accurate = np.where(correct, g, ~g)
    label = np.where(says_accurate, "accurate", inacc_label).astype(object)
    label[~correct & cant] = "cant_assess"
    label[skipped] = "skip"
    rconf = np.where(correct, rng.choice(4, size=m, p=_CONFIDENCE_IF_RIGHT),
                     rng.choice(4, size=m, p=_CONFIDENCE_IF_WRONG))
    helpful = np.full(m, np.nan)
    for a, beh in enumerate(d.arms):
        sel = arm_idx == a
        if beh.helpfulness_probs is not None:
            helpful[sel] = rng.choice(3, size=int(sel.sum()), p=beh.helpfulness_probs)
    medians = np.array([b.median_seconds for b in d.arms])
    seconds = medians[arm_idx] * np.exp(d.seconds_sigma * rng.standard_normal(m))
    names = tuple(b.name for b in d.arms)
    return SimulatedAssistedStudy(
        design=d, confidence=conf, n_samples=np.full(n, big_n), n_agree=k, ai_label=ai_label,
        gold=gold, ai_correct=ai_right, ai_accuracy_true=a_true, rater=rater,
        arm=np.asarray(names, dtype=object)[arm_idx].astype(str), item=item, position=position,
        label=label.astype(str), rater_confidence=rconf, helpfulness=helpful, seconds=seconds,
        rater_arm=np.asarray(names)[rater_arm], rater_effect=effect, arm_names=names)
