"""Accuracy of an AI system from ordinary and complementary labels (METHODS.md M1; paper
000, "Towards Scalable Oversight via Partitioned Human Supervision").

Sufficient statistics per cell (an AI system, optionally within a stratum):
ordinary labels n_o with S_o correct predictions; complementary labels n_c with
S_c = Σ w_i, w_i = 1{ŷ_i ≠ ȳ_i} (a missing prediction scores (K−2)/(K−1)).

Every function is vectorised: counts broadcast, and one call estimates many cells.

No-data convention (documented, never NaN): a cell with no usable label gets accuracy 0.5,
se = √(1/12) (the sd of a uniform prior), interval [0, 1] and an infinite bound. It is a
library convention only: the platform's payload shows such a cell as ``null`` ("no data").

Several labels per item (several queries per item) are not independent: use
:func:`estimators.partitioned.clustered.estimate_clustered`, which hands this module
effective counts and the item-clustered variance of the mixtures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from estimators.numerics.proportion import blaker, clopper_pearson
from estimators.numerics.validate import as_counts, check_k, check_successes
from estimators.partitioned.bounds import (
    bernstein_union_bound,
    complementary_bound,
    fixed_weight_bound,
    hoeffding_union_bound,
    ordinary_bound,
)
from estimators.partitioned.intervals import (
    INTERVAL_METHODS,
    RANDOMISED,
    approximate,
    confidence_interval,
    decisive_events,
    exact_where_needed,
    few_events,
    tie_weight,
)
from estimators.partitioned.likelihood import (
    NO_DATA_ACCURACY,
    NO_DATA_SE,
    fisher_se,
    log_likelihood,
    ml_accuracy,
)

METHODS = ("ord", "comp", "ivw", "ivw_pilot", "ivw_fixed", "ml")
INTERVALS = INTERVAL_METHODS


@dataclass(frozen=True)
class Estimate:
    """Result of :func:`estimate`; every numeric field is a float or an array of the
    broadcast shape of the inputs.

    ``accuracy`` is the estimator's value — for "comp" the raw unbiased one, which can lie
    outside [0, 1]; ``accuracy_clipped`` is it clipped to [0, 1] (equal for other methods).
    ``weight`` is the weight of the ordinary estimate for IVW methods, else None.
    ``bound`` is a finite-sample half-width holding with probability ≥ confidence (None
    where no guarantee applies: "ml"); ``bound_valid`` is False where the guarantee's
    assumptions fail (Theorem 4 with a weight taken from the same data). ``u`` holds the
    uniform tie-breaks of the randomised exact intervals (None for the other modes): with
    them, and the same counts, the intervals are reproduced exactly. ``events`` is the
    number of events the interval rests on (:func:`estimators.partitioned.intervals.
    decisive_events`; ∞ without data) and ``approximate`` whether they are so few that its
    real coverage stands away from its level (:func:`estimators.partitioned.intervals.
    approximate`)."""

    method: str
    k: int
    confidence: float
    accuracy: np.ndarray | float
    accuracy_clipped: np.ndarray | float
    se: np.ndarray | float
    ci_low: np.ndarray | float
    ci_high: np.ndarray | float
    weight: np.ndarray | float | None
    bound: np.ndarray | float | None
    bound_valid: bool = True
    u: np.ndarray | float | None = None
    events: np.ndarray | float = np.inf
    approximate: np.ndarray | bool = False


def _out(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else x


def _flag(x: np.ndarray) -> np.ndarray | bool:
    return bool(x) if np.ndim(x) == 0 else np.asarray(x, dtype=bool)


def ordinary(n_ord: np.ndarray, s_ord: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Â_ord = S_o / n_o and its plug-in variance Â(1−Â)/n_o (no data → 0.5, 1/12)."""
    has = n_ord > 0
    safe = np.where(has, n_ord, 1.0)
    a = np.where(has, s_ord / safe, NO_DATA_ACCURACY)
    var = np.where(has, a * (1 - a) / safe, NO_DATA_SE**2)
    return a, var


