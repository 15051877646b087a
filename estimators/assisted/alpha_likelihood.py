"""The interval of Krippendorff's α (nominal): the profile likelihood of the sentences' rating
patterns (issue 18; docs/coverage.md "Assisted: Krippendorff's alpha").

A pairable sentence enters α only through its **type**: its number of ratings m and how
many of them gave each value, summarised as x = (d, n_1, …, n_k) with
d = Σ_c n_c (n_c − 1) / (m − 1). For a distribution p over types, with means
μ = Σ_t p_t x_t = (D̄, T̄_1, …, T̄_k) and n̄ = Σ_c T̄_c,

    1 − α(p) = (n̄ − 1/S) (n̄ − D̄) / (n̄² − Σ_c T̄_c²),

which at the observed shares p̂_t = N_t / S (N_t sentences of type t, S pairable sentences)
is Krippendorff's α̂ exactly (:mod:`estimators.assisted.agreement`). The sentences are
independent draws of a type, so the likelihood of p is Π_t p_t^{N_t}, and the interval
holds every α₀ whose profile likelihood ratio is not too small:

    −2 log R(α₀) ≤ c,   R(α₀) = max { Π_t (p_t / p̂_t)^{N_t} : α(p) = α₀ },

the maximum taken over **every possible type** — each observed m with any split of its
ratings over the k observed values — not only those seen. A pattern that is rare and
decisive (say, all three ratings of a sentence on the rare verdict) may be missing from a
study; the sentence bootstrap never draws it, so its interval is too short exactly where α
looks low, while the profile may give it probability at a price in likelihood. (In the
likelihood every possible type carries ε = 10⁻³ of a sentence, N_t + ε, which keeps the
maximisation smooth; the bounds move by about 10⁻⁴.)

The cut-off is c = t²_{ν, (1 + level)/2}, ν = Satterthwaite's degrees of freedom of the
delete-one-sentence jackknife variance (its values α₍u₎, e_u = ᾱ₍.₎ − α₍u₎):

    ν = 2 (Σ_u e_u²)² / (Σ_u e_u⁴ − (Σ_u e_u²)² / S),  clipped to [1, S − 1].

ν = S − 1 (Owen's F calibration of the likelihood ratio) unless a few sentences carry most
of α's variance; then ν is small and c grows, as the Bartlett correction of the likelihood
ratio grows with the kurtosis of the sentences' influence. Against known agreement
(docs/coverage.md) the χ²₁ cut-off covered 93.5 % and t² on S − 1 94.2–95 % where three
ratings per sentence meet verdicts 95 % alike and α = 0.2–0.5; this one 95.5–96 %.

Computation: for a fixed α₀, Newton's method on (γ, μ) with
p_t = w_t / (W + γ h(μ)·(x_t − μ)), w_t = N_t + ε, W = Σ w_t, h = ∇g and

    g(μ; α₀) = (n̄ − 1/S)(n̄ − D̄) − (1 − α₀)(n̄² − Σ_c T̄_c²),

solving Σ_t p_t x_t = μ and g(μ; α₀) = 0 (step halving keeps every p_t > 0). Each bound by
continuation from α̂: Newton's method on √(−2 log R(α₀)) = √c, with
d(−2 log R)/dα₀ = 2γ (n̄² − Σ_c T̄_c²), regula falsi and bisection as safeguards, each α₀
solved from the solution at the last α₀ inside the interval. The maximisation is not
concave: where a handful of ratings disagree (the dashboard's note) the path may stop on a
lesser branch; where the note is absent the bounds agreed with a brute-force maximisation
(the tests). Bounds are clipped to [−1, 1]. The functions work on a batch of studies
(rows) sharing one list of types, as the coverage table calls them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

import numpy as np
from scipy import stats

EPSILON = 1e-3  # of a sentence, on every possible type (module docstring)
MAX_TYPES = 200_000  # beyond this many possible types, only the observed ones are used
_TOL = 1e-12  # Newton: iterate until the residual is this small or stops falling
_ACCEPT = 1e-7  # … and accept the solution when it is below this


def type_count(ms: Iterable[int], k: int) -> int:
    """How many types :func:`sentence_types` lists."""
    return sum(math.comb(m + k - 1, k - 1) for m in set(ms))


def sentence_types(ms: Iterable[int], k: int) -> np.ndarray:
    """(T, 1 + k): x = (d, n_1, …, n_k) of every split of m ratings over k values, for each
    m in ``ms`` (m ≥ 2), in increasing m."""
    rows = []
    for m in sorted(set(ms)):
        for cut in itertools.combinations(range(m + k - 1), k - 1):
            n = np.diff((-1, *cut, m + k - 1)) - 1
            rows.append((float((n * (n - 1)).sum()) / (m - 1), *map(float, n)))
    return np.array(rows, dtype=float).reshape(-1, 1 + k)


def effective_df(jackknife: np.ndarray) -> np.ndarray:
    """Satterthwaite's ν of the jackknife variance per row of delete-one values (module
    docstring), clipped to [1, S − 1]; S − 1 where the values do not vary."""
    s = jackknife.shape[-1]
    e2 = (jackknife - jackknife.mean(axis=-1, keepdims=True)) ** 2
    m2 = e2.sum(axis=-1)
    spread = (e2 ** 2).sum(axis=-1) - m2 ** 2 / s
    with np.errstate(divide="ignore", invalid="ignore"):
        nu = np.where(spread > 0, 2 * m2 ** 2 / np.where(spread > 0, spread, 1), s - 1)
    return np.clip(nu, 1, max(s - 1, 1))


def cutoff(nu: np.ndarray, level: float) -> np.ndarray:
    """c = t²_{ν, (1 + level)/2}."""
    return stats.t.ppf((1 + level) / 2, nu) ** 2


def _constraint(mu: np.ndarray, a0: np.ndarray, inv_s: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(g, h = ∇g, Hessian of g) at μ (rows)."""
    t = mu[:, 1:]
    n = t.sum(axis=1)
    d = mu[:, 0]
    keep = 1 - a0
    g = (n - inv_s) * (n - d) - keep * (n * n - (t * t).sum(axis=1))
    h = np.concatenate([-(n - inv_s)[:, None],
                        ((n - d) + (n - inv_s))[:, None] - keep[:, None] * 2 * (n[:, None] - t)],
                       axis=1)
    k = t.shape[1]
    hess = np.zeros((mu.shape[0], k + 1, k + 1))
    hess[:, 0, 1:] = hess[:, 1:, 0] = -1
    hess[:, 1:, 1:] = 2 * a0[:, None, None] + 2 * keep[:, None, None] * np.eye(k)
    return g, h, hess


