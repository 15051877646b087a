"""The critique simulator: the paper's sampling tree, its modes, and the planted choice
behaviour — recovered exactly by the input-pair table (Table 5)."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

from estimators.critique import critique_report
from estimators.critique.simulation import CritiqueDesign, simulate_critique


@pytest.mark.parametrize(("changes", "message"), [
    ({"counts": (7, 1, 1)}, "counts: every level below the top needs ≥ 2"),
    ({"accuracy": (0.5, 0.6)}, r"accuracy: one value per level \(4\)"),
    ({"accuracy": (0.5, 1.0, 0.7, 0.8)}, r"accuracy\[1\]: must lie strictly in \(0, 1\)"),
    ({"spread": 0.45}, r"spread: 0.45 is too large for accuracy\[2\] = 0.72"),
    ({"mode": "mixed"}, "mode: one of"),
    ({"mode": "human_ai"}, "ai_accuracy: one value per level"),
    ({"confidence": (0.5, 3, 3, 3)}, r"confidence: means in \[1, 5\]"),
    ({"neither_rate": 1.5}, r"neither_rate: must lie in \[0, 1\]"),
    ({"n_questions": 0}, "n_questions"),
])
def test_impossible_designs_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        simulate_critique(CritiqueDesign(**changes), seed=1)


def test_the_sampling_tree_is_the_papers():
    sim = simulate_critique(CritiqueDesign(n_questions=6), seed=2)
    questions, outputs = sim.records
    per_level = Counter((o.question, o.level) for o in outputs)
    assert per_level == {(q.id, lv): c for q in questions
                         for lv, c in enumerate((7, 5, 3, 1))}
    by_question_level = defaultdict(list)
    for o in outputs:
        by_question_level[(o.question, o.level)].append(o)
    for (q, lv), group in by_question_level.items():
        if lv == 0:
            continue
        first_two = sorted(o.id for o in by_question_level[(q, lv - 1)])[:2]
        # every critique compares the first two outputs of the level below
        assert all(sorted((o.parent_a, o.parent_b)) == first_two for o in group)
    assert [o.level for o in outputs] == sorted(o.level for o in outputs)
    assert {o.author for o in outputs} == {"human"}


def test_human_ai_mode_puts_humans_beside_the_ai_chain():
    design = CritiqueDesign(n_questions=5, counts=(4, 3, 2), accuracy=(0.4, 0.5, 0.6),
                            ai_accuracy=(0.6, 0.6, 0.6), human_counts=(2, 1, 3),
                            confidence=(3, 3, 3), minutes=(5, 5, 5), mode="human_ai")
    _, outputs = simulate_critique(design, seed=3).records
    by_id = {o.id: o for o in outputs}
    counts = Counter((o.author, o.level) for o in outputs)
    assert counts == {("ai", 0): 20, ("ai", 1): 15, ("ai", 2): 10,
                      ("human", 0): 10, ("human", 1): 5, ("human", 2): 15}
    parents = {p for o in outputs for p in (o.parent_a, o.parent_b) if p is not None}
    assert all(by_id[p].author == "ai" for p in parents)  # humans never feed the chain


def test_unparsed_outputs_are_wrong_ones_and_gold_share_is_honoured():
    design = CritiqueDesign(n_questions=400, unparsed_rate=0.5, gold_share=0.25)
    sim = simulate_critique(design, seed=4)
    questions, outputs = sim.records
    assert sum(q.gold is not None for q in questions) == 100
    study = sim.study
    gold = study.gold[study.output_question]
    scored = gold >= 0
    for lv, count in enumerate(design.counts):
        at = study.level == lv
        # a share unparsed_rate of the wrong outputs (1 − accuracy) is unparseable
        expected = design.unparsed_rate * (1 - design.accuracy[lv])
        share = (study.final[at] < 0).mean()
        sd = np.sqrt(expected * (1 - expected) / at.sum()) * np.sqrt(count)  # clustered
        assert abs(share - expected) < 4 * sd, (lv, share, expected)
        # and the accuracy (unparseable = wrong) is still the planted one
        right = (study.final == gold)[at & scored].mean()
        assert abs(right - design.accuracy[lv]) < 0.1


def test_simulation_is_deterministic_given_the_seed():
    a = simulate_critique(CritiqueDesign(n_questions=20), seed=5).records
    b = simulate_critique(CritiqueDesign(n_questions=20), seed=5).records
    c = simulate_critique(CritiqueDesign(n_questions=20), seed=6).records
    assert a == b and a != c


def test_input_pair_table_recovers_the_planted_choice_behaviour():
    # spread 0: every question has the planted accuracies, so the conditional rates are
    # r_k = p_l + w (k/2 − p_{l−1}) with w = 0.5 (unclipped here), and the picks follow
    nu, w = 0.2, 0.5
    design = CritiqueDesign(n_questions=1500, counts=(4, 6, 4), accuracy=(0.5, 0.6, 0.7),
                            confidence=(3, 3, 3), minutes=(5, 5, 5), spread=0.0,
                            neither_rate=nu, input_weight=w)
    report = critique_report(simulate_critique(design, seed=7).study, seed=1,
                             interval_level=0.9999)
    rows = [r for r in report.input_pairs if r.domain is None]
    assert {(r.level, r.inputs) for r in rows} == {
        (lv, k) for lv in (1, 2) for k in ("both_correct", "one_correct", "both_wrong")}
    for r in rows:
        p, pi = design.accuracy[r.level], design.accuracy[r.level - 1]
        k = {"both_wrong": 0, "one_correct": 1, "both_correct": 2}[r.inputs]
        rate = p + w * (k / 2 - pi)
        assert r.accuracy.lower <= rate <= r.accuracy.upper, r
        # "neither": a right critique with a right input says it w.p. ν; a wrong one
        # that cannot follow a wrong input (both right) always does; both wrong: right
        # critiques always, wrong ones w.p. ν
        neither = {2: rate * nu + (1 - rate), 1: nu, 0: rate + (1 - rate) * nu}[k]
        assert r.picked_neither.lower <= neither <= r.picked_neither.upper, r
        if k == 1:
            assert r.picked_correct.lower <= rate * (1 - nu) <= r.picked_correct.upper, r
            assert r.picked_wrong.lower <= (1 - rate) * (1 - nu) <= r.picked_wrong.upper, r
    shares = np.array([r.share for r in rows if r.level == 1])
    assert shares.sum() == pytest.approx(1.0)
