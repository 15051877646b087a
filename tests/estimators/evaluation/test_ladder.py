"""The Ladder's rule (Blum & Hardt 2015) exactly."""

import numpy as np
import pytest

from estimators.evaluation.ladder import ladder_release, rounded


def test_first_submission_is_released_rounded():
    step = ladder_release(None, 0.6137, 0.02)
    assert step.score == pytest.approx(0.62) and step.improved


def test_released_only_when_better_by_the_margin():
    best = 0.62
    assert ladder_release(best, 0.639, 0.02).score == best  # +0.019: not by the margin
    assert not ladder_release(best, 0.64, 0.02).improved  # equal to best + margin: not beyond
    step = ladder_release(best, 0.6401, 0.02)
    assert step.improved and step.score == pytest.approx(0.64)
    assert ladder_release(best, 0.1, 0.02).score == best  # worse: the best again


def test_a_sequence_follows_the_rule():
    scores = [0.50, 0.51, 0.53, 0.52, 0.58, 0.585, 0.61]
    best, released = None, []
    for s in scores:
        step = ladder_release(best, s, 0.02)
        best = step.best
        released.append(step.score)
    assert released == pytest.approx([0.5, 0.5, 0.54, 0.54, 0.58, 0.58, 0.62])


def test_rounding_is_to_the_nearest_multiple():
    assert rounded(0.629, 0.02) == pytest.approx(0.62)
    assert rounded(0.631, 0.02) == pytest.approx(0.64)
    with pytest.raises(ValueError, match="margin"):
        rounded(0.5, 0)


def test_each_move_raises_the_best_by_the_margin_so_moves_are_few():
    """Brute force on random sequences: a release that moves is ≥ best + η, so the number
    of moves is at most 1 + (last best − first release)/η ≤ 1 + (score range)/η."""
    rng = np.random.default_rng(3)
    for margin in (0.01, 0.02, 0.05):
        for _ in range(200):
            scores = 0.1 + 0.02 * rng.standard_normal(rng.integers(1, 400))
            best, first, moves = None, None, 0
            for s in scores:
                step = ladder_release(best, float(s), margin)
                if step.improved:
                    assert best is None or step.best >= best + margin - 1e-12
                    moves += 1
                best = step.best
                first = best if first is None else first
            assert moves <= 1 + (best - first) / margin + 1e-9
            assert moves <= 1 + (scores.max() - scores[0] + margin) / margin + 1e-9
