"""The programmatic verifier: the rubric evaluated by code (paper 004, Section 6.1.1).

Challenge 1 (equality up to permutation over C̄): for every relevant substring s of x there is a
relevant substring t of x′ with C̄(s) = C̄(t). With the default relevant substrings (the whole
datapoint, as the published code) this is C̄(x) = C̄(x′).

Challenge 2 (equality up to isomorphism): C(x′) = C(x). Relaxed variant (paper Appendix C.1):
pass when δ(C(x), C(x′)) < ε for a distance δ and tolerance ε (``distance``/``tolerance``;
the default distance is the normalised Hamming distance, the share of differing bits).

A criterion that raises on the committed x′ (a datapoint of the wrong shape) fails the check,
naming the criterion; it never crashes the run — except the exceptions named in ``reraise``
(the caller's interruptions, e.g. a task's time limit), which are never the datapoint's.
On failure the verdict names the first criterion (in rubric order) whose value differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .criteria import Datapoint
from .protocol import PASS, Challenge, Verdict
from .rubrics import Rubric, TotalRubric
from .substrings import SubstringFn, whole

Distance = Callable[[Sequence[int], Sequence[int]], float]
_PERMUTATION = Challenge.PERMUTATION  # read once: an enum member lookup costs ~0.2 µs


def hamming(a: Sequence[int], b: Sequence[int]) -> float:
    """Normalised Hamming distance: the share of positions where the bit strings differ."""
    if len(a) != len(b):
        raise ValueError(f"encodings differ in length: {len(a)} and {len(b)}")
    return sum(u != v for u, v in zip(a, b, strict=True)) / len(a) if a else 0.0


class _Unevaluable(Exception):
    def __init__(self, criterion: str, error: Exception) -> None:
        super().__init__(criterion)
        self.criterion = criterion
        self.error = error


def _encode(rubric: Rubric | TotalRubric, x: Datapoint,
            reraise: tuple[type[BaseException], ...] = ()) -> tuple[int, ...]:
    bits = []
    for c in rubric.criteria:
        try:
            bits.append(c(x))
        except reraise:
            raise
        except Exception as exc:  # noqa: BLE001 — any failure of a check is the datapoint's
            raise _Unevaluable(c.name, exc) from exc
    return tuple(bits)


def _first_difference(names: Sequence[str], a: Sequence[int], b: Sequence[int]) -> str:
    return next((n for n, u, v in zip(names, a, b, strict=True) if u != v), "")


@dataclass
class ProgrammaticVerifier:
    """Checks both challenges against ``rubric`` (and its total form) by evaluating code.

    ``distance``/``tolerance`` switch challenge 2 to the relaxed variant (both or neither;
    0 < tolerance ≤ 1/2 as in the paper's Appendix C.1).

    A check is decided by the encodings alone: challenge 1 by the total evaluations of the
    relevant substrings of x and of x′ (``_substring_codes``), challenge 2 by C(x) and C(x′).
    The criteria, the substring function and the distance are deterministic (the paper assumes
    deterministic functions throughout), so the encodings of hashable datapoints and the
    verdict of each pair of encodings are memoised: a long run evaluates each datapoint's
    criteria once and decides each pair of encodings once, with the verdict an uncached check
    would give (``tests/estimators/nodata/test_protocol.py`` compares the two).
    ``reraise``: exceptions a criterion may raise that interrupt the run instead of failing
    the check.
    """

    rubric: Rubric
    substrings: SubstringFn = whole
    distance: Distance | None = None
    tolerance: float | None = None
    reraise: tuple[type[BaseException], ...] = ()
    _memo: dict = field(default_factory=dict, init=False, repr=False)
    _signatures: tuple[dict, dict] = field(default_factory=lambda: ({}, {}), init=False,
                                           repr=False)
    _verdicts: tuple[dict, dict] = field(default_factory=lambda: ({}, {}), init=False,
                                         repr=False)

    def __post_init__(self) -> None:
        if self.tolerance is None:
            if self.distance is not None:
                raise ValueError("tolerance: the relaxed challenge 2 needs a tolerance ε")
        else:
            if self.distance is None:
                self.distance = hamming
            if not 0 < self.tolerance <= 0.5:
                raise ValueError(f"tolerance: need 0 < ε ≤ 1/2, got {self.tolerance}")
        self.total: TotalRubric = self.rubric.total()
        self._names, self._total_names = self.rubric.names, self.total.names

    def _code(self, which: Rubric | TotalRubric, x: Datapoint) -> tuple[int, ...]:
        try:
            key = (which is self.total, type(x), x)  # 1, 1.0 and True stay apart
            hit = self._memo.get(key)
        except TypeError:  # unhashable datapoint (a JSON object): no memo
            return _encode(which, x, self.reraise)
        if hit is None:
            hit = self._memo[key] = _encode(which, x, self.reraise)
        return hit

    def _substring_codes(self, x: Datapoint) -> tuple[tuple[int, ...], ...]:
        """C̄(s) for every relevant substring s of x, in the order ``substrings`` gives."""
        return tuple(self._code(self.total, s) for s in self.substrings(x))

    def _rubric_code(self, x: Datapoint) -> tuple[int, ...]:
        """C(x)."""
        return self._code(self.rubric, x)

    def _signature(self, challenge_index: int, x: Datapoint) -> tuple:
        """What challenge 1 (index 0) or 2 (index 1) reads of x, memoised for hashable x."""
        memo = self._signatures[challenge_index]
        try:
            key = (type(x), x)
            hit = memo.get(key)
        except TypeError:
            hit = key = None
        if hit is None:
            hit = (self._substring_codes if challenge_index == 0 else self._rubric_code)(x)
            if key is not None:
                memo[key] = hit
        return hit

    def check(self, challenge: Challenge, x: Datapoint, similar: Datapoint) -> Verdict:
        index = 0 if challenge == _PERMUTATION else 1
        memo = self._signatures[index]
        try:  # the common case: both datapoints seen before
            ours, theirs = memo[type(x), x], memo[type(similar), similar]
        except (KeyError, TypeError):
            try:
                ours = self._signature(index, x)
                theirs = self._signature(index, similar)
            except _Unevaluable as exc:
                return Verdict(False, exc.criterion,
                               f"challenge {int(challenge)}: criterion {exc.criterion} could "
                               f"not evaluate the datapoint ({type(exc.error).__name__}: "
                               f"{exc.error})")
        verdicts = self._verdicts[index]
        pair = (ours, theirs)
        verdict = verdicts.get(pair)
        if verdict is None:
            decide = self._permutation if index == 0 else self._isomorphism
            verdict = verdicts[pair] = decide(ours, theirs)
        return verdict

    def _permutation(self, ours: Sequence[tuple[int, ...]],
                     theirs: Sequence[tuple[int, ...]]) -> Verdict:
        """Challenge 1 from the substrings' total evaluations of x (ours) and of x′ (theirs)."""
        available = set(theirs)
        for s_code in ours:
            if s_code in available:
                continue
            nearest = theirs[0] if len(theirs) == 1 else min(
                theirs, key=lambda t: hamming(s_code, t))
            criterion = _first_difference(self._total_names, s_code, nearest)
            return Verdict(False, criterion,
                           "challenge 1: no relevant substring of x′ has the total evaluation "
                           f"of x's ({criterion} differs)")
        return PASS

    def _isomorphism(self, a: tuple[int, ...], b: tuple[int, ...]) -> Verdict:
        """Challenge 2 from C(x) = a and C(x′) = b."""
        if self.tolerance is None:
            if a == b:
                return PASS
            criterion = _first_difference(self._names, a, b)
            return Verdict(False, criterion, f"challenge 2: C(x′) ≠ C(x) ({criterion} differs)")
        d = float(self.distance(a, b))
        if d < self.tolerance:
            return PASS
        criterion = _first_difference(self._names, a, b)
        return Verdict(False, criterion,
                       f"challenge 2: δ(C(x), C(x′)) = {d:.3g} ≥ ε = {self.tolerance:.3g}")
