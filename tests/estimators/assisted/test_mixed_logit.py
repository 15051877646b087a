"""The random-intercept logistic regression against direct numerical integration of its
likelihood, against brute-force maximisation of that integral, and in simulations with
known effects (the coverage of its Wald intervals)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, special

from estimators.assisted.mixed_logit import (
    arm_effects,
    fit_random_intercept_logit,
    marginal_log_likelihood,
)


def _simulate(rng, n_groups: int, per_group: int, beta, tau: float, n_arms: int = 3):
    arms = rng.integers(0, n_arms, n_groups * per_group)
    group = np.repeat(np.arange(n_groups), per_group)
    X = np.column_stack([np.ones(arms.size)] + [arms == a for a in range(1, n_arms)]) * 1.0
    u = rng.normal(0, tau, n_groups)
    y = (rng.uniform(size=arms.size) < special.expit(X @ np.asarray(beta) + u[group])) * 1.0
    return y, X, group, arms


def _quad_loglik(y, X, group, beta, tau) -> float:
    """ℓ by scipy's adaptive quadrature, one group at a time (slow, independent)."""
    total = 0.0
    for g in np.unique(group):
        m = group == g
        eta, yy = X[m] @ beta, y[m]

        def f(u, eta=eta, yy=yy):
            t = eta + u
            return math.exp(-np.sum(yy * np.logaddexp(0, -t) + (1 - yy) * np.logaddexp(0, t))
                            - u * u / (2 * tau * tau)) / (math.sqrt(2 * math.pi) * tau)

        reach = 12 * tau + 8
        total += math.log(integrate.quad(f, -reach, reach, epsabs=0, epsrel=1e-12,
                                         limit=400)[0])
    return total


def _grid_loglik(y, X, group, beta, tau, n: int = 1201) -> float:
    """ℓ by the trapezoid rule on a dense grid of u (vectorised, independent; ``group``
    sorted). For these smooth, fast-decaying integrands the rule converges geometrically:
    1 201 points agree with 4 801 to 1e-10."""
    reach = 12 * tau + 8
    u = np.linspace(-reach, reach, n)
    t = (X @ beta)[:, None] + u[None, :]
    ll = -(y[:, None] * np.logaddexp(0, -t) + (1 - y)[:, None] * np.logaddexp(0, t))
    per = np.add.reduceat(ll, np.flatnonzero(np.r_[True, np.diff(group) != 0]), axis=0)
    log_f = per - u ** 2 / (2 * tau ** 2) - math.log(math.sqrt(2 * math.pi) * tau)
    top = log_f.max(axis=1, keepdims=True)
    return float((top[:, 0] + np.log(np.trapezoid(np.exp(log_f - top), u, axis=1))).sum())


@pytest.mark.parametrize(("beta", "tau", "tol"), [([0.8, -0.5, 0.4], 1.2, 1e-6),
                                                  ([0.0, 0.0, 0.0], 0.3, 1e-8),
                                                  ([2.0, 1.0, -1.0], 3.0, 1e-4)])
def test_the_likelihood_is_the_integral(beta, tau, tol):
    # given 120 groups of 4 ratings (small groups: the hardest case for quadrature)
    y, X, group, _ = _simulate(np.random.default_rng(1), 120, 4, [0.8, -0.5, 0.4], 1.2)
    # then adaptive Gauss–Hermite agrees with scipy's adaptive quadrature
    fast = marginal_log_likelihood(y, X, group, beta, tau)
    assert fast == pytest.approx(_quad_loglik(y, X, group, np.asarray(beta), tau), abs=tol)


def test_the_fit_is_the_brute_force_maximum():
    # given a small study with planted effects and sentence variation
    y, X, group, _ = _simulate(np.random.default_rng(7), 60, 5, [0.6, -0.7, 0.5], 1.0)
    fit = fit_random_intercept_logit(y, X, group)

    # (the grid is fine enough: four times the points change ℓ by less than 1e-10)
    at = (np.array([0.5, -0.5, 0.5]), 1.3)
    assert _grid_loglik(y, X, group, *at) == pytest.approx(
        _grid_loglik(y, X, group, *at, n=4801), abs=1e-10)

    # when the dense-grid likelihood is maximised by Nelder–Mead from far away
    def neg(theta):
        return -_grid_loglik(y, X, group, theta[:3], math.exp(theta[3]))

    brute = optimize.minimize(neg, np.array([0.0, 0.0, 0.0, math.log(2.5)]),
                              method="Nelder-Mead",
                              options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 8000,
                                       "maxfev": 8000})
    # then both find the same maximum
    assert brute.success
    np.testing.assert_allclose(fit.beta, brute.x[:3], atol=2e-3)
    assert fit.tau == pytest.approx(math.exp(brute.x[3]), abs=2e-3)
    assert fit.log_likelihood == pytest.approx(-brute.fun, abs=1e-5)
    assert fit.converged


