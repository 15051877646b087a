"""Importing an assisted study's sentences (CSV or JSONL) and its AI traces (JSONL).

Both are atomic — the whole file or nothing — and every problem is reported as
``file:line: field: problem`` (``ImportFailed`` lists them all).

Sentence fields: ``id``, ``prompt``, ``response``, ``sentence`` (the target sentence of
the response; ``target`` is accepted too), optional ``gold`` (a verdict, code or label;
hidden from raters), ``stratum``, ``metadata`` (a JSON object), ``searches`` (search
results given to the AI rater: a JSON list of {query, results: [{title, url, snippet}]}),
and ``ai_verdict`` with ``ai_confidence`` (an AI rating made elsewhere; both or neither).

Trace lines: ``{"sentence": id, "sample": n, "score": x, "trace": {…}}``
(``assistants.traces.read_trace_file``). A sentence's samples in the file replace the ones
it had, unless a rater was already shown them (refused). Samples are verified
(``assistants.traces.verify``: failing ones are kept with their reasons and do not count)
and aggregated into the AI rating; an open study routes the sentences then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from django.db import transaction

from annotations.assisted.models import Sentence
from annotations.assisted.services.ai import ai_rating_store, searches_of, sentences_shown
from annotations.assisted.services.design import settings_of
from annotations.assisted.services.ranks import sentence_rank
from annotations.assisted.services.routing import sentences_reroute, sentences_route
from annotations.core.errors import ImportFailed
from annotations.core.models import Study
from annotations.core.services.bulk import gc_paused, rows_insert
from annotations.core.services.records import (
    KeysSeen,
    error_line,
    parse_json_cell,
    read_records,
    unknown_fields,
)
from annotations.core.words import counted
from assistants.aggregation import samples_from_records
from assistants.models import TraceSample
from assistants.traces import TraceInvalid, parse_trace, parse_verdict, read_trace_file

SENTENCE_FIELDS = {"id", "prompt", "response", "sentence", "target", "gold", "stratum",
                   "metadata", "searches", "ai_verdict", "ai_confidence"}
SENTENCE_COLUMNS = {"id": Sentence._meta.get_field("external_id"),
                    "stratum": Sentence._meta.get_field("stratum"),
                    "prompt": Sentence._meta.get_field("prompt"),
                    "response": Sentence._meta.get_field("response"),
                    "sentence": Sentence._meta.get_field("target"),
                    "target": Sentence._meta.get_field("target")}


@dataclass(frozen=True)
class SentenceImportResult:
    created: int
    routed: int = 0

    def summary(self) -> str:
        return f"{counted(self.created, 'sentence')} created" + (
            f", {self.routed} routed." if self.routed else ".")

    def details(self) -> list[tuple[str, str, str]]:
        """The summary's own rows (``import_jobs.import_summary``); sentences are never
        rewritten (updated is 0)."""
        return [("Routed at once (the study is open)", f"{self.routed:,}", "routed")]

    def next_step(self) -> str:
        if self.routed:
            return "The new sentences are routed: raters get them now."
        return ("Import the AI traces of these sentences (or sample them from the study's "
                "page), then open the study.")


@dataclass(frozen=True)
class TraceImportResult:
    samples: int
    sentences: int
    verified: int
    routed: int = 0
    replaced: int = 0  # sentences whose earlier samples these replace

    @property
    def created(self) -> int:
        return self.samples

    @property
    def updated(self) -> int:
        return self.replaced

    def summary(self) -> str:
        return (f"{counted(self.samples, 'trace sample')} for "
                f"{counted(self.sentences, 'sentence')} "
                f"({self.verified} verified).")

    def details(self) -> list[tuple[str, str, str]]:
        """The summary's own rows (``import_jobs.import_summary``): created counts trace
        samples, updated the sentences whose earlier samples they replace."""
        return [("Sentences", f"{self.sentences:,}", "sentences"),
                ("Samples passing the format verifier", f"{self.verified:,}", "verified")]

    def next_step(self) -> str:
        return ("Check the AI ratings on the study's page (samples failing the verifier are "
                "kept with their reasons and do not count), then open the study to raters.")


def parse_searches(value: object) -> list[dict] | None:
    """Search results given to the AI rater, checked by the trace schema (paths such as
    ``searches[0].results[1].url``); None when empty. ValueError naming the problem; a
    TraceInvalid (a ValueError) with every problem of the results in ``problems``."""
    if value in (None, ""):
        return None
    value = parse_json_cell(value, expect=list)
    trace = parse_trace({"claims": [], "searches": value, "verdict": "accurate"})
    return trace.to_dict()["searches"]


def _text(rec: dict, *names: str) -> str:
    for name in names:
        value = rec.get(name)
        if value not in (None, ""):
            return str(value).strip()
    return ""


@transaction.atomic
def sentences_import(*, study: Study, source: IO | str, name: str | None = None,
                     fmt: str | None = None, update: bool = False) -> SentenceImportResult:
    """Import sentences (see the module). Existing ids are an error (``update`` is not
    supported: a sentence's text is what its ratings answer)."""
    settings_of(study)
    label = name or getattr(source, "name", None) or str(source)
    errors: list[str] = []
    if update:
        raise ImportFailed([f"{label}: sentences cannot be updated; import new ids"])
    existing = set(Sentence.objects.filter(study=study).values_list("external_id", flat=True))
    seen = KeysSeen(existing)
    rows: list[dict] = []
    with gc_paused():
        for line, rec in read_records(source, name=name, fmt=fmt, columns=SENTENCE_COLUMNS,
                                      problems=errors):
            row, problems = _sentence_row(study, rec, seen, line)
            if problems:
                errors += [f"{label}:{line}: {problem}" for problem in problems]
            else:
                rows.append(row)
    if errors:
        raise ImportFailed(errors)
    if not rows:
        raise ImportFailed([f"{label}: no sentences in the file"])
    rows_insert(Sentence, rows)
    created = Sentence.objects.filter(study=study, external_id__in=[r["external_id"]
                                                                   for r in rows])
    routed = sentences_route(study=study, sentences=list(created.only("pk")))
    return SentenceImportResult(created=len(rows), routed=routed)


def _sentence_ai(rec: dict) -> tuple[dict, str | None]:
    """The AI rating a sentence brings (``ai_verdict`` with ``ai_confidence``), or its
    first problem."""
    has_verdict = rec.get("ai_verdict") not in (None, "")
    has_confidence = rec.get("ai_confidence") not in (None, "")
    if has_verdict != has_confidence:
        missing = "ai_confidence" if has_verdict else "ai_verdict"
        return {}, f"{missing}: give ai_verdict and ai_confidence together"
    if not has_verdict:
        return {}, None
    try:
        verdict = parse_verdict(str(rec["ai_verdict"]), "ai_verdict")
    except TraceInvalid as exc:
        return {}, f"ai_verdict: {exc.message}"
    try:
        confidence = float(rec["ai_confidence"])
    except (TypeError, ValueError):
        return {}, f"ai_confidence: '{rec['ai_confidence']}' is not a number"
    if isinstance(rec["ai_confidence"], bool) or not 0.0 <= confidence <= 1.0:
        return {}, "ai_confidence: must lie between 0 and 1"
    return {"ai_verdict": verdict, "ai_confidence": confidence,
            "ai_source": Sentence.AiSource.IMPORTED}, None


def _sentence_row(study: Study, rec: dict, seen: KeysSeen, line: int
                  ) -> tuple[dict, list[str]]:
    """One line of a sentences file as the sentence's row, or every problem of the line."""
    problems = unknown_fields(rec, SENTENCE_FIELDS, "one of " + ", ".join(
        sorted(SENTENCE_FIELDS - {"target"})))
    ext = _text(rec, "id")
    if problem := seen.problem(ext, line):
        problems.append(problem)
    texts = {}
    for field, names in (("prompt", ("prompt",)), ("response", ("response",)),
                         ("sentence", ("sentence", "target"))):
        texts[field] = _text(rec, *names)
        if not texts[field]:
            problems.append(f"{field}: missing")
    gold = ""
    if rec.get("gold") not in (None, ""):
        try:
            gold = parse_verdict(str(rec["gold"]), "gold")
        except TraceInvalid as exc:
            problems.append(f"gold: {exc.message}")
    metadata = searches = None
    try:
        metadata = parse_json_cell(rec.get("metadata"), expect=dict)
    except (ValueError, TypeError) as exc:
        problems.append(f"metadata: {exc}")
    try:
        searches = parse_searches(rec.get("searches"))
    except TraceInvalid as exc:  # every bad field of the results, each with its path
        problems += [f"searches: {p.path}: {p.message}" for p in exc.problems]
    except (ValueError, TypeError) as exc:
        problems.append(f"searches: {exc}")
    ai, problem = _sentence_ai(rec)
    if problem:
        problems.append(problem)
    if problems:
        return {}, problems
    return {"study_id": study.pk, "external_id": ext, "prompt": texts["prompt"],
            "response": texts["response"], "target": texts["sentence"], "gold": gold,
            "stratum": _text(rec, "stratum"), "metadata": metadata, "searches": searches,
            "rank": sentence_rank(study.seed, ext), **ai}, []


@transaction.atomic
def traces_import(*, study: Study, source: IO | str, name: str | None = None,
                  fmt: str | None = None, update: bool = False) -> TraceImportResult:
    """Import trace samples from JSONL (see the module); ``fmt`` and ``update`` are
    accepted for the shared upload page and ignored (traces are JSONL; a sentence's samples
    are always replaced while no rater saw them)."""
    settings = settings_of(study)
    label = name or getattr(source, "name", None) or "upload.jsonl"
    errors: list[str] = []
    with gc_paused():
        known = set(Sentence.objects.filter(study=study).values_list("external_id",
                                                                      flat=True))
        records = read_trace_file(source, name=label, sentences=known, problems=errors)
    by_id = {s.external_id: s for s in Sentence.objects.filter(
        study=study, external_id__in={r.sentence for r in records})}
    shown = sentences_shown(s.pk for s in by_id.values())
    first_line: dict[str, int] = {}
    for r in records:
        first_line.setdefault(r.sentence, r.line)
    errors += [f"{label}:{first_line[ext]}: sentence: '{ext}' — raters were already shown "
               f"its AI output; its traces cannot be replaced"
               for ext, s in by_id.items() if s.pk in shown]
    if errors:
        raise ImportFailed(sorted(errors, key=error_line))
    given = {ext: searches_of(s) for ext, s in by_id.items() if s.searches is not None}
    grouped = samples_from_records(records, given=given)
    replaced = TraceSample.objects.filter(sentence_id__in=[by_id[e].pk for e in grouped]
                                          ).values("sentence_id").distinct().count()
    verified = 0
    for ext, samples in grouped.items():
        sentence = Sentence.objects.select_for_update().get(pk=by_id[ext].pk)
        ai_rating_store(sentence=sentence, samples=samples, source=TraceSample.Source.IMPORTED,
                        settings=settings)
        verified += sum(1 for s in samples if s.verified)
    ids = [by_id[e].pk for e in grouped]
    sentences_reroute(study=study, sentence_ids=ids)
    routed = Sentence.objects.filter(pk__in=ids).exclude(route=Sentence.Route.WAITING).count()
    return TraceImportResult(samples=len(records), sentences=len(grouped), verified=verified,
                             routed=routed, replaced=replaced)