def _residual(x, w, a0, inv_s, gamma, mu):
    g, h, hess = _constraint(mu, a0, inv_s)
    dx = x[None] - mu[:, None, :]
    hx = np.einsum("btp,bp->bt", dx, h)
    den = w.sum(axis=1, keepdims=True) + gamma[:, None] * hx
    with np.errstate(divide="ignore", invalid="ignore"):
        p = w / den
    f = np.concatenate([np.einsum("bt,tp->bp", p, x) - mu, g[:, None]], axis=1)
    return f, p, den, h, hess, dx, hx


def _solve(x, w, a0, inv_s, gamma, mu, iters: int = 60):
    """Newton on (γ, μ) for a fixed α₀ per row (module docstring). Returns γ, μ, p and
    whether each row converged."""
    gamma, mu = gamma.copy(), mu.copy()
    f, p, den, h, hess, dx, hx = _residual(x, w, a0, inv_s, gamma, mu)
    norm = np.abs(f).max(axis=1)
    live = norm > _TOL
    k1 = x.shape[1]
    for _ in range(iters):
        if not live.any():
            break
        i = np.flatnonzero(live)
        q = -w[i] / den[i] ** 2
        jac = np.zeros((i.size, k1 + 1, k1 + 1))
        jac[:, :k1, 0] = np.einsum("bt,tp->bp", q * hx[i], x)
        dden = gamma[i, None, None] * (np.einsum("btq,bpq->btp", dx[i], hess[i]) - h[i, None, :])
        jac[:, :k1, 1:] = np.einsum("tp,btq->bpq", x, q[..., None] * dden) - np.eye(k1)
        jac[:, k1, 1:] = h[i]
        try:
            step = np.linalg.solve(jac, -f[i][..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = (np.linalg.pinv(jac) @ -f[i][..., None])[..., 0]
        step = np.where(np.isfinite(step), step, 0.0)
        t = np.ones(i.size)
        for _ in range(40):  # halve the step until every p > 0 and the residual falls
            f2, _, den2, *_ = _residual(x, w[i], a0[i], inv_s[i], gamma[i] + t * step[:, 0],
                                        mu[i] + t[:, None] * step[:, 1:])
            ok = (den2 > 0).all(axis=1) & (np.abs(f2).max(axis=1) < (1 - 1e-4 * t) * norm[i])
            if ok.all():
                break
            t = np.where(ok, t, t / 2)
        moved = ok
        gamma[i[moved]] += t[moved] * step[moved, 0]
        mu[i[moved]] += t[moved, None] * step[moved, 1:]
        f_i, p_i, den_i, h_i, hess_i, dx_i, hx_i = _residual(x, w[i], a0[i], inv_s[i],
                                                             gamma[i], mu[i])
        f[i], p[i], den[i], h[i], hess[i], dx[i], hx[i] = (f_i, p_i, den_i, h_i, hess_i,
                                                           dx_i, hx_i)
        norm[i] = np.abs(f_i).max(axis=1)
        live[i] = moved & (norm[i] > _TOL)
    return gamma, mu, p, norm <= _ACCEPT


def profile_bounds(x: np.ndarray, counts: np.ndarray, alpha_hat: np.ndarray,
                   spread: np.ndarray, crit: np.ndarray, iters: int = 60
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) per row (study): the α₀ where −2 log R(α₀) = ``crit`` on each side of
    ``alpha_hat`` (module docstring). ``x``: (T, 1 + k) every possible type of the studies
    (:func:`sentence_types` of their m's and k used values); ``counts``: (B, T) sentences
    of each type; ``spread``: a standard error to start the search from. NaN where the
    search fails."""
    counts = np.asarray(counts, dtype=float)
    w = counts + EPSILON
    inv_s = 1 / counts.sum(axis=1)
    p0 = w / w.sum(axis=1, keepdims=True)
    mu0 = np.einsum("bt,tp->bp", p0, x)
    disagree = (counts * (x[:, 0] < x[:, 1:].sum(axis=1))[None]).sum(axis=1) > 0
    step0 = np.where(np.isfinite(spread) & (spread > 0), spread, 0.1) * np.sqrt(crit)
    out = []
    for side in (-1.0, 1.0):
        out.append(_bound(x, w, inv_s, p0, mu0, alpha_hat.astype(float), side,
                          np.clip(alpha_hat + side * step0, -1, 1), crit, ~disagree, iters))
    return out[0], out[1]


def _bound(x, w, inv_s, p0, mu0, alpha_hat, side, first, crit, agreed, iters):
    """One side's bound by continuation from α̂: each trial α₀ is solved from the solution
    at the last α₀ known inside (never from one outside, whose solution may lie on another
    branch); a failed or implausible solve (the profile must rise outwards) pulls the trial
    back towards it. The next trial: Newton on √(−2 log R) from inside, regula falsi on it
    within the bracket, bisection when neither helps."""
    n_rows = w.shape[0]
    inner, outer, trial = alpha_hat.copy(), np.full(n_rows, side), first.copy()
    r_in, dr_in = np.zeros(n_rows), np.full(n_rows, np.nan)
    r_out = np.full(n_rows, np.inf)
    gamma, mu = np.zeros(n_rows), mu0.copy()
    result = np.full(n_rows, np.nan)
    done = np.zeros(n_rows, dtype=bool)
    root_c = np.sqrt(crit)
    if side > 0:  # α = 1 is impossible once two ratings of a sentence differ
        result[agreed] = 1.0
        done |= agreed
    for _ in range(iters):
        live = np.flatnonzero(~done)
        if not live.size:
            break
        a = trial[live]
        beyond = (side > 0) & (a >= 1)  # α₀ = 1 with a disagreement: R = 0
        g_, m_, p_, conv = _solve(x, w[live], a, inv_s[live], gamma[live], mu[live])
        with np.errstate(divide="ignore", invalid="ignore"):
            m2l = -2 * np.where(w[live] > 0, w[live] * np.log(p_ / p0[live]), 0).sum(axis=1)
            r = np.sqrt(np.maximum(m2l, 0))
            t2 = m_[:, 1:]
            dr = g_ * (t2.sum(axis=1) ** 2 - (t2 * t2).sum(axis=1)) / r * side
        step = np.abs(a - inner[live])
        plausible = (r >= r_in[live] - 1e-9) & (
            ~np.isfinite(dr_in[live]) | (r <= 2 * (r_in[live] + np.abs(dr_in[live]) * step) + 1))
        ok = conv & np.isfinite(m2l) & plausible & ~beyond
        inside = ok & (r < root_c[live])
        outside = beyond | (ok & ~inside)
        k = live[inside]
        inner[k], r_in[k], dr_in[k] = a[inside], r[inside], dr[inside]
        gamma[k], mu[k] = g_[inside], m_[inside]
        outer[live[outside]] = a[outside]
        r_out[live[outside]] = np.where(beyond, np.inf, r)[outside]
        hit = ok & (np.abs(r - root_c[live]) < 1e-8 * root_c[live])
        closed = np.abs(outer[live] - inner[live]) < 1e-9
        edge = inside & (np.abs(a) >= 1)
        fin = hit | closed | edge
        result[live[fin]] = np.where(hit[fin], a[fin], inner[live[fin]])
        done[live[fin]] = True
        i_, o_ = inner[live], outer[live]
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = i_ + side * (root_c[live] - r_in[live]) / dr_in[live]
            falsi = i_ + (o_ - i_) * (root_c[live] - r_in[live]) / (r_out[live] - r_in[live])
        lo_b, hi_b = np.minimum(i_, o_), np.maximum(i_, o_)
        pick = np.where(inside & (newton > lo_b) & (newton < hi_b), newton,
                        np.where(np.isfinite(r_out[live]) & (falsi > lo_b) & (falsi < hi_b),
                                 falsi, (i_ + o_) / 2))
        # a failed solve: a quarter of the way from the last α₀ inside
        trial[live] = np.where(ok | beyond, pick, i_ + (a - i_) / 4)
    near = ~done & (np.abs(outer - inner) < 1e-6)  # out of iterations, bracket narrow
    result[near] = inner[near]
    return result
