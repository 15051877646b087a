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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

FAMILY_ALPHA = 0.01
MIN_ANSWERED = 30


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


__all__ = ["FAMILY_ALPHA", "MIN_ANSWERED", "ShareTest", "YesShare", "yes_share_test"]
