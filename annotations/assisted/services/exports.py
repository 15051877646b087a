"""Exporting an assisted study's ratings (CSV or JSONL through ``core.exports``): one row per
rating with what its rater was shown and what they opened.

Columns: ``rating_id``, ``task`` (the task's public id), ``sentence`` (its id as imported),
``stratum``, ``arm``, ``arm_version``, ``rater``, ``label``, ``confidence`` (0–3, the API's
values; empty for "can't confidently assess") and ``confidence_label`` (its words on the rating
page: "Not at all confident" … "Completely confident"), ``helpfulness`` (0–2; assisted arms) and
``helpfulness_label`` ("Not at all helpful" … "Extremely helpful"), ``comment``,
``time_on_task_ms``,
``rated_at``; what was shown — ``shown_components`` (empty: nothing, the blind arm),
``shown_trace_ids``, ``panel_sha256``, ``shown_via`` (page or api), ``shown_at``; and what the
rater did with it — ``interactions``, a list of {kind, section, target, at} in time order."""

from __future__ import annotations

from collections import defaultdict
from typing import IO

from annotations.assisted.models import Interaction, Rating
from annotations.core.exports import rows_write
from annotations.core.models import Study

RATING_FIELDS = [
    "rating_id", "task", "sentence", "stratum", "arm", "arm_version", "rater", "label",
    "confidence", "confidence_label", "helpfulness", "helpfulness_label", "comment",
    "time_on_task_ms", "rated_at", "shown_components", "shown_trace_ids", "panel_sha256",
    "shown_via", "shown_at", "interactions",
]
CHUNK = 2000


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def _words(scale, value: int | None) -> str:
    """The words the rating page shows for ``value`` on ``scale`` ("" when not asked)."""
    return "" if value is None else str(scale(value).label)  # English: exports run in it


def rating_rows(study: Study):
    ratings = (Rating.objects.filter(study=study)
               .select_related("task", "sentence", "arm", "rater", "exposure")
               .order_by("created_at", "pk"))
    batch: list[Rating] = []
    for rating in ratings.iterator(chunk_size=CHUNK):
        batch.append(rating)
        if len(batch) == CHUNK:
            yield from _rows(batch)
            batch = []
    yield from _rows(batch)


def _rows(ratings: list[Rating]):
    done: dict[int, list[dict]] = defaultdict(list)
    for i in (Interaction.objects.filter(task_id__in=[r.task_id for r in ratings])
              .order_by("at", "pk").values("task_id", "rater_id", "kind", "section", "target",
                                           "at")):
        done[(i["task_id"], i["rater_id"])].append(
            {"kind": i["kind"], "section": i["section"], "target": i["target"],
             "at": _iso(i["at"])})
    for r in ratings:
        shown = r.exposure
        yield {
            "rating_id": r.pk, "task": r.task.public_id, "sentence": r.sentence.external_id,
            "stratum": r.sentence.stratum, "arm": r.arm.name, "arm_version": r.arm_version,
            "rater": r.rater.username, "label": r.label, "confidence": r.confidence,
            "confidence_label": _words(Rating.Confidence, r.confidence),
            "helpfulness": r.helpfulness,
            "helpfulness_label": _words(Rating.Helpfulness, r.helpfulness),
            "comment": r.comment,
            "time_on_task_ms": r.time_on_task_ms, "rated_at": _iso(r.created_at),
            "shown_components": shown.components if shown else None,
            "shown_trace_ids": shown.trace_ids if shown else None,
            "panel_sha256": shown.panel_sha256 if shown else None,
            "shown_via": shown.via if shown else None,
            "shown_at": _iso(shown.shown_at) if shown else None,
            "interactions": done.get((r.task_id, r.rater_id), []),
        }


def ratings_export(*, study: Study, out: IO[str], fmt: str = "csv") -> int:
    """Write every rating of the study to ``out``; returns the number of rows."""
    return rows_write(rating_rows(study), out=out, fmt=fmt, fields=RATING_FIELDS)
