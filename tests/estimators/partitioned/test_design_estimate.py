"""The design-based estimate (estimators.partitioned.design_estimate): exact unbiasedness by
enumerating every class order of tiny studies, and a loop-based brute force."""

import itertools

import numpy as np
import pytest

from estimators.partitioned.design_estimate import (
    NO,
    UNSURE,
    YES,
    design_estimate,
    design_steps,
    item_terms,
    missing_rates,
)
from estimators.partitioned.designs import targeted_probabilities
from estimators.partitioned.routing_simulation import simulate

# three tiny items, K = 4: (truth, predictions of 3 systems: −1 = none), targeted π
ITEMS = [(0, [0, 1, -1]), (2, [1, 1, 2]), (3, [3, 0, 0])]
K = 4


def _pi(pred, epsilon=0.2):
    counts = np.bincount([p for p in pred[:2] if p >= 0], minlength=K)  # 2 routed systems
    return targeted_probabilities(counts, epsilon)


def _orders(pi, depth):
    """Every class order of length ``depth`` with its successive-sampling probability."""
    for order in itertools.permutations(range(len(pi)), depth):
        prob, left = 1.0, 1.0
        for c in order:
            prob *= pi[c] / left
            left -= pi[c]
        yield order, prob


def _answers(order, truth, unsure_at=None):
    out, done = [], False
    for j, c in enumerate(order):
        if done:
            out.append(-1)
        elif j == unsure_at:
            out.append(UNSURE)
        else:
            out.append(YES if c == truth else NO)
            done = c == truth
    return out


def _outcomes(depth):
    """Per item: the list of (probability, orders, answers) of every outcome."""
    per_item = []
    for truth, pred in ITEMS:
        pi = _pi(pred)
        per_item.append([(prob, order, _answers(order, truth))
                         for order, prob in _orders(pi, depth)])
    return per_item


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("b", [(0.0, 0.0, 0.0), (0.7, -0.3, 1.9)])
def test_every_item_term_has_mean_c_exactly(depth, b):
    """Σ over every class order of P(order)·(X_i − b·D_i) = c_i for fixed b (1e-12)."""
    for (truth, pred), outcomes in zip(ITEMS, _outcomes(depth), strict=True):
        pi = _pi(pred)
        probs = np.array([o[0] for o in outcomes])
        assert probs.sum() == pytest.approx(1, abs=1e-12)
        steps = design_steps(np.array([[o[1]] for o in outcomes]),
                             np.broadcast_to(pi, (len(outcomes), 1, K)),
                             np.array([[o[2]] for o in outcomes]),
                             np.broadcast_to(np.array(pred), (len(outcomes), 1, 3)), depth)
        x, d, mask = item_terms(steps)
        assert mask.all()
        z = x[:, 0] - np.einsum("j,rjs->rs", np.array(b), d[:, 0])
        c = (np.array(pred) == truth).astype(float)
        np.testing.assert_allclose(probs @ z, c, atol=1e-12)
        np.testing.assert_allclose(np.einsum("r,rjs->js", probs, d[:, 0]), 0, atol=1e-12)


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("coefficients", ["model", "loo"])
def test_estimated_coefficients_keep_the_estimate_exactly_unbiased(depth, coefficients):
    """With the default working-model coefficients (pilot from the other items) or the
    leave-one-out regression, E[Â] = the items' mean c exactly: every joint outcome of the
    three items enumerated."""
    per_item = _outcomes(depth)
    joint = list(itertools.product(*per_item))
    probs = np.array([np.prod([o[0] for o in combo]) for combo in joint])
    orders = np.array([[o[1] for o in combo] for combo in joint])
    answers = np.array([[o[2] for o in combo] for combo in joint])
    pis = np.broadcast_to(np.array([_pi(p) for _, p in ITEMS]), (len(joint), 3, K))
    preds = np.broadcast_to(np.array([p for _, p in ITEMS]), (len(joint), 3, 3))
    est = design_estimate(design_steps(orders, pis, answers, preds, depth),
                          coefficients=coefficients)
    c = np.mean([np.array(p) == t for t, p in ITEMS], axis=0)
    np.testing.assert_allclose(probs @ est.accuracy, c, atol=1e-12)


