"""The design-based (inverse-probability) estimate of each AI system's accuracy under a
routing design (issue 28; docs/estimators.md, "Routing designs: inverse-probability
estimates"; the designs themselves: :mod:`estimators.partitioned.designs`).

An item of true class y gets queries at steps j = 0 … depth − 1 of its class order; the
class k_j is drawn with the known conditional probability π_j(·) over R_j, the classes not
asked before it; a "yes" ends the item, a "no" or "unsure" is followed by the next step.
Specialists are truthful (yes ⇔ k_j = y). For system s with pick ŷ (none: wrong, c = 0),
c = 1{ŷ = y}. Every answered step j contributes

* an **exact** step (ŷ asked at an earlier step of the item and answered "no", or s has no
  prediction): x = c = 0, D = 0;
* otherwise the inverse-probability term and three control variates,

      x  = 1{k_j = ŷ, yes} / π_j(ŷ)                  E(x | history) = c
      d1 = 1{yes} / π_j(k_j) − 1                     E = 0 (y ∈ R_j: earlier answers "no")
      u  = 1{k_j = ŷ} / π_j(ŷ) − 1                   E = 0
      v  = 1{k_j ≠ ŷ} / π_j(k_j) − (|R_j| − 1)       E = 0

  (x − d1 = 1 − 1{k_j ≠ ŷ, yes}/π_j(k_j): the complementary-like part is in the family);
* after a "yes" at step j < depth − 1, c is known (c = 1{k_j = ŷ}): the steps j+1 … depth−1
  are **virtual** exact steps x = c, D = 0.

An "unsure" answer tells nothing: it and every later step of the item are unavailable (a
later step's E(x | history) = c needs y ∉ the classes asked before). A **pending** step
(asked after a "no" but not answered yet: −1 in :func:`design_steps`, or no row) is
missing the same way. Without missing steps, every item has D = depth available steps
(answered + virtual) whose terms Z_0 … Z_{D−1} each have conditional mean c_i given the
item's history (a virtual step equals c_i), so X_i = (1/D) Σ_j Z_j has E[X_i] = c_i and
E[D_i] = 0 **exactly**, for any fixed coefficients b: E[X_i − b·D_i] = c_i, whatever the
AI's errors.

**Missing steps (unsure or pending).** Assumption (missing completely at random): whether
the step asked at position l is missing does not depend on the item, its class order or
its answers, with rate u_l per position. Fix an item's latent path (y, the class order,
hence J = the position of the true class, or D − 1). In the complete path steps 0 … J
are asked and J + 1 … D − 1 virtual. Step j is available (R_j = 1) iff no asked step up
to j is missing: the asked ones are l = 0 … min(j, J) (a virtual step inherits the
availability of the "yes" before it), so

    P(R_j = 1 | path) = Π_{l ≤ min(j, J)} (1 − u_l) =: ρ_j,

known whenever R_j = 1. Hence, with the fixed denominator D,

    X_i = (1/D) Σ_j R_j Z_j / ρ_j,     D_i = (1/D) Σ_j R_j D_ij / ρ_j,

E[X_i | path] = (1/D) Σ_j Z_j and E[X_i] = c_i, E[D_i] = 0, again exactly for any fixed b.
The old mean over the available steps is biased: a "yes" makes the later (virtual) steps
available at once, after a "no" they wait for answers that may be missing, so the number
of available steps depends on the answers. An item whose first step is unsure stays in
the sample with X_i = 0, D_i = 0; the sample is the items whose first step was answered
(any answer), n counts them. Without a missing step every ρ_j = 1 and X_i is the mean
of the D steps, bit for bit as before.

The rates are plug-in estimates from the same data, per study of the stack
(:func:`missing_rates`): û_l = the share of the steps asked at position l that are
missing, position 0 being asked for every item in the sample and position l ≥ 1 where
steps 0 … l − 1 were all "no" (``rates=`` passes known ones). With û_0 the estimate
equals the mean over the items with a decisive first step (ratio estimation, bias
O(1/n)). The SE accounts for the estimated rates by linearisation: each item's term
gets Σ_l n T̄_l (m_il − û_l a_il)/((1 − û_l) N_l) (a_il / m_il: position l asked /
missing, N_l = Σ_i a_il, T_il = the part of the item's term whose weight holds 1/(1 −
u_l), T̄_l its mean), which has mean 0 over the items: it changes the residuals, not Â
(without a missing step it is 0). Measured: docs/estimators.md, "Unsure and pending
steps".

The coefficients (``coefficients=``):

* "model" (default): per step, b_j minimising the step's expected variance under a working
  law for y given the history (:func:`working_coefficients`), at a pilot accuracy α_(−i)
  from the *other* items. b_j never depends on item i's answers, so E(Â) = mean c_i
  exactly; a wrong working law costs efficiency only.
* "pooled": the estimated optimal regression coefficients b̂ = S_DD⁺ S_DX (S: sums of
  centred products over the n items; ⁺: pseudo-inverse, v = −u under the uniform design
  with depth 1), Â = X̄ − b̂·D̄, the intercept of the least-squares fit of X_i on (1, D_i);
  SE² = Σ_i (X_i − X̄ − b̂·(D_i − D̄))²/(n(n − 1 − p)), p = rank S_DD. Bias O(1/n), and it
  overfits rare heavy-weight events (docs/estimators.md).
* "loo": each item's b̂ fitted without it (Sherman–Morrison; a refit where the item alone
  spans a direction): exactly unbiased, but as prone to rare events.
* a fixed b (3,) or (B, S, 3): b = 0 is the plain inverse-probability mean.

With item terms Z_i (x − b·D summed over the item's available steps with the weights
1/(Dρ_j) above), Â = mean Z_i and SE² = Σ_i (Z_i − Â)²/(n(n − 1)) (items are the clusters;
Z_i plus the rates' linearised share when steps are missing). The interval (``interval_method=``) is
binomial at the effective count n_eff = ã(1 − ã)/SE² (ã = Â clipped to [1/(2n),
1 − 1/(2n)]), capped at the detectable items Σ_i min(1, Σ_j r_ij), r_ij = π_j(ŷ) +
1{k_j ≠ ŷ}π_j(k_j)/(1 − π_j(ŷ)) (an exact step: 1) — the items whose errors the design
could see, so that a sample without an observed error gives the rule of three's width;
SE = 0 gives n_eff = the cap: "clopper_pearson" (default), "wilson", "jeffreys"; or on
the SE: "wald" Â ± z·SE, "t" with n − 1 − p degrees of freedom. Coverage: docs/coverage.md,
"Routing designs: the inverse-probability estimate".
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from scipy import stats

from estimators.partitioned.accuracy import Estimate
from estimators.partitioned.likelihood import NO_DATA_ACCURACY, NO_DATA_SE

NO, YES, UNSURE = 0, 1, 2  # answer codes of :func:`design_steps` (−1: not answered)
INTERVALS = ("clopper_pearson", "wilson", "jeffreys", "wald", "t")
RCOND = 1e-12  # eigenvalues of Σ Z_i Z_iᵀ below this share of the largest count as 0
# The approximate flag (:func:`approximate`): an interval rests on fewer decisive events
# than this, or one item carries more than MAX_SHARE of the residual sum of squares.
APPROXIMATE_EVENTS = 5
MAX_SHARE = 0.25


@dataclass(frozen=True)
class DesignSteps:
    """The answered steps of a stack of studies: arrays of shape (..., n) per step (the
    stack's shape first, then the steps), (..., n, S) per step and system.

    ``item``: item index (the steps of an item contiguous, in step order); ``step``: its
    position j (0-based); ``yes``/``unsure``: the answer; ``p_asked``: π_j(k_j);
    ``remaining``: |R_j| (classes not asked before step j); ``own``: k_j = ŷ_s;
    ``p_own``: π_j(ŷ_s), 0 where ŷ_s was asked before or s has no prediction;
    ``present``: s has a prediction; ``valid``: False on padding; ``depth``: the design's
    number of steps per item. For the working-model coefficients (the default):
    ``rest`` (..., n) = 1 − Σ_{i<j} π(k_i), the design mass left at step j, and
    ``inv_total`` (..., n) = Σ_{k ∈ R_j} 1/π_j(k). ``count`` (..., M), optional: how many
    items each item index stands for (items of one **type**, whose steps are identical):
    every sum over the items counts an index that many times, so the estimate equals that
    of the steps with each item repeated ``count`` times (the kept statistics of a
    targeted study, ``annotations.partitioned.services.tally_designs``); None: 1 each."""

    item: np.ndarray
    step: np.ndarray
    yes: np.ndarray
    unsure: np.ndarray
    p_asked: np.ndarray
    remaining: np.ndarray
    own: np.ndarray
    p_own: np.ndarray
    present: np.ndarray
    valid: np.ndarray
    depth: int
    rest: np.ndarray | None = None
    inv_total: np.ndarray | None = None
    count: np.ndarray | None = None

    @property
    def stack_shape(self) -> tuple:
        return self.item.shape[:-1]

    @property
    def systems(self) -> int:
        return self.own.shape[-1]

    def take(self, index) -> DesignSteps:
        """The studies ``index`` of a stack (an index into its leading axis)."""
        return DesignSteps(**{f.name: (getattr(self, f.name)
                                       if f.name == "depth" or getattr(self, f.name) is None
                                       else getattr(self, f.name)[index])
                              for f in fields(self)})


def design_steps(orders, pi, answers, predictions, depth: int | None = None) -> DesignSteps:
    """DesignSteps from per-item data (a leading stack shape ``...`` allowed everywhere):

    * ``orders`` (..., N, D) int: the class asked at each step (any value where not asked);
    * ``pi`` (..., N, K): each item's design π (the class order's successive sampling);
    * ``answers`` (..., N, D) int: ``YES``, ``NO``, ``UNSURE``, or −1 (not asked or not
      yet answered);
    * ``predictions`` (..., N, S) int: each system's class, −1 for none;
    * ``depth``: the design's steps per item (default D).

    π_j(k) = π(k) / (1 − Σ_{i<j} π(k_i)) (successive sampling); steps are laid out item by
    item (N·D per study), unanswered ones marked invalid."""
    o = np.asarray(orders, dtype=np.int64)
    p = np.asarray(pi, dtype=float)
    a = np.asarray(answers, dtype=np.int64)
    pred = np.asarray(predictions, dtype=np.int64)
    *stack, n_items, d = o.shape
    k = p.shape[-1]
    depth = d if depth is None else int(depth)
    if a.shape != o.shape or p.shape[:-1] != o.shape[:-1] or pred.shape[:-1] != o.shape[:-1]:
        raise ValueError("orders, answers (..., N, D), pi (..., N, K) and predictions "
                         "(..., N, S) must share their leading shape")
    valid = a >= 0
    oc = np.where(valid, o, 0)
    if ((oc < 0) | (oc >= k)).any():
        raise ValueError(f"orders: answered steps must ask a class in 0..{k - 1}")
    drawn = np.take_along_axis(p, oc, axis=-1)
    before = np.cumsum(drawn, axis=-1) - drawn
    rest = 1 - before
    p_asked = drawn / rest
    present = pred >= 0
    pc = np.where(present, pred, 0)
    p_pred = np.take_along_axis(p, pc, axis=-1)  # (..., N, S)
    own = (oc[..., :, None] == pred[..., None, :]) & present[..., None, :]
    asked_before = (np.cumsum(own, axis=-2) - own) > 0  # ŷ asked at an earlier step
    p_own = np.where(present[..., None, :] & ~asked_before,
                     p_pred[..., None, :] / rest[..., None], 0.0)
    step = np.broadcast_to(np.arange(d), o.shape)
    item = np.broadcast_to(np.arange(n_items)[:, None], o.shape)
    # Σ_{k ∈ R_j} 1/π_j(k) = rest_j · (Σ_k 1/π(k) − Σ_{i<j} 1/π(k_i))
    inv_all = (1 / p).sum(axis=-1, keepdims=True)
    inv_before = np.cumsum(1 / drawn, axis=-1) - 1 / drawn
    inv_total = rest * (inv_all - inv_before)
    s = pred.shape[-1]
    flat = (*stack, n_items * d)
    return DesignSteps(
        item=item.reshape(flat).copy(), step=step.reshape(flat).copy(),
        yes=(a == YES).reshape(flat), unsure=(a == UNSURE).reshape(flat),
        p_asked=p_asked.reshape(flat), remaining=(k - step).reshape(flat).copy(),
        own=own.reshape(*flat, s), p_own=p_own.reshape(*flat, s),
        present=np.broadcast_to(present[..., None, :], own.shape).reshape(*flat, s),
        valid=valid.reshape(flat), depth=depth, rest=rest.reshape(flat),
        inv_total=inv_total.reshape(flat))


@dataclass(frozen=True)
class _Steps:
    """Per answered step, flattened (steps, S): the terms of the module docstring."""

    key: np.ndarray  # study · M + item, per step
    b: int  # studies
    m: int  # item slots per study
    depth: int  # D: the fixed denominator of X_i
    weight: np.ndarray  # (steps,) 1/Π_{l ≤ j}(1 − u_l) on an available step (0: unavailable)
    has: np.ndarray  # (B·M,) the item is in the sample: its first step answered
    count: np.ndarray  # (B·M,) the items each index stands for (DesignSteps.count; 1)
    rates: np.ndarray  # (B, P) u_l per study and step position
    asked: np.ndarray  # (B·M, P) position l asked
    missing: np.ndarray  # (B·M, P) position l asked and missing (unsure or pending)
    estimated: bool  # u_l estimated from these data (else known)
    step: np.ndarray  # (steps,) position j
    x: np.ndarray  # (steps, S) x plus the virtual steps' c
    x_ipw: np.ndarray  # (steps, S) x alone
    detect: np.ndarray  # (steps, S) the step's chance to reveal an error (1: exact step)
    d: np.ndarray  # (steps, 3, S)
    ipw: np.ndarray  # (steps, S) the inverse-probability steps
    p_own: np.ndarray  # (steps, S) π_j(ŷ) (1 off ipw)
    remaining: np.ndarray  # (steps,) |R_j|
    rest: np.ndarray | None
    inv_total: np.ndarray | None

    def per_item(self, values):
        """(steps, …, S) sums → (B·M, …, S) per item."""
        flat = values.reshape(values.shape[0], -1)
        out = np.stack([np.bincount(self.key, weights=flat[:, j], minlength=self.b * self.m)
                        for j in range(flat.shape[1])], axis=-1)
        return out.reshape(self.b * self.m, *values.shape[1:])

    def rate_correction(self, values):
        """(steps, …, S) → (B·M, …, S): each item's linearised share of the estimation of
        û_l (0 with known rates), Σ_l n T̄_l (m_il − û_l a_il)/((1 − û_l) N_l), T_il =
        (1/D) Σ_{j ≥ l} w_j values_ij (the part of the item mean whose weight holds
        1/(1 − u_l)), T̄_l its mean over the n items, a_il / m_il: position l asked /
        missing, N_l = Σ_i a_il. Its mean over the items is 0: it moves the residuals (the
        SE), not the estimate."""
        out = np.zeros((self.b * self.m, *values.shape[1:]))
        if not self.estimated or not self.missing.any():
            return out
        npos = self.rates.shape[1]
        flat = (values * self.weight.reshape(-1, *([1] * (values.ndim - 1)))).reshape(
            values.shape[0], -1)
        cell = self.key * npos + np.minimum(self.step, npos - 1)
        per = np.stack([np.bincount(cell, weights=flat[:, j], minlength=self.b * self.m * npos)
                        for j in range(flat.shape[1])], axis=-1)  # (B·M·P, F)
        per = per.reshape(self.b, self.m, npos, -1)
        tail = np.flip(np.cumsum(np.flip(per, axis=2), axis=2), axis=2) / self.depth
        has = self.has.reshape(self.b, self.m, 1, 1)
        many = self.count.reshape(self.b, self.m, 1, 1)
        n = (has * many).sum(axis=1, keepdims=True)
        tbar = (tail * has * many).sum(axis=1, keepdims=True) / np.maximum(n, 1)
        u = self.rates[:, None, :, None]
        a = self.asked.reshape(self.b, self.m, npos, 1)
        mi = self.missing.reshape(self.b, self.m, npos, 1)
        big_n = (a * many).sum(axis=1, keepdims=True)
        ok = (big_n > 0) & (u < 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(ok, n * tbar * (mi - u * a) / np.where(ok, (1 - u) * big_n, 1.0), 0.0)
        return (c.sum(axis=2) * has[:, :, 0]).reshape(self.b * self.m, *values.shape[1:])

    def item_mean(self, values):
        """(steps, …, S) → (B·M, …, S): Σ_j w_j values_j / D per item (module docstring)."""
        w = self.weight.reshape(-1, *([1] * (values.ndim - 1)))
        return self.per_item(values * w) / self.depth


def missing_rates(steps: DesignSteps) -> np.ndarray:
    """û_l (…, P) per study of the stack and step position l (P = max(depth, steps)): the
    share of the steps **asked** at position l that are missing — "unsure", or not answered
    (a pending step: −1, or no row, after a "no"). Position 0 is asked for every item whose
    first step was answered; position l ≥ 1 for every item whose steps 0 … l − 1 were all
    decisive "no" (after a "yes" the later steps are virtual, never asked). 0 where no step
    was asked at l."""
    t = _step_terms(steps)
    return t.rates.reshape(*steps.stack_shape, -1)


def _positions(key, step, valid, unsure, yes, bm, p):
    """Per item (B·M, P): the step positions available (steps 0 … l answered, decisive, no
    "yes" before l) and asked (position 0 if the first step was answered; l ≥ 1 if step
    l − 1 was available and "no"), and whether its first step was answered (B·M,)."""
    dec = np.zeros((bm, p), dtype=bool)
    yes_at = np.zeros((bm, p), dtype=bool)
    first = np.zeros(bm, dtype=bool)
    ok = valid & (step < p)
    dec[key[ok & ~unsure], step[ok & ~unsure]] = True
    yes_at[key[ok & yes], step[ok & yes]] = True
    first[key[ok & (step == 0)]] = True
    cont = dec.copy()
    cont[:, 1:] &= ~yes_at[:, :-1]
    avail = np.logical_and.accumulate(cont, axis=1)
    asked = np.empty_like(avail)
    asked[:, 0] = first
    asked[:, 1:] = avail[:, :-1] & ~yes_at[:, :-1]
    return avail, asked, first


def _step_terms(steps: DesignSteps, rates=None) -> _Steps:
    st = steps
    n = st.item.shape[-1]
    b = int(np.prod(st.stack_shape, dtype=np.int64))
    s = st.systems
    item = st.item.reshape(b, n)
    valid = st.valid.reshape(b, n)
    m = int(item[valid].max()) + 1 if valid.any() else 1
    key = (np.arange(b)[:, None] * m + np.where(valid, item, 0)).ravel()
    step = st.step.reshape(-1)
    vflat = valid.ravel()
    npos = max(st.depth, int(step[vflat].max()) + 1 if vflat.any() else 1)
    pos_avail, asked, first = _positions(key, step, vflat, st.unsure.reshape(-1),
                                         st.yes.reshape(-1), b * m, npos)
    count = np.ones(b * m)
    if st.count is not None:
        given = np.asarray(st.count, dtype=float).reshape(b, -1)[:, :m]
        count = np.pad(given, ((0, 0), (0, m - given.shape[1])), constant_values=1.0).ravel()
    many = count.reshape(b, m, 1)
    if rates is None:  # û_l: the share of asked steps at position l that are missing
        n_asked = (asked.reshape(b, m, npos) * many).sum(axis=1)
        n_miss = ((asked & ~pos_avail).reshape(b, m, npos) * many).sum(axis=1)
        u = n_miss / np.where(n_asked > 0, n_asked, 1)
    else:  # known rates (..., P') or (P',), padded with 0 to P positions
        r = np.asarray(rates, dtype=float)
        r = np.broadcast_to(r, (*st.stack_shape, r.shape[-1])).reshape(b, -1)
        u = np.zeros((b, npos))
        u[:, :min(npos, r.shape[1])] = r[:, :npos]
    surv = np.cumprod(1 - u, axis=1)  # P(step j available | its path) = Π_{l ≤ j}(1 − u_l)
    w_pos = np.where(surv > 0, 1 / np.where(surv > 0, surv, 1.0), 0.0)
    spos = np.minimum(step, npos - 1)
    avail = vflat & pos_avail[key, spos]
    weight = np.where(avail, w_pos[np.repeat(np.arange(b), n), spos], 0.0)
    yes = st.yes.reshape(-1) & avail
    own = st.own.reshape(-1, s)
    p_own = st.p_own.reshape(-1, s)
    p_asked = st.p_asked.reshape(-1)
    remaining = st.remaining.reshape(-1)
    ipw = avail[:, None] & (p_own > 0)  # steps with the inverse-probability terms
    safe_own = np.where(ipw, p_own, 1.0)
    safe_asked = np.where(avail, p_asked, 1.0)[:, None]
    x = np.where(ipw & own & yes[:, None], 1.0 / safe_own, 0.0)
    d1 = np.where(ipw, yes[:, None] / safe_asked - 1, 0.0)
    du = np.where(ipw, own / safe_own - 1, 0.0)
    dv = np.where(ipw, ~own / safe_asked - (remaining[:, None] - 1), 0.0)
    virtual = np.where(yes, np.maximum(st.depth - 1 - step, 0), 0).astype(float)
    x_all = x + virtual[:, None] * (own & st.present.reshape(-1, s))
    with np.errstate(divide="ignore", invalid="ignore"):
        other = np.where(ipw & ~own & (safe_own < 1), p_asked[:, None] / (1 - safe_own), 0.0)
    detect = np.where(ipw, np.where(ipw, p_own, 0.0) + other, avail[:, None] * 1.0)
    return _Steps(key=key, b=b, m=m, depth=st.depth, weight=weight, has=first, count=count,
                  rates=u,
                  asked=asked, missing=asked & ~pos_avail, estimated=rates is None, step=step,
                  x=x_all, x_ipw=x, detect=detect,
                  d=np.stack([d1, du, dv], axis=1), ipw=ipw, p_own=safe_own,
                  remaining=remaining,
                  rest=None if st.rest is None else st.rest.reshape(-1),
                  inv_total=None if st.inv_total is None else st.inv_total.reshape(-1))


def item_terms(steps: DesignSteps, rates=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item: X (B, M, S), D (B, M, 3, S) and the mask of items in the sample (B, M), the
    stack flattened to B studies and M = the largest item index + 1 (module docstring):
    X_i = (1/D) Σ_j R_ij x_ij / Π_{l ≤ j}(1 − u_l), the same weights for D_i. ``rates``:
    known u_l, (P,) or (…, P) (default: :func:`missing_rates` from the same data)."""
    return _item_terms(_step_terms(steps, rates), steps.systems)[:3]


