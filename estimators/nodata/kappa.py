"""Cohen's κ between an evaluator's labels and people's labels of the same datapoints, with a
large-sample interval — shown beside an audit's success rate where human labels exist (issue
19: the two signals side by side; the success rate never looks at labels, κ only at them).

κ = (p_o − p_e) / (1 − p_e), p_o the observed agreement, p_e = Σ_c p_c· p_·c the agreement
expected from the two margins. The standard error is Fleiss, Cohen & Everitt (1969,
Psychological Bulletin 72(5), eq. 13, the non-null variance):

    var(κ̂) = [Σ_c p_cc (1 − (p_c· + p_·c)(1 − κ))² + (1 − κ)² Σ_{c≠k} p_ck (p_·c + p_k·)²
              − (κ − p_e (1 − κ))²] / (n (1 − p_e)²),

and the interval is κ̂ ± z·SE, cut to [−1, 1]. κ is undefined (NaN) when p_e = 1 (both
raters gave one and the same label to everything) or there is no pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm


@dataclass(frozen=True)
class Kappa:
    kappa: float
    lower: float
    upper: float
    se: float
    observed: float  # p_o, the share of pairs that agree
    expected: float  # p_e
    n: int

    def as_dict(self) -> dict[str, float | int | None]:
        def f(x: float) -> float | None:
            return None if math.isnan(x) else float(x)

        return {"kappa": f(self.kappa), "lower": f(self.lower), "upper": f(self.upper),
                "se": f(self.se), "observed": f(self.observed), "expected": f(self.expected),
                "n": self.n}


def cohen_kappa(a: Sequence, b: Sequence, *, level: float = 0.95) -> Kappa:
    """κ of two equal-length label sequences (pairs with a None on either side are left out)."""
    if len(a) != len(b):
        raise ValueError(f"b: {len(b)} labels for {len(a)}")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    n = len(pairs)
    nan = float("nan")
    if n == 0:
        return Kappa(nan, nan, nan, nan, nan, nan, 0)
    cats = sorted({x for x, _ in pairs} | {y for _, y in pairs}, key=repr)
    index = {c: i for i, c in enumerate(cats)}
    table = np.zeros((len(cats), len(cats)))
    for x, y in pairs:
        table[index[x], index[y]] += 1
    p = table / n
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    p_o = float(np.trace(p))
    p_e = float(rows @ cols)
    if p_e >= 1.0:
        return Kappa(nan, nan, nan, nan, p_o, p_e, n)
    k = (p_o - p_e) / (1 - p_e)
    diag = sum(p[i, i] * (1 - (rows[i] + cols[i]) * (1 - k)) ** 2 for i in range(len(cats)))
    off = (1 - k) ** 2 * sum(p[i, j] * (cols[i] + rows[j]) ** 2
                             for i in range(len(cats)) for j in range(len(cats)) if i != j)
    var = (diag + off - (k - p_e * (1 - k)) ** 2) / (n * (1 - p_e) ** 2)
    se = math.sqrt(max(var, 0.0))
    z = float(norm.ppf(0.5 + level / 2))
    return Kappa(k, max(-1.0, k - z * se), min(1.0, k + z * se), se, p_o, p_e, n)