def test_unsure_and_pending_steps_are_weighted():
    """An unsure step and a pending one are the same missing step; with known rates u the
    available steps carry 1/Π_{l ≤ j}(1 − u_l) over the fixed denominator D; an item whose
    first step is unsure stays in the sample with X = 0, D = 0."""
    pi = np.array([[0.4, 0.3, 0.2, 0.1]] * 3)
    orders = np.array([[1, 0], [1, 0], [0, 2]])
    pred = np.array([[0], [0], [0]])
    base = design_steps(orders[:1], pi[:1], np.array([[NO, -1]]), pred[:1])
    with_unsure = design_steps(orders[1:2], pi[1:2], np.array([[NO, UNSURE]]), pred[1:2])
    for a, b in zip(item_terms(base), item_terms(with_unsure), strict=True):
        np.testing.assert_array_equal(a, b)
    x, d, _ = item_terms(base, rates=[0.2, 0.5])
    # step 0 asked class 1 ≠ ŷ = 0, "no": x = 0, d1 = −1, u = −1, v = 1/π_0(1) − 3
    np.testing.assert_allclose(x[0, 0], [0.0])
    np.testing.assert_allclose(d[0, 0, :, 0], np.array([-1, -1, 1 / 0.3 - 3]) / 0.8 / 2)
    np.testing.assert_allclose(missing_rates(base), [0.0, 1.0])
    x, d, mask = item_terms(design_steps(orders[2:], pi[2:], np.array([[UNSURE, YES]]),
                                         pred[2:]))
    assert mask.all() and not x.any() and not d.any()
    assert not item_terms(design_steps(orders[2:], pi[2:], np.array([[-1, -1]]), pred[2:]))[
        2].any()


def _successive(pi, order):
    """P(the class order) under successive sampling from π."""
    prob, rest = 1.0, 1.0
    for k in order:
        prob *= pi[k] / rest
        rest -= pi[k]
    return prob


def test_unsure_enumeration_is_exact():
    """K = 3, depth 2, one item of truth y = 0, π = (0.2, 0.5, 0.3), systems picking 0, 1,
    2; each asked step is unsure with the known rate u_l = (0.2, 0.35) independently (the
    next step asked as after a "no"). Enumerating every class order and unsure pattern:
    E[X_i − b·D_i] = c_i exactly (b = 0, a fixed b, the default per-step coefficients)
    with the known rates, while the old mean over the available steps is biased."""
    pi = np.array([0.2, 0.5, 0.3])
    y, u = 0, np.array([0.2, 0.35])
    orders, answers, probs = [], [], []
    for k0, k1 in itertools.permutations(range(3), 2):
        for m0, m1 in itertools.product((0, 1), repeat=2):
            a0 = UNSURE if m0 else (YES if k0 == y else NO)
            if a0 == YES and m1:
                continue  # no second step after a "yes"
            a1 = -1 if a0 == YES else (UNSURE if m1 else (YES if k1 == y else NO))
            orders.append([k0, k1])
            answers.append([a0, a1])
            probs.append(_successive(pi, [k0, k1]) * (u[0] if m0 else 1 - u[0])
                         * ((u[1] if m1 else 1 - u[1]) if a0 != YES else 1.0))
    probs = np.array(probs)
    assert probs.sum() == pytest.approx(1.0, abs=1e-14)
    n = len(probs)
    steps = design_steps(np.array(orders)[:, None], np.tile(pi, (n, 1, 1)),
                         np.array(answers)[:, None], np.tile([[0, 1, 2]], (n, 1, 1)))
    c = np.array([1.0, 0.0, 0.0])
    x, d, mask = item_terms(steps, rates=u)
    assert mask.all()
    np.testing.assert_allclose(probs @ x[:, 0], c, atol=1e-12)
    np.testing.assert_allclose(np.einsum("r,rjs->js", probs, d[:, 0]), 0.0, atol=1e-12)
    for b in (np.zeros(3), np.array([0.3, -0.2, 0.1]), "model"):
        est = design_estimate(steps, coefficients=b, rates=u)
        np.testing.assert_allclose(probs @ est.accuracy, c, atol=1e-12)
    # the old rule: the mean over the available steps (answered + virtual), items with
    # none dropped — X·D/count from the unweighted sum
    x0 = item_terms(steps, rates=[0.0, 0.0])[0][:, 0]
    a = np.array(answers)
    decisive = (a >= 0) & (a != UNSURE)
    count = np.where(a[:, 0] == YES, 2, decisive[:, 0] * (1 + decisive[:, 1]))
    kept = count > 0
    old = (probs[kept] @ (x0[kept] * 2 / count[kept, None])) / probs[kept].sum()
    assert abs(old[0] - 1.0) > 1e-3