def _item_terms(t: _Steps, s: int):
    """item_terms' (X, D, mask) and the rate corrections of X and D (:meth:`_Steps.
    rate_correction`)."""
    has = t.has
    cx = t.rate_correction(t.x).reshape(t.b, t.m, s)
    cd = t.rate_correction(t.d).reshape(t.b, t.m, 3, s)
    big_x = t.item_mean(t.x)
    big_d = t.item_mean(t.d)
    return (big_x.reshape(t.b, t.m, s), big_d.reshape(t.b, t.m, 3, s), has.reshape(t.b, t.m),
            cx, cd)


def working_coefficients(alpha, p_own, remaining, rest, inv_total) -> np.ndarray:
    """b (…, 3) minimising a step's expected variance E_y Var(x − b·D | history) under the
    working model P(y = ŷ) = α, P(y = k) = (1 − α) π(k)/(1 − π(ŷ)) for k ≠ ŷ, given that y
    is none of the classes asked before (docs/estimators.md): with p = π_j(ŷ), m = |R_j|,
    H = Σ_{k ∈ R_j, k ≠ ŷ} 1/π_j(k), G = (m − 1)/(1 − p) and α_j the working P(y = ŷ | y ∈
    R_j), b = Q⁻¹ q,

        Q = [[α_j(1/p − 1) + (1 − α_j)(G − 1),  α_j(1/p − 1) − (1 − α_j),  (1 − α_j)G − (m − 1)],
             [·,  1/p − 1,  −(m − 1)],  [·,  ·,  H − (m − 1)²]],
        q = α_j (1/p − 1, 1/p − 1, −(m − 1));
    where π_j is equal over the classes of R_j other than ŷ (the uniform design; a targeted
    one where no other class got a vote) v is a multiple of u and Q is singular: v is
    dropped (b_3 = 0) and b_1, b_2 solve the 2 × 2 system in (d1, u). Any
    b that does not depend on the item's own answers keeps E(x − b·D | history) = c."""
    return _WorkingModel(p_own, remaining, rest, inv_total).coefficients(alpha)


