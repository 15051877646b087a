"""Calibration of the AI rater's confidence (METHODS.md M2: "Report the AI's calibration
(reliability bins, expected calibration error)"; paper 001, Figure 10).

The confidences c_i ∈ [0, 1] are put in bins B_1 … B_m; per non-empty bin,

    conf_b = mean of c_i,   acc_b = mean of the correctness x_i ∈ [0, 1],   n_b = |B_b|,

    ECE = Σ_b (n_b / N) |acc_b − conf_b|,      MCE = max_b |acc_b − conf_b|.

Bins are right-closed, c ≤ edge (as scikit-learn's ``calibration_curve`` and the
hybridization threshold), with ``strategy`` "uniform" (m equal-width bins on [0, 1]),
"quantile" (edges at the quantiles of c, so bins hold about equal counts; repeated edges
merge) or "distinct" (one bin per distinct confidence, natural when c is a share of N
samples). Each bin's accuracy carries an interval: where the correctness is 0/1 (the AI's),
Blaker's exact interval for the bin's binomial count (coverage ≥ the level at every
accuracy, however few items a bin holds; Wilson's fell to 80–86 % in bins of 1–30 items
near accuracies of 0.8–0.99, docs/coverage.md "Assisted: calibration"); for fractional x
(the humans' share of right ratings, not drawn with bars) a Wilson score interval
(conservative there: Var x ≤ acc (1 − acc)).

ECE is biased upwards in small bins (|·| of a noisy difference: a perfectly calibrated AI
shows ECE > 0), so no interval centred on it keeps its promise where the AI is nearly
calibrated (the former percentile bootstrap covered 0 % of studies of a calibrated AI).
The interval offered (:func:`ece_bounds`) holds the ECE of the study's bins,
Σ_b (n_b/N) |p_b − conf_b| with p_b the bins' true accuracies, with probability ≥ the
level: the bins' counts are independent binomials given the confidences, so the K bins'
Blaker intervals at level^(1/K) (Šidák) hold every p_b at once with probability ≥ level,
and on that event the ECE lies between the smallest and the largest Σ_b (n_b/N) |q_b −
conf_b| over q_b in those intervals. Conservative by construction (wide with few items).

scikit-learn is not a dependency: its ``calibration_curve`` returns neither the bin counts
nor the edges, both needed here, so the few lines are numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from estimators.assisted.hybridization import check_share
from estimators.numerics.bootstrap import _json_float, check_level
from estimators.numerics.proportion import blaker

STRATEGIES = ("uniform", "quantile", "distinct")


@dataclass(frozen=True)
class ReliabilityDiagram:
    """Per non-empty bin: edges (lower < c ≤ upper; the first bin also holds c = lower, which
    is 0 for "uniform" bins and the smallest confidence otherwise), count, mean confidence,
    accuracy with its interval (Blaker for 0/1 correctness, Wilson for fractional); ECE,
    MCE and the optional interval of the ECE (:func:`ece_bounds`)."""

    lower_edge: np.ndarray
    upper_edge: np.ndarray
    n: np.ndarray
    mean_confidence: np.ndarray
    accuracy: np.ndarray
    accuracy_lower: np.ndarray
    accuracy_upper: np.ndarray
    ece: float
    mce: float
    ece_interval: tuple[float, float] | None
    n_items: int
    level: float

    def rows(self) -> list[dict[str, float | int | None]]:
        return [{"lower_edge": _json_float(lo), "upper_edge": _json_float(hi), "n": int(k),
                 "mean_confidence": float(c), "accuracy": float(a),
                 "accuracy_lower": float(al), "accuracy_upper": float(au)}
                for lo, hi, k, c, a, al, au in zip(
                    self.lower_edge, self.upper_edge, self.n, self.mean_confidence,
                    self.accuracy, self.accuracy_lower, self.accuracy_upper, strict=True)]


def wilson_interval(successes: np.ndarray, n: np.ndarray, level: float = 0.95
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for successes / n (n > 0):
    (p̂ + z²/2n ± z √(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)."""
    check_level(level)
    z = stats.norm.ppf((1 + level) / 2)
    n = np.asarray(n, dtype=float)
    p = np.asarray(successes, dtype=float) / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # exact at the ends (the formula gives 0 and 1 there only up to rounding)
    lo = np.where(p <= 0, 0.0, np.clip(centre - half, 0, 1))
    hi = np.where(p >= 1, 1.0, np.clip(centre + half, 0, 1))
    return lo, hi


def _inner_edges(c: np.ndarray, n_bins: int, strategy: str) -> np.ndarray:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")
    if strategy == "distinct":
        return np.unique(c)[:-1]
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins: need a positive integer, got {n_bins}")
    if strategy == "uniform":
        return np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    return np.unique(np.quantile(c, np.linspace(0.0, 1.0, n_bins + 1))[1:-1])


