"""Cohen's κ between an evaluator's labels and people's labels of the same datapoints, with a
large-sample interval — shown beside an audit's success rate where human labels exist (issue
19: the two signals side by side; the success rate never looks at labels, κ only at them).

κ = (p_o − p_e) / (1 − p_e), p_o the observed agreement, p_e = Σ_c p_c· p_·c the agreement
expected from the two margins. The standard error is Fleiss, Cohen & Everitt (1969,
Psychological Bulletin 72(5), eq. 13, the non-null variance), evaluated at a table p:

    var(κ; p) = [Σ_c p_cc (1 − (p_c· + p_·c)(1 − κ))² + (1 − κ)² Σ_{c≠k} p_ck (p_·c + p_k·)²
                 − (κ − p_e (1 − κ))²] / (n (1 − p_e)²).

The interval (issue 18) is the Wald interval of the **add-½ table**: every cell of the K × K
table gets ½ (an Agresti–Coull-type adjustment), κ̃ and var(κ̃; p̃) are computed from
p̃ = (n_ck + ½) / (n + K²/2), and the interval is κ̃ ± z·SE, widened if needed to contain
the reported κ̂ (of the table itself) and cut to [−1, 1]. The plain Wald interval around κ̂
collapses where a table has few off-diagonal or minority counts (κ̂ = 1 gives [1, 1]) and
covered 29–88 % with 20–100 datapoints at prevalences of 0.8–0.95 (exact sums over every
2 × 2 table: docs/coverage.md "Audits: Cohen's κ", ``manage.py coverage_tables nodata
--kappa``). Where either side gave its less common label fewer than ``MIN_KAPPA_MINORITY``
times (``n_minority``), no interval keeps the promise (κ rests on a handful of datapoints):
the audit page says so. κ is undefined (NaN) when p_e = 1 (both raters gave one and the same
label to everything) or there is no pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import norm

ADD = 0.5  # added to every cell for the interval (module docstring)
MIN_KAPPA_MINORITY = 15  # below, the audit page says κ's interval is unreliable


@dataclass(frozen=True)
class Kappa:
    kappa: float
    lower: float
    upper: float
    se: float
    observed: float  # p_o, the share of pairs that agree
    expected: float  # p_e
    n: int
    n_minority: int = 0  # the fewer times either side gave a label other than its commonest

    @property
    def interval_reliable(self) -> bool:
        """Enough minority labels for the interval's promise (module docstring)."""
        return self.n_minority >= MIN_KAPPA_MINORITY

    def as_dict(self) -> dict[str, float | int | bool | None]:
        def f(x: float) -> float | None:
            return None if math.isnan(x) else float(x)

        return {"kappa": f(self.kappa), "lower": f(self.lower), "upper": f(self.upper),
                "se": f(self.se), "observed": f(self.observed), "expected": f(self.expected),
                "n": self.n, "n_minority": self.n_minority,
                "interval_reliable": self.interval_reliable}


def cohen_kappa(a: Sequence, b: Sequence, *, level: float = 0.95) -> Kappa:
    """κ of two equal-length label sequences (pairs with a None on either side are left out):
    the table of counts (rows ``a``'s labels, columns ``b``'s, labels in the order of their
    ``repr``) through :func:`kappa_of_tables`."""
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
    t = kappa_of_tables(table, level=level)
    return Kappa(float(t.kappa), float(t.lower), float(t.upper), float(t.se),
                 float(t.observed), float(t.expected), n, int(t.n_minority))


@dataclass(frozen=True)
class KappaTables:
    """:class:`Kappa`'s figures as arrays, one entry per table of a stack."""

    kappa: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    se: np.ndarray
    observed: np.ndarray
    expected: np.ndarray
    n: np.ndarray
    n_minority: np.ndarray


def kappa_of_tables(tables: ArrayLike, *, level: float = 0.95) -> KappaTables:
    """κ, its add-½ Wald interval (module docstring) and the parts of :class:`Kappa` for
    tables of counts (..., K, K) — rows one side's labels, columns the other's; leading
    axes are a stack of independent tables (the coverage table's every outcome), one table
    is what :func:`cohen_kappa` passes. Where p_e = 1 κ, the interval and the SE are NaN."""
    table = np.asarray(tables, dtype=float)
    if table.ndim < 2 or table.shape[-1] != table.shape[-2]:
        raise ValueError(f"tables: need square tables on the last two axes, got {table.shape}")
    rows, cols = _margins(table)
    n = np.asarray(sum(rows), dtype=float)
    p_o, p_e, k = _kappa(table / n[..., None, None])
    minority = np.minimum(n - np.max(rows, axis=0), n - np.max(cols, axis=0))
    adjusted = (table + ADD) / (n + ADD * table.shape[-1] ** 2)[..., None, None]
    _, _, k_adj = _kappa(adjusted)
    se = fleiss_se(adjusted, n)
    z = float(norm.ppf(0.5 + level / 2))
    undefined = p_e >= 1.0
    lower = np.where(undefined, np.nan, np.maximum(-1.0, np.minimum(k, k_adj - z * se)))
    upper = np.where(undefined, np.nan, np.minimum(1.0, np.maximum(k, k_adj + z * se)))
    return KappaTables(k, lower, upper, np.where(undefined, np.nan, se), p_o, p_e, n,
                       minority.astype(int))


def _margins(p: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Row and column sums of tables (..., K, K), one array per label (loops over the K
    labels: a stack of millions of small tables is summed as fast as one)."""
    size = p.shape[-1]
    rows = [sum(p[..., i, j] for j in range(size)) for i in range(size)]
    cols = [sum(p[..., i, j] for i in range(size)) for j in range(size)]
    return rows, cols


def _kappa(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p_o, p_e, κ) of tables of shares (..., K, K) (κ NaN where p_e = 1)."""
    rows, cols = _margins(p)
    size = len(rows)
    p_o = np.asarray(sum(p[..., i, i] for i in range(size)), dtype=float)
    p_e = np.asarray(sum(rows[i] * cols[i] for i in range(size)), dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(p_e < 1.0, (p_o - p_e) / (1 - p_e), np.nan)
    return p_o, p_e, k


def fleiss_se(p: ArrayLike, n: ArrayLike) -> np.ndarray:
    """√var(κ; p) of Fleiss, Cohen & Everitt at tables of shares ``p`` (..., K, K) for
    ``n`` pairs (module docstring); NaN where p_e = 1."""
    p = np.asarray(p, dtype=float)
    rows, cols = _margins(p)
    _, p_e, k = _kappa(p)
    size = len(rows)
    diag = sum(p[..., i, i] * (1 - (rows[i] + cols[i]) * (1 - k)) ** 2 for i in range(size))
    off = (1 - k) ** 2 * sum(p[..., i, j] * (cols[i] + rows[j]) ** 2
                             for i in range(size) for j in range(size) if i != j)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = (diag + off - (k - p_e * (1 - k)) ** 2) / (np.asarray(n, float) * (1 - p_e) ** 2)
    return np.sqrt(np.maximum(var, 0.0))
