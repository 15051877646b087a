"""What a rater of an arm is shown of the AI rater's output: the panel, built by copying
only the fields of the arm's components out of the stored traces (METHODS M2 "Assistance
components"). What an arm does not include is never copied, so it cannot reach the page or
the API; a baseline arm (no component) has no panel at all.

Components → fields of a trace (``assistants.traces`` schema):

* search — ``searches`` (queries; results with title, URL, snippet);
* evidence — ``evidence`` (numbered quotes with title and URL); implies search;
* reasoning — the claims (text and reasoning citing evidence) and the overall reasoning;
  the claims' evidence numbers only with evidence;
* judgments — the overall verdict, and each claim's verdict when reasoning shows claims;
* confidence — band (low/medium/high) and rounded percentage of the AI rating;
* debate — instead of the displayed trace, the two traces arguing for opposite verdicts,
  each with the fields above (never a confidence).

``panel_html`` renders the one template (``assisted/_panel.html``) used by the rating page
and the admin preview; ``panel_sha256`` hashes what was rendered (or the API's JSON).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction

from assistants.aggregation import confidence_band
from assistants.traces import VERDICT_LABELS

SEARCH, EVIDENCE, REASONING, JUDGMENTS, CONFIDENCE, DEBATE = (
    "search", "evidence", "reasoning", "judgments", "confidence", "debate")
COMPONENTS = (SEARCH, EVIDENCE, REASONING, JUDGMENTS, CONFIDENCE, DEBATE)
TRACE_COMPONENTS = (SEARCH, EVIDENCE, REASONING, JUDGMENTS)


@dataclass(frozen=True)
class StoredTrace:
    """A stored trace sample as the panel builder needs it: its id, its trace dict
    (``Trace.to_dict()``) and, for debates, the side it argues."""

    sample_id: int
    trace: dict
    side: str = ""


@dataclass(frozen=True)
class PanelTrace:
    sample_id: int
    side: str = ""  # debate with judgments: accurate | inaccurate
    searches: list[dict] | None = None
    evidence: list[dict] | None = None
    claims: list[dict] | None = None
    reasoning: str | None = None
    verdict: str | None = None
    verdict_label: str | None = None


@dataclass(frozen=True)
class PanelConfidence:
    label: str  # low | medium | high
    percent: int


@dataclass(frozen=True)
class Panel:
    """Everything of the AI output one arm shows for one sentence (and nothing else).
    ``traces`` is empty when the AI produced no usable trace for the sentence."""

    components: list[str]
    traces: list[PanelTrace] = field(default_factory=list)
    confidence: PanelConfidence | None = None

    @property
    def trace_ids(self) -> list[int]:
        return [t.sample_id for t in self.traces]

    @property
    def is_debate(self) -> bool:
        return DEBATE in self.components

    def shows(self, component: str) -> bool:
        return component in self.components

    def as_dict(self) -> dict:
        """The API's form: only keys of shown components appear (absent, not null)."""
        out: dict = {"components": list(self.components), "traces": []}
        for t in self.traces:
            row = {k: v for k, v in asdict(t).items() if v is not None and v != ""}
            out["traces"].append(row)
        if self.confidence is not None:
            out["confidence"] = asdict(self.confidence)
        return out


def components_check(components: Sequence[str]) -> list[str]:
    """The components in display order, checked: known codes, evidence ⇒ search, debate ⇒
    no confidence and at least one trace component."""
    unknown = [c for c in components if c not in COMPONENTS]
    if unknown:
        raise ValueError(f"components: unknown '{unknown[0]}' (use {', '.join(COMPONENTS)})")
    chosen = [c for c in COMPONENTS if c in components]
    if EVIDENCE in chosen and SEARCH not in chosen:
        raise ValueError("components: evidence implies search results")
    if DEBATE in chosen and CONFIDENCE in chosen:
        raise ValueError("components: a debate shows no confidence")
    if DEBATE in chosen and not any(c in chosen for c in TRACE_COMPONENTS):
        raise ValueError("components: a debate needs something of its traces to show")
    return chosen