def _inputs(confidence: ArrayLike, correct: ArrayLike, *, keep_nan: bool = False
            ) -> tuple[np.ndarray, np.ndarray]:
    """The checked arrays; items without a label (NaN) left out unless ``keep_nan``."""
    c = np.asarray(confidence, dtype=float)
    if c.ndim != 1 or c.size == 0:
        raise ValueError(f"confidence: need a non-empty 1-D array, got shape {c.shape}")
    c = check_share(c, "confidence", c.size, allow_nan=False)
    x = check_share(correct, "correct", c.size, allow_nan=True)
    if keep_nan:
        return c, x
    keep = ~np.isnan(x)
    return c[keep], x[keep]


def _bin_sums(bins: np.ndarray, m: int, *cols: np.ndarray) -> list[np.ndarray]:
    return [np.bincount(bins, weights=col, minlength=m) for col in cols]


def ece_bounds(n: ArrayLike, successes: ArrayLike, mean_confidence: ArrayLike,
               level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Interval of Σ_b (n_b/N) |p_b − conf_b| (module docstring): with (l_b, u_b) Blaker's
    interval of successes_b / n_b at level^(1/K) (K non-empty bins),

        lower = Σ_b (n_b/N) dist(conf_b, [l_b, u_b]),
        upper = Σ_b (n_b/N) max(|l_b − conf_b|, |u_b − conf_b|).

    Bins on the last axis (empty bins, n_b = 0, are left out); leading axes are independent
    diagrams (the coverage study's simulated studies). Returns (lower, upper) arrays."""
    check_level(level)
    n = np.atleast_1d(np.asarray(n, dtype=float))
    s = np.atleast_1d(np.asarray(successes, dtype=float))
    conf = np.atleast_1d(np.asarray(mean_confidence, dtype=float))
    full = n > 0
    k = full.sum(axis=-1, keepdims=True)
    lo, hi = np.zeros(n.shape), np.ones(n.shape)
    for bins in np.unique(k):  # one simultaneous level per number of bins
        m = full & (k == bins)
        lo[m], hi[m] = blaker(np.round(s[m]).astype(int), n[m].astype(int),
                              level ** (1 / bins))
    w = n / n.sum(axis=-1, keepdims=True)
    lower = (w * np.where(full, np.maximum(0.0, np.maximum(lo - conf, conf - hi)), 0.0)).sum(-1)
    upper = (w * np.where(full, np.maximum(np.abs(lo - conf), np.abs(hi - conf)), 0.0)).sum(-1)
    return lower, upper


@dataclass(frozen=True)
class ReliabilityStack:
    """:class:`ReliabilityDiagram`'s figures for a stack of studies: per study its
    non-empty bins in order, padded to the largest number of them (B, K) — ``n`` 0 and the
    rest NaN in the padding; per study ``ece``, ``mce``, ``n_items`` and the ECE's interval
    (``ece_lower``/``ece_upper``, NaN unless asked for)."""

    lower_edge: np.ndarray
    upper_edge: np.ndarray
    n: np.ndarray
    mean_confidence: np.ndarray
    accuracy: np.ndarray
    accuracy_lower: np.ndarray
    accuracy_upper: np.ndarray
    ece: np.ndarray
    mce: np.ndarray
    ece_lower: np.ndarray
    ece_upper: np.ndarray
    n_items: np.ndarray
    level: float


def _study_bins(c: np.ndarray, x: np.ndarray, n_bins: int, strategy: str
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray], bool]:
    """One study's bins: (bin of each labelled item, lower and upper edge of each bin,
    [count, Σ c, Σ x] per bin, whether every label is 0/1)."""
    keep = ~np.isnan(x)
    c, x = c[keep], x[keep]
    if c.size == 0:
        raise ValueError("correct: no item has a label")
    inner = _inner_edges(c, n_bins, strategy)
    bins = np.searchsorted(inner, c, side="left")
    edges = np.r_[0.0 if strategy == "uniform" else -math.inf, inner,
                  1.0 if strategy == "uniform" else math.inf]
    lower_edge, upper_edge = edges[:-1], edges[1:]
    if strategy != "uniform":
        lower_edge = np.where(np.isinf(lower_edge), c.min(), lower_edge)
        upper_edge = np.where(np.isinf(upper_edge), c.max(), upper_edge)
    sums = _bin_sums(bins, inner.size + 1, np.ones_like(c), c, x)
    return lower_edge, upper_edge, bins, sums, bool(np.isin(x, (0.0, 1.0)).all())


def reliability_stack(confidence: ArrayLike, correct: ArrayLike, *, n_bins: int = 10,
                      strategy: str = "uniform", level: float = 0.95,
                      ece_interval: bool = False) -> ReliabilityStack:
    """:func:`reliability_bins` for a stack of studies: (studies, items) arrays, one study
    per row (the coverage table's simulated studies, or every outcome of one bin;
    :func:`reliability_bins` passes one row). Each study is binned on its own (its own
    edges for "quantile" and "distinct"); the bins' intervals and the ECE's are then
    computed for every study at once."""
    check_level(level)
    c_all = np.asarray(confidence, dtype=float)
    if c_all.ndim != 2 or c_all.shape[1] == 0:
        raise ValueError(f"confidence: need (studies, items) with items, got {c_all.shape}")
    x_all = np.asarray(correct, dtype=float)
    if x_all.shape != c_all.shape:
        raise ValueError(f"correct: shape {x_all.shape}, expected {c_all.shape}")
    studies = [_study_bins(*_inputs(c, x, keep_nan=True), n_bins, strategy)
               for c, x in zip(c_all, x_all, strict=True)]
    width = max(int((st[3][0] > 0).sum()) for st in studies)
    b = len(studies)
    pad = lambda: np.full((b, width), np.nan)  # noqa: E731
    lower_edge, upper_edge, count, sc, sx = pad(), pad(), np.zeros((b, width)), pad(), pad()
    binary = np.zeros(b, dtype=bool)
    for i, (lo_e, hi_e, _, (n, c_sum, x_sum), is_binary) in enumerate(studies):
        full = n > 0
        k = int(full.sum())
        lower_edge[i, :k], upper_edge[i, :k] = lo_e[full], hi_e[full]
        count[i, :k], sc[i, :k], sx[i, :k] = n[full], c_sum[full], x_sum[full]
        binary[i] = is_binary
    full = count > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        conf_b, acc_b = sc / count, sx / count
    gap = np.abs(acc_b - conf_b)
    lo, hi = pad(), pad()
    both = full & binary[:, None]
    lo[both], hi[both] = blaker(np.round(sx[both]).astype(int), count[both].astype(int), level)
    frac = full & ~binary[:, None]
    lo[frac], hi[frac] = wilson_interval(sx[frac], count[frac], level)
    if ece_interval and not binary.all():
        raise ValueError("ece_interval: needs 0/1 correctness (the AI's)")
    n_items = count.sum(axis=1)
    ece = np.array([float((count[i, full[i]] * gap[i, full[i]]).sum() / n_items[i])
                    for i in range(b)])
    mce = np.array([float(gap[i, full[i]].max()) for i in range(b)])
    if ece_interval:
        e_lo, e_hi = ece_bounds(count, np.where(full, sx, 0.0), np.where(full, conf_b, 0.0),
                                level)
    else:
        e_lo, e_hi = np.full(b, np.nan), np.full(b, np.nan)
    return ReliabilityStack(lower_edge, upper_edge, count.astype(int), conf_b, acc_b, lo, hi,
                            ece, mce, e_lo, e_hi, n_items.astype(int), level)


def reliability_bins(confidence: ArrayLike, correct: ArrayLike, *, n_bins: int = 10,
                     strategy: str = "uniform", level: float = 0.95,
                     ece_interval: bool = False) -> ReliabilityDiagram:
    """Reliability diagram of ``confidence`` against ``correct`` (module formulas).

    ``correct`` ∈ [0, 1] per item; NaN entries (no label) are left out — so the same
    function bins the humans' correctness by the AI's confidence (Figure 10).
    ``ece_interval`` adds the ECE's interval (:func:`ece_bounds`; 0/1 correctness only).
    Computed by :func:`reliability_stack` on a stack of one study."""
    check_level(level)
    c, x = _inputs(confidence, correct, keep_nan=True)
    s = reliability_stack(c[None], x[None], n_bins=n_bins, strategy=strategy, level=level,
                          ece_interval=ece_interval)
    k = int((s.n[0] > 0).sum())
    return ReliabilityDiagram(
        lower_edge=s.lower_edge[0, :k], upper_edge=s.upper_edge[0, :k], n=s.n[0, :k],
        mean_confidence=s.mean_confidence[0, :k], accuracy=s.accuracy[0, :k],
        accuracy_lower=s.accuracy_lower[0, :k], accuracy_upper=s.accuracy_upper[0, :k],
        ece=float(s.ece[0]), mce=float(s.mce[0]),
        ece_interval=(float(s.ece_lower[0]), float(s.ece_upper[0])) if ece_interval else None,
        n_items=int(s.n_items[0]), level=level)


def expected_calibration_error(confidence: ArrayLike, correct: ArrayLike, *, n_bins: int = 10,
                               strategy: str = "uniform") -> float:
    """ECE = Σ_b (n_b / N) |acc_b − conf_b| over the bins of :func:`reliability_bins`."""
    return reliability_bins(confidence, correct, n_bins=n_bins, strategy=strategy).ece
