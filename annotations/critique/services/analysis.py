"""A critique study's analysis: its records read in two queries, the tables of
``estimators.critique.critique_report`` (the paper's Tables 1–3 and 5, per level and
domain, intervals clustered by question and annotator), progress and position counts,
stored as an ``EstimateSnapshot`` (the same snapshots, scheduling and health as every study:
``services.recompute``, where this module registers the critique kind).

The estimators see each output as ``OutputRecord(id, question, level, parent_a, parent_b,
final, choice, confidence, time_ms, author, tree=None, annotator)`` — ``annotator`` the
writer's user id (None for the AI's outputs), so that the intervals cluster by annotator as
well as by question — with parent_a / parent_b = the inputs in the order the writer saw
them, so ``choice`` 0 = the input shown first, 1 = second; "neither" and an unparseable AI
choice are both None there (the snapshot counts unparseable choices
separately, ``choices``). Ties of the majority votes are broken with the study's seed.
"""

from __future__ import annotations

import math
import time

from django.db.models import Count, Q
from scipy import stats

from annotations.core.exclusion_models import answers_left_out
from annotations.core.models import EstimateSnapshot, ItemFlag, Study
from annotations.core.services.recompute import snapshot_store
from annotations.critique.models import (
    CritiqueOutput,
    CritiqueQuestion,
    CritiqueSettings,
    CritiqueTask,
)
from estimators.critique import CritiqueStudy, critique_report

CHOICE_CODE = {"first": 0, "second": 1}
SEED_MASK = 2**63 - 1


def rejected_outputs(study: Study) -> set[int]:
    """The ids of the outputs the estimates leave out for reviews and exclusions: every
    rejected or excluded output (``answers_left_out``) and every critique built on one,
    level by level (a critique judged a pair one of whose inputs no longer counts: its
    choice compares nothing the analysis keeps, and the chains need both inputs)."""
    rejected = set(CritiqueOutput.objects.filter(answers_left_out(study, CritiqueOutput),
                                                 study=study).values_list("pk", flat=True))
    if not rejected:
        return rejected
    for output_id, first, second in (CritiqueOutput.objects.filter(study=study, level__gt=0)
                                     .order_by("level", "pk")
                                     .values_list("pk", "first_id", "second_id")):
        if first in rejected or second in rejected:
            rejected.add(output_id)
    return rejected


def study_records(study: Study) -> tuple[list[tuple], list[tuple]]:
    """(questions, outputs) as the estimators' record tuples (module docstring); withdrawn
    questions (flags) and their outputs are left out, and so are rejected outputs with the
    critiques built on them (:func:`rejected_outputs`)."""
    withdrawn = ItemFlag.withdrawn_ids(study)
    questions = list(CritiqueQuestion.objects.filter(study=study).exclude(pk__in=withdrawn)
                     .values_list("id", "gold", "domain"))
    left_out = rejected_outputs(study)
    rows = [row for row in CritiqueOutput.objects.filter(study=study)
            .exclude(question_id__in=withdrawn)
            .values_list("id", "question_id", "level", "first_id", "second_id", "final",
                         "choice", "confidence", "time_ms", "author_kind", "author_id")
            if row[0] not in left_out]
    code = CHOICE_CODE.get
    outputs = [(i, q, lv, a, b, f, code(c), None if cf is None else float(cf),
                None if t is None else float(t), who, None, user if who == "human" else None)
               for i, q, lv, a, b, f, c, cf, t, who, user in rows]
    return questions, outputs


