"""Recursive critique (METHODS.md M3): the effort-matched and naive baselines against a
hand-built tree and a loop-by-loop reference, the tables against explicit counts, and the
planted accuracies of simulated studies (known truth, brute-force majority probabilities)."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections import Counter, defaultdict

import numpy as np
import pytest
from scipy import stats

from estimators.critique import (
    CritiqueStudy,
    OutputRecord,
    QuestionRecord,
    clustered_proportion,
    critique_report,
    effort,
    effort_matched_votes,
    majority,
    naive_votes,
    voters,
)
from estimators.critique.simulation import CritiqueDesign, simulate_critique
from estimators.critique.votes import tie_uniforms


def output(oid, question, level, parents=(None, None), final=None, choice=None, author="human",
      confidence=3, time_ms=60_000):
    return OutputRecord(oid, question, level, parents[0], parents[1], final, choice,
                        confidence, time_ms, author)


# A hand-built question (gold 0) whose ids are deliberately NOT in chain order, with two
# sibling groups of C¹, an AI response and an AI critique, an unparseable C¹ and a C² group
# too small for its effort-matched vote. Question 2 (no gold) is a minimal chain.
HAND_QUESTIONS = [QuestionRecord(1, 0, "math"), QuestionRecord(2, None, "english")]
HAND_OUTPUTS = [
    # responses of question 1: id → final
    output(50, 1, 0, final=0), output(10, 1, 0, final=1), output(30, 1, 0, final=0), output(20, 1, 0, final=2),
    output(40, 1, 0, final=0, author="ai"), output(60, 1, 0, final=1), output(70, 1, 0, final=1),
    output(80, 1, 0, final=0),
    # C¹ group A on (50, 30) — 5 critiques; 202 is the AI's and unparseable
    output(205, 1, 1, (50, 30), final=0, choice=0), output(201, 1, 1, (30, 50), final=1, choice=None),
    output(203, 1, 1, (50, 30), final=1, choice=None),
    output(202, 1, 1, (50, 30), final=None, choice=None, author="ai"),
    output(204, 1, 1, (50, 30), final=1, choice=None),
    # C¹ group B on (10, 20) — 2 critiques
    output(209, 1, 1, (10, 20), final=2, choice=1), output(208, 1, 1, (20, 10), final=2, choice=0),
    # C² on (205, 203) — 3; C² on group B (208, 209) — 1
    output(303, 1, 2, (205, 203), final=0, choice=0), output(301, 1, 2, (203, 205), final=0, choice=1),
    output(302, 1, 2, (205, 203), final=1, choice=1),
    output(310, 1, 2, (208, 209), final=2, choice=None),
    # C³ on (303, 302)
    output(400, 1, 3, (303, 302), final=0, choice=0),
    # question 2: 3 responses, 1 C¹
    output(500, 2, 0, final=1), output(501, 2, 0, final=1), output(502, 2, 0, final=0),
    output(510, 2, 1, (500, 501), final=1, choice=0),
]


@pytest.fixture(scope="module")
def hand():
    return CritiqueStudy.from_records(HAND_QUESTIONS, HAND_OUTPUTS)


def test_effort_is_two_per_level_plus_one_and_voters_match_it():
    assert [effort(lv) for lv in range(5)] == [1, 3, 5, 7, 9]
    # C³ ↔ 3 C², 5 C¹, 7 R; C² ↔ 3 C¹, 5 R; C¹ ↔ 3 R (paper §2.2)
    assert [voters(3, j) for j in (2, 1, 0)] == [3, 5, 7]
    assert [voters(2, j) for j in (1, 0)] == [3, 5]
    assert voters(1, 0) == 3
    for t, j in itertools.product(range(1, 5), range(4)):
        if j < t:
            # k level-j outputs sharing their lower levels cost 2j + k = E(Cᵗ)
            assert 2 * j + voters(t, j) == effort(t)
    with pytest.raises(ValueError):
        voters(2, 2)


@pytest.mark.parametrize(("anchor", "level", "expected"), [
    (201, 0, (30, 50, 10)),            # its pair (by id), then the lowest other response
    (205, 0, (30, 50, 10)),
    (208, 0, (10, 20, 30)),            # group B's pair first
    (301, 1, (203, 205, 201)),         # only group A's C¹ are eligible
    (301, 0, (30, 50, 10, 20, 40)),
    (400, 2, (302, 303, 301)),         # 310 is a C² of another pair: not eligible
    (400, 1, (203, 205, 201, 202, 204)),
    (400, 0, (30, 50, 10, 20, 40, 60, 70)),
    (310, 0, (10, 20, 30, 40, 50)),
    (510, 0, (500, 501, 502)),
])
def test_effort_matched_vote_uses_exactly_the_outputs_its_rule_names(hand, anchor, level,
                                                                     expected):
    # given the hand-built tree, when the votes are built
    votes = effort_matched_votes(hand, seed=7)
    # then each uses exactly the hand-listed voters, in rule order
    assert votes.members_of(anchor, level) == expected
    row = np.flatnonzero((votes.anchor == anchor) & (votes.voted_level == level))[0]
    assert votes.complete[row]


def test_every_critique_gets_one_vote_per_lower_level(hand):
    votes = effort_matched_votes(hand, seed=7)
    per_anchor = Counter(votes.anchor.tolist())
    levels = {o.id: o.level for o in HAND_OUTPUTS}
    assert per_anchor == {o: lv for o, lv in levels.items() if lv > 0}


def test_too_few_eligible_outputs_make_an_incomplete_vote_that_is_not_scored(hand):
    votes = effort_matched_votes(hand, seed=7)
    row = np.flatnonzero((votes.anchor == 310) & (votes.voted_level == 1))[0]
    # group B holds 2 C¹, the vote needs 3: reported with what exists, never scored
    assert not votes.complete[row]
    assert votes.members_of(310, 1) == (208, 209)
    assert votes.result[row] == -1 and votes.correct[row] == -1
    report = critique_report(hand, seed=7)
    c1 = next(r for r in report.levels if r.domain is None and r.level == 1)
    cell = next(m for m in c1.majority if m.target_level == 2)
    assert cell.n_incomplete == 1 and cell.n_votes == 3  # 301, 302, 303


def test_votes_count_parseable_finals_and_break_ties_among_the_tied_options(hand):
    votes = effort_matched_votes(hand, seed=7)

    def vote(anchor, level):
        i = np.flatnonzero((votes.anchor == anchor) & (votes.voted_level == level))[0]
        return int(votes.result[i]), bool(votes.tied[i]), int(votes.correct[i])

    assert vote(201, 0) == (0, False, 1)          # 0, 0, 1
    assert vote(301, 1) == (1, False, 0)          # 1, 0, 1
    assert vote(400, 1) == (1, False, 0)          # 1, 0, 1, None (202 unparseable), 1
    assert vote(400, 2) == (0, False, 1)          # 1, 0, 0
    result, tied, _ = vote(208, 0)                # 1, 2, 0: a three-way tie
    assert tied and result in (0, 1, 2)
    result, tied, _ = vote(400, 0)                # 0 ×3, 1 ×3, 2 ×1
    assert tied and result in (0, 1)
    assert vote(510, 0)[2] == -1                  # question 2 has no gold


def test_author_filter_restricts_anchors_and_voters(hand):
    human = effort_matched_votes(hand, seed=7, author="human")
    assert 202 not in human.anchor                                    # the AI's C¹
    assert human.members_of(400, 0) == (30, 50, 10, 20, 60, 70, 80)  # without AI's 40
    i = np.flatnonzero((human.anchor == 400) & (human.voted_level == 1))[0]
    assert not human.complete[i]                                      # 4 human C¹ in A
    assert human.members_of(400, 1) == (203, 205, 201, 204)
    ai = effort_matched_votes(hand, seed=7, author="ai")
    assert ai.anchor.tolist() == [202]
    assert ai.members_of(202, 0) == (40,) and not ai.complete[0]
    with pytest.raises(ValueError, match="author"):
        effort_matched_votes(hand, author="robot")


def test_naive_vote_uses_the_whole_chain_below(hand):
    votes = naive_votes(hand, seed=7)
    assert votes.members_of(201) == (30, 50)
    assert votes.members_of(301) == (30, 50, 203, 205)
    assert votes.members_of(400) == (30, 50, 203, 205, 302, 303)
    assert votes.members_of(310) == (10, 20, 208, 209)
    i = np.flatnonzero(votes.anchor == 400)[0]
    # finals 0, 0, 1, 0, 1, 0 → 0
    assert votes.result[i] == 0 and votes.correct[i] == 1
    # a human critique of an AI chain still votes over that chain
    ai_chain = naive_votes(hand, seed=7, author="ai")
    assert ai_chain.members_of(202) == (30, 50)


def _brute_majority(row, u):
    votes = Counter(int(f) for f in row if f >= 0)
    if not votes:
        return -1, False
    best = max(votes.values())
    tied = sorted(o for o, c in votes.items() if c == best)
    return tied[min(int(u * len(tied)), len(tied) - 1)], len(tied) > 1


def test_majority_against_brute_force_on_random_votes():
    rng = np.random.default_rng(3)
    finals = rng.integers(-1, 4, size=(3000, 7))
    finals[:50] = -1
    u = rng.random(3000)
    result, tied = majority(finals, u)
    for row, ui, r, t in zip(finals, u, result, tied, strict=True):
        assert (int(r), bool(t)) == _brute_majority(row, ui)


def test_tie_draws_are_seeded_uniform_and_depend_only_on_the_voters():
    ids = np.arange(3 * 40_000).reshape(-1, 3)
    u = tie_uniforms(11, ids)
    assert np.array_equal(u, tie_uniforms(11, ids))
    assert not np.array_equal(u, tie_uniforms(12, ids))
    assert np.array_equal(tie_uniforms(11, ids[5:9]), u[5:9])  # no dependence on other rows
    padded = np.hstack([ids, np.full((len(ids), 4), -1)])
    assert np.array_equal(tie_uniforms(11, padded), u)  # nor on the padding (study's L)
    # a three-way tie resolves to each option with probability 1/3
    ties = np.tile([0, 1, 2], (len(ids), 1))
    result, tied = majority(ties, u)
    assert tied.all()
    counts = np.bincount(result, minlength=3)
    assert stats.chisquare(counts).pvalue > 1e-3
    assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_new_outputs_elsewhere_never_change_an_existing_vote():
    sim = simulate_critique(CritiqueDesign(n_questions=30, counts=(7, 5, 3),
                                           accuracy=(0.4, 0.5, 0.6), confidence=(3, 3, 3),
                                           minutes=(9, 9, 9), unparsed_rate=0.3), seed=3)
    questions, outputs = sim.records
    before = effort_matched_votes(sim.study, seed=5)
    assert before.tied.any()
    # the study grows: a C³ on question 0 (so L becomes 3) and a new question
    c2 = sorted(o.id for o in outputs if o.question == 0 and o.level == 2)[:2]
    grown = CritiqueStudy.from_records(
        questions + [QuestionRecord(99, 1, "math")],
        outputs + [output(10_000, 0, 3, tuple(c2), final=0, choice=0),
                   output(10_001, 99, 0, final=1), output(10_002, 99, 0, final=0)])
    after = effort_matched_votes(grown, seed=5)
    for i in range(len(before)):
        key = (int(before.anchor[i]), int(before.voted_level[i]))
        j = np.flatnonzero((after.anchor == key[0]) & (after.voted_level == key[1]))[0]
        assert before.members_of(*key) == after.members_of(*key)
        assert before.result[i] == after.result[j]


def _reference_votes(questions, outputs, seed, author):
    """The rule of estimators.critique.votes written out with dicts and loops."""
    by_id = {o.id: o for o in outputs}
    gold = {q.id: q.gold for q in questions}

    def ok(o):
        return author is None or o.author == author

    def pair_at(o, j):
        pair = (o.parent_a, o.parent_b)
        for _ in range(o.level - 1 - j):
            first = by_id[pair[0]]
            pair = (first.parent_a, first.parent_b)
        return tuple(sorted(pair))

    def siblings(o):
        if o.level == 0:
            return ("q", o.question, o.tree)
        return tuple(sorted((o.parent_a, o.parent_b)))

    out = {}
    for c in outputs:
        if c.level == 0 or not ok(c):
            continue
        for j in range(c.level):
            n = 2 * (c.level - j) + 1
            pair = pair_at(c, j)
            key = siblings(by_id[pair[0]])
            eligible = sorted(o.id for o in outputs
                              if o.level == j and o.question == c.question
                              and siblings(o) == key and ok(o))
            chosen = [p for p in pair if p in eligible]
            chosen += [o for o in eligible if o not in pair][:n - len(chosen)]
            complete = len(chosen) == n
            padded = np.full((1, 2 * c.level + 1), -1)
            padded[0, :len(chosen)] = chosen
            finals = [-1 if by_id[i].final is None else by_id[i].final for i in chosen]
            u = tie_uniforms(seed, padded)[0]
            result, _ = _brute_majority(finals, u) if complete else (-1, False)
            g = gold[c.question]
            correct = -1 if g is None or not complete else int(result == g)
            out[(c.id, j)] = (tuple(chosen), complete, result, correct)
    return out


def _relabelled(sim, rng):
    """The simulated study with ids permuted (so chain order ≠ id order) and random authors."""
    questions, outputs = sim.records
    new = dict(zip([o.id for o in outputs],
                   (rng.permutation(len(outputs)) * 3 + 1000).tolist(), strict=True))

    def m(x):
        return None if x is None else new[x]

    return questions, [o._replace(id=new[o.id], parent_a=m(o.parent_a), parent_b=m(o.parent_b),
                                  author="ai" if rng.random() < 0.3 else "human")
                       for o in outputs]


@pytest.mark.parametrize(("author", "counts"), [
    (None, (7, 5, 3, 2)), ("human", (7, 5, 3, 2)), ("ai", (7, 5, 3, 2)),
    (None, (9, 7, 5, 3, 2)), ("human", (3, 2)), (None, (4, 2, 3, 2)),
])
def test_effort_matched_votes_match_a_loop_by_loop_reference(author, counts):
    rng = np.random.default_rng(5)
    n_lv = len(counts)
    design = CritiqueDesign(n_questions=12, counts=counts, unparsed_rate=0.2, gold_share=0.75,
                            accuracy=(0.5,) * n_lv, confidence=(3,) * n_lv, minutes=(9,) * n_lv)
    questions, outputs = _relabelled(simulate_critique(design, seed=1), rng)
    study = CritiqueStudy.from_records(questions, outputs)
    votes = effort_matched_votes(study, seed=9, author=author)
    expected = _reference_votes(questions, outputs, 9, author)
    assert len(votes) == len(expected)
    for i in range(len(votes)):
        key = (int(votes.anchor[i]), int(votes.voted_level[i]))
        chosen, complete, result, correct = expected[key]
        assert votes.members_of(*key) == chosen
        assert (bool(votes.complete[i]), int(votes.result[i]), int(votes.correct[i])) == (
            complete, result, correct)


def test_level_accuracy_confidence_and_time_equal_explicit_counts():
    rng = np.random.default_rng(8)
    design = CritiqueDesign(n_questions=30, counts=(5, 3, 2), accuracy=(0.5, 0.6, 0.7),
                            confidence=(3.0, 3.5, 4.0), minutes=(10.0, 9.0, 8.0),
                            unparsed_rate=0.3, gold_share=0.8)
    questions, outputs = _relabelled(simulate_critique(design, seed=2), rng)
    report = critique_report(CritiqueStudy.from_records(questions, outputs), seed=1)
    gold = {q.id: q.gold for q in questions}
    domain = {q.id: q.domain for q in questions}
    for row in report.levels:
        mine = [o for o in outputs if o.level == row.level
                and (row.domain is None or domain[o.question] == row.domain)
                and row.author in ("all", o.author)]
        scored = [o for o in mine if gold[o.question] is not None]
        right = sum(o.final == gold[o.question] for o in scored)
        assert row.n_outputs == len(mine) and row.n_scored == len(scored)
        assert row.n_unparsed == sum(o.final is None for o in mine)
        assert row.accuracy.value == pytest.approx(right / len(scored))
        assert row.accuracy.n_questions == len({o.question for o in scored})
        assert row.confidence.value == pytest.approx(np.mean([o.confidence for o in mine]))
        assert row.minutes.value == pytest.approx(np.mean([o.time_ms for o in mine]) / 60000)
        assert row.accuracy.lower <= row.accuracy.value <= row.accuracy.upper


def test_input_pair_table_equals_explicit_counts():
    rng = np.random.default_rng(4)
    design = CritiqueDesign(n_questions=40, counts=(7, 5, 3, 1), unparsed_rate=0.1,
                            gold_share=0.9)
    questions, outputs = _relabelled(simulate_critique(design, seed=3), rng)
    report = critique_report(CritiqueStudy.from_records(questions, outputs), seed=1)
    by_id = {o.id: o for o in outputs}
    gold = {q.id: q.gold for q in questions}
    groups = defaultdict(list)
    for c in outputs:
        g = gold[c.question]
        if c.level == 0 or g is None:
            continue
        ok = [by_id[c.parent_a].final == g, by_id[c.parent_b].final == g]
        kind = ("both_wrong", "one_correct", "both_correct")[sum(ok)]
        for a in ("all", c.author):
            groups[(a, c.level, kind)].append((c, ok))
    authors = set(report.authors)
    rows = [r for r in report.input_pairs if r.domain is None]
    assert {(r.author, r.level, r.inputs) for r in rows if r.n} == {
        k for k in groups if k[0] in authors}
    for r in rows:
        items = groups.get((r.author, r.level, r.inputs), [])
        level_total = sum(len(v) for k, v in groups.items() if k[:2] == (r.author, r.level))
        assert r.n == len(items)
        assert r.share == pytest.approx(len(items) / level_total)
        if not items:
            assert math.isnan(r.accuracy.value)
            continue
        g = gold[items[0][0].question]
        assert r.accuracy.value == pytest.approx(
            np.mean([c.final == gold[c.question] for c, _ in items]))
        assert r.picked_neither.value == pytest.approx(np.mean([c.choice is None for c, _ in items]))
        if r.inputs == "one_correct":
            right = [c.choice is not None and ok[c.choice] for c, ok in items]
            wrong = [c.choice is not None and not ok[c.choice] for c, ok in items]
            assert r.picked_correct.value == pytest.approx(np.mean(right))
            assert r.picked_wrong.value == pytest.approx(np.mean(wrong))
        else:
            assert r.picked_correct is None and r.picked_wrong is None
        del g


def test_human_ai_table_keeps_questions_where_the_ai_is_neither_always_right_nor_wrong():
    design = CritiqueDesign(n_questions=80, counts=(3, 3, 2), accuracy=(0.4, 0.5, 0.6),
                            ai_accuracy=(0.6, 0.62, 0.65), human_counts=(2, 2, 1),
                            mode="human_ai", confidence=(3, 3.5, 4), minutes=(20, 18, 15))
    sim = simulate_critique(design, seed=4)
    questions, outputs = sim.records
    report = critique_report(sim.study, seed=1)
    gold = {q.id: q.gold for q in questions}
    ai_resp = defaultdict(list)
    for o in outputs:
        if o.author == "ai" and o.level == 0:
            ai_resp[o.question].append(o.final == gold[o.question])
    kept = {q for q, v in ai_resp.items() if 0 < sum(v) < len(v)}
    assert 0 < len(kept) < len(questions)

    def acc(author, level):
        sel = [o.final == gold[o.question] for o in outputs
               if o.author == author and o.level == level and o.question in kept]
        return np.mean(sel)

    rows = [r for r in report.human_ai if r.domain is None]
    assert [r.level for r in rows] == [0, 1, 2]
    for r in rows:
        assert r.n_questions == len(kept)
        assert r.human_accuracy.value == pytest.approx(acc("human", r.level))
        assert r.ai_accuracy.value == pytest.approx(acc("ai", r.level))
        if r.level == 0:
            assert r.gain is None
        else:
            assert r.gain.value == pytest.approx(acc("human", r.level) - acc("ai", r.level - 1))
            assert r.gain.lower <= r.gain.value <= r.gain.upper


def test_human_ai_table_is_empty_for_one_author_kind():
    sim = simulate_critique(CritiqueDesign(n_questions=10), seed=1)
    report = critique_report(sim.study)
    assert report.human_ai == () and report.authors == ("all",)


def test_unparseable_finals_are_wrong_and_questions_without_gold_are_not_scored(hand):
    report = critique_report(hand, seed=7)
    c1 = next(r for r in report.levels if r.domain is None and r.level == 1)
    # question 1's seven C¹: finals 0, 1, 1, None, 1, 2, 2 → 1/7; question 2's C¹ not scored
    assert (c1.n_outputs, c1.n_scored, c1.n_unparsed) == (8, 7, 1)
    assert c1.accuracy.value == pytest.approx(1 / 7)
    english = next(r for r in report.levels if r.domain == "english" and r.level == 0)
    assert english.n_scored == 0 and math.isnan(english.accuracy.value)
    assert english.confidence.value == 3.0  # confidence still counts


def test_report_rows_are_json_ready_with_one_header():
    sim = simulate_critique(CritiqueDesign(n_questions=20, gold_share=0.5), seed=6)
    report = critique_report(sim.study, seed=2)
    for rows in (report.level_rows(), report.input_pair_rows()):
        assert rows and len({tuple(r) for r in rows}) == 1
        json.dumps(rows, allow_nan=False)
    json.dumps(report.as_dict(), allow_nan=False)
    row = report.level_rows()[0]
    assert {"majority_e3", "majority_e5", "majority_e7", "gain_over_majority_e7",
            "naive", "confidence", "minutes"} <= set(row)


def test_report_is_deterministic_given_the_seed():
    sim = simulate_critique(CritiqueDesign(n_questions=40), seed=9)
    a = critique_report(sim.study, seed=3).as_dict()
    assert a == critique_report(sim.study, seed=3).as_dict()
    again = CritiqueStudy.from_records(*sim.records)
    assert critique_report(again, seed=3).as_dict() == a


def test_empty_and_response_only_studies():
    empty = CritiqueStudy.from_records([], [])
    report = critique_report(empty)
    assert report.top_level == 0 and report.input_pairs == ()
    assert math.isnan(report.levels[0].accuracy.value)
    only = CritiqueStudy.from_records([QuestionRecord(1, 0, None)],
                                      [output(1, 1, 0, final=0), output(2, 1, 0, final=1)])
    row = critique_report(only).levels[0]
    assert row.accuracy.value == 0.5 and row.majority == () and row.naive is None
    assert len(effort_matched_votes(only)) == 0 and len(naive_votes(only)) == 0


# --- known truth ------------------------------------------------------------------------


# Difficulty quantiles U of the simulator, for E_U[…] by the midpoint rule (the integrands
# are smooth on (0, 1); 20 000 points put the error far below any interval's width).
U_GRID = (np.arange(20_000) + 0.5) / 20_000


def _p_of(u, mean, spread):
    """The simulator's per-question accuracy at quantile u (Beta with that mean and SD)."""
    k = mean * (1 - mean) / spread ** 2 - 1
    return stats.beta.ppf(u, mean * k, (1 - mean) * k)


