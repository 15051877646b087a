"""Agreement between raters (Krippendorff's α, nominal) and with the AI (METHODS.md M2;
issue 9 "agreement between raters (Krippendorff's α) and with the AI").

Krippendorff's α for nominal data with missing values (Krippendorff 2011, "Computing
Krippendorff's Alpha-Reliability", section C). Let n_uc be the number of values c given to
unit u, m_u = Σ_c n_uc; only units with m_u ≥ 2 are pairable. The coincidence matrix
counts, within each unit, every ordered pair of values of different raters with weight
1/(m_u − 1):

    o_ck = Σ_u (n_uc n_uk − [c = k] n_uc) / (m_u − 1),   n_c = Σ_k o_ck,   n = Σ_c n_c,

    α = 1 − D_o / D_e,   D_o = Σ_{c≠k} o_ck / n,   D_e = Σ_{c≠k} n_c n_k / (n (n − 1)),

equivalently α = [(n − 1) Σ_c o_cc − Σ_c n_c (n_c − 1)] / [n (n − 1) − Σ_c n_c (n_c − 1)].
Only the diagonal o_cc = Σ_u n_uc (n_uc − 1)/(m_u − 1) is needed, from one bincount. α is
undefined (NaN) when D_e = 0 (a single value in all the data) or nothing is pairable.

The optional interval (``interval=True``) is the profile likelihood of the sentences' rating
patterns, every possible pattern allowed, with the cut-off t² on Satterthwaite's degrees of
freedom of the delete-one-sentence jackknife (:mod:`estimators.assisted.alpha_likelihood`).
The jackknife values α₍u₎ come in closed form from the unit sums. Against known agreement
(docs/coverage.md "Assisted: Krippendorff's alpha", ``manage.py coverage_tables assisted
--alpha``: 20–400 sentences, 2–3 ratings each) it covered 94.6–98.8 % (median 95.5 %)
where the dashboard shows it without a note; the BCa sentence bootstrap before it
91.5–97.8 %, and 91.5–93.3 % where raters barely agree (α ≈ 0.2) with three ratings per
sentence on skewed verdicts: resampling sentences never draws a rare decisive pattern the
study lacks (say, all three ratings on the rare verdict), and where it is missing α looks
low and its spread small together.
Where few values differ from the most common one — ``n_minority`` (pairable values outside
the most common category) below ``MIN_ALPHA_MINORITY`` — or none disagree at all (α̂ = 1),
α rests on a handful of disagreements: the interval still covered 94.0–99.8 % in the
simulated settings (the BCa as little as 20 %), but there its promise depends on patterns
too rare to check from the study, and the dashboard says α's interval is unreliable.

For factuality ratings, pass the binarised verdicts (:func:`estimators.assisted.factuality.verdicts`
without skips: Accurate, Inaccurate, Can't assess) or the raw labels; one arm at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from estimators.assisted.alpha_likelihood import (
    MAX_TYPES,
    cutoff,
    effective_df,
    profile_bounds,
    sentence_types,
    type_count,
)
from estimators.numerics.bootstrap import _json_float, check_level, encode

# Below this many pairable values outside the most common category, α's interval is not
# trusted (docs/coverage.md "Assisted: Krippendorff's α").
MIN_ALPHA_MINORITY = 30


@dataclass(frozen=True)
class Agreement:
    """Krippendorff's α (nominal) with its parts and optional interval."""

    alpha: float
    observed_disagreement: float
    expected_disagreement: float
    n_units: int
    n_values: int
    lower: float
    upper: float
    n_minority: int = 0  # pairable values outside the most common category

    @property
    def interval_reliable(self) -> bool:
        """Enough disagreement for the interval's promise (module docstring): at least
        ``MIN_ALPHA_MINORITY`` minority values and not every pair agreeing."""
        return self.n_minority >= MIN_ALPHA_MINORITY and self.observed_disagreement > 0

    def as_dict(self) -> dict[str, float | int | bool | None]:
        return {"alpha": _json_float(self.alpha), "alpha_lower": _json_float(self.lower),
                "alpha_upper": _json_float(self.upper),
                "observed_disagreement": _json_float(self.observed_disagreement),
                "expected_disagreement": _json_float(self.expected_disagreement),
                "n_units": self.n_units, "n_values": self.n_values,
                "n_minority": self.n_minority,
                "interval_reliable": self.interval_reliable}