class _WorkingModel:
    """:func:`working_coefficients` with the parts that do not depend on α computed once."""

    def __init__(self, p_own, remaining, rest, inv_total):
        p = np.asarray(p_own, float)
        mm = np.asarray(remaining, float) - 1
        pi_own = p * rest
        with np.errstate(divide="ignore", invalid="ignore"):
            self.others = np.where(mm > 0, (rest - pi_own) / (1 - pi_own), 0.0)
            g = np.where(mm > 0, mm / (1 - p), 0.0)
        self.inv = inv = 1 / p - 1
        self.g1, self.g, self.mm = g - 1, g, mm
        self.q22, self.q23 = inv, -mm
        self.q33 = inv_total - 1 / p - mm**2
        self.c11 = self.q22 * self.q33 - self.q23 * self.q23
        # H = Σ_{k ∈ R_j, k ≠ ŷ} 1/π_j(k) ≥ (m − 1)²/(1 − p), with equality iff π_j is
        # equal over the classes other than ŷ: then v is a multiple of u
        with np.errstate(divide="ignore", invalid="ignore"):
            self.flat = (mm <= 0) | (self.q33 + mm**2 <= mm**2 / (1 - p) * (1 + 1e-9))

    def coefficients(self, alpha) -> np.ndarray:
        a = np.asarray(alpha, float)
        a_j = a / (a + (1 - a) * self.others)
        inv, mm, q22, q23, q33 = self.inv, self.mm, self.q22, self.q23, self.q33
        q11 = a_j * inv + (1 - a_j) * self.g1
        q12 = a_j * inv - (1 - a_j)
        q13 = (1 - a_j) * self.g - mm
        r1, r3 = a_j * inv, -a_j * mm
        # the symmetric 3 × 3 system by its adjugate (r2 = r1)
        c11 = self.c11
        c12 = q13 * q23 - q12 * q33
        c13 = q12 * q23 - q13 * q22
        c22 = q11 * q33 - q13 * q13
        c23 = q12 * q13 - q11 * q23
        c33 = q11 * q22 - q12 * q12
        det = q11 * c11 + q12 * c12 + q13 * c13
        # π_j equal over R_j \ {ŷ}: v ∝ u, Q singular — v dropped, the 2 × 2 system in (d1, u)
        det2 = c33
        flat = self.flat
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(det > 0, 1 / det, 0.0)
            scale2 = np.where(det2 > 0, 1 / det2, 0.0)
            out = np.stack([
                np.where(flat, (q22 - q12) * r1 * scale2,
                         ((c11 + c12) * r1 + c13 * r3) * scale),
                np.where(flat, (q11 - q12) * r1 * scale2,
                         ((c12 + c22) * r1 + c23 * r3) * scale),
                np.where(flat, 0.0, ((c13 + c23) * r1 + c33 * r3) * scale)], axis=-1)
        return np.where(np.isfinite(out), out, 0.0)


