"""Confidence intervals for A from the joint ordinary + complementary likelihood.

``confidence_interval`` (what ``estimate`` uses) picks per cell: the exact interval of
:mod:`estimators.partitioned.exact` where a source with few events of some kind (fewer than
``EXACT_BELOW`` correct ordinary answers, wrong ordinary answers, or complementary answers
that hit the AI's prediction) carries more than ``EXACT_SHARE`` of the Fisher information,
else the likelihood-ratio interval (see below). The likelihood-ratio interval alone covers only
85–88 % near perfect scores (e.g. A = 0.97, K = 10, n_o = 40, n_c = 360); docs/coverage.md
holds the grid that chose the rule.

Interval modes (``INTERVAL_METHODS``, what ``estimate(interval=…)`` takes):

* "auto" (the default, what dashboards show): likelihood ratio; the **mid-p** exact
  interval (tied outcomes weigh ½ in both tails) in the cells that :func:`needs_exact`.
  Deterministic — the same counts always give the same interval — and never of zero
  width (a perfect 2/2 has a lower end of √0.05 ≈ 0.22). Its coverage is close to 95 %
  on average over A but not guaranteed at every A (docs/coverage.md: 93–99 %).
* "conservative": likelihood ratio; the conservative exact interval (tie weight 1) in
  those cells — at least 95 % for every A where it is used; for audits.
* "randomised": likelihood ratio; the randomised exact interval in those cells (tie
  weights U and 1 − U, U uniform, drawn independently of the data: exactly 95 % on average
  over U). Library only: the interval depends on a coin.
* "exact": the randomised exact interval in every cell (library only).
* "asymptotic": likelihood ratio everywhere.

Likelihood ratio (:func:`estimators.partitioned.likelihood.likelihood_ratio_interval`):
ℓ(A) = S_o log A + T_o log(1−A) + S_c log q + T_c log(1−q),  q = (A+K−2)/(K−1),
is concave in A on [0, 1], so {A : 2(ℓ(Â) − ℓ(A)) ≤ χ²₁(confidence)} is an interval whose
ends are found by vectorised bisection on [0, Â] and [Â, 1]. Unlike the Wald interval it
does not collapse when Â ∈ {0, 1} (a perfect score still gets a lower end below 1).
"""

from __future__ import annotations

import numpy as np

from estimators.partitioned.exact import exact_interval
from estimators.partitioned.likelihood import likelihood_ratio_interval, ml_accuracy

EXACT_BELOW = 30  # events of a kind under which a source is "few-event"
# Events of a kind under which an interval is approximate (:func:`approximate`): chosen on the
# several-queries grids of docs/coverage.md, where every figure outside 93.5–96.5 % comes
# with the note in most of its studies.
APPROXIMATE_BELOW = 8
# The coverage of approximate intervals on those grids (the cells where most studies carry
# the note), which the dashboard's note quotes; a test checks it against docs/coverage.md.
APPROXIMATE_COVERAGE = (0.91, 1.0)
# Share of the Fisher information above which a few-event source makes the likelihood-ratio
# interval unreliable (chosen from the validation grid: on the 124 cells whose few-event
# sources carry less than this share the likelihood-ratio interval covers 93.8–95.9 % with
# 4 000 replicates, the six nearest the threshold 94.5–95.1 % with 40 000).
EXACT_SHARE = 0.2


def few_events(n_ord, s_ord, n_comp, s_comp) -> tuple[np.ndarray, np.ndarray]:
    """(ordinary, complementary): whether each source holds fewer than ``EXACT_BELOW`` events of
    its rarer kind (correct or wrong ordinary answers; complementary answers that hit the
    AI's prediction)."""
    n_ord, s_ord, n_comp, s_comp = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (n_ord, s_ord, n_comp, s_comp)))
    few_ord = (n_ord > 0) & (np.minimum(s_ord, n_ord - s_ord) < EXACT_BELOW)
    few_comp = (n_comp > 0) & (n_comp - s_comp < EXACT_BELOW)
    return few_ord, few_comp


def ordinary_information_share(n_ord, n_comp, k: int, a) -> np.ndarray:
    """Share of the Fisher information about A carried by the ordinary labels at A:
    I_o/(I_o + I_c) with I_o = n_o/(A(1−A)) and I_c = n_c/((K−1)² q(1−q)), which, as
    1 − q = (1−A)/(K−1), is n_o (K−1) q / (n_o (K−1) q + n_c A) — finite at A ∈ {0, 1}."""
    n_ord, n_comp, a = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (n_ord, n_comp, a)))
    ordinary = n_ord * (a + k - 2)  # n_o (K−1) q
    total = ordinary + n_comp * np.clip(a, 0.0, 1.0)
    return np.divide(ordinary, total, out=np.ones(a.shape), where=total > 0)


