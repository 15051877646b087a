"""Intervals clustered by question and annotator (estimators/numerics/crossed.py): the
two-way variance against a loop over its definition, reduction to the question-clustered
intervals without annotators, the floor, the degrees of freedom."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from estimators.numerics import crossed as xc
from estimators.numerics.clustered import (
    clustered_difference,
    clustered_mean,
    clustered_proportion,
)


def _data(seed=0, m=300, cells=3, questions=25, annotators=6):
    rng = np.random.default_rng(seed)
    cell = rng.integers(0, cells, m)
    question = rng.integers(0, questions, m)
    who = rng.integers(0, annotators, m)
    skill = rng.normal(0, 1, annotators)
    s = (rng.random(m) < 1 / (1 + np.exp(-(0.3 + skill[who])))).astype(float)
    return cell, question, who, np.ones(m), s


def _per_question(cell, question, values, cells, questions):
    out = np.zeros((questions, cells))
    np.add.at(out, (question, cell), values)
    return out


def test_without_annotators_the_intervals_are_the_question_clustered_ones():
    cell, question, _, n, s = _data()
    c = xc.crossed_totals(n, s, cell, question, 3)
    nq, sq = (_per_question(cell, question, v, 3, 25) for v in (n, s))
    one, ref = xc.crossed_proportion(c), clustered_proportion(nq, sq)
    assert np.allclose(one.lower, ref.lower) and np.allclose(one.upper, ref.upper)
    x = s * 2.5 + question * 0.1
    mean, ref_mean = xc.crossed_mean(xc.crossed_totals(n, x, cell, question, 3)), clustered_mean(
        nq, _per_question(cell, question, x, 3, 25))
    assert np.allclose(mean.lower, ref_mean.lower) and np.allclose(mean.upper, ref_mean.upper)
    s2 = (np.arange(len(s)) % 3 == 0).astype(float)
    b = xc.crossed_totals(n, s2, cell, question, 3)
    empty = xc.Links(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    d = xc.crossed_difference(c, b, xc.crossed_covariance(c, b, cell, question, 3, empty, empty))
    ref_d = clustered_difference(nq, sq, nq, _per_question(cell, question, s2, 3, 25))
    assert np.allclose(d.lower, ref_d.lower) and np.allclose(d.upper, ref_d.upper)


def test_two_way_variance_is_its_definition():
    cell, question, who, n, s = _data(seed=3)
    c = xc.crossed_totals(n, s, cell, question, 3, own_links=(np.arange(len(s)), who))
    for k in range(3):
        at = cell == k
        p = s[at].sum() / n[at].sum()
        r = s[at] - p * n[at]
        qs, ws = question[at], who[at]
        g_q, g_a = len(set(qs)), len(set(ws))
        v_q = g_q / (g_q - 1) * sum(r[qs == q].sum() ** 2 for q in set(qs)) / n[at].sum() ** 2
        cross = (sum(r[ws == a].sum() ** 2 for a in set(ws))
                 - sum(r[(ws == a) & (qs == q)].sum() ** 2 for a in set(ws) for q in set(qs)))
        v_a = max(0.0, g_a / (g_a - 1) * cross) / n[at].sum() ** 2
        assert c.v_question[k] == pytest.approx(v_q)
        assert c.v_annotator[k] == pytest.approx(v_a)
        assert (c.g_question[k], c.g_annotator[k]) == (g_q, g_a)
        # Satterthwaite, capped at annotators − 1 when annotators add anything
        sat = (v_q + v_a) ** 2 / (v_q ** 2 / (g_q - 1) + v_a ** 2 / (g_a - 1))
        assert c.df()[k] == pytest.approx(min(sat, g_a - 1) if v_a > 0 else g_q - 1)


def test_the_interval_is_wilson_at_the_two_way_effective_size():
    cell, question, who, n, s = _data(seed=5)
    c = xc.crossed_totals(n, s, cell, question, 3, own_links=(np.arange(len(s)), who))
    ci = xc.crossed_proportion(c)
    for k in range(3):
        p, v = c.value[k], c.variance[k]
        n_eff = p * (1 - p) / v
        t = stats.t.ppf(0.975, c.df()[k])
        centre = (p + t * t / (2 * n_eff)) / (1 + t * t / n_eff)
        half = t / (1 + t * t / n_eff) * np.sqrt(p * (1 - p) / n_eff + t * t / (4 * n_eff ** 2))
        assert (ci.lower[k], ci.upper[k]) == pytest.approx((centre - half, centre + half))


def test_annotators_never_narrow_an_interval():
    # annotators whose residuals cancel across questions: the annotator part is floored
    question = np.repeat(np.arange(20), 2)
    who = np.tile([0, 1], 20)
    s = np.tile([1.0, 0.0], 20)
    s[::4], s[1::4] = 0.0, 1.0
    n = np.ones(40)
    cell = np.zeros(40, dtype=np.int64)
    with_ann = xc.crossed_totals(n, s, cell, question, 1, own_links=(np.arange(40), who))
    alone = xc.crossed_totals(n, s, cell, question, 1)
    assert with_ann.v_annotator[0] == 0
    assert xc.crossed_proportion(with_ann).lower[0] == xc.crossed_proportion(alone).lower[0]
