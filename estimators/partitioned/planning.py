"""How many labels to collect (METHODS.md M1, "labels needed").

With several queries per item the labels of an item are not independent
(:mod:`estimators.partitioned.clustered`): a study's labels then carry the information of n/d
independent ones (effective counts, d the design effect of the joint score), and planning
counts in effective labels. :func:`routing_information` gives, for the routing protocol
(a uniform class order per item, distinct classes, stopping at the first "yes"), the
expected labels, model information and squared score of one item, hence the design effect
a study will have before it has any labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_VARIANCE_ACCURACY = 0.01  # plan as if A were at least this far from 0 and 1


def labels_needed(n_ord, accuracy, k: int, design_effect=1.0) -> np.ndarray | float:
    """n_c = (1 + (K−2)/A) · n_o complementary labels carry the information of n_o ordinary
    ones (equal variance of Â_comp and Â_ord); complementary labels with a design effect d
    relative to the ordinary ones (several queries per item) count n_c/d: d times as many."""
    a = np.clip(np.asarray(accuracy, float), MIN_VARIANCE_ACCURACY, 1.0)
    out = (1 + (k - 2) / a) * np.asarray(n_ord, float) * np.asarray(design_effect, float)
    return float(out) if np.ndim(out) == 0 else out


def _info_per_label(accuracy, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Fisher information of one ordinary and of one complementary label:
    1/(A(1−A)) and 1/((A+K−2)(1−A))."""
    a = np.clip(np.asarray(accuracy, float), MIN_VARIANCE_ACCURACY, 1 - MIN_VARIANCE_ACCURACY)
    return 1 / (a * (1 - a)), 1 / ((a + k - 2) * (1 - a))


def complementary_labels_for_width(target_width, accuracy, k: int, n_ord=0, n_comp=0,
                                   confidence: float = 0.95, design_effect=1.0,
                                   ordinary_per_complementary=0.0) -> np.ndarray | float:
    """Further complementary labels until the ML interval's full width 2 z SE reaches
    ``target_width``, given the labels already collected (0 when reached).

    In effective counts: the collected labels carry I = n_o/(A(1−A)) + n_c/((A+K−2)(1−A))
    of model information, worth I/d with a design effect d (several queries per item; 1
    with one query per item). The target needs (2z/width)² of effective information. Each
    further complementary label brings i_c = 1/((A+K−2)(1−A)), plus r·i_o when it comes
    with r = ``ordinary_per_complementary`` ordinary labels (with several queries per item,
    the "yes" answers of its items: the collected ratio n_o/n_c), and counts 1/d like the
    collected ones: N = (d (2z/width)² − I) / (i_c + r i_o), rounded up."""
    z = stats.norm.ppf(0.5 + confidence / 2)
    i_ord, i_comp = _info_per_label(accuracy, k)
    target = (2 * z / np.asarray(target_width, float)) ** 2
    have = np.asarray(n_ord, float) * i_ord + np.asarray(n_comp, float) * i_comp
    per_label = i_comp + np.asarray(ordinary_per_complementary, float) * i_ord
    d = np.asarray(design_effect, float)
    out = np.ceil(np.maximum(d * target - have, 0.0) / per_label)
    return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class ItemInformation:
    """Per item routed with the protocol, at an accuracy A (expectations over the item's
    truth, the AI's answer and the class order): labels, queries asked, model (Fisher)
    information of the joint likelihood and squared score — whose ratio is the design
    effect d = E[U²]/E[I] (1 with one query per item)."""

    ordinary: float
    complementary: float
    queries: float
    information: float
    squared_score: float

    @property
    def design_effect(self) -> float:
        return self.squared_score / self.information


