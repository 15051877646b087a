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
    or fewer than two sentences are pairable). The pairable sentences' value counts go
    through :func:`alpha_of_counts` as a stack of one study."""
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
    counts = counts[counts.sum(axis=1) >= 2]
    if counts.shape[0] == 0:
        return Agreement(math.nan, math.nan, math.nan, 0, 0, math.nan, math.nan)
    got = alpha_of_counts(counts, interval=interval, level=level)
    return Agreement(float(got.alpha), float(got.observed_disagreement),
                     float(got.expected_disagreement), int(got.n_units), int(got.n_values),
                     float(got.lower), float(got.upper), int(got.n_minority))


@dataclass(frozen=True)
class AgreementStack:
    """:class:`Agreement`'s figures as arrays, one entry per study of a stack."""

    alpha: np.ndarray
    observed_disagreement: np.ndarray
    expected_disagreement: np.ndarray
    n_units: np.ndarray
    n_values: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    n_minority: np.ndarray

    @property
    def interval_reliable(self) -> np.ndarray:
        """:attr:`Agreement.interval_reliable` per study."""
        return (self.n_minority >= MIN_ALPHA_MINORITY) & (self.observed_disagreement > 0)


def alpha_of_counts(counts: ArrayLike, *, interval: bool = False, level: float = 0.95,
                    crit: ArrayLike | None = None) -> AgreementStack:
    """α (module formula) and its parts from the value counts n_uc of pairable sentences:
    ``counts`` (..., S, K), every sentence with m_u = Σ_c n_uc ≥ 2 ratings; leading axes
    are a stack of independent studies of S sentences each (the coverage table's simulated
    studies), one study is what :func:`krippendorff_alpha_nominal` passes. With
    ``interval``, the profile-likelihood interval (:mod:`estimators.assisted.alpha_likelihood`)
    over every possible type of the values the study used, cut at ``crit`` (default, and
    the dashboard's: t² on Satterthwaite's ν of the study's jackknife values α₍u₎); NaN
    where α is undefined or S < 2. Studies sharing their used values and their numbers of
    ratings share one list of types and are solved together."""
    check_level(level)
    c = np.asarray(counts, dtype=float)
    if c.ndim < 2:
        raise ValueError(f"counts: need (..., sentences, values), got shape {c.shape}")
    lead = c.shape[:-2]
    c = c.reshape((-1, *c.shape[-2:]))
    n_studies, s, _ = c.shape
    m = c.sum(axis=2)
    if (m < 2).any():
        raise ValueError("counts: every sentence needs at least 2 ratings (pairable)")
    per_unit_diag = (c * (c - 1)).sum(axis=2) / (m - 1)
    totals = c.sum(axis=1)
    alpha, d_o, d_e = _alpha_parts(per_unit_diag.sum(axis=1), totals)
    lower, upper = np.full(n_studies, np.nan), np.full(n_studies, np.nan)
    if interval and s >= 2:
        rows = np.flatnonzero(np.isfinite(alpha))
        jack = _alpha_parts(per_unit_diag[rows].sum(axis=1, keepdims=True)
                            - per_unit_diag[rows], totals[rows, None] - c[rows])[0]
        cut = (cutoff(effective_df(jack), level) if crit is None
               else np.broadcast_to(np.asarray(crit, dtype=float), (n_studies,))[rows])
        spread = np.sqrt((s - 1) / s * ((jack - jack.mean(axis=1, keepdims=True)) ** 2
                                        ).sum(axis=1))
        lower[rows], upper[rows] = _likelihood_intervals(c[rows], m[rows], totals[rows] > 0,
                                                         alpha[rows], spread, cut)
    shape = lambda x: x.reshape(lead)  # noqa: E731
    return AgreementStack(shape(alpha), shape(d_o), shape(d_e), shape(np.full(n_studies, s)),
                          shape(m.sum(axis=1).astype(int)), shape(lower), shape(upper),
                          shape((totals.sum(axis=1) - totals.max(axis=1)).astype(int)))


def _likelihood_intervals(counts: np.ndarray, m: np.ndarray, used: np.ndarray,
                          alpha: np.ndarray, spread: np.ndarray, crit: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """The interval of :mod:`estimators.assisted.alpha_likelihood` per study from its
    sentences' value counts (studies, S, K), numbers of ratings m (studies, S), the values
    it used (studies, K), α̂, the jackknife spread and the cut-off. Every possible type of
    the used values and the observed m's; beyond ``MAX_TYPES`` of them, the observed types
    only (empirical likelihood)."""
    lo, hi = np.full(alpha.size, np.nan), np.full(alpha.size, np.nan)
    keys: dict[tuple, list[int]] = {}
    for i in range(alpha.size):
        keys.setdefault((tuple(used[i]), tuple(np.unique(m[i]).astype(int))), []).append(i)
    for (pattern, ms), group in keys.items():
        pick = np.array(pattern)
        k = int(pick.sum())
        if type_count(ms, k) <= MAX_TYPES:
            members = [np.array(group)]
            x = sentence_types(ms, k)
        else:  # too many possible types: each study's observed ones
            members = [np.array([i]) for i in group]
        for rows in members:
            cu = counts[rows][:, :, pick]
            if type_count(ms, k) > MAX_TYPES:  # (m, n_1, …, n_k) in increasing order
                observed = np.unique(np.column_stack([m[rows[0]], cu[0]]).astype(int),
                                     axis=0)
                x = np.column_stack([(observed[:, 1:] * (observed[:, 1:] - 1)).sum(axis=1)
                                     / (observed[:, 0] - 1), observed[:, 1:]]).astype(float)
            n_types = (cu[:, :, None, :] == x[None, None, :, 1:]).all(axis=3).sum(axis=1)
            lo[rows], hi[rows] = profile_bounds(x, n_types.astype(float), alpha[rows],
                                                spread[rows], crit[rows])
    return lo, hi


def agreement_with_ai(value: ArrayLike, ai_value: ArrayLike) -> float:
    """Share of ratings equal to the AI's value for the same item (entries pairwise; NaN
    when there is no rating). For verdict codes, "can't assess" never equals the AI's
    Accurate/Inaccurate."""
    v = np.asarray(value)
    a = np.asarray(ai_value)
    if v.shape != a.shape or v.ndim != 1:
        raise ValueError(f"ai_value: shape {a.shape} differs from value {v.shape}")
    return float((v == a).mean()) if v.size else math.nan
