"""Mixed-effects logistic regression with one random intercept — the paper's test of an
assistance arm (METHODS.md M2: "a mixed effects logistic regression predicting individual
rating accuracy from a fixed effect of label type … and a random intercept by
conversation").

Model: observation i of group g(i) (the sentence) is correct with probability

    P(y_i = 1 | u) = σ(x_iᵀβ + u_g(i)),   u_g ~ N(0, τ²) independent,

so the marginal log-likelihood is

    ℓ(β, τ) = Σ_g log ∫ Π_{i∈g} σ(±(x_iᵀβ + u)) φ(u; 0, τ²) du.

Each one-dimensional integral is computed by adaptive Gauss–Hermite quadrature (Liu &
Pierce 1994; lme4's ``nAGQ``): the nodes are centred at the mode û_g of the integrand and
scaled by its curvature, ŝ_g = (−∂²/∂u² log f)^(−1/2), so

    ∫ f(u) du ≈ √2 ŝ_g Σ_k w_k e^{z_k²} f(û_g + √2 ŝ_g z_k)

with (z_k, w_k) the Gauss–Hermite rule. With the default 25 nodes ℓ agrees with direct
numerical integration to 1e-6 for τ ≈ 1 and 1e-4 for τ = 3 even with groups of 4
observations, the hardest case (tests); lme4's glmer(nAGQ = 25) does the same.
Observations with the same group and the same row of X are first collapsed into binomial
cells, so the cost grows with groups × distinct rows, not with the ratings.
ℓ is maximised over (β, log τ) by L-BFGS-B with the gradient
∂ℓ/∂θ = Σ_g E[∂ log f_g(u; θ)/∂θ] (expectation over each group's posterior of u, by the
same nodes): ∂/∂β = Σ_i (y_i − p_i(u)) x_i and ∂/∂ log τ = u²/τ² − 1. τ is bounded to
[1e-4, 50]: a fit at the lower bound means no detectable variation between groups.

Standard errors are the square roots of the diagonal of the inverse observed information
(the Hessian of −ℓ by central differences of the gradient) — Wald z = β̂/SE, two-sided
p = 2Φ(−|z|), intervals β̂ ± z_{(1+level)/2}·SE (odds ratios e^β). A fixed effect whose
level is all correct or all wrong has no finite estimate (separation); :func:`arm_effects`
leaves such an arm out of the fit and says so rather than report an infinite effect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special, stats

TAU_BOUNDS = (1e-4, 50.0)
N_NODES = 25


@dataclass(frozen=True)
class MixedLogitFit:
    """Estimates β (with ``names``), their standard errors, τ (the random intercept's
    standard deviation), ℓ at the optimum, sizes and whether the optimiser converged (and
    the information matrix was invertible); ``message`` says why not."""

    names: tuple[str, ...]
    beta: np.ndarray
    se: np.ndarray
    tau: float
    log_likelihood: float
    n_obs: int
    n_groups: int
    converged: bool
    message: str

    @property
    def z(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.beta / self.se

    @property
    def p(self) -> np.ndarray:
        return 2 * stats.norm.sf(np.abs(self.z))

    def interval(self, j: int, level: float = 0.95) -> tuple[float, float]:
        q = stats.norm.ppf((1 + level) / 2)
        return float(self.beta[j] - q * self.se[j]), float(self.beta[j] + q * self.se[j])


def _check(y: ArrayLike, X: ArrayLike, group: ArrayLike) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray, int]:
    yy = np.asarray(y, dtype=float)
    XX = np.asarray(X, dtype=float)
    if yy.ndim != 1 or not np.isin(yy, (0.0, 1.0)).all():
        bad = int(np.argmax(~np.isin(yy, (0.0, 1.0)))) if yy.ndim == 1 else 0
        raise ValueError(f"y[{bad}]: need 0 or 1 (one entry per observation)")
    if XX.ndim != 2 or XX.shape[0] != yy.size:
        raise ValueError(f"X: need {yy.size} rows, got shape {XX.shape}")
    if not np.isfinite(XX).all():
        r, c = np.argwhere(~np.isfinite(XX))[0]
        raise ValueError(f"X[{r}, {c}]: non-finite value")
    _, codes = np.unique(np.asarray(group), return_inverse=True)
    codes = codes.reshape(-1)
    if codes.size != yy.size:
        raise ValueError(f"group: {codes.size} entries for {yy.size} observations")
    if yy.size == 0:
        raise ValueError("y: no observations")
    return yy, XX, codes, int(codes.max()) + 1


class _Model:
    """ℓ and its gradient for one data set; remembers the last modes as the next start.

    Observations with the same group and the same row of X share their linear predictor,
    so they are collapsed into binomial cells (m trials, s successes) first: with a
    categorical design (arms) that is at most groups × arms cells, whatever the ratings."""

    def __init__(self, y: np.ndarray, X: np.ndarray, group: np.ndarray, n_groups: int,
                 n_nodes: int) -> None:
        keys, cell = np.unique(np.column_stack([group, X]), axis=0, return_inverse=True)
        cell = cell.reshape(-1)
        self.m = np.bincount(cell, minlength=keys.shape[0]).astype(float)
        self.s = np.bincount(cell, weights=y, minlength=keys.shape[0])
        self.g, self.X = keys[:, 0].astype(np.int64), keys[:, 1:]  # sorted by group
        self.G = n_groups
        self.starts = np.flatnonzero(np.r_[True, np.diff(self.g) != 0])
        z, w = np.polynomial.hermite.hermgauss(n_nodes)
        self.z, self.logw = z, np.log(w) + z ** 2
        self.u = np.zeros(n_groups)

    def _sum(self, values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values, self.starts, axis=0)

    def _modes(self, eta: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
        """û_g and ŝ_g: Newton on the concave log integrand (steps capped at 4)."""
        u = self.u.copy()
        inv = 1 / tau ** 2
        for _ in range(100):
            p = special.expit(eta + u[self.g])
            grad = self._sum(self.s - self.m * p) - u * inv
            curv = self._sum(self.m * p * (1 - p)) + inv
            step = np.clip(grad / curv, -4, 4)
            u += step
            if np.abs(step).max() < 1e-10:
                break
        p = special.expit(eta + u[self.g])
        curv = self._sum(self.m * p * (1 - p)) + inv
        self.u = u
        return u, 1 / np.sqrt(curv)

    def value_and_grad(self, beta: np.ndarray, log_tau: float
                       ) -> tuple[float, np.ndarray, float]:
        tau = math.exp(log_tau)
        eta = self.X @ beta
        u_hat, s = self._modes(eta, tau)
        nodes = u_hat[:, None] + math.sqrt(2) * s[:, None] * self.z[None, :]  # (G, K)
        t = eta[:, None] + nodes[self.g]  # (n, K)
        loglik = -(self.s[:, None] * np.logaddexp(0, -t)
                   + (self.m - self.s)[:, None] * np.logaddexp(0, t))
        log_f = self._sum(loglik) - 0.5 * (nodes / tau) ** 2 - math.log(tau) \
            - 0.5 * math.log(2 * math.pi)
        terms = self.logw[None, :] + log_f  # (G, K)
        per_group = special.logsumexp(terms, axis=1)
        value = float(per_group.sum() + (np.log(math.sqrt(2) * s)).sum())
        post = np.exp(terms - per_group[:, None])  # normalised weights, (G, K)
        resid = ((self.s[:, None] - self.m[:, None] * special.expit(t))
                 * post[self.g]).sum(axis=1)
        grad_beta = self.X.T @ resid
        grad_log_tau = float((post * (nodes ** 2 / tau ** 2 - 1)).sum())
        return value, grad_beta, grad_log_tau


def marginal_log_likelihood(y: ArrayLike, X: ArrayLike, group: ArrayLike, beta: ArrayLike,
                            tau: float, *, n_nodes: int = N_NODES) -> float:
    """ℓ(β, τ) by adaptive Gauss–Hermite quadrature (module docstring)."""
    yy, XX, codes, G = _check(y, X, group)
    return _Model(yy, XX, codes, G, n_nodes).value_and_grad(
        np.asarray(beta, dtype=float), math.log(tau))[0]


def fit_random_intercept_logit(y: ArrayLike, X: ArrayLike, group: ArrayLike, *,
                               names: tuple[str, ...] | None = None,
                               n_nodes: int = N_NODES) -> MixedLogitFit:
    """Maximum-likelihood fit of y ~ Xβ + (1 | group) (module docstring). ``X`` holds the
    intercept column if one is wanted."""
    yy, XX, codes, G = _check(y, X, group)
    p = XX.shape[1]
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(p))
    if len(names) != p:
        raise ValueError(f"names: {len(names)} names for {p} columns of X")
    model = _Model(yy, XX, codes, G, n_nodes)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, gb, gt = model.value_and_grad(theta[:p], float(theta[p]))
        return -value, -np.r_[gb, gt]

    lo, hi = (math.log(b) for b in TAU_BOUNDS)
    start = np.r_[np.zeros(p), 0.0]
    result = optimize.minimize(objective, start, jac=True, method="L-BFGS-B",
                               bounds=[(None, None)] * p + [(lo, hi)],
                               options={"maxiter": 500, "gtol": 1e-7})
    theta = result.x
    info = _information(objective, theta, p, at_bound=theta[p] <= lo + 1e-6)
    se = np.full(p, np.nan)
    converged, message = bool(result.success), str(result.message)
    try:
        cov = np.linalg.inv(info)
        diag = np.diag(cov)[:p]
        if (diag > 0).all() and np.isfinite(diag).all():
            se = np.sqrt(diag)
        else:
            converged, message = False, "the information matrix is not positive definite"
    except np.linalg.LinAlgError:
        converged, message = False, "the information matrix is singular"
    return MixedLogitFit(names, theta[:p].copy(), se, math.exp(theta[p]),
                         float(-result.fun), int(yy.size), G, converged, message)


def _information(objective, theta: np.ndarray, p: int, *, at_bound: bool) -> np.ndarray:
    """Observed information: the Hessian of −ℓ by central differences of its gradient. With
    τ at its lower bound (no between-group variation), the β block alone."""
    k = p if at_bound else p + 1
    h = 1e-4
    H = np.empty((k, k))
    for j in range(k):
        e = np.zeros_like(theta)
        e[j] = h
        H[:, j] = (objective(theta + e)[1][:k] - objective(theta - e)[1][:k]) / (2 * h)
    return (H + H.T) / 2


@dataclass(frozen=True)
class ArmEffect:
    """One arm against the baseline: log-odds difference β with its SE, z, p and interval,
    and the odds ratio e^β; ``note`` when it could not be estimated."""

    arm: str
    beta: float
    se: float
    z: float
    p: float
    lower: float
    upper: float
    n: int
    note: str = ""

    @classmethod
    def undefined(cls, arm: str, n: int, note: str) -> ArmEffect:
        nan = math.nan
        return cls(arm, nan, nan, nan, nan, nan, nan, n, note)

    def as_dict(self) -> dict[str, float | int | str | None]:
        def f(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        with np.errstate(over="ignore"):  # an effect past e^709 has no finite odds ratio
            odds = np.exp([self.beta, self.lower, self.upper])
        return {"arm": self.arm, "beta": f(self.beta), "se": f(self.se), "z": f(self.z),
                "p": f(self.p), "beta_lower": f(self.lower), "beta_upper": f(self.upper),
                "odds_ratio": f(odds[0]), "odds_ratio_lower": f(odds[1]),
                "odds_ratio_upper": f(odds[2]), "n": self.n, "note": self.note}


@dataclass(frozen=True)
class ArmRegression:
    """The fit of correct ~ arm + (1 | sentence) with the baseline as reference."""

    baseline: str
    effects: tuple[ArmEffect, ...]
    baseline_log_odds: float
    tau: float
    n_obs: int
    n_groups: int
    converged: bool
    message: str
    level: float

    def rows(self) -> list[dict]:
        return [e.as_dict() for e in self.effects]


def arm_effects(correct: ArrayLike, arm: ArrayLike, group: ArrayLike, *, baseline: str,
                level: float = 0.95, n_nodes: int = N_NODES) -> ArmRegression:
    """The paper's regression: each rating's correctness on a fixed effect of its arm
    (dummy-coded, ``baseline`` the reference) and a random intercept per ``group`` (the
    sentence). Arms whose ratings are all correct or all wrong — and the baseline itself,
    if it is — cannot be estimated (separation): they are reported with a note and left
    out of the fit."""
    y = np.asarray(correct, dtype=float)
    labels = np.asarray(arm, dtype=object).astype(str)
    groups = np.asarray(group)
    if not (y.size == labels.size == groups.size):
        raise ValueError(f"arm/group: need one entry per rating ({y.size}), got "
                         f"{labels.size} and {groups.size}")
    names = [a for a in dict.fromkeys(labels.tolist()) if a != baseline]
    counts = {a: int((labels == a).sum()) for a in [baseline, *names]}

    def every(a: str) -> str:  # an arm whose ratings all agree: "correct" or "wrong"
        return "correct" if y[labels == a].max() else "wrong"

    separated = {a for a in counts if counts[a] and y[labels == a].min() == y[labels == a]
                 .max()}
    if counts[baseline] == 0 or baseline in separated:
        why = ("no ratings in the baseline arm" if counts[baseline] == 0 else
               f"every baseline rating is {every(baseline)}")
        return ArmRegression(baseline, tuple(
            ArmEffect.undefined(a, counts[a], f"no reference: {why}") for a in names),
            math.nan, math.nan, int(y.size), 0, False, f"not estimable: {why}", level)
    used = [a for a in names if a not in separated]
    keep = np.isin(labels, [baseline, *used])
    X = np.column_stack([np.ones(int(keep.sum()))] +
                        [(labels[keep] == a).astype(float) for a in used])
    fit = fit_random_intercept_logit(y[keep], X, groups[keep],
                                     names=("(intercept)", *used), n_nodes=n_nodes)
    effects = []
    for a in names:
        if a in separated:
            effects.append(ArmEffect.undefined(
                a, counts[a], f"every rating is {every(a)}: no finite effect"))
            continue
        j = used.index(a) + 1
        effects.append(ArmEffect(a, float(fit.beta[j]), float(fit.se[j]), float(fit.z[j]),
                                 float(fit.p[j]), *fit.interval(j, level), counts[a]))
    return ArmRegression(baseline, tuple(effects), float(fit.beta[0]), fit.tau, fit.n_obs,
                         fit.n_groups, fit.converged, fit.message, level)