CHUNK = 1 << 15  # steps per block of the working-coefficient arithmetic (stays in cache)


def _model_terms(steps: DesignSteps, prior: float = 1.0, clip: float = 0.01, rates=None):
    """Per item (B, M, S) the terms Z_i = (1/D) Σ_j R_j (x − b_j·D)/ρ_j (module docstring),
    b_j the working
    coefficients (:func:`working_coefficients`) at the pilot α_(−i) = the other items'
    ordinary ratio (Σ_{l≠i} X_l + ½·prior)/(Σ_{l≠i} (1 + U_l) + prior) — the share of
    "yes" among their steps that asked ŷ, weighted by 1/π_j(ŷ), pulled towards ½ by
    ``prior`` items — clipped to [clip, 1 − clip]; and the item mask (B, M). α_(−i) does
    not depend on item i's answers, so E(Z_i) = c_i exactly."""
    if steps.rest is None or steps.inv_total is None:
        raise ValueError("coefficients='model' needs DesignSteps.rest and .inv_total "
                         "(design_steps fills them)")
    t = _step_terms(steps, rates)
    s = steps.systems
    has = t.has
    w = has.reshape(t.b, t.m, 1)
    many = t.count.reshape(t.b, t.m, 1)
    xs = t.item_mean(t.x_ipw).reshape(t.b, t.m, s) * w
    us = t.item_mean(np.where(t.ipw, t.d[:, 1] + 1, 0.0)).reshape(t.b, t.m, s) * w
    num = (xs * many).sum(axis=1, keepdims=True) - xs + 0.5 * prior
    den = (us * many).sum(axis=1, keepdims=True) - us + prior
    alpha = np.clip(num / den, clip, 1 - clip).reshape(t.b * t.m, s)[t.key]
    sel = t.ipw  # only the inverse-probability steps carry coefficients
    idx = np.nonzero(sel)
    rows = idx[0]
    z = t.x.copy()
    shift = np.empty(rows.size)
    for lo in range(0, rows.size, CHUNK):
        r, c = rows[lo:lo + CHUNK], idx[1][lo:lo + CHUNK]
        coef = working_coefficients(alpha[r, c], t.p_own[r, c], t.remaining[r], t.rest[r],
                                    t.inv_total[r])
        shift[lo:lo + CHUNK] = (coef * t.d[r, :, c]).sum(axis=-1)  # (q, 3) each
    z[idx] -= shift
    return (t.item_mean(z).reshape(t.b, t.m, s), has.reshape(t.b, t.m), _detectable(t),
            t.rate_correction(z).reshape(t.b, t.m, s), t.count.reshape(t.b, t.m))


