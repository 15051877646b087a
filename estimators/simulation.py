"""The paper's statistical validation on simulated data (METHODS.md M1; paper 000, Table 1
and Figure 2), usable from a notebook or ``manage.py validate_estimators``.

Protocol, per replicate: n_o items whose routed class k was the truth (ordinary labels) and
n_c items whose k was not (complementary labels). The AI is right with probability A; a
complementary label ȳ is uniform over the K−1 wrong classes, so the AI's answer differs
from it with probability q = (A+K−2)/(K−1). The counts are therefore S_o ~ Bin(n_o, A) and
S_c ~ Bin(n_c, q), drawn directly (``simulate_items`` runs the item-level protocol and is
used by the tests to check that the two agree).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from estimators.binomial import count_window
from estimators.clustered import Clusters, design_effects, estimate_clustered
from estimators.partitioned import estimate
from estimators.planning import labels_needed

ESTIMATORS = ("Ord", "Comp-n_o", "Comp-(K-1)", "Comp-Var", "IVW-0.5", "IVW", "ML")
# The validation grid of docs/estimators.md (issue 3): 4 × 6 × 4 × 5 = 480 cells.
STANDARD_GRID = {"ks": (3, 5, 10, 16), "accuracies": (0.05, 0.3, 0.6, 0.9, 0.97, 0.99),
                 "n_ords": (20, 40, 200, 2000), "n_comps": (0, 40, 360, 2000, 20000)}


@dataclass(frozen=True)
class ValidationRow:
    """One estimator of the Table-1 layout: labels used, mean and across-replicate SD of
    the estimate, mean within-run SE, coverage and mean width of its 95 % interval (the
    default "auto" interval, and the asymptotic one the paper uses)."""

    estimator: str
    n_ord: int
    n_comp: int
    mean: float
    sd: float
    mean_se: float
    coverage: float
    width: float
    coverage_asymptotic: float
    width_asymptotic: float

    def as_dict(self) -> dict:
        return asdict(self)


def simulate_counts(rng: np.random.Generator, reps: int, accuracy: float, k: int, n_ord: int,
                    n_comp: int) -> tuple[np.ndarray, np.ndarray]:
    """S_o and S_c of ``reps`` replicate studies."""
    q = (accuracy + k - 2) / (k - 1)
    return rng.binomial(n_ord, accuracy, reps), rng.binomial(n_comp, q, reps)


def simulate_items(rng: np.random.Generator, n_items: int, accuracy: float,
                   k: int) -> tuple[int, int, int, int]:
    """Item-level protocol: truth y uniform, the AI right w.p. A (else a uniformly drawn
    wrong class), a class k drawn uniformly; k = y gives an ordinary label, else a
    complementary one. Returns (n_o, S_o, n_c, S_c)."""
    y = rng.integers(0, k, n_items)
    wrong = (y + rng.integers(1, k, n_items)) % k
    pred = np.where(rng.random(n_items) < accuracy, y, wrong)
    asked = rng.integers(0, k, n_items)
    ordinary = asked == y
    n_o = int(ordinary.sum())
    s_o = int((pred[ordinary] == y[ordinary]).sum())
    s_c = int((pred[~ordinary] != asked[~ordinary]).sum())
    return n_o, s_o, n_items - n_o, s_c


def _row(name: str, n_o: int, n_c: int, s_o, s_c, k: int, method: str, truth: float,
         confidence: float, u: np.ndarray, weight=None) -> ValidationRow:
    est = estimate(n_o, s_o, n_c, s_c, k, method=method, confidence=confidence, weight=weight,
                   u=u)
    paper = estimate(n_o, s_o, n_c, s_c, k, method=method, confidence=confidence,
                     weight=weight, interval="asymptotic")
    value = np.asarray(est.accuracy, float)
    return ValidationRow(
        estimator=name, n_ord=n_o, n_comp=n_c, mean=float(value.mean()),
        sd=float(value.std(ddof=1)), mean_se=float(np.mean(est.se)),
        coverage=float(np.mean((est.ci_low <= truth) & (truth <= est.ci_high))),
        width=float(np.mean(np.asarray(est.ci_high) - est.ci_low)),
        coverage_asymptotic=float(np.mean((paper.ci_low <= truth) & (truth <= paper.ci_high))),
        width_asymptotic=float(np.mean(np.asarray(paper.ci_high) - paper.ci_low)),
    )


def validation_study(*, k: int, accuracy: float, n_ord: int, n_comp: int, reps: int = 10_000,
                     confidence: float = 0.95, seed: int = 0,
                     estimators: tuple[str, ...] = ESTIMATORS) -> list[ValidationRow]:
    """Replicate studies of one cell through the protocol; one row per estimator.

    Ord uses the n_o ordinary labels; Comp-n_o, Comp-(K−1) and Comp-Var use only
    complementary labels, n_o, (K−1)·n_o and the variance-matched (1+(K−2)/A)·n_o of them;
    IVW-0.5, IVW and ML combine the n_o ordinary and n_c complementary labels."""
    if not 0 <= accuracy <= 1:
        raise ValueError(f"accuracy: must lie in [0, 1], got {accuracy}")
    if n_ord < 0 or n_comp < 0 or reps < 2:
        raise ValueError("n_ord and n_comp must be ≥ 0 and reps ≥ 2")
    unknown = set(estimators) - set(ESTIMATORS)
    if unknown:
        raise ValueError(f"estimators: unknown {sorted(unknown)} (one of {ESTIMATORS})")
    rng = np.random.default_rng(seed)
    s_o, s_c = simulate_counts(rng, reps, accuracy, k, n_ord, n_comp)
    u = rng.random(reps)  # each replicate's tie-break, shared by its estimators as on the site
    rows = []
    for name in estimators:
        if name == "Ord":
            rows.append(_row(name, n_ord, 0, s_o, 0, k, "ord", accuracy, confidence, u))
        elif name.startswith("Comp"):
            size = {"Comp-n_o": n_ord, "Comp-(K-1)": (k - 1) * n_ord,
                    "Comp-Var": int(np.ceil(labels_needed(n_ord, max(accuracy, 0.01), k)))}[name]
            _, only_c = simulate_counts(rng, reps, accuracy, k, 0, size)
            rows.append(_row(name, 0, size, 0, only_c, k, "comp", accuracy, confidence, u))
        elif name == "IVW-0.5":
            rows.append(_row(name, n_ord, n_comp, s_o, s_c, k, "ivw_fixed", accuracy,
                             confidence, u, weight=0.5))
        else:
            rows.append(_row(name, n_ord, n_comp, s_o, s_c, k, name.lower(), accuracy,
                             confidence, u))
    return rows


@dataclass(frozen=True)
class CoverageCell:
    k: int
    accuracy: float
    n_ord: int
    n_comp: int
    coverage: float  # of the default ("auto": mid-p exact where events are few) ML interval
    width: float
    coverage_conservative: float  # the non-randomised option ("conservative")
    width_conservative: float
    coverage_lr: float  # likelihood ratio alone
    coverage_wald: float  # the paper's plug-in IVW interval
    exact: bool = False  # by exact summation over outcomes (else simulated)

    def as_dict(self) -> dict:
        return asdict(self)


# Cells whose probable outcomes (count windows holding all but 1e-12 of each binomial)
# number at most this many get their coverage by exact summation, not by simulation.
EXACT_SUM_OUTCOMES = 40_000
NEGLIGIBLE = 1e-11


def _outcomes(n_o: int, n_c: int, k: int, a: float) -> tuple[np.ndarray, ...] | None:
    """Every probable outcome (S_o, S_c) of a cell with its probability, or None when
    there are more than ``EXACT_SUM_OUTCOMES``."""
    q = (a + k - 2) / (k - 1)
    w_o, w_c = count_window(n_o, np.array([a])), count_window(n_c, np.array([q]))
    if len(w_o) * len(w_c) > EXACT_SUM_OUTCOMES:
        return None
    s_o, s_c = (x.ravel() for x in np.meshgrid(w_o, w_c, indexing="ij"))
    prob = stats.binom.pmf(s_o, n_o, a) * stats.binom.pmf(s_c, n_c, q)
    keep = prob > NEGLIGIBLE  # the dropped outcomes hold < 40 000 × 1e-11 = 4e-7 in all
    return s_o[keep], s_c[keep], prob[keep]


def coverage_grid(*, ks, accuracies, n_ords, n_comps, reps: int = 4000,
                  confidence: float = 0.95, seed: int = 0,
                  progress: Callable[[int, int, CoverageCell], None] | None = None
                  ) -> list[CoverageCell]:
    """Coverage of the default ML interval on every cell of the grid (and, for comparison,
    of its "conservative" option, of the likelihood-ratio interval alone and of the
    paper's plug-in Wald interval for IVW). Cells with few probable outcomes (the small,
    discrete ones, where intervals differ most) are computed exactly — Σ over outcomes of
    P(outcome) · 1{the interval covers} —, the others from ``reps`` simulated studies.
    ``progress(done, total, cell)`` is called after each cell."""
    rng = np.random.default_rng(seed)
    total = len(ks) * len(accuracies) * len(n_ords) * len(n_comps)
    cells = []
    for k in ks:
        for a in accuracies:
            for n_o in n_ords:
                for n_c in n_comps:
                    exact = _outcomes(n_o, n_c, k, a)
                    if exact is None:
                        s_o, s_c = simulate_counts(rng, reps, a, k, n_o, n_c)
                        prob = np.full(reps, 1 / reps)
                    else:
                        s_o, s_c, prob = exact
                    ml = estimate(n_o, s_o, n_c, s_c, k, "ml", confidence)
                    conservative = estimate(n_o, s_o, n_c, s_c, k, "ml", confidence,
                                            interval="conservative")
                    lr = estimate(n_o, s_o, n_c, s_c, k, "ml", confidence,
                                  interval="asymptotic")
                    wald = estimate(n_o, s_o, n_c, s_c, k, "ivw", confidence,
                                    interval="asymptotic")
                    cells.append(CoverageCell(
                        k=k, accuracy=a, n_ord=n_o, n_comp=n_c,
                        coverage=_covers(ml, a, prob), width=_width(ml, prob),
                        coverage_conservative=_covers(conservative, a, prob),
                        width_conservative=_width(conservative, prob),
                        coverage_lr=_covers(lr, a, prob), coverage_wald=_covers(wald, a, prob),
                        exact=exact is not None))
                    if progress is not None:
                        progress(len(cells), total, cells[-1])
    return cells


def _covers(est, truth: float, prob=None) -> float:
    inside = (est.ci_low <= truth) & (truth <= est.ci_high)
    return float(np.mean(inside) if prob is None else np.sum(prob * inside))


def _width(est, prob=None) -> float:
    width = np.asarray(est.ci_high) - est.ci_low
    return float(np.mean(width) if prob is None else np.sum(prob * width))


@dataclass(frozen=True)
class VariancePoint:
    ratio: float  # n_c / n_o
    n_comp: int
    var_ord: float
    var_comp: float
    var_ivw_fixed: float  # w = 0.5
    var_ivw: float  # plug-in weights
    var_ivw_pilot: float  # closed-form optimal weight from the true A
    var_ml: float

    def as_dict(self) -> dict:
        return asdict(self)


def variance_curve(*, k: int, accuracy: float, n_ord: int, ratios, reps: int = 4000,
                   seed: int = 0) -> list[VariancePoint]:
    """Across-replicate variance of each estimator as n_c/n_o grows (the paper's Figure 2:
    the optimally weighted IVW keeps below the fixed 0.5 weighting away from n_c ≈ 3 n_o)."""
    rng = np.random.default_rng(seed)
    points = []
    for ratio in ratios:
        n_c = int(round(ratio * n_ord))
        s_o, s_c = simulate_counts(rng, reps, accuracy, k, n_ord, n_c)

        counts = (n_ord, s_o, n_c, s_c, k)
        points.append(VariancePoint(
            ratio=float(ratio), n_comp=n_c, var_ord=_variance(counts, "ord"),
            var_comp=_variance(counts, "comp"),
            var_ivw_fixed=_variance(counts, "ivw_fixed", weight=0.5),
            var_ivw=_variance(counts, "ivw"),
            var_ivw_pilot=_variance(counts, "ivw_pilot", pilot=accuracy),
            var_ml=_variance(counts, "ml")))
    return points


def _variance(counts: tuple, method: str, **kw) -> float:
    est = estimate(*counts, method=method, interval="asymptotic", **kw)
    return float(np.var(est.accuracy, ddof=1))


def simulate_routed_items(rng: np.random.Generator, reps: int, n_items: int,
                          accuracy: float, k: int, queries: int) -> Clusters:
    """Items through the routing protocol with several queries per item (METHODS.md M1):
    per item a uniform class order (a random permutation), up to ``queries`` classes asked
    in that order, stopping at the first "yes" (perfect specialists: "yes" exactly at the
    true class). The AI is right with probability A, else it names a wrong class.
    Returns per-item sums of ``reps`` replicate studies (items × replicates).

    By symmetry only positions in the order matter: the truth's position P is uniform on
    0..K−1, a wrong prediction's uniform on the other K−1. The item gets
    m = min(P, queries) complementary labels (the classes before the truth) and an
    ordinary one if P < queries; a complementary label hits the prediction iff the wrong
    prediction's position is below m."""
    shape = (n_items, reps)
    pos_truth = rng.integers(0, k, shape)
    right = rng.random(shape) < accuracy
    r = rng.integers(0, k - 1, shape)
    pos_pred = r + (r >= pos_truth)
    m = np.minimum(pos_truth, queries)
    n_o = (pos_truth < queries).astype(float)
    hit = ~right & (pos_pred < m)
    return Clusters(n_ord=n_o, s_ord=n_o * right, n_comp=m.astype(float),
                    s_comp=(m - hit).astype(float))