def _majority_correct_probability(p, n, k):
    """P(the majority of n iid answers — right w.p. p, else uniform over the k − 1 wrong
    options — is right, ties broken uniformly), summing over every count vector; ``p`` may
    be an array."""
    p = np.asarray(p, dtype=float)
    total = np.zeros_like(p)
    for counts in itertools.product(range(n + 1), repeat=k):
        if sum(counts) != n:
            continue
        best = max(counts)
        if counts[0] != best:
            continue
        coef = math.factorial(n) / np.prod([math.factorial(c) for c in counts])
        wrong = ((1 - p) / (k - 1)) ** (n - counts[0])
        total += coef * p ** counts[0] * wrong / counts.count(best)
    return total


def test_brute_force_majority_probability_is_a_probability_and_matches_simple_cases():
    p = np.linspace(0, 1, 11)
    # one voter: right with probability p; three voters, two options: P(≥ 2 right)
    assert np.allclose(_majority_correct_probability(p, 1, 4), p)
    assert np.allclose(_majority_correct_probability(p, 3, 2), 3 * p ** 2 - 2 * p ** 3)


# The recovery tests check many intervals at once (48 here): at 99.99 % a miss anywhere
# has probability < 0.5 %; calibration at 95 % is the coverage test's job.
STRICT = 0.9999