def _old_bias(st):
    """(new, old) b = 0 estimates per study: the weighted sum over D and the old mean over
    the available steps (the unweighted sum × D / the available + virtual steps)."""
    a = st.items["answers"]
    depth = a.shape[-1]
    x0 = item_terms(st.steps, rates=np.zeros(depth))[0]
    decisive = np.logical_and.accumulate((a >= 0) & (a != UNSURE), axis=-1)
    said_yes = (decisive & (a == YES)).any(axis=-1)
    count = np.where(said_yes, depth, decisive.sum(axis=-1))
    kept = count > 0
    old = (x0 * depth / np.maximum(count, 1)[..., None] * kept[..., None]).sum(axis=1)
    return old / kept.sum(axis=1)[:, None]


def test_unsure_simulation_unbiased():
    """Targeted design (ε = 0.2), depth 2, 30 % unsure, K = 4, three agreeing systems, 200
    items, 1 500 simulated studies: the weighted estimate (b = 0 and the default
    coefficients) is within Monte-Carlo error of the truth; the old mean over the
    available steps was clearly below it (docs/estimators.md, "Unsure and pending steps").
    The SE (with the estimated rates' linearised share) matches the spread of the
    estimates (RMS SE / SD in [0.9, 1.1]); treating û_l as known would overstate it
    (the same estimate, the SE 1.2–3× too large here)."""
    st = simulate(np.random.default_rng(30), 1500, 200, 4, [0.6, 0.9, 0.97],
                  design="targeted", epsilon=0.2, depth=2, unsure=0.3)
    old = _old_bias(st) - st.truth
    for coefficients in (np.zeros(3), "model"):
        est = design_estimate(st.steps, coefficients=coefficients)
        new = est.accuracy - st.truth
        mc = new.std(axis=0, ddof=1) / np.sqrt(len(new))
        assert (np.abs(new.mean(axis=0)) < 3.5 * mc).all(), (new.mean(axis=0), mc)
        ratio = np.sqrt((est.se**2).mean(axis=0)) / new.std(axis=0, ddof=1)
        assert ((ratio > 0.9) & (ratio < 1.1)).all(), ratio
        plug = design_estimate(st.steps, coefficients=coefficients,
                               rates=missing_rates(st.steps))
        np.testing.assert_array_equal(plug.accuracy, est.accuracy)
        assert (plug.se > est.se).mean() > 0.9
    mc_old = old.std(axis=0, ddof=1) / np.sqrt(len(old))
    assert old.mean(axis=0)[0] < -6 * mc_old[0], (old.mean(axis=0), mc_old)