def needs_exact(n_ord, s_ord, n_comp, s_comp, k: int, mle) -> np.ndarray:
    """Cells where the likelihood-ratio interval is not to be trusted: a source with fewer
    than ``EXACT_BELOW`` events of its rarer kind (:func:`few_events`) carries more than
    ``EXACT_SHARE`` of the information at Â. (A few-event source beside a much richer one
    barely moves the likelihood: see ``EXACT_SHARE``.)"""
    few_ord, few_comp = few_events(n_ord, s_ord, n_comp, s_comp)
    share = ordinary_information_share(n_ord, n_comp, k, mle)
    return (few_ord & (share > EXACT_SHARE)) | (few_comp & (1 - share > EXACT_SHARE))


def decisive_events(n_ord, s_ord, n_comp, s_comp, k: int, mle, method: str = "ml"
                    ) -> np.ndarray:
    """The number of events an interval rests on — the count whose few possible values make
    its outcomes discrete (counts as the interval is built from them: effective counts n/d
    with several queries per item):

    * "ord": the ordinary source's rarer kind, min(S_o, n_o − S_o);
    * "comp": the complementary one's, min(n_c − S_c, S_c) — the hits (answers naming the
      AI's prediction, each the mark of an error) unless they are the majority;
    * the joint methods (ML, IVW, and the IPW and stratified columns, which hand
      ``estimate`` their effective counts): the smaller of the errors seen, wrong ordinary
      answers plus complementary hits (near A = 1 both are Poisson counts with rates
      n_o(1−A) and n_c(1−A)/(K−1), so their sum is what the data say about 1 − A), and the
      right ordinary answers where the ordinary labels carry more than ``EXACT_SHARE`` of
      the information at Â (near A = 0 only they are rare: complementary answers miss or
      hit the prediction about evenly).

    ∞ where the method has no labels."""
    n_ord, s_ord, n_comp, s_comp = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (n_ord, s_ord, n_comp, s_comp)))
    has_o, has_c = n_ord > 0, n_comp > 0
    if method == "ord":
        return np.where(has_o, np.minimum(s_ord, n_ord - s_ord), np.inf)
    if method == "comp":
        return np.where(has_c, np.minimum(n_comp - s_comp, s_comp), np.inf)
    errors = np.where(has_o, n_ord - s_ord, 0.0) + np.where(has_c, n_comp - s_comp, 0.0)
    share = ordinary_information_share(n_ord, n_comp, k, mle)
    right = np.where(has_o & (share > EXACT_SHARE), s_ord, np.inf)
    return np.where(has_o | has_c, np.minimum(errors, right), np.inf)


def approximate(events) -> np.ndarray:
    """Whether an interval is **approximate**: it rests on fewer than ``APPROXIMATE_BELOW``
    events (:func:`decisive_events`), so few that its real coverage depends on where the
    true accuracy lies between the handful of outcomes it can tell apart, and stands away
    from its level (docs/coverage.md: 93.5–96.5 % with more events)."""
    return np.asarray(events, dtype=float) < APPROXIMATE_BELOW


def exact_where_needed(lo, hi, small, n_ord, s_ord, n_comp, s_comp, k: int,
                       confidence: float, mle, u=None) -> tuple[np.ndarray, np.ndarray]:
    """Replace the (asymptotic) interval ``lo, hi`` by the exact one in the cells marked
    ``small``: tie weight ``u`` in the lower tail and 1 − ``u`` in the upper (u = ½:
    mid-p; a uniform draw per cell: randomised), conservative when ``u`` is None; the
    others are returned unchanged."""
    arrays = (n_ord, s_ord, n_comp, s_comp, mle, lo, hi, small, 0.0 if u is None else u)
    n_ord, s_ord, n_comp, s_comp, mle, lo, hi, small, u_all = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in arrays))
    small = small.astype(bool)
    lo, hi = lo.copy(), hi.copy()
    if small.any():
        *cells, lattice_mle = lattice_outcome(n_ord[small], s_ord[small], n_comp[small],
                                              s_comp[small], k, mle[small])
        lo[small], hi[small] = exact_interval(
            *cells, k, confidence, lattice_mle, u=None if u is None else u_all[small])
    return lo, hi