def test_simulated_study_recovers_planted_accuracies_confidence_and_time():
    design = CritiqueDesign(n_questions=1000, domains=("math", "english", "logic"))
    report = critique_report(simulate_critique(design, seed=21).study, seed=4,
                             interval_level=STRICT)
    for row in report.levels:
        lv = row.level
        assert row.accuracy.lower <= design.accuracy[lv] <= row.accuracy.upper, row
        assert row.confidence.lower <= design.confidence[lv] <= row.confidence.upper, row
        assert row.minutes.lower <= design.minutes[lv] <= row.minutes.upper, row


def test_response_majorities_and_naive_votes_recover_their_brute_force_truth():
    design = CritiqueDesign(n_questions=1500, counts=(7, 2, 2, 1), spread=0.2,
                            accuracy=(0.45, 0.55, 0.65, 0.7))
    report = critique_report(simulate_critique(design, seed=8).study, seed=2,
                             interval_level=STRICT)
    row0 = next(r for r in report.levels if r.domain is None and r.level == 0)
    p0 = _p_of(U_GRID, design.accuracy[0], design.spread)
    assert [c.n_voters for c in row0.majority] == [3, 5, 7]
    for cell in row0.majority:
        truth = _majority_correct_probability(p0, cell.n_voters, design.n_options).mean()
        assert cell.accuracy.lower <= truth <= cell.accuracy.upper, (cell, truth)
    # The naive vote of a C¹ is the majority of its two responses: right when both are,
    # a coin flip when one is — p² + p(1 − p) = p, the response accuracy.
    row1 = next(r for r in report.levels if r.domain is None and r.level == 1)
    assert row1.naive.accuracy.lower <= design.accuracy[0] <= row1.naive.accuracy.upper