def _working_b(alpha, pi, asked, a):
    """The working-model coefficients by enumerating y (the working law given y ∉ asked)
    and the class asked k: b = Q⁻¹ q, Q = E D Dᵀ, q = E D (x − c)."""
    rest = [c for c in range(len(pi)) if c not in asked]
    mass = sum(pi[c] for c in rest)
    p = {c: pi[c] / mass for c in rest}
    law = {c: (alpha if c == a else (1 - alpha) * pi[c] / (1 - pi[a])) for c in rest}
    total = sum(law.values())
    q_mat, q_vec = np.zeros((3, 3)), np.zeros(3)
    for y in rest:
        for k in rest:
            yes = k == y
            x = (k == a and yes) / p[a]
            dvec = np.array([yes / p[k] - 1, (k == a) / p[a] - 1,
                             (k != a) / p[k] - (len(rest) - 1)])
            weight = law[y] / total * p[k]
            q_mat += weight * np.outer(dvec, dvec)
            q_vec += weight * dvec * (x - (y == a))
    other = [p[c] for c in rest if c != a]
    if max(other) - min(other) < 1e-12:  # equal over R_j \ {ŷ}: v ∝ u, drop v
        return np.append(np.linalg.solve(q_mat[:2, :2], q_vec[:2]), 0.0)
    return np.linalg.solve(q_mat, q_vec)


def _brute_rates(answers, depth):
    """û_l by loops: among the items whose first step was answered, the share of the steps
    asked at position l (steps 0 … l − 1 all "no") that are unsure or not answered."""
    asked, missing = np.zeros(depth), np.zeros(depth)
    for row in answers:
        if row[0] < 0:
            continue
        for j in range(depth):
            asked[j] += 1
            if row[j] < 0 or row[j] == UNSURE:
                missing[j] += 1
                break
            if row[j] == YES:
                break
    return np.where(asked > 0, missing / np.maximum(asked, 1), 0.0)


def _brute_model(orders, pi, answers, preds, depth):
    """Plain loops for the default coefficients: per item its ordinary pieces, the pilot α
    of the other items, then per step x − b·D with b from :func:`_working_b`."""
    n_items, n_sys = preds.shape
    surv = np.cumprod(1 - _brute_rates(answers, depth))
    count = depth
    acc, se = [], []
    for s in range(n_sys):
        items = []  # per item: list of (x, D, pi, asked, yhat) steps, count, Xo, Uo
        for i in range(n_items):
            steps, xo, uo, asked = [], 0.0, 0.0, []
            yhat = preds[i, s]
            for j in range(depth):
                a = answers[i, j]
                if a < 0 or a == UNSURE:
                    break
                k = orders[i, j]
                w = 1 / surv[j]
                yes = a == YES
                if yhat >= 0 and yhat not in asked:
                    rest = 1 - sum(pi[i, c] for c in asked)
                    p_k, p_own = pi[i, k] / rest, pi[i, yhat] / rest
                    x = (k == yhat and yes) / p_own
                    dvec = np.array([yes / p_k - 1, (k == yhat) / p_own - 1,
                                     (k != yhat) / p_k - (K - len(asked) - 1)])
                    steps.append((w * x, w * dvec, list(asked)))
                    xo += w * x
                    uo += w * (k == yhat) / p_own
                if yes:
                    virtual = depth - 1 - j
                    steps.append((w * virtual * float(k == yhat), None, None))
                    break
                asked.append(k)
            if answers[i, 0] >= 0:  # first step answered: in the sample
                items.append((steps, count, xo / count, uo / count, yhat, i))
        z = []
        for steps, count, _, _, yhat, i in items:
            others = [it for it in items if it[5] != i]
            alpha = (sum(o[2] for o in others) + 0.5) / (sum(o[3] for o in others) + 1)
            alpha = min(max(alpha, 0.01), 0.99)
            total = 0.0
            for x, dvec, asked in steps:
                total += x if dvec is None else x - _working_b(alpha, pi[i], asked, yhat) @ dvec
            z.append(total / count)
        z = np.array(z)
        acc.append(z.mean())
        se.append(z.std(ddof=1) / np.sqrt(len(z)))
    return np.array(acc), np.array(se)