def complementary(n_comp: np.ndarray, s_comp: np.ndarray, k: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Â_comp = (K−1) q̂ − (K−2) with q̂ = S_c / n_c (unbiased, may leave [0, 1]), and its
    plug-in variance (K−1)² q̂(1−q̂)/n_c (no data → 0.5, 1/12)."""
    has = n_comp > 0
    safe = np.where(has, n_comp, 1.0)
    q = s_comp / safe
    a = np.where(has, (k - 1) * q - (k - 2), NO_DATA_ACCURACY)
    var = np.where(has, (k - 1) ** 2 * q * (1 - q) / safe, NO_DATA_SE**2)
    return a, var


def ivw_plugin_weight(var_ord, var_comp, n_ord, n_comp, pilot_weight) -> np.ndarray:
    """ŵ = V̂_c / (V̂_o + V̂_c) (paper Eq. 7). Cells with only one kind of label take that
    one (w = 1 or 0); cells where both plug-in variances are 0 fall back to the pilot
    closed form (a perfect score on both sides would otherwise divide 0 by 0)."""
    total = var_ord + var_comp
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(total > 0, var_comp / np.where(total > 0, total, 1.0), pilot_weight)
    w = np.where(n_comp <= 0, 1.0, w)
    return np.where(n_ord <= 0, 0.0, w)


def ivw_pilot_weight(pilot, n_ord, n_comp, k: int) -> np.ndarray:
    """w* = (Ã+K−2) n_o / (Ã n_c + (Ã+K−2) n_o) (paper Eq. 8) from a pilot accuracy Ã."""
    pilot = np.clip(pilot, 0.0, 1.0)
    num = (pilot + k - 2) * n_ord
    den = pilot * n_comp + num
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.5)
    w = np.where(n_comp <= 0, 1.0, w)
    return np.where(n_ord <= 0, 0.0, w)


# The single-source columns ("ord", "comp": one binomial each) in the non-randomised modes:
# Blaker's interval by default (coverage ≥ 95 % at every accuracy, median 96.2 % on the grid
# of docs/coverage.md, where the mid-p interval fell to 91.7 %), Clopper–Pearson for audits.
# From BLAKER_EXACT_BELOW events of each kind the default takes Clopper–Pearson's too: there
# the two differ by less than 0.6 % of their width (ends within 3e-4), and Blaker's costs a
# thousand times more (a recompute of 1 000 000 answers × 20 systems spent 1 s in it).
BLAKER_EXACT_BELOW = 1000


def _blaker(s, n, confidence):
    return blaker(s, n, confidence, clopper_pearson_from=BLAKER_EXACT_BELOW)


SINGLE_SOURCE = {"auto": _blaker, "conservative": clopper_pearson}


def single_source_interval(n, s, confidence: float, interval: str
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The interval for one binomial proportion S/n of a single-source column (``"auto"``:
    Blaker's, ``"conservative"``: Clopper–Pearson; :mod:`estimators.numerics.proportion`).
    Fractional counts (effective counts n/d, S/d with several queries per item, or a
    complementary sum holding missing predictions' (K−2)/(K−1)) take the interval of the
    nearest integer outcome n' = round(n), S' = round(n'·S/n), as the joint intervals do
    (:func:`estimators.partitioned.intervals.lattice_outcome`); n' = 0 gives [0, 1]."""
    n, s = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(s, dtype=float))
    n_r = np.round(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        s_r = np.where(n > 0, np.round(n_r * s / np.where(n > 0, n, 1.0)), 0.0)
    integral = (n == n_r) & (s == np.round(s))
    s_r = np.where(integral, s, np.clip(s_r, 0, n_r))
    return SINGLE_SOURCE[interval](s_r, n_r, confidence)


def estimate(n_ord, s_ord, n_comp, s_comp, k: int, method: str = "ml",
             confidence: float = 0.95, weight=None, pilot=None,
             interval: str = "auto", weight_from_data: bool = False, u=None,
             rng: np.random.Generator | int | None = None,
             mixture_variance: Callable[[np.ndarray], np.ndarray] | None = None) -> Estimate:
    """Estimate accuracy with a standard error, a ``confidence`` interval and, where one
    applies, a finite-sample bound. ``method``:

    * "ord": Â_ord = S_o/n_o; interval: Blaker's for the binomial (below); bound:
      Hoeffding.
    * "comp": Â_comp = (K−1)S_c/n_c − (K−2) (raw, unbiased); interval: Blaker's for q,
      mapped to A = (K−1)q − (K−2) and clipped to [0, 1]; bound: Theorem 2 (min of
      Hoeffding and empirical Bernstein, × (K−1)).
    * "ivw": w Â_ord + (1−w) Â_comp with plug-in ŵ (Eq. 7); SE from the plug-in variance
      V̂_oV̂_c/(V̂_o+V̂_c); bound: Proposition 3 (valid for any weight).
    * "ivw_pilot": closed-form weight (Eq. 8) from ``pilot`` (default Â_ord).
    * "ivw_fixed": ``weight`` (default 0.5); bound: Theorem 4, valid only for a weight
      fixed before seeing the data — pass ``weight_from_data=True`` when it was not, and
      the result carries ``bound_valid=False``.
    * "ml": closed-form maximum likelihood; SE from the Fisher information; no
      finite-sample bound.

    ``interval`` — how ``ci_low``/``ci_high`` are made (:mod:`estimators.partitioned.intervals`):

    * "auto" (default): for the single-source "ord" and "comp", **Blaker's** interval
      everywhere (:func:`single_source_interval`: coverage ≥ 95 % at every accuracy).
      For the others the asymptotic interval, and the **mid-p** exact interval
      (:mod:`estimators.partitioned.exact`, tied outcomes weighing ½) where data are too
      discrete for it. For "ml" the likelihood-ratio interval, exact
      where a source with few events (< 30 of a kind) carries more than ``EXACT_SHARE``
      of the information (:func:`estimators.partitioned.intervals.needs_exact`); for the
      IVW mixtures Wald on
      the SE, exact wherever a source has few events. Deterministic and never of zero
      width where there are labels; coverage on the grid of docs/coverage.md.
    * "conservative": as "auto" but the conservative exact interval: never below 95 %
      where it is used, wider on small samples; for audits ("ord", "comp": Clopper–
      Pearson everywhere).
    * "randomised": as "auto" but the randomised exact interval (tie-breaks ``u``): 95 %
      on average over the coin. Library only.
    * "exact": the randomised exact interval in every cell (slower). Library only.
    * "asymptotic": the asymptotic interval everywhere — the paper's plug-in Wald for the
      mixtures, which collapses near perfect scores (kept for comparison).

    The randomised intervals need one uniform tie-break per cell, independent of the
    data: ``u`` (broadcast against the counts) or, by default, drawn from ``rng`` (a
    Generator or a seed; None: fresh entropy).

    ``mixture_variance(w)`` (IVW methods only): the variance of w Â_ord + (1−w) Â_comp to
    use instead of the plug-in one — the item-clustered variance that
    :func:`estimators.partitioned.clustered.estimate_clustered` passes."""
    if method not in METHODS:
        raise ValueError(f"method: unknown '{method}' (one of {', '.join(METHODS)})")
    if interval not in INTERVALS:
        raise ValueError(f"interval: unknown '{interval}' (one of {', '.join(INTERVALS)})")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: must be in (0, 1), got {confidence}")
    c = as_counts(n_ord=n_ord, s_ord=s_ord, n_comp=n_comp, s_comp=s_comp)
    n_o, s_o, n_c, s_c = c["n_ord"], c["s_ord"], c["n_comp"], c["s_comp"]
    check_successes(n_o, s_o, "n_ord", "s_ord")
    check_successes(n_c, s_c, "n_comp", "s_comp")
    check_k(k, n_c)
    if interval in RANDOMISED:
        if u is None:
            u = np.random.default_rng(rng).random(n_o.shape)
        u = np.broadcast_to(np.asarray(u, dtype=float), n_o.shape)
        if ((u < 0) | (u > 1) | np.isnan(u)).any():
            raise ValueError("u: tie-breaks must lie in [0, 1]")
    else:
        u = None
    delta = 1 - confidence
    z = stats.norm.ppf(1 - delta / 2)
    a_ord, v_ord = ordinary(n_o, s_o)
    if k >= 3:
        a_comp, v_comp = complementary(n_c, s_c, k)
    else:
        a_comp, v_comp = np.full_like(n_o, NO_DATA_ACCURACY), np.full_like(n_o, NO_DATA_SE**2)
    no_data = (n_o + n_c) <= 0
    w_out = None
    bound_valid = True

    zeros = np.zeros_like(n_o)
    if method == "ord":
        acc, se = a_ord, np.sqrt(v_ord)
        if interval in SINGLE_SOURCE:
            lo, hi = single_source_interval(n_o, s_o, confidence, interval)
        else:
            lo, hi = confidence_interval(n_o, s_o, zeros, zeros, k, confidence, mle=a_ord,
                                         method=interval, u=u)
        bound = ordinary_bound(n_o, s_o, delta)
        clipped = acc
    elif method == "comp":
        acc, se = a_comp, np.sqrt(v_comp)
        clipped = np.clip(acc, 0.0, 1.0)
        if interval in SINGLE_SOURCE:
            q_lo, q_hi = single_source_interval(n_c, s_c, confidence, interval)
            lo = np.clip((k - 1) * q_lo - (k - 2), 0.0, 1.0)
            hi = np.clip((k - 1) * q_hi - (k - 2), 0.0, 1.0)
            # q̂ below (K−2)/(K−1), i.e. Â_comp < 0, is impossible for every A in [0, 1]:
            # there q's interval may lie below every possible q. Such outcomes keep the
            # joint exact interval, which ties them all at Â = 0 (never a point).
            below = (n_c > 0) & (a_comp < 0)
            if below.any():
                j_lo, j_hi = confidence_interval(zeros, zeros, n_c, s_c, k, confidence,
                                                 mle=clipped, method=interval)
                lo, hi = np.where(below, j_lo, lo), np.where(below, j_hi, hi)
        else:
            lo, hi = confidence_interval(zeros, zeros, n_c, s_c, k, confidence, mle=clipped,
                                         method=interval, u=u)
        bound = complementary_bound(n_c, s_c, k, delta)
        no_data = n_c <= 0
    elif method == "ml":
        acc = ml_accuracy(n_o, s_o, n_c, s_c, k)
        se = fisher_se(acc, n_o, n_c, k)
        lo, hi = confidence_interval(n_o, s_o, n_c, s_c, k, confidence, mle=acc,
                                     method=interval, u=u)
        bound = None
        clipped = acc
    else:
        pilot_a = a_ord if pilot is None else np.broadcast_to(np.asarray(pilot, float), n_o.shape)
        w_pilot = ivw_pilot_weight(pilot_a, n_o, n_c, k)
        if method == "ivw":
            w = ivw_plugin_weight(v_ord, v_comp, n_o, n_c, w_pilot)
        elif method == "ivw_pilot":
            w = w_pilot
        else:
            w = np.broadcast_to(np.asarray(0.5 if weight is None else weight, float), n_o.shape)
            if ((w < 0) | (w > 1)).any():
                raise ValueError("weight: must lie in [0, 1]")
            w = np.where(n_c <= 0, 1.0, np.where(n_o <= 0, 0.0, w))
        acc = w * a_ord + (1 - w) * a_comp
        var = w**2 * v_ord + (1 - w) ** 2 * v_comp
        if method == "ivw":  # the paper's plug-in variance V̂oV̂c/(V̂o+V̂c)
            total = v_ord + v_comp
            with np.errstate(divide="ignore", invalid="ignore"):
                var = np.where(total > 0, v_ord * v_comp / np.where(total > 0, total, 1), 0.0)
            var = np.where(n_c <= 0, v_ord, np.where(n_o <= 0, v_comp, var))
        if mixture_variance is not None:
            var = np.broadcast_to(np.asarray(mixture_variance(w), float), n_o.shape)
        se = np.sqrt(var)
        clipped = acc = np.clip(acc, 0.0, 1.0)  # mixtures report the clipped value
        lo = np.clip(clipped - z * se, 0.0, 1.0)  # Wald on the plug-in SE
        hi = np.clip(clipped + z * se, 0.0, 1.0)
        if interval == "exact":
            lo, hi = confidence_interval(n_o, s_o, n_c, s_c, k, confidence, method="exact",
                                         u=u)
        elif interval != "asymptotic":
            # the Wald interval of a mixture collapses when either source's variance
            # estimate does (a perfect score): exact wherever a source has few events, or
            # the variance estimate is 0 (e.g. no complementary label missing the AI)
            small = np.logical_or(*few_events(n_o, s_o, n_c, s_c)) | ((se <= 0) & ~no_data)
            lo, hi = exact_where_needed(lo, hi, small, n_o, s_o, n_c, s_c, k, confidence,
                                        ml_accuracy(n_o, s_o, n_c, s_c, k),
                                        u=tie_weight(interval, u))
        if method == "ivw_fixed":
            bound = fixed_weight_bound(w, n_o, s_o, n_c, s_c, k, delta)
            bound_valid = not weight_from_data
        else:
            bound = np.minimum(hoeffding_union_bound(w, n_o, n_c, k, delta),
                               bernstein_union_bound(w, n_o, s_o, n_c, s_c, k, delta))
        w_out = _out(w)

    if method in ("ord", "comp"):
        events = decisive_events(n_o, s_o, n_c, s_c, k, clipped, method)
    else:
        events = decisive_events(n_o, s_o, n_c, s_c, k,
                                 acc if method == "ml" else ml_accuracy(n_o, s_o, n_c, s_c, k))
    events = np.where(no_data, np.inf, events)
    acc = np.where(no_data, NO_DATA_ACCURACY, acc)
    clipped = np.where(no_data, NO_DATA_ACCURACY, clipped)
    se = np.where(no_data, NO_DATA_SE, se)
    lo = np.where(no_data, 0.0, np.minimum(lo, clipped))
    hi = np.where(no_data, 1.0, np.maximum(hi, clipped))
    if bound is not None:
        bound = _out(np.where(no_data, np.inf, bound))
    return Estimate(method=method, k=int(k), confidence=confidence, accuracy=_out(acc),
                    accuracy_clipped=_out(clipped), se=_out(se), ci_low=_out(lo),
                    ci_high=_out(hi), weight=w_out, bound=bound, bound_valid=bound_valid,
                    u=None if u is None else _out(u), events=_out(events),
                    approximate=_flag(approximate(events)))


__all__ = ["Estimate", "INTERVALS", "METHODS", "estimate", "log_likelihood", "ml_accuracy"]