def test_wald_intervals_cover_the_planted_effects():
    # given 200 simulated studies (150 sentences × 4 ratings, 3 arms, τ = 1)
    rng = np.random.default_rng(11)
    truth = np.array([0.5, -0.6, 0.4])
    hits, estimates = np.zeros(3), []
    for _ in range(200):
        y, X, group, _ = _simulate(rng, 150, 4, truth, 1.0)
        fit = fit_random_intercept_logit(y, X, group)
        assert fit.converged
        lo_hi = np.array([fit.interval(j) for j in range(3)])
        hits += (lo_hi[:, 0] <= truth) & (truth <= lo_hi[:, 1])
        estimates.append(fit.beta)
    # then each 95 % interval covers its truth in about 95 % of the studies (binomial
    # 200 draws: 0.90–0.99 is beyond 3 standard errors), and the estimates centre on it
    assert ((hits / 200 >= 0.90) & (hits / 200 <= 0.99)).all(), hits / 200
    spread = np.std(estimates, axis=0) / math.sqrt(200)
    assert (np.abs(np.mean(estimates, axis=0) - truth) < 4 * spread + 0.03).all()


def test_without_sentence_variation_it_is_ordinary_logistic_regression():
    # given ratings with no random intercept at all
    y, X, group, _ = _simulate(np.random.default_rng(5), 200, 5, [0.4, 0.6, -0.3], 0.0001)
    fit = fit_random_intercept_logit(y, X, group)

    def neg(beta):
        t = X @ beta
        return np.sum(y * np.logaddexp(0, -t) + (1 - y) * np.logaddexp(0, t))

    plain = optimize.minimize(neg, np.zeros(3), method="BFGS", options={"gtol": 1e-10})
    # then τ is estimated near 0 and β is the plain logistic fit (within a tenth of an SE)
    assert fit.tau < 0.35
    assert (np.abs(fit.beta - plain.x) < 0.1 * fit.se).all()


def test_arm_effects_against_the_baseline_and_a_separated_arm():
    rng = np.random.default_rng(3)
    y, X, group, arms = _simulate(rng, 200, 6, [0.3, 0.8, -0.5], 0.8)
    names = np.array(["baseline", "search", "trace"])[arms]
    direct = fit_random_intercept_logit(y, X, group)
    # given a fourth arm whose every rating is correct
    y4 = np.r_[y, np.ones(30)]
    names4 = np.r_[names, ["everything"] * 30]
    group4 = np.r_[group, np.arange(30)]
    report = arm_effects(y4, names4, group4, baseline="baseline")
    rows = {r["arm"]: r for r in report.rows()}
    # then the estimable arms are the direct fit's dummies, the separated one a note
    assert rows["search"]["beta"] == pytest.approx(direct.beta[1], abs=1e-4)
    assert rows["trace"]["beta"] == pytest.approx(direct.beta[2], abs=1e-4)
    assert rows["trace"]["odds_ratio"] == pytest.approx(math.exp(direct.beta[2]), rel=1e-3)
    assert rows["search"]["p"] < 0.05 and rows["search"]["beta_lower"] > 0
    assert rows["everything"]["beta"] is None
    assert rows["everything"]["note"] == "every rating is correct: no finite effect"
    assert report.converged and report.tau == pytest.approx(direct.tau, abs=1e-4)
    # and a baseline with no ratings fits nothing and says why
    none = arm_effects(y, names, group, baseline="absent")
    assert not none.converged and none.message == "not estimable: no ratings in the baseline arm"


def test_bad_input_names_the_problem():
    X = np.ones((3, 1))
    with pytest.raises(ValueError, match=r"y\[1\]: need 0 or 1"):
        fit_random_intercept_logit([1, 2, 0], X, [0, 0, 1])
    with pytest.raises(ValueError, match=r"X: need 3 rows"):
        fit_random_intercept_logit([1, 0, 0], np.ones((2, 1)), [0, 0, 1])
    with pytest.raises(ValueError, match=r"group: 2 entries for 3"):
        fit_random_intercept_logit([1, 0, 0], X, [0, 1])