def _brute(orders, pi, answers, preds, depth, loo=True):
    """Plain loops: X_i, D_i per item and system, then per system the leave-one-out (or
    pooled) least-squares coefficients with an intercept (np.linalg.lstsq)."""
    n_items, n_sys = preds.shape
    surv = np.cumprod(1 - _brute_rates(answers, depth))
    count = depth
    acc, se = [], []
    for s in range(n_sys):
        xs, ds = [], []
        for i in range(n_items):
            zsum, dsum, asked = 0.0, np.zeros(3), []
            yhat = preds[i, s]
            for j in range(depth):
                a = answers[i, j]
                if a < 0 or a == UNSURE:
                    break
                k = orders[i, j]
                w = 1 / surv[j]
                rest = 1 - sum(pi[i, c] for c in asked)
                if yhat < 0 or yhat in asked:
                    pass  # exact step: x = 0, D = 0
                else:
                    p_k, p_own = pi[i, k] / rest, pi[i, yhat] / rest
                    yes = a == YES
                    zsum += w * (k == yhat and yes) / p_own
                    dsum += w * np.array([yes / p_k - 1, (k == yhat) / p_own - 1,
                                          (k != yhat) / p_k - (K - len(asked) - 1)])
                if a == YES:
                    virtual = depth - 1 - j
                    zsum += w * virtual * float(k == yhat)
                    break
                asked.append(k)
            if answers[i, 0] >= 0:  # first step answered: in the sample
                xs.append(zsum / count)
                ds.append(dsum / count)
        x, dm = np.array(xs), np.array(ds)
        n = len(x)
        terms = []
        for i in range(n):
            keep = np.arange(n) != i if loo else np.ones(n, bool)
            z = np.column_stack([np.ones(keep.sum()), dm[keep]])
            beta = np.linalg.lstsq(z, x[keep], rcond=1e-6)[0]
            terms.append(x[i] - beta[1:] @ dm[i])
        terms = np.array(terms)
        acc.append(terms.mean())
        if loo:
            se.append(terms.std(ddof=1) / np.sqrt(n))
        else:
            rank = np.linalg.matrix_rank(np.column_stack([np.ones(n), dm]), tol=None) - 1
            se.append(np.sqrt(((terms - terms.mean())**2).sum() / (n - 1 - rank) / n))
    return np.array(acc), np.array(se)


@pytest.mark.parametrize(("design", "depth", "unsure"), [
    ("uniform", 1, 0.0), ("targeted", 1, 0.0), ("targeted", 2, 0.1), ("uniform", 3, 0.2),
    ("targeted", 3, 0.0)])
@pytest.mark.parametrize("coefficients", ["model", "loo", "pooled"])
def test_equals_brute_force(design, depth, unsure, coefficients):
    """design_estimate's accuracy and SE equal the loop implementation (1e-12), on hand-made
    studies with systems that have no prediction, a newcomer, unsure answers (the unsure
    steps weighted by 1/Π(1 − û_l); the SE with û_l passed as known rates, which leaves
    out the estimated rates' share of the residuals)."""
    rng = np.random.default_rng(5)
    st = simulate(rng, 3, 40, K, [0.6, 0.9, 0.97, 0.8], agree=True, design=design,
                  routed=[0, 1, 2], depth=depth, unsure=unsure, missing=0.1)
    est = design_estimate(st.steps, coefficients=coefficients)
    it = st.items
    for r in range(3):
        args = (it["orders"][r], it["pi"][r], it["answers"][r], it["predictions"][r], depth)
        if coefficients == "model":
            acc, se = _brute_model(*args)
        else:
            acc, se = _brute(*args, loo=coefficients == "loo")
        known = design_estimate(st.steps.take(slice(r, r + 1)), coefficients=coefficients,
                                rates=_brute_rates(it["answers"][r], depth))
        np.testing.assert_allclose(est.accuracy[r], acc, atol=1e-12)
        np.testing.assert_allclose(known.accuracy[0], acc, atol=1e-12)
        np.testing.assert_allclose(known.se[0], se, atol=1e-12)
        if unsure == 0:
            np.testing.assert_allclose(est.se[r], se, atol=1e-12)


