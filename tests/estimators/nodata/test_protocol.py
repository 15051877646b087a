"""The EV protocol's rules (paper 004, Section 6.1): the evaluator commits, then one challenge
is drawn per round, a failure ends the run, r rounds make a success; and the programmatic
verifier's two challenges."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.nodata.algorithm import run_ev
from estimators.nodata.protocol import (
    Challenge,
    Commitment,
    Verdict,
    challenge_schedule,
    ev_protocol,
)
from estimators.nodata.synthetic import IP_RUBRIC, OOP_RUBRIC, generator, universe
from estimators.nodata.verifiers import ProgrammaticVerifier, hamming


class ScriptedEvaluator:
    """Commits to (label, x) every round and logs each call."""

    def __init__(self, label=1, similar="x", errors=()):
        self.calls: list[int] = []
        self.label, self.similar, self.errors = label, similar, set(errors)

    def prepare(self, items):
        return None

    def commit(self, item, x, round_index, rng):
        self.calls.append(round_index)
        if round_index in self.errors:
            return Commitment.invalid("unparseable output")
        return Commitment(self.label, self.similar if self.similar != "x" else x)


class ScriptedVerifier:
    """Passes every check except the rounds in ``fail_at`` (1-based check count)."""

    def __init__(self, fail_at=()):
        self.checks: list[Challenge] = []
        self.fail_at = set(fail_at)

    def check(self, challenge, x, similar):
        self.checks.append(challenge)
        if len(self.checks) in self.fail_at:
            return Verdict(False, "c9", "scripted failure")
        return Verdict(True)


def _play(evaluator, verifier, rounds, seed=0):
    ev_rng, ver_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    row = challenge_schedule(ver_rng, 1, max(rounds, 1) if isinstance(rounds, int) else 3)[0]
    return ev_protocol("7", "0101", evaluator, verifier, rounds=rounds,
                       evaluator_rng=ev_rng, challenges=row)


@pytest.mark.parametrize("rounds", [1, 2, 3, 5])
def test_passing_every_check_plays_exactly_r_rounds_and_succeeds(rounds):
    ev, ver = ScriptedEvaluator(), ScriptedVerifier()
    out = _play(ev, ver, rounds)
    assert out.success and out.failure is None and out.challenge is None
    assert ev.calls == list(range(1, rounds + 1))
    assert [r.index for r in out.rounds] == list(range(1, rounds + 1))


def test_one_challenge_per_round_revealed_after_the_commitment():
    log = []

    class LoggingEvaluator(ScriptedEvaluator):
        def commit(self, item, x, round_index, rng):
            log.append(("commit", round_index))
            return super().commit(item, x, round_index, rng)

    class LoggingVerifier(ScriptedVerifier):
        def check(self, challenge, x, similar):
            log.append(("check", challenge))
            return super().check(challenge, x, similar)

    ver = LoggingVerifier()
    out = _play(LoggingEvaluator(), ver, 6)
    # commit, check, commit, check, …: one check per round, each after that round's commitment
    assert [kind for kind, _ in log] == ["commit", "check"] * 6
    assert [r.challenge for r in out.rounds] == ver.checks
    # and the draws are the verifier stream's: one uniform per round, < 1/2 → challenge 1
    draws = np.random.default_rng(1).random(6)
    assert ver.checks == [Challenge.PERMUTATION if u < 0.5 else Challenge.ISOMORPHISM
                          for u in draws]


def test_an_items_challenges_do_not_depend_on_the_other_items():
    # a deterministic evaluator: the same x′ for every datapoint (passes some, fails others)
    data = list(universe()[::41])
    verifier = ProgrammaticVerifier(OOP_RUBRIC)

    def run(subset):
        return run_ev(subset, ScriptedEvaluator(similar="011100000001"), verifier, rounds=3,
                      evaluator_rng=np.random.default_rng(0),
                      verifier_rng=np.random.default_rng(9))

    full, head = run(data), run(data[:40])
    assert head == full[:40]
    assert any(o.success for o in full) and not all(o.success for o in full)


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_the_first_failure_ends_the_run(fail_at):
    ev, ver = ScriptedEvaluator(label=0), ScriptedVerifier(fail_at=(fail_at,))
    out = _play(ev, ver, 3)
    assert not out.success
    assert len(out.rounds) == len(ev.calls) == len(ver.checks) == fail_at
    assert out.failure.reason == "scripted failure" and out.failure.criterion == "c9"
    assert out.challenge == ver.checks[-1]
    assert out.label == 0  # the label is revealed whatever the outcome


def test_an_unusable_commitment_fails_its_round_without_a_challenge():
    ev, ver = ScriptedEvaluator(label=1, errors={2}), ScriptedVerifier()
    out = _play(ev, ver, 3)
    assert not out.success and len(out.rounds) == 2 and len(ver.checks) == 1
    assert out.challenge is None and "unparseable output" in out.reason
    assert out.label == 1  # the last valid commitment's label


@pytest.mark.parametrize("bad", [Commitment(2, "01"), Commitment(1, None)])
def test_a_label_other_than_zero_or_one_or_no_datapoint_is_never_guessed(bad):
    class Bad(ScriptedEvaluator):
        def commit(self, item, x, round_index, rng):
            return bad

    out = _play(Bad(), ScriptedVerifier(), 3)
    assert not out.success and out.label is None and out.reason.startswith("evaluator:")


@pytest.mark.parametrize("rounds", [0, -1, 1.5, True, "3"])
def test_rounds_must_be_a_positive_whole_number(rounds):
    with pytest.raises(ValueError, match="rounds"):
        _play(ScriptedEvaluator(), ScriptedVerifier(), rounds)


def test_challenges_are_drawn_uniformly():
    schedule = challenge_schedule(np.random.default_rng(5), 5_000, 4)
    n = schedule.size
    assert set(np.unique(schedule)) == {1, 2}
    assert abs(int((schedule == 1).sum()) - n / 2) < 4 * (n * 0.25) ** 0.5
    # row i is the same however many items follow it
    assert (challenge_schedule(np.random.default_rng(5), 10, 4) == schedule[:10]).all()


def test_too_few_challenges_for_the_rounds_is_refused():
    with pytest.raises(ValueError, match="challenges"):
        ev_protocol("1", "0", ScriptedEvaluator(), ScriptedVerifier(), rounds=3,
                    evaluator_rng=np.random.default_rng(0), challenges=[1, 2])


# ---- the programmatic verifier ------------------------------------------------------------

def _pair_differing_only_in_a_clause():
    """x, x′ with C_IP(x) = C_IP(x′) but a different total evaluation (an xor clause)."""
    total = IP_RUBRIC.total()
    for x in universe():
        for y in universe():
            if IP_RUBRIC.encode(x) == IP_RUBRIC.encode(y) and total.encode(x) != total.encode(y):
                return x, y
    raise AssertionError("no such pair")


def test_challenge_one_sees_the_clauses_that_challenge_two_cannot():
    x, y = _pair_differing_only_in_a_clause()
    v = ProgrammaticVerifier(IP_RUBRIC)
    assert v.check(Challenge.ISOMORPHISM, x, y).passed
    verdict = v.check(Challenge.PERMUTATION, x, y)
    assert not verdict.passed and verdict.criterion in ("c1a", "c1b")
    assert v.check(Challenge.PERMUTATION, x, x).passed


def test_challenge_two_names_the_first_differing_criterion():
    v = ProgrammaticVerifier(OOP_RUBRIC)  # c0 contains 111, c1 ends with 1, c2 contains 110001
    verdict = v.check(Challenge.ISOMORPHISM, "000000000000", "000000000001")
    assert not verdict.passed and verdict.criterion == "c1" and "C(x′) ≠ C(x)" in verdict.reason


def test_the_relaxed_challenge_two_passes_within_the_tolerance():
    x, one_off, two_off = "000000000000", "000000000001", "111000000001"
    strict = ProgrammaticVerifier(OOP_RUBRIC)
    relaxed = ProgrammaticVerifier(OOP_RUBRIC, tolerance=0.5)  # normalised Hamming < 1/2
    assert hamming((0, 0, 0), (0, 1, 0)) == pytest.approx(1 / 3)
    assert not strict.check(Challenge.ISOMORPHISM, x, one_off).passed
    assert relaxed.check(Challenge.ISOMORPHISM, x, one_off).passed  # δ = 1/3 < 1/2
    verdict = relaxed.check(Challenge.ISOMORPHISM, x, two_off)       # δ = 2/3
    assert not verdict.passed and "ε = 0.5" in verdict.reason


def test_a_verifier_needs_a_tolerance_in_range():
    with pytest.raises(ValueError, match="tolerance"):
        ProgrammaticVerifier(OOP_RUBRIC, distance=hamming)
    with pytest.raises(ValueError, match="tolerance"):
        ProgrammaticVerifier(OOP_RUBRIC, tolerance=0.75)


def test_a_datapoint_the_criteria_cannot_read_fails_naming_the_criterion():
    v = ProgrammaticVerifier(OOP_RUBRIC)
    # ("111" in a dict is merely False; ends-with has no meaning for a dict)
    verdict = v.check(Challenge.ISOMORPHISM, "000000000000", {"text": "0101"})
    assert not verdict.passed and verdict.criterion == "c1"
    assert "could not evaluate" in verdict.reason and "AttributeError" in verdict.reason


def test_windows_as_relevant_substrings():
    from estimators.nodata.substrings import windows

    v = ProgrammaticVerifier(OOP_RUBRIC, substrings=windows(6))
    # every 6-window of x has a window of x′ with the same total evaluation, and not back
    assert v.check(Challenge.PERMUTATION, "000000", "000000110001").passed
    assert not v.check(Challenge.PERMUTATION, "110001", "000000").passed


def test_the_oracle_generator_keeps_the_total_evaluation():
    rng = np.random.default_rng(0)
    total = IP_RUBRIC.total()
    oracle = generator("oracle")
    for x in universe()[::97]:
        assert total.encode(oracle.similar(x, 1, rng)) == total.encode(x)


@pytest.mark.parametrize("make", [
    lambda: ProgrammaticVerifier(IP_RUBRIC),
    lambda: ProgrammaticVerifier(OOP_RUBRIC),
    lambda: ProgrammaticVerifier(OOP_RUBRIC, tolerance=0.4),
    lambda: ProgrammaticVerifier(IP_RUBRIC, substrings=__import__(
        "estimators.nodata.substrings", fromlist=["windows"]).windows(5)),
], ids=["ip", "oop", "oop-relaxed", "ip-windows"])
def test_a_long_lived_verifier_answers_as_a_fresh_one(make):
    """The memoised encodings and verdicts (issue 27) change no verdict: one verifier asked
    many times, its memos filling up, says exactly what a fresh verifier says to each check —
    on random strings, repeats, strings of other lengths and datapoints the criteria cannot
    read (unhashable, so never memoised)."""
    rng = np.random.default_rng(27)
    pool = list(universe()[::7]) + ["", "1", "0110", "111000110001111"]
    shared = make()
    for _ in range(3000):
        x = pool[int(rng.integers(len(pool)))]
        similar = pool[int(rng.integers(len(pool)))] if rng.random() < 0.97 else {"text": x}
        challenge = Challenge(int(rng.integers(1, 3)))
        assert shared.check(challenge, x, similar) == make().check(challenge, x, similar)
