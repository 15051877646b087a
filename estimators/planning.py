"""How many labels to collect (METHODS.md M1, "labels needed")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_VARIANCE_ACCURACY = 0.01  # plan as if A were at least this far from 0 and 1


def labels_needed(n_ord, accuracy, k: int) -> np.ndarray | float:
    """n_c = (1 + (K−2)/A) · n_o complementary labels carry the information of n_o ordinary
    ones (equal variance of Â_comp and Â_ord)."""
    a = np.clip(np.asarray(accuracy, float), MIN_VARIANCE_ACCURACY, 1.0)
    out = (1 + (k - 2) / a) * np.asarray(n_ord, float)
    return float(out) if np.ndim(out) == 0 else out


def _info_per_label(accuracy, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Fisher information of one ordinary and of one complementary label:
    1/(A(1−A)) and 1/((A+K−2)(1−A))."""
    a = np.clip(np.asarray(accuracy, float), MIN_VARIANCE_ACCURACY, 1 - MIN_VARIANCE_ACCURACY)
    return 1 / (a * (1 - a)), 1 / ((a + k - 2) * (1 - a))


def complementary_labels_for_width(target_width, accuracy, k: int, n_ord=0, n_comp=0,
                                   confidence: float = 0.95) -> np.ndarray | float:
    """Further complementary labels until the ML interval's full width 2 z SE reaches
    ``target_width``, given the labels already collected (0 when reached):
    need total information I* = (2z/width)², minus n_o/(A(1−A)) + n_c/((A+K−2)(1−A)),
    divided by the information of one complementary label."""
    z = stats.norm.ppf(0.5 + confidence / 2)
    i_ord, i_comp = _info_per_label(accuracy, k)
    target = (2 * z / np.asarray(target_width, float)) ** 2
    have = np.asarray(n_ord, float) * i_ord + np.asarray(n_comp, float) * i_comp
    out = np.ceil(np.maximum(target - have, 0.0) / i_comp)
    return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class LabelPlan:
    """Labels for a target full interval width: only ordinary, only complementary, or the
    routed mix (one query per item: a share A/K of answers are 'yes', the rest 'no')."""

    ordinary_only: float
    complementary_only: float
    routed_queries: float


def plan_labels(target_width: float, pilot_accuracy: float, k: int,
                confidence: float = 0.95) -> LabelPlan:
    """Plan from scratch with a pilot accuracy Ã. ``routed_queries`` is what partitioned
    supervision needs: the drawn class is the true one with probability 1/K (an ordinary
    label), otherwise the answer is a complementary label."""
    z = stats.norm.ppf(0.5 + confidence / 2)
    i_ord, i_comp = _info_per_label(pilot_accuracy, k)
    target = (2 * z / target_width) ** 2
    per_query = i_ord / k + i_comp * (k - 1) / k
    return LabelPlan(ordinary_only=float(np.ceil(target / i_ord)),
                     complementary_only=float(np.ceil(target / i_comp)),
                     routed_queries=float(np.ceil(target / per_query)))
