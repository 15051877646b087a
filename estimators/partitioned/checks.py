"""Sanity checks that need no gold labels (METHODS.md M1, "beyond the paper").

**Yes share.** The first query of an item asks a class drawn uniformly from the K
classes, independently of the truth, so a perfect specialist answers "yes" with
probability exactly 1/K. Among *answered* first queries ("yes" + "no"; "not sure"
excluded) the share of "yes" is therefore Bin(answered, 1/K)/answered — unless abstention
depends on the truth (specialists who say "not sure" more often when the answer is
"yes", or "no") or routing does (a class drawn with knowledge of the item). A departure
biases every estimate, and this is the one check of it that needs no gold.

(Later queries of an item are asked only after a "no", so their yes share is higher —
1/(K−j) at the j-th query —: the check uses first queries only.)

Per class k the share of "yes" among the answered first queries *asking k* is the share
of items whose answer is class k. With shuffled options (the class is the option
position) that is 1/K as well; with named classes it is the classes' prevalence, which
need not be 1/K — so per-class tests are made only when ``uniform_classes`` says so.

Test: the exact two-sided binomial test (scipy.stats.binomtest) of share = 1/K, overall
and per class. Significance: a family-wise level ``FAMILY_ALPHA`` = 1 % shared by the
K + 1 tests (Bonferroni: each test at 1 %/(K+1)), so a study that follows the protocol
shows the warning on at most about 1 % of its snapshots; a test is only made with at least
``MIN_ANSWERED`` answered first queries, so the first few answers of a study (where only an
extreme split could reject, and a warning would come and go as answers arrive) raise no
flag. The exact test keeps its level at any sample size; the minimum is about what a
manager can act on, not about validity.

**What the check can detect** (``detectable_shares``). At the study's current number of
answered first queries n the overall test rejects when the yes count falls in its
rejection region R = {x : p(x) < level} (the exact test's two-sided p-value, as
scipy's ``binomtest`` computes it: the total probability under 1/K of the outcomes no
more likely than x). Its power against a true share p is P_p(X ∈ R) = Σ_{x∈R} C(n,x)
p^x (1−p)^{n−x} (exact: a sum over the outcomes). The dashboard states the shares below
and above 1/K detected with probability ``POWER`` = 80 % — e.g. with K = 4 and 1 000
answers, at the level of the overall test (1 %/5): a share under 19.8 % or over 30.6 %
instead of 25 % — so a manager reads a
missing warning as "no departure at least this large", not as "no departure".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

FAMILY_ALPHA = 0.01
MIN_ANSWERED = 30
POWER = 0.8


@dataclass(frozen=True)
class ShareTest:
    """One test: ``yes`` of ``answered``; ``share`` and ``p_value`` are None without
    answers (``p_value`` also when the test is not made); ``flag`` when p < level."""

    yes: int
    answered: int
    share: float | None
    p_value: float | None
    flag: bool


@dataclass(frozen=True)
class YesShare:
    expected: float
    level: float  # per-test significance level after the multiplicity correction
    overall: ShareTest
    classes: list[ShareTest]


def _test(yes: int, answered: int, expected: float, level: float, run: bool) -> ShareTest:
    if answered <= 0:
        return ShareTest(int(yes), 0, None, None, False)
    share = yes / answered
    if not run:
        return ShareTest(int(yes), int(answered), share, None, False)
    p = float(stats.binomtest(int(yes), int(answered), expected).pvalue)
    return ShareTest(int(yes), int(answered), share, p,
                     bool(answered >= MIN_ANSWERED and p < level))


def yes_share_test(yes, answered, k: int, uniform_classes: bool = True,
                   family_alpha: float = FAMILY_ALPHA) -> YesShare:
    """Yes share of answered first queries against 1/K (module docstring): ``yes`` and
    ``answered`` per class (answered = yes + no). Per-class tests are made only when
    ``uniform_classes`` (classes are shuffled option positions), else only the overall
    one, and the correction then covers that one test."""
    yes = np.asarray(yes, dtype=int)
    answered = np.asarray(answered, dtype=int)
    if k < 2 or yes.shape != answered.shape or len(yes) != k:
        raise ValueError(f"yes, answered: need one count per class (K = {k})")
    if ((yes < 0) | (yes > answered)).any():
        raise ValueError("yes: must lie between 0 and answered for every class")
    expected = 1 / k
    tests = k + 1 if uniform_classes else 1
    level = family_alpha / tests
    overall = _test(int(yes.sum()), int(answered.sum()), expected, level, True)
    classes = [_test(int(y), int(n), expected, level, uniform_classes)
               for y, n in zip(yes, answered, strict=True)]
    return YesShare(expected=expected, level=level, overall=overall, classes=classes)


def rejection_region(n: int, expected: float, level: float) -> np.ndarray:
    """bool[x] for x = 0…n: does the exact two-sided test of share = ``expected`` reject a
    yes count x at ``level``? The p-value of x is the total Bin(n, expected) probability of
    the outcomes y with pmf(y) ≤ pmf(x)·(1 + 1e−7) — scipy's ``binomtest`` rule — found for
    every x at once from the sorted probabilities. Only the outcomes within 12 standard
    deviations of the mean are summed (outside, pmf < 1e−30: they are rejected and add
    nothing a float can hold to any p-value), so a million answers cost milliseconds."""
    lo, window = _region_window(n, expected, level)
    region = np.ones(n + 1, dtype=bool)
    region[lo:lo + len(window)] = window
    return region


def _region_window(n: int, expected: float, level: float) -> tuple[int, np.ndarray]:
    """(lo, rejected): :func:`rejection_region` on the outcomes lo … hi within 12 standard
    deviations of the mean — every outcome outside is rejected."""
    sd = math.sqrt(n * expected * (1 - expected))
    lo = max(0, math.floor(n * expected - 12 * sd - 1))
    hi = min(n, math.ceil(n * expected + 12 * sd + 1))
    pmf = stats.binom.pmf(np.arange(lo, hi + 1), n, expected)
    order = np.sort(pmf)
    cumulative = np.cumsum(order)
    upto = np.searchsorted(order, pmf * (1 + 1e-7), side="right")
    return lo, np.minimum(1.0, cumulative[upto - 1]) < level


def power_against(n: int, share: float, region: np.ndarray) -> float:
    """P(X ∈ region) for X ~ Bin(n, share): the exact sum over the rejected outcomes."""
    return float(stats.binom.pmf(np.flatnonzero(region), n, share).sum())


def detectable_shares(n: int, expected: float, level: float, power: float = POWER
                      ) -> tuple[float | None, float | None]:
    """(low, high): the true yes shares below and above ``expected`` that the exact test at
    ``level`` with ``n`` answers detects with probability ``power`` (module docstring); a
    side is None when even a share of 0 (or 1) would be detected less often. The binomial
    being unimodal, the region is two tails, x ≤ a and x ≥ b, so the power is
    F(a) + 1 − F(b − 1) (the same sum as ``power_against``, in O(1)); it grows
    monotonically away from ``expected`` on each side, so each end is one root (brentq)."""
    from scipy.optimize import brentq

    if n <= 0:
        return None, None
    # the tails' inner ends, from the window of outcomes near the mean (everything outside
    # it is rejected): the cost does not grow with n
    lo, window = _region_window(n, expected, level)
    hi = lo + len(window) - 1
    mode = min(n, math.floor((n + 1) * expected))  # the binomial's mode
    below = np.flatnonzero(window[:max(0, mode - lo)]) + lo
    above = np.flatnonzero(window[max(0, mode - lo):]) + max(mode, lo)
    a = int(below[-1]) if below.size else lo - 1
    b = int(above[0]) if above.size else (hi + 1 if hi < n else n + 1)

    def gap(share: float) -> float:
        tails = (stats.binom.cdf(a, n, share) if a >= 0 else 0.0) + (
            stats.binom.sf(b - 1, n, share) if b <= n else 0.0)
        return float(tails) - power

    low = brentq(gap, 0.0, expected, xtol=1e-9) if gap(0.0) > 0 else None
    high = brentq(gap, expected, 1.0, xtol=1e-9) if gap(1.0) > 0 else None
    return low, high


__all__ = ["FAMILY_ALPHA", "MIN_ANSWERED", "POWER", "ShareTest", "YesShare",
           "detectable_shares", "power_against", "rejection_region", "yes_share_test"]