def routing_information(accuracy: float, k: int, queries_per_item: int = 1) -> ItemInformation:
    """:class:`ItemInformation` of the routing protocol (perfect specialists: "yes" exactly
    at the true class). The truth's position P in the item's class order is uniform on
    0..K−1; the item gets m = min(P, Q) complementary labels and an ordinary one if P < Q
    (Q queries per item, at most K).
    Right AI (probability A): the ordinary label is correct and every complementary one
    misses, score U = 1{P<Q}/A + m/((K−1)q). Wrong AI: the ordinary label is wrong, and one
    complementary label hits the prediction with probability m/(K−1) (the asked wrong
    classes are a uniform subset), U = −1{P<Q}/(1−A) + (m − h)/((K−1)q) − h/((K−1)(1−q)),
    h ∈ {0, 1}; q = (A+K−2)/(K−1). With K = 2 a "no" is an ordinary label of the other
    class: one query per item says all there is."""
    a = float(np.clip(accuracy, MIN_VARIANCE_ACCURACY, 1 - MIN_VARIANCE_ACCURACY))
    i_ord, i_comp = (float(x) for x in _info_per_label(a, k))
    if k < 3:
        return ItemInformation(1.0, 0.0, 1.0, i_ord, i_ord)
    q_max = min(int(queries_per_item), k)
    q = (a + k - 2) / (k - 1)
    pos = np.arange(k)
    m = np.minimum(pos, q_max).astype(float)
    o = (pos < q_max).astype(float)
    miss, hit = 1 / ((k - 1) * q), -1 / ((k - 1) * (1 - q))
    right = o / a + m * miss
    wrong_no_hit = -o / (1 - a) + m * miss
    wrong_hit = -o / (1 - a) + (m - 1) * miss + hit
    p_hit = m / (k - 1)
    squared = a * right**2 + (1 - a) * (p_hit * wrong_hit**2 + (1 - p_hit) * wrong_no_hit**2)
    asked = np.minimum(pos + 1, q_max)
    return ItemInformation(ordinary=float(o.mean()), complementary=float(m.mean()),
                           queries=float(asked.mean()),
                           information=float((o * i_ord + m * i_comp).mean()),
                           squared_score=float(squared.mean()))


@dataclass(frozen=True)
class LabelPlan:
    """Labels for a target full interval width: only ordinary, only complementary, or the
    routed mix — ``routed_queries`` on ``items`` items (one query per item: a share 1/K of
    answers are 'yes', the rest 'no'; several: the protocol's queries per item, whose
    labels count 1/``design_effect`` each)."""

    ordinary_only: float
    complementary_only: float
    routed_queries: float
    items: float
    design_effect: float


def plan_labels(target_width: float, pilot_accuracy: float, k: int,
                confidence: float = 0.95, queries_per_item: int = 1) -> LabelPlan:
    """Plan from scratch with a pilot accuracy Ã. ``routed_queries`` is what partitioned
    supervision needs: with one query per item the drawn class is the true one with
    probability 1/K (an ordinary label), otherwise the answer is a complementary label;
    with several, items are routed by the protocol (:func:`routing_information`) and
    the ML variance of G items is d/(G·E[I]) (the sandwich E[U²]/(G E[I]²)), so
    G = d (2z/width)² / E[I] items, each asking E[queries] routed queries."""
    z = stats.norm.ppf(0.5 + confidence / 2)
    i_ord, i_comp = _info_per_label(pilot_accuracy, k)
    target = (2 * z / target_width) ** 2
    item = routing_information(pilot_accuracy, k, queries_per_item)
    if queries_per_item <= 1:
        per_query = i_ord / k + i_comp * (k - 1) / k
        routed = float(np.ceil(target / per_query))
        return LabelPlan(ordinary_only=float(np.ceil(target / i_ord)),
                         complementary_only=float(np.ceil(target / i_comp)),
                         routed_queries=routed, items=routed, design_effect=1.0)
    d = item.design_effect
    items = float(np.ceil(d * target / item.information))
    return LabelPlan(ordinary_only=float(np.ceil(target / i_ord)),
                     complementary_only=float(np.ceil(target / i_comp)),
                     routed_queries=float(np.ceil(items * item.queries)), items=items,
                     design_effect=d)
