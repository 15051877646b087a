"""The Ladder of Blum & Hardt ("The Ladder: A Reliable Leaderboard for Machine Learning
Competitions", ICML 2015), for a score where higher is better (an accuracy).

Per token the service keeps the best released score R (none at first). A submission with
score s is released as ``[s]_η`` (s rounded to the nearest multiple of the margin η) when
there is no R yet or s > R + η; otherwise R is released again. So the released score
changes only when a submission beats the best so far by the margin, and only in steps of
the margin: an adaptive analyst learns at most one of ~1/η values per improvement instead
of a fresh real number per call."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    """What the Ladder releases for one submission: ``score`` (the released value),
    ``improved`` (True when it moved, i.e. the new best) and ``best`` (the best after this
    submission, equal to ``score``)."""

    score: float
    improved: bool
    best: float


def rounded(score: float, margin: float) -> float:
    """``score`` rounded to the nearest multiple of ``margin`` (halves away from zero), with
    the float noise of the multiplication removed (12 decimals)."""
    if not margin > 0:
        raise ValueError(f"margin: must be > 0, got {margin}")
    steps = math.floor(score / margin + 0.5)
    return round(steps * margin, 12)


def ladder_release(best: float | None, score: float, margin: float) -> Release:
    """The Ladder's step: ``best`` is the best released so far (None before the first
    submission), ``score`` the new submission's raw score."""
    if best is None or score > best + margin:
        new = rounded(score, margin)
        return Release(score=new, improved=True, best=new)
    return Release(score=best, improved=False, best=best)
