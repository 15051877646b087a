"""Confidence-based hybridization (METHODS.md M2 "Hybridization"; paper 001, section 2.3 and
Figures 1, 8, 9, 12).

Each item i has the AI's confidence c_i, the AI's correctness a_i ∈ {0, 1} and a human
correctness h_i ∈ [0, 1] (1/0 for a majority vote, the share of correct ratings for
individual ratings; see :mod:`estimators.assisted.factuality`). At threshold t the items with
c_i ≤ t are taken from the humans and the others from the AI:

    hybrid accuracy(t) = (1/n) [ Σ_{c_i ≤ t} h_i + Σ_{c_i > t} a_i ],
    human share(t)     = #{c_i ≤ t} / n.

:func:`threshold_curve` evaluates this at every distinct confidence value (plus the all-AI
end, t = −∞) from one sort and two cumulative sums: O(n log n).

Beyond the paper (METHODS.md M2): the best threshold is chosen on calibration items and its
accuracy reported on held-out items (:func:`held_out_threshold` — choosing T and reporting
its accuracy on the same items overstates it, the paper's stated limitation); a budget caps
the human share; bands of confidence can each go to their own arm or to the AI
(:func:`band_accuracy`, :func:`best_band_sources`).

Intervals (issue 18) treat the items as the sampling unit — independent draws from the
population of items the study's items come from, each with its human label as the study's
raters gave it (the raters are held fixed: the rater-clustered reliance intervals speak of
other raters). An accuracy is Clopper–Pearson's interval at the items' effective size
(Korn–Graubard), a gain over the AI on the same items Newcombe's paired interval
(:mod:`estimators.numerics.units`; closed form, from sums over items). A held-out figure is
a fixed-threshold estimate on items independent of the choice. Their coverage, measured on
simulated studies with known truth: docs/coverage.md "Assisted: hybridization".

Items without a human label (h_i = NaN, e.g. an arm that rated only items with c ≤ 0.75):
a threshold that would send such an item to the humans is left out of the curve.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from estimators.numerics.bootstrap import UNDEFINED, IntervalEstimate, _json_float, check_level
from estimators.numerics.units import difference_bounds, mean_bounds, unit_differences, unit_means

AI = "ai"
# Accuracies within this of the best count as ties (cumulative sums in floating point).
_TIE = 1e-9


def _array(x: ArrayLike, field: str, n: int | None = None) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{field}: need a 1-D array, got shape {arr.shape}")
    if n is not None and arr.size != n:
        raise ValueError(f"{field}: {arr.size} entries, expected {n} (one per item)")
    return arr


def check_confidence(confidence: ArrayLike) -> np.ndarray:
    c = _array(confidence, "confidence")
    bad = ~np.isfinite(c)
    if bad.any():
        raise ValueError(f"confidence[{int(np.argmax(bad))}]: not a finite number")
    return c


def check_share(x: ArrayLike, field: str, n: int, *, allow_nan: bool) -> np.ndarray:
    """A per-item array of values in [0, 1] (NaN allowed where ``allow_nan``)."""
    arr = _array(x, field, n)
    bad = (arr < 0) | (arr > 1) | (np.isinf(arr))
    if not allow_nan:
        bad |= np.isnan(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{field}[{i}]: {arr[i]} is not in [0, 1]"
                         + ("" if allow_nan else " (missing values are not allowed here)"))
    return arr


def _inputs(confidence: ArrayLike, ai_correct: ArrayLike, human_correct: ArrayLike
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = check_confidence(confidence)
    if c.size == 0:
        raise ValueError("confidence: no items")
    a = check_share(ai_correct, "ai_correct", c.size, allow_nan=False)
    h = check_share(human_correct, "human_correct", c.size, allow_nan=True)
    return c, a, h


@dataclass(frozen=True)
class BestThreshold:
    """The threshold with the highest hybrid accuracy (−∞: all AI) and its human share."""

    threshold: float
    accuracy: float
    human_share: float
    index: int

    def as_dict(self) -> dict[str, float | None]:
        return {"threshold": _json_float(self.threshold), "accuracy": _json_float(self.accuracy),
                "human_share": _json_float(self.human_share)}


def _best_index(accuracy: np.ndarray, human_share: np.ndarray, max_human_share: float
                ) -> np.ndarray:
    """First index on the last axis (smallest human share) within _TIE of the best accuracy
    among the points whose human share is within the budget (the all-AI point always is);
    leading axes are independent curves (a point to be skipped has human share ∞)."""
    ok = human_share <= max_human_share + 1e-12
    acc = np.where(ok, accuracy, -np.inf)
    return np.argmax(acc >= acc.max(axis=-1, keepdims=True) - _TIE, axis=-1)


def _check_budget(max_human_share: float) -> None:
    if not 0 <= max_human_share <= 1:
        raise ValueError(f"max_human_share: must lie in [0, 1], got {max_human_share}")


@dataclass(frozen=True)
class ThresholdCurve:
    """Hybrid accuracy and human share per threshold; point 0 is the all-AI end (−∞).

    Unpacks as ``thresholds, hybrid_accuracy, human_share``."""

    thresholds: np.ndarray
    hybrid_accuracy: np.ndarray
    human_share: np.ndarray
    n_items: int

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.thresholds, self.hybrid_accuracy, self.human_share))

    @property
    def ai_accuracy(self) -> float:
        """Accuracy of the AI alone (the all-AI end)."""
        return float(self.hybrid_accuracy[0])

    @property
    def human_accuracy(self) -> float:
        """Accuracy of the humans alone (NaN when some item has no human label)."""
        return float(self.hybrid_accuracy[-1]) if self.human_share[-1] == 1 else math.nan

    def best(self, max_human_share: float = 1.0) -> BestThreshold:
        """The most accurate threshold sending at most ``max_human_share`` of the items to
        humans; ties go to the smaller human share."""
        _check_budget(max_human_share)
        j = int(_best_index(self.hybrid_accuracy, self.human_share, max_human_share))
        return BestThreshold(float(self.thresholds[j]), float(self.hybrid_accuracy[j]),
                             float(self.human_share[j]), j)

    def rows(self) -> list[dict[str, float | None]]:
        return [{"threshold": _json_float(t), "hybrid_accuracy": float(a),
                 "human_share": float(s)}
                for t, a, s in zip(self.thresholds, self.hybrid_accuracy, self.human_share,
                                   strict=True)]


def _sorted_groups(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order that sorts c, index in sorted order of the last item of each distinct value)."""
    order = np.argsort(c, kind="stable")
    cs = c[order]
    ends = np.flatnonzero(np.r_[cs[1:] != cs[:-1], True])
    return order, ends


