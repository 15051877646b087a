"""From N sampled traces of one sentence to the AI rating (METHODS M2, paper 001 A.2.2.1).

* AI rating = the mode of the verified samples' overall verdicts (five-way). Ties go to the
  verdict met first in ``TIE_ORDER`` (inaccurate, unsupported, disputed, no_attribution,
  accurate): a tie never makes a sentence "accurate", as a tied human majority counts as
  Inaccurate in M2.
* Confidence = (verified samples whose verdict is the mode) / (verified samples). With no
  verified sample there is no rating: verdict, confidence and displayed trace are None.
* Displayed trace = the best verified sample agreeing with the mode under a scorer (higher
  is better; ties → the lowest sample index). The paper used a reward model; the default
  here, ``most_evidence``, prefers the trace with most evidence items, then most claims.
  ``imported_score`` uses a score carried by the samples (e.g. a reward model's, from the
  JSONL file). Any ``Callable[[SampleResult], float]`` can be passed.
* Debate = for each side of the binarised verdict (accurate vs. everything else), the best
  verified sample on that side under the same scorer; None unless both sides have one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from assistants.traces import VERDICTS, Search, Trace, TraceRecord, is_accurate, verify

TIE_ORDER = ("inaccurate", "unsupported", "disputed", "no_attribution", "accurate")
DEFAULT_BAND_CUTOFFS = (0.7, 0.9)


@dataclass(frozen=True)
class SampleResult:
    """One sample of the AI rater. ``trace`` is None when there is none (``error`` says why:
    the provider failed, or the reply held no valid trace); ``reasons`` are the format
    verifier's objections to a parsed trace. Only ``verified`` samples count."""

    index: int
    trace: Trace | None
    raw_text: str = ""
    error: str | None = None
    reasons: tuple[str, ...] = ()
    score: float | None = None
    model: str = ""
    latency: float | None = None
    usage: dict | None = None

    @property
    def verified(self) -> bool:
        return self.trace is not None and self.error is None and not self.reasons

    @property
    def drop_reasons(self) -> tuple[str, ...]:
        """Why the sample does not count (empty when it does)."""
        if self.error is not None:
            return (self.error,)
        return self.reasons


Scorer = Callable[[SampleResult], float | tuple]


def most_evidence(sample: SampleResult) -> tuple[int, int]:
    """Default scorer: (evidence items, claims) — a verified trace cites all its evidence,
    so this is the trace that grounds its verdict in most quotes."""
    assert sample.trace is not None
    return (len(sample.trace.evidence), len(sample.trace.claims))


def imported_score(sample: SampleResult) -> float:
    """The sample's own ``score`` (e.g. a reward model's); a sample without one ranks last."""
    return float("-inf") if sample.score is None else sample.score


@dataclass(frozen=True)
class Debate:
    accurate: SampleResult
    inaccurate: SampleResult


@dataclass(frozen=True)
class AiRating:
    verdict: str | None
    n_agree: int
    n_verified: int
    n_samples: int
    displayed: SampleResult | None
    debate: Debate | None
    dropped: tuple[tuple[int, tuple[str, ...]], ...]
    counts: tuple[tuple[str, int], ...]  # verified samples per verdict, in VERDICTS order

    @property
    def confidence(self) -> float | None:
        return None if self.n_verified == 0 else self.n_agree / self.n_verified


def aggregate(samples: Sequence[SampleResult], *, scorer: Scorer = most_evidence,
              tie_order: Sequence[str] = TIE_ORDER) -> AiRating:
    """The AI rating of one sentence from its samples (see the module's docstring)."""
    if sorted(tie_order) != sorted(VERDICTS):
        raise ValueError(f"tie_order must list each of {', '.join(VERDICTS)} once")
    indices = [s.index for s in samples]
    if len(set(indices)) != len(indices):
        raise ValueError("samples: two samples share an index")
    verified = [s for s in samples if s.verified]
    dropped = tuple((s.index, s.drop_reasons) for s in samples if not s.verified)
    tally = Counter(s.trace.verdict for s in verified if s.trace is not None)
    counts = tuple((v, tally.get(v, 0)) for v in VERDICTS)
    if not verified:
        return AiRating(None, 0, 0, len(samples), None, None, dropped, counts)
    top = max(tally.values())
    verdict = next(v for v in tie_order if tally.get(v, 0) == top)
    agreeing = [s for s in verified if s.trace is not None and s.trace.verdict == verdict]
    sides = ([s for s in verified if s.trace is not None and is_accurate(s.trace.verdict)],
             [s for s in verified if s.trace is not None and not is_accurate(s.trace.verdict)])
    debate = None
    if sides[0] and sides[1]:
        debate = Debate(accurate=best(sides[0], scorer), inaccurate=best(sides[1], scorer))
    return AiRating(verdict, top, len(verified), len(samples), best(agreeing, scorer), debate,
                    dropped, counts)


def best(samples: Iterable[SampleResult], scorer: Scorer = most_evidence) -> SampleResult:
    """The highest-scored sample; equal scores → the lowest index."""
    return min(samples, key=lambda s: (_negate(scorer(s)), s.index))


def _negate(score: float | tuple) -> tuple:
    values = score if isinstance(score, tuple) else (score,)
    return tuple(-float(v) for v in values)


@dataclass(frozen=True)
class ConfidenceBand:
    label: str  # low | medium | high
    percent: int

    def __str__(self) -> str:
        return f"{self.label} ({self.percent}%)"


def confidence_band(n_agree: int, n_verified: int,
                    cutoffs: tuple[float, float] = DEFAULT_BAND_CUTOFFS) -> ConfidenceBand:
    """The confidence as shown to raters: "low" if c < cutoffs[0], "medium" if c <
    cutoffs[1], else "high", with c = n_agree / n_verified compared exactly (fractions);
    the percentage is 100·c rounded half up (5/8 → 63). The default cut-offs (0.7, 0.9) are
    the platform's choice (the paper shows "low (65%)" and "high (95%)" but states none)."""
    if n_verified <= 0 or not 0 <= n_agree <= n_verified:
        raise ValueError(f"need 0 ≤ n_agree ≤ n_verified and n_verified > 0 "
                         f"(got {n_agree}, {n_verified})")
    low, high = (Fraction(str(c)) for c in cutoffs)
    if not 0 <= low <= high <= 1:
        raise ValueError(f"cutoffs must satisfy 0 ≤ low ≤ high ≤ 1 (got {cutoffs})")
    share = Fraction(n_agree, n_verified)
    label = "low" if share < low else "medium" if share < high else "high"
    percent = (200 * n_agree + n_verified) // (2 * n_verified)
    return ConfidenceBand(label, percent)


def samples_from_records(records: Iterable[TraceRecord], *,
                         given: dict[str, Sequence[Search]] | None = None,
                         quote_url_must_match: bool = True) -> dict[str, list[SampleResult]]:
    """Imported traces as samples, verified, grouped by sentence id (ordered by sample).
    ``given`` maps a sentence id to the search results its model was given, if any."""
    grouped: dict[str, list[SampleResult]] = {}
    for record in records:
        searches = (given or {}).get(record.sentence)
        trace = record.trace
        if searches is not None and not trace.searches:
            trace = Trace(trace.claims, tuple(searches), trace.evidence, trace.verdict,
                          trace.reasoning)
        reasons = verify(trace, given=searches, quote_url_must_match=quote_url_must_match)
        grouped.setdefault(record.sentence, []).append(SampleResult(
            index=record.sample, trace=trace, reasons=reasons, score=record.score))
    for samples in grouped.values():
        samples.sort(key=lambda s: s.index)
    return grouped
