"""Several queries per item: every estimator's variance clustered by item (METHODS.md M1,
"several queries per item"; the sandwich / cluster-robust variance of an M-estimator).

The labels of one item share one AI answer: with the protocol's queries (distinct classes
drawn without replacement, stopping at the first "yes"), an item the AI gets right gives a
correct ordinary label *and* complementary labels that all miss the prediction, an item it
gets wrong a wrong ordinary label and possibly one complementary hit. Treating them as
independent makes the ML and IVW standard errors 13–20 % too small (intervals covering
88–91.5 % instead of 95 %).

Input: per-item sums of one scope's labels (:class:`Clusters`; items on axis 0, cells — AI
systems, replicate studies — on the further axes): n_o,i ordinary labels of item i, S_o,i
of them correct, n_c,i complementary labels, S_c,i their scores w (a missing prediction
scores (K−2)/(K−1)). Labels may carry weights (inverse-probability weights): the sums are
then weighted sums, and everything below holds as written.
Every design effect below reads the clusters only through their moments — Σ_i x_i and
Σ_i x_i x_iᵀ of x_i = (S_o,i, T_o,i, S_c,i, T_c,i), the items with a label, whether an item
has several ordinary labels (:class:`ClusterMoments`): each sum of squares is a quadratic
form in them. Moments of disjoint sets of items add.

Score of the joint log-likelihood ℓ(A) (METHODS.md M1) for item i, with q = (A+K−2)/(K−1):

    U_i(A) = S_o,i/A − T_o,i/(1−A) + [S_c,i/q − T_c,i/(1−q)]/(K−1),  T = n − S,

observed information I(A) = S_o/A² + T_o/(1−A)² + [S_c/q² + T_c/(1−q)²]/(K−1)², and the
item-clustered (sandwich) variance of Â_ML is Σ_i U_i(Â)² / I(Â)². Its ratio to the model
variance 1/I(Â) is the **design effect** d = Σ_i U_i(Â)² / I(Â). With one label per item
and 0/1 scores d = 1 exactly (each label's squared score equals its information).

How the estimators use it (:func:`estimate_clustered`): the counts are divided by the
design effect (effective counts n/d, S/d: the same proportions, so the same point estimates,
and a log-likelihood divided by d), and every interval is built from them as usual — the
likelihood-ratio interval of ℓ/d (a design-effect-adjusted likelihood ratio), where events
are few the exact interval of the nearest integer outcome, with that outcome's own ML
estimate (:func:`estimators.partitioned.intervals.lattice_outcome`). Per method: "ord" with the
design effect of the ordinary proportion (1: an item has at most one "yes"), "comp" with
that of the complementary proportion, "ml" with the joint one; the IVW mixtures with the
sandwich variance of w Â_ord + (1 − w) Â_comp, whose per-item terms
w (S_o,i − Â_o n_o,i)/n_o + (1 − w)(K−1)(S_c,i − q̂ n_c,i)/n_c carry the covariance of the
two sources within an item (their Wald interval uses it; their exact cells the joint
effective counts).

A sandwich from G items is itself estimated: every design effect taken from one is
multiplied by G/(G−1)·(t_{G−1}/z)² (:func:`small_sample_factor`, the cluster-robust
variance's CR1 factor and a Student t quantile on G − 1 degrees of freedom), 1.035 with
100 items.

Design effects may fall below 1 (an item's complementary labels are negatively correlated:
at most one of them hits a wrong prediction). Where the ML estimate is 1 the sandwich is
0/0 (no error was seen): the design effect then is its expectation under the protocol as A
→ 1, Σ_i E[F_i²] / Σ_i E[F_i], with F_i the item's errors — its n_o,i ordinary labels,
plus one complementary hit with probability n_c,i/(K−1) (the asked wrong classes are a
uniform subset of the K−1 wrong ones): E[F_i] = n_o,i + p_i, E[F_i²] = n_o,i² + 2 n_o,i
p_i + p_i, p_i = n_c,i/(K−1). Where a proportion is 0 or 1 otherwise (Â_ML = 0, a perfect
ordinary or complementary score) the design effect is 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from scipy import sparse, stats

from estimators.partitioned.accuracy import (
    METHODS,
    Estimate,
    estimate,
)
from estimators.partitioned.likelihood import ml_accuracy


@dataclass(frozen=True)
class Clusters:
    """Per-item sums of labels (items on axis 0; further axes: cells; the n arrays may have
    a cell axis of 1 when every cell shares them)."""

    n_ord: np.ndarray
    s_ord: np.ndarray
    n_comp: np.ndarray
    s_comp: np.ndarray

    def totals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(n_o, S_o, n_c, S_c) per cell (read-only; summed once per instance: a recompute
        asks for them once per estimator and scope)."""
        return self._totals

    @cached_property
    def _totals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        shape = np.broadcast_shapes(*(x.shape for x in (self.n_ord, self.s_ord, self.n_comp,
                                                         self.s_comp)))[1:]
        out = tuple(np.broadcast_to(x.sum(axis=0), shape).astype(float)
                    for x in (self.n_ord, self.s_ord, self.n_comp, self.s_comp))
        for total in out:
            total.flags.writeable = False
        return out

    def subset(self, items: np.ndarray) -> Clusters:
        """The clusters of ``items`` (a boolean mask or indices on axis 0)."""
        return Clusters(self.n_ord[items], self.s_ord[items], self.n_comp[items],
                        self.s_comp[items])

    def moments(self) -> ClusterMoments:
        """Everything the design effects read (:class:`ClusterMoments`), summed over the
        items."""
        return self._moments

    @cached_property
    def _moments(self) -> ClusterMoments:
        shape = np.broadcast_shapes(*(x.shape for x in (self.n_ord, self.s_ord, self.n_comp,
                                                         self.s_comp)))[1:]
        s_o, s_c = np.asarray(self.s_ord, float), np.asarray(self.s_comp, float)
        x = (s_o, self.n_ord - s_o, s_c, self.n_comp - s_c)
        second = np.empty((4, 4, *shape))
        for a in range(4):
            for b in range(a, 4):
                second[a, b] = second[b, a] = np.broadcast_to((x[a] * x[b]).sum(axis=0),
                                                              shape)
        n_ord, n_comp = np.asarray(self.n_ord, float), np.asarray(self.n_comp, float)
        return ClusterMoments(
            first=np.stack([np.broadcast_to(v.sum(axis=0), shape) for v in x]).astype(float),
            second=second,
            labelled=np.broadcast_to(((n_ord + n_comp) > 0).sum(axis=0), shape).astype(float),
            several_ordinary=bool(n_ord.size and n_ord.max() > 1))