def lattice_outcome(n_ord, s_ord, n_comp, s_comp, k: int, mle=None) -> tuple[np.ndarray, ...]:
    """The outcome of integer counts nearest to (n_o, S_o, n_c, S_c) and its ML estimate:
    what the exact interval (defined on integer outcomes) is computed for. Integer counts
    are returned as they are (with ``mle`` when given). Counts may be fractional: effective
    counts n/d, S/d with several queries per item (:mod:`estimators.partitioned.clustered`), or a
    complementary sum holding missing predictions' (K−2)/(K−1). Then n' = round(n) and
    S' = round(n'·S/n) — the proportion kept as closely as the lattice allows, whether
    its rare events are successes or failures — and the ML estimate is that of the
    rounded outcome, so that the observed outcome is tied with itself in the exact tails
    (an estimate a rounding error off the outcome's own, e.g. 1 − 1e-16 for a perfect
    score, would drop the observed outcome's mass from one tail or the other)."""
    n_ord, s_ord, n_comp, s_comp = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (n_ord, s_ord, n_comp, s_comp)))
    counts = np.stack([n_ord, s_ord, n_comp, s_comp])
    integral = (counts == np.round(counts)).all(axis=0)
    rounded = []
    for n, s in ((n_ord, s_ord), (n_comp, s_comp)):
        n_r = np.round(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            s_r = np.where(n > 0, np.round(n_r * s / np.where(n > 0, n, 1.0)), 0.0)
        rounded += [np.where(integral, n, n_r), np.where(integral, s, np.clip(s_r, 0, n_r))]
    lattice_mle = ml_accuracy(*rounded, k)
    if mle is not None:
        lattice_mle = np.where(integral, np.broadcast_to(mle, integral.shape), lattice_mle)
    return (*rounded, lattice_mle)


def confidence_interval(n_ord, s_ord, n_comp, s_comp, k: int, confidence: float, mle=None,
                        method: str = "auto", u=None) -> tuple[np.ndarray, np.ndarray]:
    """Interval for A from the joint likelihood in one of the ``INTERVAL_METHODS`` (see the
    module docstring); the randomised modes need ``u``, uniform tie-breaks drawn
    independently of the data (broadcast against the counts); the others ignore it."""
    if method not in INTERVAL_METHODS:
        raise ValueError(f"interval: unknown '{method}' ({', '.join(INTERVAL_METHODS)})")
    if method in RANDOMISED and u is None:
        raise ValueError(f"interval '{method}' is randomised: pass u (uniform tie-breaks)")
    n_ord, s_ord, n_comp, s_comp = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (n_ord, s_ord, n_comp, s_comp)))
    a_hat = ml_accuracy(n_ord, s_ord, n_comp, s_comp, k) if mle is None else np.broadcast_to(
        np.asarray(mle, dtype=float), n_ord.shape)
    if method == "exact":
        *cells, lattice_mle = lattice_outcome(n_ord, s_ord, n_comp, s_comp, k, a_hat)
        return exact_interval(*cells, k, confidence, lattice_mle, u=u)
    if method == "asymptotic":
        return likelihood_ratio_interval(n_ord, s_ord, n_comp, s_comp, k, confidence,
                                         mle=a_hat)
    small = needs_exact(n_ord, s_ord, n_comp, s_comp, k, a_hat)
    large = ~small
    lo, hi = np.zeros(n_ord.shape), np.ones(n_ord.shape)
    if large.all():
        lo, hi = likelihood_ratio_interval(n_ord, s_ord, n_comp, s_comp, k, confidence,
                                           mle=a_hat)
    elif large.any():
        lo[large], hi[large] = likelihood_ratio_interval(
            n_ord[large], s_ord[large], n_comp[large], s_comp[large], k, confidence,
            mle=a_hat[large])
    return exact_where_needed(lo, hi, small, n_ord, s_ord, n_comp, s_comp, k, confidence,
                              a_hat, u=tie_weight(method, u))


def tie_weight(method: str, u=None):
    """The ``u`` that :func:`exact_where_needed` takes for an interval mode: ½ (mid-p) for
    "auto", None (conservative) for "conservative", the caller's tie-breaks for the
    randomised modes."""
    if method in RANDOMISED:
        return u
    return MID_P if method == "auto" else None


INTERVAL_METHODS = ("auto", "conservative", "randomised", "exact", "asymptotic")
RANDOMISED = ("randomised", "exact")  # the modes whose exact intervals use tie-breaks u
MID_P = 0.5  # weight of the outcomes tied with the observed one, in both tails