UNLABELLED = ("truncate", "ai")


def _fill(a: np.ndarray, h: np.ndarray, unlabelled: str) -> np.ndarray:
    if unlabelled not in UNLABELLED:
        raise ValueError(f"unlabelled: expected one of {UNLABELLED}, got {unlabelled!r}")
    return np.where(np.isnan(h), a, h) if unlabelled == "ai" else h


def threshold_curve(confidence: ArrayLike, ai_correct: ArrayLike, human_correct: ArrayLike, *,
                    unlabelled: str = "truncate") -> ThresholdCurve:
    """Hybrid accuracy and human share at each distinct confidence value (module formula).

    Point 0 is t = −∞ (all items from the AI); point j ≥ 1 is the j-th smallest distinct
    confidence. Items without a human label (NaN): with ``unlabelled="truncate"`` the points
    that would send one to the humans are left out; with ``"ai"`` such an item keeps the
    AI's label (what live routing does when no human answered; the human share still counts
    it). O(n log n): one sort, two cumulative sums."""
    c, a, h = _inputs(confidence, ai_correct, human_correct)
    h = _fill(a, h, unlabelled)
    n = c.size
    order, ends = _sorted_groups(c)
    hs = h[order]
    missing = np.isnan(hs)
    keep = np.cumsum(missing)[ends] == 0
    ends = ends[keep]
    as_ = a[order]
    cum_h = np.cumsum(np.where(missing, 0.0, hs))[ends]
    cum_a = np.cumsum(as_)[ends]
    total_a = float(as_.sum())
    return ThresholdCurve(
        thresholds=np.r_[-np.inf, c[order][ends]],
        hybrid_accuracy=np.r_[total_a, cum_h + total_a - cum_a] / n,
        human_share=np.r_[0.0, (ends + 1) / n],
        n_items=n,
    )


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (Steele, Lea & Flood 2014): a fixed, platform-independent hash."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def calibration_split(item_ids: ArrayLike, calibration_share: float = 0.5, seed: int = 0
                      ) -> np.ndarray:
    """True for calibration items, False for held-out ones.

    Item i is a calibration item when a hash of (seed, id_i) — SplitMix64, mapped to [0, 1)
    — falls below ``calibration_share``: deterministic, independent of item order, and an
    item keeps its side when other items are added or removed. ``item_ids`` are integers
    (e.g. primary keys)."""
    ids = np.asarray(item_ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError("item_ids: need a 1-D array of integer ids")
    if not 0 < calibration_share < 1:
        raise ValueError(f"calibration_share: must lie strictly between 0 and 1, "
                         f"got {calibration_share}")
    if int(seed) != seed or seed < 0:
        raise ValueError(f"seed: need a non-negative integer, got {seed}")
    key = _splitmix64(np.array([seed], dtype=np.uint64))[0]
    u = _splitmix64(ids.astype(np.int64).view(np.uint64) ^ key) >> np.uint64(11)
    return (u.astype(float) / 2.0**53) < calibration_share


@dataclass(frozen=True)
class HeldOutThreshold:
    """Threshold chosen on calibration items, accuracy measured on held-out items."""

    threshold: float
    max_human_share: float
    calibration_accuracy: float
    calibration_human_share: float
    held_out_accuracy: IntervalEstimate
    held_out_ai_accuracy: IntervalEstimate
    held_out_gain: IntervalEstimate
    held_out_human_share: float
    n_calibration: int
    n_held_out: int

    def rows(self) -> list[dict[str, float | int | None]]:
        return [{"threshold": _json_float(self.threshold),
                 "max_human_share": self.max_human_share,
                 "calibration_accuracy": _json_float(self.calibration_accuracy),
                 "calibration_human_share": _json_float(self.calibration_human_share),
                 **self.held_out_accuracy.as_dict("held_out_accuracy"),
                 **self.held_out_ai_accuracy.as_dict("held_out_ai_accuracy"),
                 **self.held_out_gain.as_dict("held_out_gain"),
                 "held_out_human_share": _json_float(self.held_out_human_share),
                 "n_calibration": self.n_calibration, "n_held_out": self.n_held_out}]


def _check_mask(mask: ArrayLike, n: int, field: str) -> np.ndarray:
    m = np.asarray(mask)
    if m.shape != (n,) or m.dtype != bool:
        raise ValueError(f"{field}: need a boolean array with one entry per item ({n}), "
                         f"got {m.dtype} of shape {m.shape}")
    return m


def held_out_intervals(y: np.ndarray, a: np.ndarray, level: float
                       ) -> tuple[IntervalEstimate, IntervalEstimate, IntervalEstimate]:
    """Accuracy of y, of the AI (a) and the gain mean(y − a) on held-out items, whose
    routing was fixed on other items: Clopper–Pearson at the effective size for the two
    accuracies and Newcombe's paired interval for the gain (:mod:`estimators.numerics.units`)."""
    acc, ai_acc = unit_means(np.c_[y, a], level=level)
    return acc, ai_acc, unit_differences(y, a, level=level)[0]


def _labelled_limit(c: np.ndarray, h: np.ndarray) -> float:
    """Thresholds must stay below the smallest confidence of an item without a human label."""
    missing = np.isnan(h)
    return float(c[missing].min()) if missing.any() else math.inf


def held_out_threshold(confidence: ArrayLike, ai_correct: ArrayLike, human_correct: ArrayLike,
                       calibration: ArrayLike, *, max_human_share: float = 1.0,
                       unlabelled: str = "truncate", level: float = 0.95) -> HeldOutThreshold:
    """Choose T on the calibration items, report hybrid accuracy at T on the others.

    T maximises the calibration curve (:func:`threshold_curve`) among thresholds whose
    calibration human share is at most ``max_human_share`` and that route no unlabelled
    item of either side (``unlabelled`` as in :func:`threshold_curve`). On the held-out
    items: accuracy of y_i = h_i if c_i ≤ T else a_i,
    the AI's accuracy, and the gain (y_i − a_i), each with its interval
    (:func:`held_out_intervals`); the held-out human share."""
    c, a, h = _inputs(confidence, ai_correct, human_correct)
    h = _fill(a, h, unlabelled)
    cal = _check_mask(calibration, c.size, "calibration")
    _check_budget(max_human_share)
    check_level(level)
    if not cal.any() or cal.all():
        raise ValueError("calibration: need both calibration and held-out items")
    limit = _labelled_limit(c, h)
    curve = threshold_curve(c[cal], a[cal], h[cal])
    usable = curve.thresholds < limit
    share = np.where(usable, curve.human_share, np.inf)
    j = int(_best_index(curve.hybrid_accuracy, share, max_human_share))
    t = float(curve.thresholds[j])
    ho = ~cal
    to_humans = c[ho] <= t
    y = np.where(to_humans, h[ho], a[ho])
    acc, ai_acc, gain = held_out_intervals(y, a[ho], level)
    return HeldOutThreshold(
        threshold=t, max_human_share=max_human_share,
        calibration_accuracy=float(curve.hybrid_accuracy[j]),
        calibration_human_share=float(curve.human_share[j]),
        held_out_accuracy=acc, held_out_ai_accuracy=ai_acc, held_out_gain=gain,
        held_out_human_share=float(to_humans.mean()),
        n_calibration=int(cal.sum()), n_held_out=int(ho.sum()))


@dataclass(frozen=True)
class ThresholdCurveBand:
    """The curve with pointwise intervals over items (the paper's Figure 1): of the
    hybrid accuracy (``lower``/``upper``) and of its gain over the AI alone
    (``gain_lower``/``gain_upper``; a gain interval above 0 marks a threshold where
    hybridization beats the AI); the best threshold, ``near_best`` (thresholds within the
    budget not significantly less accurate than the best) and ``best_threshold_interval``,
    the smallest and largest of those."""

    curve: ThresholdCurve
    lower: np.ndarray
    upper: np.ndarray
    gain_lower: np.ndarray
    gain_upper: np.ndarray
    best: BestThreshold
    near_best: np.ndarray
    best_threshold_interval: tuple[float, float]
    level: float

    def rows(self) -> list[dict[str, float | bool | None]]:
        out: list[dict[str, float | bool | None]] = []
        for row, lo, hi, glo, ghi, near in zip(self.curve.rows(), self.lower, self.upper,
                                               self.gain_lower, self.gain_upper,
                                               self.near_best, strict=True):
            acc = row["hybrid_accuracy"]
            assert acc is not None
            out.append({**row, "lower": _json_float(lo), "upper": _json_float(hi),
                        "gain": acc - self.curve.ai_accuracy, "gain_lower": _json_float(glo),
                        "gain_upper": _json_float(ghi), "near_best": bool(near)})
        return out


@dataclass(frozen=True)
class CurveBands:
    """:func:`curve_bands` for a stack of studies, on the grid ``thresholds`` (−∞ and every
    confidence seen in any study of the stack): per study and point (B, P) whether the
    point is on the study's curve (``shown``: a confidence of the study, routing no
    unlabelled item) and :class:`ThresholdCurveBand`'s figures there (elsewhere they repeat
    the point before); per study the best point (index into the grid), ``near_best``
    (only at shown points) and the thresholds as good (B, 2)."""

    thresholds: np.ndarray
    shown: np.ndarray
    hybrid_accuracy: np.ndarray
    human_share: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    gain_lower: np.ndarray
    gain_upper: np.ndarray
    best: np.ndarray
    near_best: np.ndarray
    best_threshold_interval: np.ndarray
    n_items: int
    level: float


def _stack_inputs(confidence: ArrayLike, ai_correct: ArrayLike, human_correct: ArrayLike
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = np.asarray(confidence, dtype=float)
    if c.ndim != 2 or c.shape[1] == 0:
        raise ValueError(f"confidence: need (studies, items) with items, got shape {c.shape}")
    for name, x in (("ai_correct", ai_correct), ("human_correct", human_correct)):
        if np.shape(x) != c.shape:
            raise ValueError(f"{name}: shape {np.shape(x)}, expected {c.shape}")
    flat = _inputs(c.ravel(), np.asarray(ai_correct, float).ravel(),
                   np.asarray(human_correct, float).ravel())
    return tuple(x.reshape(c.shape) for x in flat)  # type: ignore[return-value]


def curve_bands(confidence: ArrayLike, ai_correct: ArrayLike, human_correct: ArrayLike, *,
                max_human_share: float = 1.0, unlabelled: str = "truncate",
                level: float = 0.95) -> CurveBands:
    """:func:`curve_band` for a stack of studies at once: (studies, items) arrays, one
    study per row (the coverage table's simulated studies; :func:`curve_band` passes one
    row). Each study's items are sorted by confidence and its cumulative sums of h, h², a,
    a² and h·a taken at each point of the common grid (the sums at the last item with
    c ≤ t); the intervals, the best point and the thresholds as good are then those of
    :func:`curve_band`, every study at once."""
    c, a, h = _stack_inputs(confidence, ai_correct, human_correct)
    h = _fill(a, h, unlabelled)
    _check_budget(max_human_share)
    check_level(level)
    n_studies, n = c.shape
    grid = np.unique(c)
    order = np.argsort(c, axis=1, kind="stable")
    sort = lambda x: np.take_along_axis(x, order, axis=1)  # noqa: E731
    cs, as_, hs_raw = sort(c), sort(a), sort(h)
    missing = np.isnan(hs_raw)
    hs = np.nan_to_num(hs_raw)
    # items at or below each grid point, per study: (B, P + 1), the −∞ point first
    code = np.searchsorted(grid, cs)
    per_point = np.bincount((np.arange(n_studies)[:, None] * grid.size + code).ravel(),
                            minlength=n_studies * grid.size).reshape(n_studies, grid.size)
    below = np.c_[np.zeros(n_studies, dtype=int), np.cumsum(per_point, axis=1)]
    last = np.maximum(below - 1, 0)

    def at_points(values: np.ndarray) -> np.ndarray:
        return np.where(below > 0, np.take_along_axis(np.cumsum(values, axis=1), last, 1), 0.0)

    shown = np.c_[np.ones(n_studies, dtype=bool), per_point > 0] & (at_points(missing) == 0)
    ch, chh, cha = at_points(hs), at_points(hs * hs), at_points(hs * as_)
    ca, caa = at_points(as_), at_points(as_ * as_)
    ta, taa = as_.sum(axis=1)[:, None], (as_ * as_).sum(axis=1)[:, None]
    sy = ch + ta - ca  # Σ y(t)
    syy = chh + taa - caa  # Σ y(t)²
    sya = cha + taa - caa  # Σ y(t) a
    _, lo, hi = mean_bounds(n, sy, syy, level=level)
    _, glo, ghi = difference_bounds(n, sy, syy, ta, taa, sya, level=level)
    share = below / n
    budget = np.where(shown, share, np.inf)
    best = _best_index(sy / n, budget, max_human_share)
    b = best[:, None]
    j = np.arange(grid.size + 1)[None, :]
    low, high = np.minimum(j, b), np.maximum(j, b)
    take = lambda x, k: np.take_along_axis(x, k, axis=1)  # noqa: E731
    # Σ y(t) y(t̂): h² below both thresholds, h·a between them, a² above both
    syb = take(chh, low) + (take(cha, high) - take(cha, low)) + (taa - take(caa, high))
    _, _, diff_upper = difference_bounds(n, sy, syy, take(sy, b), take(syy, b), syb,
                                         level=level)
    near = (diff_upper >= -_TIE) & (budget <= max_human_share + 1e-12)
    near[np.arange(n_studies), best] = True
    t = np.r_[-np.inf, grid]
    first = np.argmax(near, axis=1)
    final = grid.size - np.argmax(near[:, ::-1], axis=1)
    return CurveBands(t, shown, sy / n, share, lo, hi, glo, ghi, best, near,
                      np.c_[t[first], t[final]], n, level)


def curve_band(confidence: ArrayLike, ai_correct: ArrayLike, human_correct: ArrayLike, *,
               max_human_share: float = 1.0, unlabelled: str = "truncate",
               level: float = 0.95) -> ThresholdCurveBand:
    """:func:`threshold_curve` with pointwise intervals over items. At each point the
    hybrid labels y_i(t) = h_i (c_i ≤ t) or a_i are n independent values in [0, 1]: the
    accuracy gets Clopper–Pearson at the effective size and the gain over the AI Newcombe's
    paired interval (:mod:`estimators.numerics.units`), from cumulative sums of h, h², a,
    a² and h·a over the items sorted by confidence — O(n log n), no resampling.

    The best threshold t̂ (under the budget) is an argmax over a curve that is flat near its
    top, so no interval around t̂ itself is offered. Instead, t is "near best" when the
    upper bound of Newcombe's paired ``level`` interval of acc(t) − acc(t̂) is ≥ 0 (t is
    not significantly worse than t̂; a one-sided test at (1 − level)/2); the interval
    reported is the smallest and the largest near-best threshold. Its promise, measured in
    docs/coverage.md: it holds the population's best threshold in at least ``level`` of
    studies.

    Computed by :func:`curve_bands` on a stack of one study (the coverage table calls it
    on thousands)."""
    c, a, h = _inputs(confidence, ai_correct, human_correct)
    s = curve_bands(c[None], a[None], h[None], max_human_share=max_human_share,
                    unlabelled=unlabelled, level=level)
    keep = s.shown[0]
    curve = ThresholdCurve(thresholds=s.thresholds[keep],
                           hybrid_accuracy=s.hybrid_accuracy[0, keep],
                           human_share=s.human_share[0, keep], n_items=s.n_items)
    b = int(np.count_nonzero(keep[: s.best[0]]))
    best = BestThreshold(float(curve.thresholds[b]), float(curve.hybrid_accuracy[b]),
                         float(curve.human_share[b]), b)
    lo, hi = s.best_threshold_interval[0]
    return ThresholdCurveBand(curve, s.lower[0, keep], s.upper[0, keep], s.gain_lower[0, keep],
                              s.gain_upper[0, keep], best, s.near_best[0, keep],
                              (float(lo), float(hi)), level)


def band_of(confidence: ArrayLike, edges: Sequence[float]) -> np.ndarray:
    """Band index per item: band j holds edges[j−1] < c ≤ edges[j] (band 0: c ≤ edges[0];
    the last band: c > edges[−1]). ``edges`` strictly increasing and finite."""
    c = check_confidence(confidence)
    e = np.asarray(edges, dtype=float)
    if e.ndim != 1 or not np.isfinite(e).all() or (np.diff(e) <= 0).any():
        raise ValueError(f"edges: need finite, strictly increasing band edges, got {list(e)}")
    return np.searchsorted(e, c, side="left")


@dataclass(frozen=True)
class Band:
    """One confidence band (lower < c ≤ upper) and the source its items are taken from."""

    lower: float
    upper: float
    source: str
    n_items: int
    share: float
    accuracy: float
    n_unlabelled: int


@dataclass(frozen=True)
class BandAccuracy:
    """Accuracy of a band assignment: NaN when a band sent to humans holds items without a
    label from that source (``n_unlabelled`` > 0)."""

    accuracy: float
    human_share: float
    bands: tuple[Band, ...]
    n_items: int

    def rows(self) -> list[dict[str, float | int | str | None]]:
        return [{"lower": _json_float(b.lower), "upper": _json_float(b.upper),
                 "source": b.source, "n_items": b.n_items, "share": b.share,
                 "accuracy": _json_float(b.accuracy), "n_unlabelled": b.n_unlabelled}
                for b in self.bands]


def _sources(human_correct_by_source: Mapping[str, ArrayLike], n: int
             ) -> dict[str, np.ndarray]:
    out = {}
    for name, values in human_correct_by_source.items():
        if name == AI:
            raise ValueError(f"human_correct_by_source: {AI!r} is reserved for the AI")
        out[name] = check_share(values, f"human_correct_by_source[{name!r}]", n, allow_nan=True)
    return out


def _band_table(c: np.ndarray, a: np.ndarray, humans: dict[str, np.ndarray],
                edges: Sequence[float], sources: Sequence[str]) -> BandAccuracy:
    e = [float(x) for x in edges]
    if len(sources) != len(e) + 1:
        raise ValueError(f"sources: need {len(e) + 1} sources for {len(e)} edges, "
                         f"got {len(sources)}")
    for s in sources:
        if s != AI and s not in humans:
            raise ValueError(f"sources: {s!r} is neither {AI!r} nor a human source "
                             f"({', '.join(humans) or 'none given'})")
    band = band_of(c, e)
    n = c.size
    bounds = [-math.inf, *e, math.inf]
    bands, total, unlabelled_any = [], 0.0, False
    for j, src in enumerate(sources):
        m = band == j
        vals = a[m] if src == AI else humans[src][m]
        miss = int(np.isnan(vals).sum())
        k = int(m.sum())
        acc = float(vals.mean()) if k and not miss else math.nan
        unlabelled_any |= miss > 0
        total += float(np.nansum(vals))
        bands.append(Band(bounds[j], bounds[j + 1], src, k, k / n, acc, miss))
    human = sum(b.n_items for b in bands if b.source != AI)
    return BandAccuracy(math.nan if unlabelled_any else total / n, human / n, tuple(bands), n)


def band_accuracy(confidence: ArrayLike, ai_correct: ArrayLike,
                  human_correct_by_source: Mapping[str, ArrayLike], edges: Sequence[float],
                  sources: Sequence[str]) -> BandAccuracy:
    """Accuracy when band j (:func:`band_of`) is taken from ``sources[j]`` — ``"ai"`` or a
    key of ``human_correct_by_source`` (per-item human correctness of that arm):
    (1/n) Σ_j Σ_{i in band j} x_ij with x = a for the AI, h_arm for an arm."""
    c = check_confidence(confidence)
    a = check_share(ai_correct, "ai_correct", c.size, allow_nan=False)
    return _band_table(c, a, _sources(human_correct_by_source, c.size), edges, sources)


@dataclass(frozen=True)
class BandChoice:
    """Per band the most accurate source on the calibration items, and how that assignment
    does on the held-out items (UNDEFINED without a calibration split)."""

    sources: tuple[str, ...]
    calibration: BandAccuracy
    held_out: BandAccuracy | None
    held_out_accuracy: IntervalEstimate
    held_out_ai_accuracy: IntervalEstimate
    held_out_gain: IntervalEstimate


def best_band_sources(confidence: ArrayLike, ai_correct: ArrayLike,
                      human_correct_by_source: Mapping[str, ArrayLike], edges: Sequence[float],
                      *, calibration: ArrayLike | None = None,
                      level: float = 0.95) -> BandChoice:
    """Choose each band's source on the calibration items (all items when ``calibration``
    is None): the highest band accuracy among the AI and the human sources labelling every
    calibration item of the band; ties go to the AI, then to the mapping's order; an empty
    band goes to the AI. With a calibration split, the chosen assignment's held-out
    accuracy, the AI's, and the gain carry intervals (:func:`held_out_intervals`)."""
    c = check_confidence(confidence)
    a = check_share(ai_correct, "ai_correct", c.size, allow_nan=False)
    humans = _sources(human_correct_by_source, c.size)
    band = band_of(c, edges)
    cal = (np.ones(c.size, dtype=bool) if calibration is None
           else _check_mask(calibration, c.size, "calibration"))
    chosen = []
    for j in range(len(edges) + 1):
        m = (band == j) & cal
        best_src, best_acc = AI, float(a[m].mean()) if m.any() else -math.inf
        for name, h in humans.items():
            if m.any() and not np.isnan(h[m]).any() and h[m].mean() > best_acc + _TIE:
                best_src, best_acc = name, float(h[m].mean())
        chosen.append(best_src)
    cal_table = _band_table(c[cal], a[cal], {k: v[cal] for k, v in humans.items()}, edges,
                            chosen)
    if calibration is None:
        return BandChoice(tuple(chosen), cal_table, None, UNDEFINED, UNDEFINED, UNDEFINED)
    ho = ~cal
    if not ho.any():
        raise ValueError("calibration: no held-out items")
    held = _band_table(c[ho], a[ho], {k: v[ho] for k, v in humans.items()}, edges, chosen)
    hb = band[ho]
    y = a[ho].copy()
    for j, src in enumerate(chosen):
        if src != AI:
            y[hb == j] = humans[src][ho][hb == j]
    acc, ai_acc, gain = held_out_intervals(y, a[ho], level)
    return BandChoice(tuple(chosen), cal_table, held, acc, ai_acc, gain)