def test_stack_equals_one_at_a_time():
    rng = np.random.default_rng(8)
    st = simulate(rng, 4, 60, 10, [0.7, 0.95], design="targeted", depth=2, unsure=0.05)
    whole = design_estimate(st.steps)
    for r in range(4):
        one = design_estimate(st.steps.take(slice(r, r + 1)))
        for field in ("accuracy", "se", "ci_low", "ci_high", "approximate"):
            np.testing.assert_allclose(getattr(one, field)[0], getattr(whole, field)[r],
                                       atol=1e-12)


def test_no_data_and_perfect_agreement():
    """No item: the no-data convention; every answer agreeing with a perfect AI: the
    interval holds 1 and still has width (n_eff capped at the items); with the pooled
    regression (x − d1 fits exactly) the SE is 0."""
    pi = np.full((1, 50, 3), 1 / 3)
    rng = np.random.default_rng(2)
    y = rng.integers(3, size=(1, 50))
    orders = np.argsort(rng.random((1, 50, 3)), axis=-1)[..., :1]
    answers = np.where(orders == y[..., None], YES, NO)
    steps = design_steps(orders, pi, answers, y[..., None])
    for coefficients in ("model", "pooled"):
        est = design_estimate(steps, coefficients=coefficients)
        assert est.accuracy[0, 0] > 0.99
        assert 0.9 < est.ci_low[0, 0] < 0.99 and est.ci_high[0, 0] > 0.9999
    assert est.se[0, 0] == pytest.approx(0, abs=1e-12)
    empty = design_estimate(design_steps(orders, pi, np.full_like(answers, -1), y[..., None]))
    assert empty.accuracy[0, 0] == 0.5 and (empty.ci_low[0, 0], empty.ci_high[0, 0]) == (0, 1)


@pytest.mark.parametrize("design", ["uniform", "targeted"])
def test_unbiased_against_known_truth(design):
    """Simulation with known truth (agreeing systems, a newcomer, depth 2): the mean of 400
    estimates lies within 4 standard errors of the mean of each system's accuracy."""
    rng = np.random.default_rng(11)
    st = simulate(rng, 400, 200, 4, [0.5, 0.8, 0.95, 0.9], agree=True, design=design,
                  routed=[0, 1, 2], depth=2)
    est = design_estimate(st.steps)
    err = est.accuracy - st.truth
    assert (np.abs(err.mean(axis=0)) < 4 * err.std(axis=0) / np.sqrt(400)).all()


@pytest.mark.parametrize(("design", "depth", "unsure"), [
    ("targeted", 1, 0.0), ("targeted", 3, 0.15), ("uniform", 2, 0.1)])
@pytest.mark.parametrize("coefficients", ["model", "fixed"])
def test_items_counted_equal_items_repeated(design, depth, unsure, coefficients):
    """``DesignSteps.count``: each item standing for ``count`` items of its type gives the
    estimate (and its SE, interval, flag and decisive events) of the study with every item
    written out that many times (1e-12) — how the kept statistics of a targeted study are
    read. The pooled and leave-one-out fits refuse counts (a type's items would leave
    each other out)."""
    from dataclasses import replace

    rng = np.random.default_rng(17)
    st = simulate(rng, 1, 30, K, [0.6, 0.9, 0.8], agree=True, design=design,
                  routed=[0, 1, 2], depth=depth, unsure=unsure, missing=0.1)
    it = st.items
    many = rng.integers(1, 5, size=30)
    b = np.full(3, 0.2) if coefficients == "fixed" else "model"
    counted = design_estimate(replace(design_steps(it["orders"], it["pi"], it["answers"],
                                                   it["predictions"], depth),
                                      count=many[None]), coefficients=b)
    repeated = design_estimate(design_steps(*(np.repeat(it[f], many, axis=1) for f in (
        "orders", "pi", "answers", "predictions")), depth), coefficients=b)
    for field in ("accuracy", "se", "ci_low", "ci_high", "events"):
        np.testing.assert_allclose(getattr(counted, field), getattr(repeated, field),
                                   atol=1e-12, err_msg=field)
    np.testing.assert_array_equal(counted.approximate, repeated.approximate)
    with pytest.raises(ValueError, match="counted more than once"):
        design_estimate(replace(st.steps, count=many[None]), coefficients="pooled")