def answered_counts(study_ids: list[int]) -> dict[int, int]:
    """Outputs per study (a snapshot's ``n_answered``): the sweeper's check."""
    return dict(CritiqueOutput.objects.filter(study_id__in=study_ids).values_list("study_id")
                .annotate(n=Count("id")).values_list("study_id", "n"))


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _progress(study: Study, settings: CritiqueSettings) -> list[dict]:
    """Per level: who writes it, tasks by status, outputs by author kind, unparseable —
    of the questions not withdrawn (flags), which alone are planned."""
    withdrawn = ItemFlag.withdrawn_ids(study)
    tasks = {row["level"]: row for row in CritiqueTask.objects.filter(study=study)
             .exclude(question_id__in=withdrawn)
             .values("level").annotate(
                 pending=Count("id", filter=Q(status=CritiqueTask.Status.PENDING)),
                 leased=Count("id", filter=Q(status=CritiqueTask.Status.LEASED)),
                 answered=Count("id", filter=Q(status=CritiqueTask.Status.ANSWERED)))}
    outputs = {row["level"]: row for row in CritiqueOutput.objects.filter(study=study)
               .exclude(question_id__in=withdrawn).values("level").annotate(
                   human=Count("id", filter=Q(author_kind="human")),
                   ai=Count("id", filter=Q(author_kind="ai")),
                   unparseable=Count("id", filter=Q(final__isnull=True)),
                   annotators=Count("author", distinct=True))}
    n_questions = CritiqueQuestion.objects.filter(study=study).exclude(pk__in=withdrawn).count()
    rows = []
    for level in settings.levels:
        t, o = tasks.get(level, {}), outputs.get(level, {})
        planned = settings.count_at(level) * n_questions
        done = o.get("human", 0) + o.get("ai", 0)
        rows.append({"level": level, "writer": "humans" if settings.human_level(level) else "ai",
                     "planned": planned, "pending": t.get("pending", 0),
                     "leased": t.get("leased", 0), "answered": t.get("answered", 0),
                     "human": o.get("human", 0), "ai": o.get("ai", 0),
                     "unparseable": o.get("unparseable", 0),
                     "annotators": o.get("annotators", 0),
                     "completion": done / planned if planned else None})
    return rows


def _choices(study: Study) -> list[dict]:
    """Per level and author kind: how often a critique chose the input shown first, second,
    neither, or gave no parseable choice; the share of "first" among first/second with an
    exact binomial test against ½ (position bias). Withdrawn questions and rejected outputs
    left out."""
    rows = []
    counts = (CritiqueOutput.objects.filter(study=study, level__gt=0)
              .exclude(question_id__in=ItemFlag.withdrawn_ids(study))
              .exclude(pk__in=rejected_outputs(study))
              .values("level", "author_kind").annotate(
                  first=Count("id", filter=Q(choice="first")),
                  second=Count("id", filter=Q(choice="second")),
                  neither=Count("id", filter=Q(choice="neither")),
                  unparseable=Count("id", filter=Q(choice="unparseable")))
              .order_by("level", "author_kind"))
    for row in counts:
        picked = row["first"] + row["second"]
        p_value = (float(stats.binomtest(row["first"], picked, 0.5).pvalue) if picked
                   else None)
        rows.append({**row, "first_share": row["first"] / picked if picked else None,
                     "p_value": p_value})
    return rows


def critique_payload(study: Study) -> dict:
    """Everything the dashboard shows (plain JSON)."""
    settings = CritiqueSettings.objects.get(study=study)
    questions, outputs = study_records(study)
    payload = {
        "kind": "critique", "n_answered": len(outputs), "top_level": settings.top_level,
        "mode": settings.mode, "counts": settings.counts,
        "n_questions": len(questions), "progress": _progress(study, settings),
        "choices": _choices(study), "seed": study.seed & SEED_MASK,
    }
    if not outputs:
        payload.update(levels=[], human_ai=[], input_pairs=[], domains=[], authors=[],
                       n_scored_questions=0)
        return payload
    data = CritiqueStudy.from_records(questions, outputs)
    report = critique_report(data, seed=study.seed & SEED_MASK)
    payload.update(
        levels=report.level_rows(), human_ai=report.human_ai_rows(),
        input_pairs=report.input_pair_rows(), domains=list(report.domains),
        authors=list(report.authors), n_scored_questions=report.n_scored_questions)
    return payload


def critique_recompute(*, study_id: int) -> EstimateSnapshot:
    """Recompute a critique study into a new snapshot (the Celery recompute calls this
    through ``services.recompute.study_recompute_any``)."""
    started = time.perf_counter()
    study = Study.objects.get(pk=study_id)
    payload = critique_payload(study)
    duration_ms = (time.perf_counter() - started) * 1000
    return snapshot_store(study=study, payload=payload, duration_ms=duration_ms)