@dataclass(frozen=True)
class ClusterMoments:
    """What every design effect needs of the item clusters, as sums over items — so the
    moments of two disjoint sets of items add, and a change to one item changes them by
    its new terms less its old ones: the form maintained statistics can keep.

    Per item i the vector x_i = (S_o,i, T_o,i, S_c,i, T_c,i) of its sums — ordinary labels
    correct and wrong (T = n − S), complementary scores and their complements — and per
    cell: ``first`` = Σ_i x_i (4, *cells), ``second`` = Σ_i x_i x_iᵀ (4, 4, *cells),
    ``labelled`` = items with a label (n_o,i + n_c,i > 0), ``several_ordinary`` = whether
    some item of some cell has more than one ordinary label (n_o,i > 1).

    Every sum of squares of :mod:`this module <estimators.partitioned.clustered>` is a
    quadratic form in ``second``: Σ_i (u·x_i)(v·x_i) = uᵀ (Σ_i x_i x_iᵀ) v
    (:meth:`form`). In the (S, T) basis each count meets its own coefficient (1/A and
    −1/(1−A) in the score; with one label per item S_i T_i = 0), so a form cancels only
    where items mix correct and wrong labels; near Â = 1 the forms agree with a
    label-by-label loop to 2e-13 (tests/estimators/partitioned/test_clustered.py)."""

    first: np.ndarray
    second: np.ndarray
    labelled: np.ndarray
    several_ordinary: bool

    def __post_init__(self) -> None:
        for array in (self.first, self.second, self.labelled):
            array.flags.writeable = False  # sums shared by every estimate of a recompute

    def totals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(n_o, S_o, n_c, S_c) per cell."""
        s_o, t_o, s_c, t_c = self.first
        return s_o + t_o, s_o, s_c + t_c, s_c

    def form(self, u, v=None) -> np.ndarray:
        """Σ_i (u·x_i)(v·x_i) per cell (``v`` None: ``u``), the coefficients u, v four
        scalars or arrays broadcastable to the cells."""
        v = u if v is None else v
        return sum(u[a] * v[b] * self.second[a, b] for a in range(4) for b in range(4)
                   if not (np.isscalar(u[a]) and u[a] == 0 or np.isscalar(v[b]) and v[b] == 0))

    def __add__(self, other: ClusterMoments) -> ClusterMoments:
        """The moments of the union of two disjoint sets of items."""
        return ClusterMoments(self.first + other.first, self.second + other.second,
                              self.labelled + other.labelled,
                              self.several_ordinary or other.several_ordinary)


def moments_of(c: Clusters | ClusterMoments) -> ClusterMoments:
    """``c`` as :class:`ClusterMoments`."""
    return c if isinstance(c, ClusterMoments) else c.moments()


def per_item_sums(item: np.ndarray, n_items: int, values: np.ndarray) -> np.ndarray:
    """Σ over the labels of each item: ``values`` (labels on axis 0, any further axis)
    summed into rows 0..n_items−1 by ``item`` (the label's item index). One sparse
    product, so a million labels × 20 systems take tens of milliseconds."""
    values = np.asarray(values, dtype=float)
    flat = values.reshape(len(values), int(np.prod(values.shape[1:])))
    member = sparse.csr_matrix((np.ones(len(item)), (np.asarray(item), np.arange(len(item)))),
                               shape=(n_items, len(item)))
    return np.asarray(member @ flat).reshape((n_items,) + values.shape[1:])


# Floor of an estimated design effect: only a guard against a degenerate ratio. (A floor
# of 1 made the complementary intervals cover ~97 %: an item's complementary labels are
# negatively correlated — at most one of them hits a wrong prediction — so d < 1 there.)
MIN_DESIGN_EFFECT = 0.1


def _ratio(meat, model, fallback) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(model > 0, meat / np.where(model > 0, model, 1.0), fallback)
    return np.maximum(np.where(np.isfinite(d), d, fallback), MIN_DESIGN_EFFECT)


def proportion_design_effect(n_i, s_i) -> np.ndarray:
    """Design effect of a proportion p̂ = S/n clustered by item:
    Σ_i (S_i − p̂ n_i)² / (p̂(1−p̂) n) (≥ 1; 1 where p̂ ∈ {0, 1} or n = 0)."""
    n_i, s_i = np.broadcast_arrays(np.asarray(n_i, float), np.asarray(s_i, float))
    zeros = np.zeros_like(n_i)
    return _proportion_effect(Clusters(n_i, s_i, zeros, zeros).moments(), 0)


def _proportion_effect(m: ClusterMoments, source: int) -> np.ndarray:
    """:func:`proportion_design_effect` of the ordinary (``source`` 0) or complementary
    (2) proportion, from the moments: S_i − p̂ n_i = (1 − p̂) S_i − p̂ T_i."""
    s, t = m.first[source], m.first[source + 1]
    n = s + t
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n > 0, s / np.where(n > 0, n, 1.0), 0.0)
    u = [0.0] * 4
    u[source], u[source + 1] = 1 - p, -p
    return _ratio(m.form(u), p * (1 - p) * n, 1.0)


def _ml_terms(m: ClusterMoments, k: int, a) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_i U_i(A)², I(A)) at A ∈ (0, 1), per cell: U_i = u·x_i with
    u = (1/A, −1/(1−A), 1/(q(K−1)), −1/((1−q)(K−1)))."""
    a = np.asarray(a, float)
    s_o, t_o, s_c, t_c = m.first
    u = [1 / a, -1 / (1 - a), 0.0, 0.0]
    info = s_o / a**2 + t_o / (1 - a) ** 2
    if k >= 3:
        q = (a + k - 2) / (k - 1)
        u[2], u[3] = 1 / (q * (k - 1)), -1 / ((1 - q) * (k - 1))
        info = info + (s_c / q**2 + t_c / (1 - q) ** 2) / (k - 1) ** 2
    return m.form(u), info


def ml_design_effect(c: Clusters | ClusterMoments, k: int, a_hat) -> np.ndarray:
    """d = Σ_i U_i(Â)² / I(Â) of the joint score (module docstring), ≥ 1; at Â = 1 its
    expectation under the protocol as A → 1; 1 at Â = 0 and without labels."""
    m = moments_of(c)
    shape = m.labelled.shape
    a_hat = np.broadcast_to(np.asarray(a_hat, float), shape)
    inside = (a_hat > 0) & (a_hat < 1)
    safe = np.where(inside, a_hat, 0.5)
    meat, info = _ml_terms(m, k, safe)
    d = _ratio(meat, info, 1.0)
    # Σ n_o,i² + 2 n_o,i p_i + p_i with n_o = S_o + T_o, p_i = n_c,i/(K−1), n_c = S_c + T_c
    ordinary = [1.0, 1.0, 0.0, 0.0]
    n_o = m.first[0] + m.first[1]
    squares = m.form(ordinary)
    if k >= 3:
        n_c = m.first[2] + m.first[3]
        cross = m.form(ordinary, [0.0, 0.0, 1.0, 1.0]) / (k - 1)
        perfect = _ratio(squares + 2 * cross + n_c / (k - 1), n_o + n_c / (k - 1), 1.0)
    else:
        perfect = _ratio(squares, n_o, 1.0)
    return np.where(inside, d, np.where(a_hat >= 1, np.broadcast_to(perfect, shape), 1.0))


def _influence(m: ClusterMoments, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Σ e_o², Σ e_o e_c, Σ e_c²) over items of the per-item influence terms of Â_ord and
    Â_comp (:func:`mixture_variance`), per cell: e_o,i = ((1 − p̂) S_o,i − p̂ T_o,i)/n_o
    and e_c,i = (K−1)((1 − q̂) S_c,i − q̂ T_c,i)/n_c, quadratic forms in the moments."""
    n_o, s_o, n_c, s_c = m.totals()
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n_o > 0, s_o / np.where(n_o > 0, n_o, 1), 0.0)
        q = np.where(n_c > 0, s_c / np.where(n_c > 0, n_c, 1), 0.0)
        scale_o = np.where(n_o > 0, 1 / np.where(n_o > 0, n_o, 1), 0.0)
        scale_c = np.where(n_c > 0, (k - 1) / np.where(n_c > 0, n_c, 1), 0.0)
    e_o = [(1 - p) * scale_o, -p * scale_o, 0.0, 0.0]
    e_c = [0.0, 0.0, (1 - q) * scale_c, -q * scale_c]
    return m.form(e_o), m.form(e_o, e_c), m.form(e_c)


def _plug_in(m: ClusterMoments, k: int, w) -> np.ndarray:
    n_o, s_o, n_c, s_c = m.totals()
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n_o > 0, s_o / np.where(n_o > 0, n_o, 1), 0.0)
        q = np.where(n_c > 0, s_c / np.where(n_c > 0, n_c, 1), 0.0)
        return (w**2 * np.where(n_o > 0, p * (1 - p) / np.where(n_o > 0, n_o, 1), 0.0)
                + (1 - w) ** 2 * np.where(n_c > 0, (k - 1) ** 2 * q * (1 - q)
                                          / np.where(n_c > 0, n_c, 1), 0.0))


def _mixture(moments: tuple[np.ndarray, np.ndarray, np.ndarray], plug_in: np.ndarray,
             w) -> np.ndarray:
    oo, oc, cc = moments
    w = np.asarray(w, float)
    sandwich = w * w * oo + 2 * w * (1 - w) * oc + (1 - w) ** 2 * cc
    return np.where(sandwich > 1e-15 * (oo + cc), sandwich, plug_in)


def mixture_variance(c: Clusters | ClusterMoments, k: int, w) -> np.ndarray:
    """Sandwich variance of w Â_ord + (1−w) Â_comp: Σ_i [w e_o,i + (1−w) e_c,i]² with
    e_o,i = (S_o,i − Â_o n_o,i)/n_o and e_c,i = (K−1)(S_c,i − q̂ n_c,i)/n_c (computed from
    Σe_o², Σe_o e_c, Σe_c², so any weight costs nothing more); where it is 0 (perfect
    scores: no residual) the plug-in w² Â_o(1−Â_o)/n_o + (1−w)² (K−1)² q̂(1−q̂)/n_c,
    whose interval is then the exact one anyway."""
    m = moments_of(c)
    return _mixture(_influence(m, k), _plug_in(m, k, np.asarray(w, float)), w)


@dataclass(frozen=True)
class DesignEffects:
    """Per cell: of the ordinary proportion, of the complementary one, of the joint score;
    and the sums of the mixtures' influence terms (:func:`mixture_variance`) — each with
    the small-sample factor ``small_sample`` (:func:`small_sample_factor`) in it wherever
    it comes from a sandwich over items (not the ordinary proportion's, whose items hold
    one label each: there the sandwich is the binomial variance exactly)."""

    ordinary: np.ndarray
    complementary: np.ndarray
    joint: np.ndarray
    influence: tuple[np.ndarray, np.ndarray, np.ndarray]
    small_sample: np.ndarray | float = 1.0


def small_sample_factor(items, confidence: float = 0.95) -> np.ndarray:
    """G/(G−1) · (t_{G−1}/z)²: the sandwich's usual correction for G clusters (items with
    labels) — the G/(G−1) of the cluster-robust variance (CR1) and a Student t quantile on
    G − 1 degrees of freedom in place of the normal one, folded into the design effect so
    that both the likelihood-ratio and the exact intervals of the effective counts take it.
    1.035 at G = 100, 1.012 at 300, 1.003 at 1 000; 1 below two items. Without it ML and IVW
    covered 94.6 % on average over the 100-item cells of docs/coverage.md (93.5 % at K = 3,
    Q = 2, A = 0.9): the sandwich from 100 items is itself uncertain."""
    g = np.asarray(items, dtype=float)
    alpha = 1 - confidence
    safe = np.maximum(g, 2.0)
    factor = (safe / (safe - 1)
              * (stats.t.ppf(1 - alpha / 2, safe - 1) / stats.norm.ppf(1 - alpha / 2)) ** 2)
    return np.where(g >= 2, factor, 1.0)


def design_effects(c: Clusters | ClusterMoments, k: int,
                   confidence: float = 0.95) -> DesignEffects:
    """Every design effect of :func:`estimate_clustered` at once (module docstring), with
    the small-sample factor of the cell's items with labels (:func:`small_sample_factor`);
    all from the clusters' moments (:class:`ClusterMoments`)."""
    m = moments_of(c)
    n_o, s_o, n_c, s_c = m.totals()
    factor = small_sample_factor(m.labelled, confidence)
    # one ordinary label per item at most (K ≥ 3): its sandwich is exactly the binomial's
    ordinary = _proportion_effect(m, 0)
    if m.several_ordinary:
        ordinary = ordinary * factor
    oo, oc, cc = _influence(m, k)
    return DesignEffects(
        ordinary=ordinary,
        complementary=(_proportion_effect(m, 2) * factor if k >= 3
                       else np.ones(n_o.shape)),
        joint=ml_design_effect(m, k, ml_accuracy(n_o, s_o, n_c, s_c, k)) * factor,
        influence=(oo * factor, oc * factor, cc * factor),
        small_sample=factor,
    )