def test_human_ai_gain_recovers_its_truth_on_the_filtered_questions():
    # Critiques ignore their inputs' correctness here (input_weight 0), so given the
    # question every output except the AI's responses is independent of the filter.
    design = CritiqueDesign(n_questions=1500, counts=(4, 3, 1), accuracy=(0.4, 0.55, 0.6),
                            ai_accuracy=(0.6, 0.5, 0.55), human_counts=(2, 2, 1),
                            mode="human_ai", confidence=(3, 3.5, 4), minutes=(20, 18, 15),
                            spread=0.2, input_weight=0.0)
    report = critique_report(simulate_critique(design, seed=13).study, seed=1,
                             interval_level=STRICT)
    p_ai0 = _p_of(U_GRID, design.ai_accuracy[0], design.spread)
    kept = 1 - p_ai0 ** 4 - (1 - p_ai0) ** 4  # P(4 AI responses neither all right nor wrong)

    def on_kept(mean):
        return (_p_of(U_GRID, mean, design.spread) * kept).mean() / kept.mean()

    # The AI's own responses are what the filter looks at: E[share right | mixed, p] =
    # (p − p⁴) / P(mixed | p).
    ai_truth = [(p_ai0 - p_ai0 ** 4).mean() / kept.mean()] + [
        on_kept(m) for m in design.ai_accuracy[1:]]
    rows = [r for r in report.human_ai if r.domain is None]
    for row in rows:
        human = on_kept(design.accuracy[row.level])
        assert row.human_accuracy.lower <= human <= row.human_accuracy.upper, row
        assert row.ai_accuracy.lower <= ai_truth[row.level] <= row.ai_accuracy.upper, row
        if row.level:
            gain = human - ai_truth[row.level - 1]
            assert row.gain.lower <= gain <= row.gain.upper, row