def _present(value: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(values as a 1-D array, mask of present entries: None and NaN are missing)."""
    v = np.asarray(value, dtype=object)
    if v.ndim != 1:
        raise ValueError(f"value: need a 1-D array, got shape {v.shape}")
    present = np.array([not (x is None or (isinstance(x, float) and math.isnan(x)))
                        for x in v], dtype=bool)
    return v, present


def _alpha_parts(diag: np.ndarray, nc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(α, D_o, D_e) from Σ_c o_cc and the n_c (last axis = values; leading axes batch)."""
    n = nc.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        d_o = (n - diag) / n
        d_e = (n * n - (nc * nc).sum(axis=-1)) / (n * (n - 1))
        alpha = np.where(d_e > 0, 1 - d_o / np.where(d_e > 0, d_e, 1.0), np.nan)
    return alpha, d_o, d_e


def krippendorff_alpha_nominal(unit: ArrayLike, value: ArrayLike, *, interval: bool = False,
                               level: float = 0.95) -> Agreement:
    """Krippendorff's α for nominal values, long form: one entry per rating (``unit`` = the
    item, ``value`` = the category; None/NaN values are dropped). Module formula; with
    ``interval``, its profile-likelihood interval at ``level`` (NaN where α is undefined
    or fewer than two sentences are pairable)."""
    check_level(level)
    v, present = _present(value)
    u = np.asarray(unit, dtype=object)
    if u.shape != v.shape:
        raise ValueError(f"unit: {u.size} entries, value: {v.size}; need one unit per value")
    if not present.any():
        return Agreement(math.nan, math.nan, math.nan, 0, 0, math.nan, math.nan)
    _, ucode = encode(u[present], "unit")
    vals = v[present]
    if all(isinstance(x, str) for x in vals):
        vals = vals.astype(str)
    _, vcode = np.unique(vals, return_inverse=True)
    vcode = vcode.reshape(-1)
    n_units, n_cat = int(ucode.max()) + 1, int(vcode.max()) + 1
    counts = np.bincount(ucode * n_cat + vcode, minlength=n_units * n_cat).reshape(
        n_units, n_cat).astype(float)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts, m = counts[pairable], m[pairable]
    if counts.shape[0] == 0:
        return Agreement(math.nan, math.nan, math.nan, 0, 0, math.nan, math.nan)
    per_unit_diag = (counts * (counts - 1)).sum(axis=1) / (m - 1)
    totals = counts.sum(axis=0)
    alpha, d_o, d_e = _alpha_parts(per_unit_diag.sum(), totals)
    lo = hi = math.nan
    if interval and math.isfinite(float(alpha)) and counts.shape[0] >= 2:
        jack = _alpha_parts(per_unit_diag.sum() - per_unit_diag, totals - counts)[0]
        lo, hi = _likelihood_interval(counts[:, totals > 0], float(alpha), jack, level)
    return Agreement(float(alpha), float(d_o), float(d_e), int(counts.shape[0]),
                     int(m.sum()), lo, hi, int(totals.sum() - totals.max()))


def _likelihood_interval(counts: np.ndarray, alpha: float, jack: np.ndarray, level: float
                         ) -> tuple[float, float]:
    """The interval of :mod:`estimators.assisted.alpha_likelihood` from the per-sentence
    value counts (pairable sentences, used values) and the jackknife values."""
    m = counts.sum(axis=1).astype(int)
    k = counts.shape[1]
    observed, n_obs = np.unique(np.column_stack([m, counts]).astype(int), axis=0,
                                return_counts=True)
    if type_count(m, k) <= MAX_TYPES:
        x = sentence_types(m, k)
    else:  # too many possible types: the observed ones only (empirical likelihood)
        x = np.column_stack([(observed[:, 1:] * (observed[:, 1:] - 1)).sum(axis=1)
                             / (observed[:, 0] - 1), observed[:, 1:]]).astype(float)
    index = {tuple(row): i for i, row in enumerate(x[:, 1:].astype(int))}
    n_types = np.zeros(len(x))
    n_types[[index[tuple(row[1:])] for row in observed]] = n_obs
    s = counts.shape[0]
    spread = math.sqrt((s - 1) / s * float(((jack - jack.mean()) ** 2).sum()))
    lo, hi = profile_bounds(x, n_types[None], np.array([alpha]), np.array([spread]),
                            cutoff(effective_df(jack[None]), level))
    return float(lo[0]), float(hi[0])


def agreement_with_ai(value: ArrayLike, ai_value: ArrayLike) -> float:
    """Share of ratings equal to the AI's value for the same item (entries pairwise; NaN
    when there is no rating). For verdict codes, "can't assess" never equals the AI's
    Accurate/Inaccurate."""
    v = np.asarray(value)
    a = np.asarray(ai_value)
    if v.shape != a.shape or v.ndim != 1:
        raise ValueError(f"ai_value: shape {a.shape} differs from value {v.shape}")
    return float((v == a).mean()) if v.size else math.nan