def estimate_clustered(c: Clusters | ClusterMoments, k: int, method: str = "ml",
                       confidence: float = 0.95,
                       weight=None, pilot=None, interval: str = "auto",
                       weight_from_data: bool = False, u=None,
                       rng: np.random.Generator | int | None = None,
                       effects: DesignEffects | None = None) -> Estimate:
    """:func:`estimators.partitioned.accuracy.estimate` with the item-clustered variance (module
    docstring): same point estimates; SE, interval and bound from the effective counts
    (IVW: the mixture's sandwich variance). The finite-sample bounds assume independent
    labels, so here they are computed on effective counts and carry ``bound_valid=False``
    (except "ord", whose labels are one per item). ``effects`` lets several methods share
    one computation of the design effects."""
    if method not in METHODS:
        raise ValueError(f"method: unknown '{method}' (one of {', '.join(METHODS)})")
    c = moments_of(c)
    n_o, s_o, n_c, s_c = c.totals()
    d = design_effects(c, k, confidence) if effects is None else effects
    common = {"confidence": confidence, "interval": interval, "u": u, "rng": rng}
    if method == "ord":
        return estimate(n_o / d.ordinary, s_o / d.ordinary, 0.0 * n_c, 0.0 * s_c, k, "ord",
                        **common)
    if method == "comp":
        out = estimate(0.0 * n_o, 0.0 * s_o, n_c / d.complementary, s_c / d.complementary,
                       k, "comp", **common)
        return replace(out, bound_valid=False)
    j = d.joint
    if method == "ml":
        return estimate(n_o / j, s_o / j, n_c / j, s_c / j, k, "ml", **common)
    out = estimate(n_o / j, s_o / j, n_c / j, s_c / j, k, method, weight=weight, pilot=pilot,
                   weight_from_data=weight_from_data,
                   mixture_variance=lambda w: _mixture(d.influence, _plug_in(c, k, w), w),
                   **common)
    return replace(out, bound_valid=False)


__all__ = ["ClusterMoments", "Clusters", "DesignEffects", "design_effects", "estimate_clustered",
           "mixture_variance", "ml_design_effect", "moments_of", "per_item_sums",
           "proportion_design_effect"]
