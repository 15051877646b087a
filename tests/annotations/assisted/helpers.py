"""Builders for assisted-study tests, through the real services: sentences, traces whose
every field carries a distinctive marker (to prove what reaches a rater), arms, raters."""

from __future__ import annotations

import io
import itertools
import json

from annotations.assisted.services.design import (
    arm_save,
    assisted_study_create,
    quiz_of,
    settings_of,
)
from annotations.assisted.services.imports import sentences_import, traces_import
from annotations.assisted.services.raters import quiz_submit, rater_join, warning_acknowledge
from annotations.core.services.studies import membership_add, study_open
from annotations.models import Arm, Study, StudyMembership, User
from tests.factories import UserFactory

_names = itertools.count()

# Per field of a trace, the marker written into it (followed by the sample's tag).
MARKERS = {
    "search": ("QUERYMK", "RESULTTITLEMK", "SNIPPETMK"),
    "evidence": ("EVTITLEMK",),
    "reasoning": ("CLAIMTEXTMK", "REASONMK", "OVERALLMK"),
}


def jsonl(records: list[dict]) -> io.StringIO:
    return io.StringIO("\n".join(json.dumps(r) for r in records))


def marked_trace(tag: str, verdict: str) -> dict:
    """A trace passing the format verifier, every text field marked with ``tag``."""
    quote = f"quote QUOTEMK{tag} verbatim"
    url = f"https://example.org/{tag.lower()}"
    return {
        "claims": [{"text": f"claim CLAIMTEXTMK{tag}", "reasoning": f"since REASONMK{tag} [1]",
                    "evidence_ids": [1], "verdict": verdict}],
        "searches": [{"query": f"query QUERYMK{tag}", "results": [
            {"title": f"page RESULTTITLEMK{tag}", "url": url,
             "snippet": f"snippet SNIPPETMK{tag} then {quote} and more"}]}],
        "evidence": [{"id": 1, "url": url, "title": f"source EVTITLEMK{tag}", "quote": quote}],
        "verdict": verdict,
        "reasoning": f"overall OVERALLMK{tag}",
    }


def sentence_records(n: int, *, gold: str = "accurate") -> list[dict]:
    return [{"id": f"s{i}", "prompt": f"Prompt {i}?", "response": f"Response {i}. More.",
             "sentence": f"Target sentence {i}.", "gold": gold, "stratum": f"g{i % 2}"}
            for i in range(n)]


def trace_records(ids: list[str], verdicts: tuple[str, ...] = ("inaccurate", "inaccurate",
                                                              "accurate")) -> list[dict]:
    """Samples per sentence with the given verdicts; sample k of sentence s is tagged
    ``<s>X<k>`` (e.g. s0X2)."""
    return [{"sentence": ext, "sample": k, "trace": marked_trace(f"{ext}X{k}", v)}
            for ext in ids for k, v in enumerate(verdicts)]


def make_assisted_study(*, n_sentences: int = 6, arms: dict[str, list[str]] | None = None,
                        traces: bool = True, open_: bool = True, seed: int = 11,
                        ratings_per_item: int = 2, **settings) -> Study:
    """An assisted study with a baseline arm plus ``arms`` (name → components), sentences
    with marked traces (AI rating: inaccurate, confidence 2/3 by default), a researcher."""
    study = assisted_study_create(name=f"assisted-{next(_names)}-{seed}", seed=seed,
                                  ratings_per_item=ratings_per_item, **settings)
    for i, (name, components) in enumerate((arms or {}).items(), start=1):
        arm_save(arm=Arm(study=study, name=name, position=i,
                         **{f"show_{c}": True for c in components}))
    if n_sentences:
        sentences_import(study=study, source=jsonl(sentence_records(n_sentences)),
                         name="sentences.jsonl")
    if traces and n_sentences:
        traces_import(study=study, source=jsonl(trace_records(
            [f"s{i}" for i in range(n_sentences)])), name="traces.jsonl")
    researcher = UserFactory(username=f"{study.pk}-researcher", is_staff=True)
    membership_add(study=study, user=researcher, role=StudyMembership.Role.RESEARCHER)
    if open_:
        study_open(study=study)
    return study


def add_rater(study: Study, name: str | None = None, *, ready: bool = True) -> User:
    """A new annotator of the study, joined (arm drawn) and, with ``ready``, past the
    quiz and the assistant's warning."""
    user = UserFactory(username=name or f"{study.pk}-rater{next(_names)}")
    membership_add(study=study, user=user, role=StudyMembership.Role.ANNOTATOR)
    assignment = rater_join(study=study, user=user)
    if ready:
        quiz_submit(study=study, user=user,
                    answers=[q["answer"] for q in quiz_of(settings_of(study))])
        if assignment.components:
            warning_acknowledge(study=study, user=user)
    return user


def rater_in_arm(study: Study, arm_name: str) -> User:
    """Raters join until one is drawn into ``arm_name`` (balanced blocks: within one block)."""
    for _ in range(2 * Arm.objects.filter(study=study, is_active=True).count()):
        user = add_rater(study)
        if user.rater_assignments.get(study=study).arm.name == arm_name:
            return user
    raise AssertionError(f"no rater drawn into {arm_name}")