CLUSTER_METHODS = ("ord", "comp", "ivw", "ivw_pilot", "ivw_fixed", "ml")
# The several-queries grid of docs/coverage.md: K, queries per item (≤ K), A, items.
CLUSTER_GRID = {"designs": ((3, 2), (3, 3), (4, 2), (4, 3), (4, 4), (10, 2), (10, 5),
                            (10, 10)),
                "accuracies": (0.3, 0.7, 0.9, 0.97), "n_items": (100, 1000)}


@dataclass(frozen=True)
class ClusteredCell:
    k: int
    queries: int
    accuracy: float
    n_items: int
    labels_per_item: float
    coverage: dict  # method → coverage of the clustered interval (default "auto" mode)
    coverage_independent: dict  # method → coverage when labels are taken as independent
    design_effect: float  # mean joint design effect

    def as_dict(self) -> dict:
        return asdict(self)


def clustered_coverage(*, k: int, queries: int, accuracy: float, n_items: int,
                       reps: int = 2000, confidence: float = 0.95, seed: int = 0,
                       methods: tuple[str, ...] = CLUSTER_METHODS,
                       interval: str = "auto") -> ClusteredCell:
    """Coverage of every estimator's interval on replicate studies of items routed with
    several queries per item (:func:`simulate_routed_items`): with the item-clustered
    variance (:func:`estimators.clustered.estimate_clustered`) and, for comparison, with the
    labels taken as independent."""
    rng = np.random.default_rng(seed)
    clusters = simulate_routed_items(rng, reps, n_items, accuracy, k, queries)
    totals = clusters.totals()
    effects = design_effects(clusters, k)
    covered, naive = {}, {}
    for method in methods:
        est = estimate_clustered(clusters, k, method, confidence, interval=interval,
                                 effects=effects)
        covered[method] = _covers(est, accuracy)
        plain = estimate(*totals, k, method, confidence, interval=interval)
        naive[method] = _covers(plain, accuracy)
    labels = float((clusters.n_ord + clusters.n_comp).sum(axis=0).mean() / n_items)
    return ClusteredCell(k=k, queries=queries, accuracy=accuracy, n_items=n_items,
                         labels_per_item=labels, coverage=covered,
                         coverage_independent=naive,
                         design_effect=float(np.mean(effects.joint)))


def clustered_grid(*, designs, accuracies, n_items, reps: int = 2000,
                   confidence: float = 0.95, seed: int = 0,
                   progress: Callable[[int, int, ClusteredCell], None] | None = None
                   ) -> list[ClusteredCell]:
    """:func:`clustered_coverage` on every (K, queries) design × accuracy × item count."""
    total = len(designs) * len(accuracies) * len(n_items)
    cells = []
    for i, ((k, queries), a, g) in enumerate(itertools.product(designs, accuracies, n_items)):
        cells.append(clustered_coverage(k=k, queries=queries, accuracy=a, n_items=g,
                                        reps=reps, confidence=confidence, seed=seed + i))
        if progress is not None:
            progress(len(cells), total, cells[-1])
    return cells