def _per_question_counts(study):
    """(outputs, correct) per question × level, counted from the study's columns."""
    n_lv = study.top_level + 1
    index = study.output_question * n_lv + study.level
    gold = study.gold[study.output_question]
    size = study.n_questions * n_lv
    n = np.bincount(index, weights=(gold >= 0).astype(float), minlength=size)
    s = np.bincount(index, weights=(study.final == gold) & (gold >= 0), minlength=size)
    return n.reshape(-1, n_lv), s.reshape(-1, n_lv)


def test_report_accuracy_interval_is_the_clustered_interval_of_the_per_question_counts():
    sim = simulate_critique(CritiqueDesign(n_questions=50, gold_share=0.8), seed=31)
    report = critique_report(sim.study, seed=1)
    n, s = _per_question_counts(sim.study)
    direct = clustered_proportion(n, s)
    for row in (r for r in report.levels if r.domain is None):
        assert (row.accuracy.value, row.accuracy.lower, row.accuracy.upper) == pytest.approx(
            (direct.value[row.level], direct.lower[row.level], direct.upper[row.level]))


def test_level_intervals_cover_the_planted_accuracy_about_nominally():
    # 120 simulated studies of 64 questions (the paper's size), 4 levels each
    design = CritiqueDesign(n_questions=64, counts=(7, 5, 3, 1), spread=0.15)
    hits = []
    for seed in range(120):
        n, s = _per_question_counts(simulate_critique(design, seed=1000 + seed).study)
        ci = clustered_proportion(n, s)
        truth = np.asarray(design.accuracy)
        hits += ((ci.lower <= truth) & (truth <= ci.upper)).tolist()
    coverage = np.mean(hits)
    # 480 intervals: binomial SD ≈ 1 point at 95 % (levels of one study are correlated)
    assert 0.92 <= coverage <= 0.975, coverage


