"""What each annotator contributes to a critique figure (estimators/critique/influence.py)
and the voters' pivots (votes.pivots): the chain's pieces add up to the output's residual,
the slopes are least squares, the pivots are the vote's change by brute force."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.critique.influence import Chain, input_slopes, output_links
from estimators.critique.simulation import CritiqueDesign, simulate_critique
from estimators.critique.votes import pivots


def _chain(seed=0):
    sim = simulate_critique(CritiqueDesign(n_questions=30, n_annotators=9), seed=seed)
    study = sim.study
    y = (study.final == study.gold[study.output_question]).astype(float)
    n_lv = study.top_level + 1
    slopes = input_slopes(study.level, y.astype(bool), np.ones(study.n_outputs, bool),
                          study.chains.parents, np.zeros(study.n_outputs, np.int64), 1,
                          n_lv)[0]
    acc = np.array([y[study.level == lv].mean() for lv in range(n_lv)])
    residual = y - acc[study.level]
    return study, y, slopes, Chain.build(study.level, study.annotator, study.chains.ancestors,
                                         slopes[study.level], residual)


def test_slopes_are_least_squares_on_the_share_of_right_inputs():
    study, y, slopes, _ = _chain()
    for lv in range(1, study.top_level + 1):
        rows = np.flatnonzero(study.level == lv)
        x = y[study.chains.parents[rows]].mean(axis=1)
        assert slopes[lv] == pytest.approx(np.clip(np.polyfit(x, y[rows], 1)[0], -1, 1))
    assert slopes[0] == 0


def test_the_chain_pieces_add_up_to_the_outputs_residual():
    # r_o = e_o + Σ_j c_{l,j} Σ_{chain pair at j} e_a, exactly (every output has an author)
    study, _, _, chain = _chain(seed=2)
    rows = np.arange(study.n_outputs)
    links = output_links(rows, chain.residual, chain)
    total = np.bincount(links.obs, weights=links.piece, minlength=rows.size)
    assert np.allclose(total, chain.residual)
    top = np.flatnonzero(study.level == study.top_level)[0]
    linked = set(links.annotator[links.obs == top].tolist())
    chain_authors = {int(study.annotator[top])} | set(
        study.annotator[study.chains.ancestors[top][study.chains.ancestors[top] >= 0]].tolist())
    assert linked == chain_authors  # its author and the 2 authors of each lower level


def _gold_wins(finals, gold, k):
    counts = np.bincount([f for f in finals if f >= 0], minlength=k)
    best = counts.max()
    return 0.0 if best == 0 or counts[gold] < best else 1 / (counts == best).sum()


def test_pivots_are_the_votes_change_by_brute_force():
    rng = np.random.default_rng(7)
    finals = rng.integers(-1, 4, (300, 5))
    gold = rng.integers(0, 4, 300)
    delta = pivots(finals, gold)
    for m in range(300):
        for i in range(5):
            if finals[m, i] < 0:
                assert delta[m, i] == 0
                continue
            others = [f for j, f in enumerate(finals[m]) if j != i]
            wrong = np.bincount([f for f in others if f >= 0 and f != gold[m]], minlength=6)
            worst = int(np.argmax(wrong)) if wrong.max() > 0 else 5  # a new wrong option
            right = _gold_wins(others + [gold[m]], gold[m], 6)
            bad = _gold_wins(others + [worst], gold[m], 6)
            assert delta[m, i] == pytest.approx(right - bad), (finals[m], gold[m], i)