def _detectable(t: _Steps) -> np.ndarray:
    """(B, S): Σ_i min(1, Σ_j r_ij), r_ij the chance that step j would reveal item i's
    error were the AI wrong — π_j(ŷ) (ŷ asked: "no") plus, where another class k_j was
    asked, π_j(k_j)/(1 − π_j(ŷ)) (an unbiased estimate of π_j(y) under the working law
    y ∝ π_j: a "yes" at another class); an exact step counts 1. The number of items whose
    errors the design can see: the cap of the effective count."""
    r = np.minimum(t.per_item(t.detect), 1.0).reshape(t.b, t.m, -1)
    return (r * t.count.reshape(t.b, t.m, 1)).sum(axis=1)


def _pinv(gram):
    """G⁺ and rank of stacked symmetric matrices (singular values below RCOND × the
    largest count as 0)."""
    vals, vecs = np.linalg.eigh(gram)
    top = np.abs(vals).max(axis=-1, keepdims=True)
    keep = vals > RCOND * np.where(top > 0, top, 1.0)
    inv_vals = np.where(keep, 1.0 / np.where(keep, vals, 1.0), 0.0)
    return (vecs * inv_vals[..., None, :]) @ np.swapaxes(vecs, -1, -2), keep.sum(axis=-1)


def _fit(x, d, mask, coefficients="loo", correction=None, count=None):
    """Â, SE, n, p, each item's term minus Â (B, M, S; 0 off the mask) and b̂ (B, S, 3)
    from item terms (module docstring); ``count`` (B, M): the items each index stands for
    (fixed coefficients only)."""
    w = mask.astype(float)[..., None]  # (B, M, 1)
    many = np.ones_like(w) if count is None else np.asarray(count, float)[..., None]
    n = (w * many).sum(axis=1)  # (B, 1)
    safe_n = np.where(n > 0, n, 1.0)
    p = np.zeros((x.shape[0], x.shape[2]), dtype=int)
    if isinstance(coefficients, str):
        if coefficients not in ("loo", "pooled"):
            raise ValueError(f"coefficients: unknown '{coefficients}' (loo, pooled or b)")
        if count is not None and not np.all(count[mask] == 1):
            raise ValueError(f"coefficients '{coefficients}': items counted more than once "
                             "need the model or fixed coefficients")
        # Z_i = (1, D_i) on the mask: (B, S, M, 4); X: (B, S, M, 1)
        zt = np.moveaxis(np.concatenate([np.ones_like(x)[:, :, None], d], axis=2)
                         * w[..., None], (1, 2), (2, 3))
        xt = np.moveaxis(x * w, 1, 2)[..., None]
        gram = np.swapaxes(zt, -1, -2) @ zt  # (B, S, 4, 4)
        inv, rank = _pinv(gram)
        p = np.maximum(rank - 1, 0)
        beta = inv @ (np.swapaxes(zt, -1, -2) @ xt)  # (B, S, 4, 1)
        coef = beta[..., 1:, 0]
        slope = zt[..., 1:] @ beta[..., 1:, :]  # b̂·D_i: (B, S, M, 1)
        terms = (xt - slope)[..., 0]
        if coefficients == "loo":
            g = zt @ inv  # (G⁺ z_i)ᵀ: (B, S, M, 4)
            h = (g * zt).sum(axis=-1)
            e = (xt - zt @ beta)[..., 0]
            regular = h < 1 - 1e-6
            lever = np.where(regular, e / np.where(regular, 1 - h, 1.0), 0.0)
            # b̂_(−i) = b̂ − [G⁺ z_i]_slope e_i/(1 − h_i) (Sherman–Morrison)
            terms = terms + (g[..., 1:] * zt[..., 1:]).sum(axis=-1) * lever
            single = ~regular & mask[:, None, :]
            if single.any():  # an item alone in a direction: refit without it
                bi, si, mi = np.nonzero(single)
                zi = zt[bi, si, mi]  # (q, 4)
                inv_i, _ = _pinv(gram[bi, si] - zi[:, :, None] * zi[:, None, :])
                rhs = (np.swapaxes(zt[bi, si], -1, -2) @ xt[bi, si])[..., 0] - zi * (
                    xt[bi, si, mi, 0][:, None])
                beta_i = (inv_i @ rhs[..., None])[..., 0]
                terms[bi, si, mi] = xt[bi, si, mi, 0] - (beta_i[:, 1:] * zi[:, 1:]).sum(-1)
        terms = np.moveaxis(terms, 2, 1)
    else:
        coef = np.broadcast_to(np.asarray(coefficients, float), (x.shape[0], x.shape[2], 3))
        terms = x - (d * np.moveaxis(coef, 1, 2)[:, None]).sum(axis=2)
    acc = (terms * w * many).sum(axis=1) / safe_n
    cx, cd = correction if correction is not None else (None, None)
    if cx is not None and (cx.any() or cd.any()):  # the estimated rates' share (residuals)
        terms = terms + cx - (cd * np.moveaxis(coef, 1, 2)[:, None]).sum(axis=2)
    resid = (terms - acc[:, None]) * w
    ss = (resid**2 * many).sum(axis=1)
    pooled = isinstance(coefficients, str) and coefficients == "pooled"
    dof = np.maximum(n - 1 - (p if pooled else 0), 1)
    se = np.sqrt(ss / dof / safe_n)
    return acc, se, np.broadcast_to(n, acc.shape), p, resid, coef