def test_estimators_critique_does_not_import_django():
    code = ("import sys, estimators.critique, estimators.critique.simulation; "
            "print('django' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# A question (gold 0) asked with three whole trees, the paper's (7 R, 5 C¹ on R₁R₂, 3 C² on
# C¹₁C¹₂, 1 C³ on C²₁C²₂), ids tree by tree: tree t holds ids 16t + 1 … 16t + 16. Tree 0's
# responses are all correct; trees 1 and 2 have a correct chain pair and five wrong
# responses (final 2 in tree 1, final 1 in tree 2). Every critique answers 0.
def _three_trees(numbered=True):
    outputs = []
    for t in range(3):
        base = 16 * t
        wrong = (0, 2, 1)[t]

        def add(oid, level, parents=(None, None), final=0, _t=t):
            outputs.append(output(oid, 1, level, parents, final=final,
                                  choice=None if level == 0 else 0)._replace(
                tree=_t if numbered else None))

        for k in range(1, 8):
            add(base + k, 0, final=0 if k <= 2 else wrong)
        for k in range(8, 13):
            add(base + k, 1, (base + 1, base + 2))
        for k in range(13, 16):
            add(base + k, 2, (base + 8, base + 9))
        add(base + 16, 3, (base + 13, base + 14))
    return [QuestionRecord(1, 0, "math")], outputs


def test_effort_matched_votes_of_a_tree_use_only_that_trees_outputs():
    # given one question asked with three whole trees
    questions, outputs = _three_trees()
    study = CritiqueStudy.from_records(questions, outputs)
    votes = effort_matched_votes(study, seed=3)
    # then the third tree's C³ (48) is matched by 7 of its own responses, not by 33, 34,
    # 1, 2, 3, 4, 5; its C¹ and C² votes stay in its tree too
    assert votes.members_of(48, 0) == (33, 34, 35, 36, 37, 38, 39)
    assert votes.members_of(48, 1) == (40, 41, 42, 43, 44)
    assert votes.members_of(48, 2) == (45, 46, 47)
    assert votes.members_of(32, 0) == (17, 18, 19, 20, 21, 22, 23)
    assert votes.members_of(24, 0) == (17, 18, 19)  # a C¹ of tree 1: 3 of its responses
    # and the 7-response votes, by hand: tree 0 → 0 (right), tree 1 → 2 and tree 2 → 1
    # (five wrong of seven), so the level-0 majority matched with C³ is right on 1 of 3
    rows = {int(a): i for i, a in enumerate(votes.anchor) if votes.voted_level[i] == 0}
    assert [int(votes.result[rows[a]]) for a in (16, 32, 48)] == [0, 2, 1]
    report = critique_report(study, seed=3)
    r0 = next(r for r in report.levels if r.domain is None and r.level == 0)
    cell = next(m for m in r0.majority if m.target_level == 3)
    assert (cell.n_votes, cell.n_incomplete) == (3, 0)
    assert cell.accuracy.value == pytest.approx(1 / 3)
    assert cell.target_minus_majority.value == pytest.approx(2 / 3)


def test_without_tree_numbers_a_question_is_one_tree():
    # the platform's studies grow one tree per question and give no numbers: all the
    # question's responses are then eligible (by id after the pair), as documented
    questions, outputs = _three_trees(numbered=False)
    votes = effort_matched_votes(CritiqueStudy.from_records(questions, outputs), seed=3)
    assert votes.members_of(48, 0) == (33, 34, 1, 2, 3, 4, 5)


def test_a_critique_whose_inputs_are_of_two_trees_is_refused():
    questions, outputs = _three_trees()
    bad = outputs + [output(99, 1, 1, (1, 17), final=0, choice=0)._replace(tree=0)]
    with pytest.raises(ValueError, match=r"outputs\[48\] \(id 99\): field 'tree': its "
                                         r"responses 1 and 17 are of trees 0 and 1"):
        CritiqueStudy.from_records(questions, bad)
    bad = outputs + [output(99, 1, 1, (1, 2), final=0, choice=0)._replace(tree=2)]
    with pytest.raises(ValueError, match=r"id 99\): field 'tree': 2, but its responses are "
                                         r"of tree 0"):
        CritiqueStudy.from_records(questions, bad)