def _trace_view(stored: StoredTrace, components: Sequence[str]) -> PanelTrace:
    trace = stored.trace
    show = set(components)
    searches = evidence = claims = reasoning = verdict = label = None
    if SEARCH in show:
        searches = [{"query": s["query"],
                     "results": [{"title": r.get("title", ""), "url": r["url"],
                                  "snippet": r["snippet"]} for r in s["results"]]}
                    for s in trace.get("searches", [])]
    if EVIDENCE in show:
        evidence = [{"id": e["id"], "url": e["url"], "title": e.get("title", ""),
                     "quote": e["quote"]} for e in trace.get("evidence", [])]
    if REASONING in show:
        claims = []
        for c in trace.get("claims", []):
            row = {"text": c["text"], "reasoning": c["reasoning"]}
            if EVIDENCE in show:
                row["evidence_ids"] = list(c.get("evidence_ids", []))
            if JUDGMENTS in show:
                row["verdict"] = c["verdict"]
                row["verdict_label"] = VERDICT_LABELS.get(c["verdict"], c["verdict"])
            claims.append(row)
        reasoning = trace.get("reasoning", "") or None
    if JUDGMENTS in show:
        verdict = trace["verdict"]
        label = VERDICT_LABELS.get(verdict, verdict)
    # A debate side names a verdict: shown only with judgments.
    side = stored.side if DEBATE in show and JUDGMENTS in show else ""
    return PanelTrace(sample_id=stored.sample_id, side=side,
                      searches=searches, evidence=evidence, claims=claims,
                      reasoning=reasoning, verdict=verdict, verdict_label=label)


def confidence_shown(*, n_agree: int | None, n_verified: int | None,
                     confidence: float | None,
                     cutoffs: tuple[float, float]) -> PanelConfidence | None:
    """The AI's confidence as raters see it: from the sample counts when known
    (``confidence_band``), else from the stored share (imported AI ratings)."""
    if n_agree is not None and n_verified:
        band = confidence_band(n_agree, n_verified, cutoffs)
        return PanelConfidence(band.label, band.percent)
    if confidence is None:
        return None
    share = Fraction(str(confidence))
    low, high = (Fraction(str(c)) for c in cutoffs)
    label = "low" if share < low else "medium" if share < high else "high"
    percent = int(share * 100 + Fraction(1, 2))
    return PanelConfidence(label, percent)


def panel_build(components: Sequence[str], *, displayed: StoredTrace | None,
                debate: Sequence[StoredTrace] = (),
                confidence: PanelConfidence | None = None) -> Panel | None:
    """The panel of an arm with ``components`` (None for the baseline: nothing shown).
    A debate arm shows the two ``debate`` traces (in the given order; when the AI argued
    only one side, the displayed trace alone); other arms the ``displayed`` trace."""
    chosen = components_check(components)
    if not chosen:
        return None
    if DEBATE in chosen:
        stored = list(debate) if len(debate) == 2 else ([displayed] if displayed else [])
    else:
        stored = [displayed] if displayed is not None else []
    traces = [_trace_view(s, chosen) for s in stored]
    shown_confidence = confidence if CONFIDENCE in chosen and traces else None
    return Panel(components=chosen, traces=traces, confidence=shown_confidence)


def panel_html(panel: Panel | None, *, preview: bool = False) -> str:
    """The panel rendered by ``assisted/_panel.html`` ('' for a baseline arm)."""
    if panel is None:
        return ""
    from django.template.loader import render_to_string

    return render_to_string("assisted/_panel.html", {"panel": panel, "preview": preview})


def panel_sha256(content: str | dict | None) -> str:
    """SHA-256 (hex) of a rendered panel (text) or of an API panel (canonical JSON: sorted
    keys, no spaces, UTF-8); of the empty string for no panel."""
    if content is None:
        content = ""
    if isinstance(content, dict):
        content = json.dumps(content, sort_keys=True, separators=(",", ":"),
                             ensure_ascii=False)
    return hashlib.sha256(content.encode("utf-8")).hexdigest()