def _wilson(x, n, z):
    with np.errstate(divide="ignore", invalid="ignore"):
        ph = x / n
        mid = (ph + z**2 / (2 * n)) / (1 + z**2 / n)
        half = z / (1 + z**2 / n) * np.sqrt(ph * (1 - ph) / n + z**2 / (4 * n**2))
    return mid - half, mid + half


def _clopper_pearson(x, n, alpha):
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.where(x > 0, stats.beta.ppf(alpha / 2, x, n - x + 1), 0.0)
        hi = np.where(x < n, stats.beta.ppf(1 - alpha / 2, x + 1, n - x), 1.0)
    return lo, hi


def effective_count(acc, se, n):
    """n_eff = ã(1 − ã)/SE², ã = Â clipped to [1/(2n), 1 − 1/(2n)], capped at n (n where
    SE = 0); and ã."""
    safe_n = np.where(n >= 1, n, 1.0)
    a = np.clip(acc, 0.5 / safe_n, 1 - 0.5 / safe_n)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(se > 0, a * (1 - a) / np.where(se > 0, se, 1.0) ** 2, safe_n)
    return np.minimum(n_eff, safe_n), a


def interval(acc, se, n, p, confidence: float = 0.95, method: str = "clopper_pearson",
             cap=None):
    """The ``confidence`` interval of ``method`` (module docstring), clipped to [0, 1];
    ``cap``: the largest effective count (default n)."""
    if method not in INTERVALS:
        raise ValueError(f"interval: unknown '{method}' (one of {', '.join(INTERVALS)})")
    alpha = 1 - confidence
    if method in ("wald", "t"):
        q = (stats.norm.ppf(1 - alpha / 2) if method == "wald"
             else stats.t.ppf(1 - alpha / 2, np.maximum(n - 1 - p, 1)))
        lo, hi = acc - q * se, acc + q * se
    else:
        n_eff, a = effective_count(acc, se, n if cap is None else cap)
        x = np.clip(acc, 0, 1) * n_eff
        if method == "wilson":
            lo, hi = _wilson(x, n_eff, stats.norm.ppf(1 - alpha / 2))
        elif method == "jeffreys":
            lo = np.where(x > 0, stats.beta.ppf(alpha / 2, x + 0.5, n_eff - x + 0.5), 0.0)
            hi = np.where(x < n_eff, stats.beta.ppf(1 - alpha / 2, x + 0.5, n_eff - x + 0.5),
                          1.0)
        else:
            lo, hi = _clopper_pearson(x, n_eff, alpha)
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def approximate(resid, n, se, acc, count=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flag, decisive events, largest share): an interval is **approximate** where it
    rests on fewer than ``APPROXIMATE_EVENTS`` decisive events — min(n_eff·ã, n_eff·(1 −
    ã)), the binomial events its width stands for (``n``: the effective count's cap) — or
    where one item carries more than ``MAX_SHARE`` of the residual sum of squares (a heavy
    inverse-probability weight dominating the SE). ``count`` (B, M): the items each row of
    ``resid`` stands for (default 1)."""
    n_eff, a = effective_count(acc, se, n)
    events = np.minimum(n_eff * a, n_eff * (1 - a))
    many = 1.0 if count is None else np.asarray(count, float)[..., None]
    ss = (resid**2 * many).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(ss > 0, (resid**2).max(axis=1) / np.where(ss > 0, ss, 1.0), 0.0)
    return (events < APPROXIMATE_EVENTS) | (share > MAX_SHARE), events, share


def design_estimates(steps: DesignSteps, confidence: float = 0.95,
                     interval_methods=INTERVALS, coefficients="model",
                     diagnostics: bool = False, rates=None):
    """:func:`design_estimate` for several interval methods from one fit: {method:
    Estimate} (the coverage tables compare them on the same draws); with ``diagnostics``
    also {"events", "share", "cap", "n"} arrays (..., S): the decisive events, the largest
    item's share of the residual sum of squares, the detectable items, the items.
    ``rates``: known missing rates u_l, (P,) or (…, P) (default: estimated,
    :func:`missing_rates`)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: must be in (0, 1), got {confidence}")
    if isinstance(coefficients, str) and coefficients == "model":
        z, mask, cap, cz, many = _model_terms(steps, rates=rates)
        zero_d = np.zeros((*z.shape[:2], 3, z.shape[2]))
        acc, se, n, p, resid, coef = _fit(z, zero_d, mask, np.zeros(3), (cz, zero_d), many)
        coef = np.full(coef.shape, np.nan)  # per step: no single b̂
    else:
        t = _step_terms(steps, rates)
        many = t.count.reshape(t.b, t.m)
        x, d, mask, cx, cd = _item_terms(t, steps.systems)
        acc, se, n, p, resid, coef = _fit(x, d, mask, coefficients, (cx, cd), many)
        cap = _detectable(t)
    cap = np.minimum(cap, n)
    flag, events, share = approximate(resid, cap, se, acc, many)
    no_data = n <= 0
    shape = (*steps.stack_shape, steps.systems)
    clipped = np.clip(acc, 0.0, 1.0)
    valid = steps.valid
    k = int((steps.remaining + steps.step)[valid].max()) if valid.any() else 0

    def out(v, fill):
        return np.where(no_data, fill, v).reshape(shape)

    found = {}
    for method in interval_methods:
        lo, hi = interval(acc, se, n, p, confidence, method, cap)
        found[method] = Estimate(
            method="design", k=k, confidence=confidence,
            accuracy=out(acc, NO_DATA_ACCURACY), accuracy_clipped=out(clipped, NO_DATA_ACCURACY),
            se=out(se, NO_DATA_SE), ci_low=out(np.minimum(lo, clipped), 0.0),
            ci_high=out(np.maximum(hi, clipped), 1.0), weight=coef.reshape(*shape, 3),
            bound=None, events=out(events, np.inf), approximate=out(flag, False))
    if diagnostics:
        return found, {"events": out(events, np.inf), "share": out(share, 0.0),
                       "cap": out(cap, 0.0), "n": out(n, 0.0)}
    return found


def design_estimate(steps: DesignSteps, confidence: float = 0.95,
                    interval_method: str = "clopper_pearson", coefficients="model",
                    rates=None) -> Estimate:
    """Each system's accuracy from the answered steps of a routing design (module
    docstring): ``Estimate`` (method "design") with arrays of shape (..., S) over the
    stack. ``coefficients``: "loo" (default: each item's b̂ fitted without it, so E[Â] =
    the items' mean c exactly), "pooled" (one b̂ from every item: bias O(1/n)) or a fixed
    b, (3,) or (B, S, 3) (b = 0: the plain inverse-probability mean). A system with no
    item gets the no-data convention (0.5, √(1/12), [0, 1]); ``weight`` holds b̂ (..., S,
    3) (NaN for "model": its b is per step), ``events`` the decisive events and
    ``approximate`` the flag of :func:`approximate`; ``k`` is K. ``rates``: known
    missing rates u_l (default: estimated, :func:`missing_rates`)."""
    return design_estimates(steps, confidence, (interval_method,), coefficients,
                            rates=rates)[interval_method]


__all__ = ["INTERVALS", "NO", "UNSURE", "YES", "DesignSteps", "approximate", "design_estimate",
           "design_estimates", "design_steps", "effective_count", "interval", "item_terms",
           "missing_rates", "working_coefficients"]
