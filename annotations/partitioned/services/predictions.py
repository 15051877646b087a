"""Writes of the assistants app: AI systems and their predictions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import IO

from django.db import connection, transaction
from django.db.models import Count, F, Q

from annotations.core.errors import DomainError, ImportFailed
from annotations.core.models import Item, Study
from annotations.core.services.bulk import IN_LIST_MAX, gc_paused, rows_insert, rows_update
from annotations.core.services.progress import progress_phase
from annotations.core.services.records import (
    UPDATE_HINT,
    KeysSeen,
    error_line,
    option_index,
    option_text,
    read_records,
    unknown_fields,
    unknown_id,
)
from annotations.core.words import counted
from annotations.partitioned.models import Query
from annotations.partitioned.services.banding import DEFAULT_N_BANDS, systems_bands_refresh
from annotations.partitioned.services.designs import redraw_after_predictions
from assistants.band_edges import MAX_CONFIDENCE_BANDS, edges_problem
from assistants.models import MAX_SYSTEMS_PER_STUDY, AISystem, ConfidenceBands, Prediction
from assistants.systems import system_create  # noqa: F401 - used here and re-exported

PREDICTION_FIELDS = {"item_id", "system", "prediction", "prediction_index", "confidence"}
# Input fields stored in a column: read_records refuses objects there and over-long text.
PREDICTION_COLUMNS = {"item_id": Item._meta.get_field("external_id"),
                      "system": AISystem._meta.get_field("name")}


@dataclass(frozen=True)
class PredictionImportResult:
    created: int
    updated: int
    systems_created: list[str]
    # per system: non-empty predictions that name no option (stored raw, scored as wrong)
    unparseable: dict[str, int] = field(default_factory=dict)
    # per system: rows with an empty prediction (also scored as wrong)
    missing: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """One line for the admin message and the command output."""
        text = f"{counted(self.created, 'prediction')} created, {self.updated} updated."
        if self.systems_created:
            text += f" New systems: {', '.join(self.systems_created)}."
        for label, counts in (("unparseable (no option has that text)", self.unparseable),
                              ("missing", self.missing)):
            if counts:
                listed = ", ".join(f"{name} {n}" for name, n in sorted(counts.items()))
                text += f" {label.capitalize()}, scored as wrong answers: {listed}."
        return text

    def details(self) -> list[tuple[str, str, str]]:
        """The summary's own rows (``import_jobs.import_summary``)."""
        def per_system(counts: dict[str, int]) -> str:
            return ", ".join(f"{name}: {n:,}" for name, n in sorted(counts.items())) or "none"

        return [("New AI systems", ", ".join(self.systems_created) or "none", "systems"),
                ("Unparseable (no option has that text), scored as wrong",
                 per_system(self.unparseable), "unparseable"),
                ("Missing (empty), scored as wrong", per_system(self.missing), "missing")]

    def next_step(self) -> str:
        return ("Open the study (or look at its dashboard if it is open): the AI accuracy "
                "estimates score these predictions against the specialists' answers.")


# The prediction rule shares its readers with the items' gold (annotations.core.services.records).
prediction_text = option_text
prediction_index = option_index


def prediction_confidence(value) -> float | None:
    """A ``confidence`` value: a number from 0 to 1 (JSON number or its text). None when
    empty; ValueError otherwise (the message names the problem)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError(f"'{value}' is not a number")
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ValueError(f"'{value}' is not a number") from None
    elif isinstance(value, int | float):
        number = float(value)
    else:
        raise ValueError(f"{value!r} is not a number")
    if not math.isfinite(number):
        raise ValueError(f"'{value}' is not a finite number")
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{value} is outside 0..1 (a share, not a percentage)")
    return number


def _items_by_external_id(study: Study, ids: set[str]) -> dict[str, tuple[int, list, list]]:
    """external id → (pk, options, option_order) of the study's items among ``ids``."""
    qs = Item.objects.filter(study=study)
    if len(ids) <= IN_LIST_MAX:
        qs = qs.filter(external_id__in=ids)
    rows = qs.values_list("external_id", "pk", "options", "option_order")
    return {ext: (pk, options, order) for ext, pk, options, order in rows if ext in ids}


@transaction.atomic
def predictions_import(
    *,
    study: Study,
    source: IO | str,
    name: str | None = None,
    fmt: str | None = None,
    update: bool = False,
) -> PredictionImportResult:
    """Import predictions (fields item_id, system, and prediction or prediction_index) from
    CSV or JSONL, all or nothing.

    The rule, never a guess: ``prediction`` is the predicted option's text (or class name
    for items without options), matched exactly after trimming spaces; a JSON number is
    read as its text (3 and 3.0 both mean the option "3"). A text that names no option is
    stored raw and scored as a wrong answer; the result counts these per system
    (``unparseable``), and empty predictions (``missing``). ``prediction_index`` is the
    0-based index of the original option (integers, 3.0 or "3"); a value that is not an
    index of the item is an error. A row gives one of the two, not both. ``confidence``
    (optional) is the system's own confidence in its answer, a number from 0 to 1: the
    dashboard then estimates its accuracy per confidence band
    (``annotations.partitioned.services.banding``).
    Unknown item ids, duplicates and bad indexes are errors naming file, line and field;
    existing (system, item) pairs are errors unless ``update``. Unknown system names create
    the system. Answered queries' masks are refreshed in the same transaction."""
    with gc_paused():
        return _predictions_import(study=study, source=source, name=name, fmt=fmt,
                                   update=update)


def _predictions_import(*, study: Study, source: IO | str, name: str | None,
                        fmt: str | None, update: bool) -> PredictionImportResult:
    label = name or getattr(source, "name", None) or str(source)
    class_names = list(study.classes.order_by("index").values_list("name", flat=True))
    errors: list[str] = []
    rows: list[tuple[int, str, str, object, object, float | None]] = []
    named: list[tuple[int, str]] = []  # (line, item id) of every line that names an item
    seen = KeysSeen()
    for line, rec in read_records(source, name=name, fmt=fmt, columns=PREDICTION_COLUMNS,
                                  problems=errors):
        problems = unknown_fields(rec, PREDICTION_FIELDS, "item_id, system, prediction or "
                                  "prediction_index, and optionally confidence")
        item_id = str(rec.get("item_id") or "").strip()
        system = str(rec.get("system") or "").strip()
        if not item_id:
            problems.append("item_id: missing")
        else:
            named.append((line, item_id))
        if not system:
            problems.append("system: missing")
        usable = bool(item_id)  # its item, option and old prediction are checked below
        if item_id and system and (repeated := seen.problem(
                (system, item_id), line, field="item_id",
                shown=f"'{item_id}' for system '{system}'")):
            problems.append(repeated)
            usable = False
        text, index = rec.get("prediction"), rec.get("prediction_index")
        if prediction_text(text) and prediction_text(index):
            problems.append("prediction_index: give prediction (option text) or "
                            "prediction_index (option index), not both")
            usable = False
        confidence = None
        try:
            confidence = prediction_confidence(rec.get("confidence"))
        except ValueError as exc:
            problems.append(f"confidence: {exc}")
        errors += [f"{label}:{line}: {problem}" for problem in problems]
        if usable:
            rows.append((line, item_id, system, text, index, confidence))
    # every line's item, its option index and an existing prediction are checked in the
    # same pass as the lines' own problems: one upload names every problem of the file
    items = _items_by_external_id(study, {item_id for _, item_id in named})
    errors += [f"{label}:{line}: {unknown_id('item_id', item_id, 'an item')}"
               for line, item_id in named if item_id not in items]
    systems = {s.name: s for s in AISystem.objects.filter(study=study)}
    new_names = sorted({r[2] for r in rows if r[2]} - set(systems))
    if len(systems) + len(new_names) > MAX_SYSTEMS_PER_STUDY:
        errors.append(
            f"{label}: system: {len(new_names)} new systems would exceed "
            f"{MAX_SYSTEMS_PER_STUDY} per study"
        )
    parsed: list[tuple[int, str, str, int, int | None, int | None, str, float | None]] = []
    unparseable: dict[str, int] = {}
    missing: dict[str, int] = {}
    for line, item_id, system_name, text, index, confidence in rows:
        if item_id not in items:
            continue
        item_pk, options, order = items[item_id]
        options = options or class_names
        if prediction_text(index):
            try:
                option = prediction_index(index, len(options))
            except ValueError as exc:
                errors.append(f"{label}:{line}: prediction_index: {exc}")
                continue
            raw = prediction_text(index)
        else:
            raw = prediction_text(text)
            option = options.index(raw) if raw in options else None
            if option is None:
                tally = unparseable if raw else missing
                tally[system_name] = tally.get(system_name, 0) + 1
        position = order.index(option) if option is not None and option in order else None
        parsed.append((line, item_id, system_name, item_pk, option, position,
                       "" if text is None and index is None else raw, confidence))
    used = [systems[n] for n in {r[2] for r in parsed} if n in systems]
    existing_qs = Prediction.objects.filter(system__in=used)
    if len(items) <= IN_LIST_MAX:
        existing_qs = existing_qs.filter(item_id__in=[v[0] for v in items.values()])
    existing = {(s, i): pk for pk, s, i in existing_qs.values_list("pk", "system_id", "item_id")}
    new: list[dict] = []
    changed: list[tuple[int, int | None, int | None, str, float | None]] = []
    for line, item_id, system_name, item_pk, option, position, raw, confidence in parsed:
        system = systems.get(system_name)
        found = None if system is None else existing.get((system.pk, item_pk))
        if found is None:
            new.append({"system_name": system_name, "item_id": item_pk, "option": option,
                        "position": position, "raw": raw, "confidence": confidence})
        elif not update:
            errors.append(
                f"{label}:{line}: item_id: '{item_id}' already has a prediction "
                f"from '{system_name}'{UPDATE_HINT}"
            )
        else:
            changed.append((found, option, position, raw, confidence))
    if errors:
        raise ImportFailed(sorted(errors, key=error_line))
    for system_name in new_names:
        systems[system_name] = system_create(study=study, name=system_name)
    for row in new:
        row["system_id"] = systems[row.pop("system_name")].pk
    progress_phase("writing", total=len(new) + len(changed))
    rows_insert(Prediction, new, batch_size=5000)  # PostgreSQL: COPY
    rows_update(Prediction, ["option", "position", "raw", "confidence"], changed)
    systems_bands_refresh(study=study)
    query_masks_refresh(study=study)
    systems_reference_refresh(study=study)
    redraw_after_predictions(study=study)
    return PredictionImportResult(created=len(new), updated=len(changed),
                                  systems_created=new_names, unparseable=unparseable,
                                  missing=missing)


@transaction.atomic
def prediction_set(*, system: AISystem, item: Item, option: int | None) -> Prediction:
    """Create or replace one prediction (the admin form): the option is an original option
    index of the item (None: missing). Refuses an item of another study than the system;
    refreshes the item's answered queries' masks and the systems' gold-subset accuracy."""
    if system.study_id != item.study_id:
        raise DomainError("This item belongs to another study than the AI system.",
                          field="item")
    n_options = len(item.options) if item.options else item.study.classes.count()
    if option is not None and not 0 <= option < n_options:
        raise DomainError(f"Option {option} is outside 0..{n_options - 1}.", field="option")
    prediction, _ = Prediction.objects.update_or_create(
        system=system, item=item,
        defaults={"option": option, "position": item.position_of(option),
                  "raw": "" if option is None else str(option)},
    )
    _masks_refresh(item.study, [item.pk])
    systems_reference_refresh(study=item.study)
    redraw_after_predictions(study=item.study, item_ids=[item.pk])
    return prediction


@transaction.atomic
def predictions_delete(*, predictions) -> int:
    """Delete predictions and refresh the masks and accuracies they entered."""
    rows = list(predictions.values_list("pk", "item_id", "item__study_id"))
    Prediction.objects.filter(pk__in=[r[0] for r in rows]).delete()
    for study in Study.objects.filter(pk__in={r[2] for r in rows}):
        _masks_refresh(study, [r[1] for r in rows if r[2] == study.pk])
        systems_reference_refresh(study=study)
    return len(rows)


def _masks_refresh(study: Study, item_ids: list[int]) -> None:
    """After predictions of ``item_ids`` changed: their queries' masks — or every answered
    query's, when the change moved a system's confidence-band edges."""
    if systems_bands_refresh(study=study):
        query_masks_refresh(study=study)
    else:
        query_masks_refresh(study=study, item_ids=item_ids)


def query_masks_refresh(*, study: Study, item_ids: list[int] | None = None) -> int:
    """Recompute match/present masks and confidence-band bits
    (``annotations.partitioned.services.banding``) of
    the study's answered queries (of ``item_ids`` only, if given) in one UPDATE. Only the
    study's own systems count (ordinals are per study) and bits combine by OR: BIT_OR on
    PostgreSQL, elsewhere SUM(DISTINCT) of the powers of two, which is the same number."""
    from annotations.partitioned.services.banding import BAND_FIELDS, band_case_sql

    q = connection.ops.quote_name
    query_t, pred_t, sys_t = (
        Query._meta.db_table,
        Prediction._meta.db_table,
        AISystem._meta.db_table,
    )
    bit = f"(CAST(1 AS BIGINT) << s.{q('ordinal')})"
    combine = f"BIT_OR({bit})" if connection.vendor == "postgresql" else f"SUM(DISTINCT {bit})"
    sub = (
        f"SELECT COALESCE({combine}, 0) FROM {pred_t} p JOIN {sys_t} s "
        f"ON s.{q('id')} = p.{q('system_id')} WHERE p.{q('item_id')} = {query_t}.{q('item_id')} "
        f"AND s.{q('study_id')} = {query_t}.{q('study_id')}"
    )
    edges = dict(AISystem.objects.filter(study=study).values_list("ordinal", "band_edges"))
    band_sql, band_params = band_case_sql(edges, ordinal=f"s.{q('ordinal')}",
                                          confidence=f"p.{q('confidence')}")
    band_sets, set_params = [], []
    for plane, column in enumerate(BAND_FIELDS):
        if band_params:
            band_sets.append(f"{q(column)} = ({sub} AND ((({band_sql}) >> {plane}) & 1) = 1)")
            set_params.extend(band_params)
        else:
            band_sets.append(f"{q(column)} = NULL")
    sql = (
        f"UPDATE {query_t} SET "
        f"{q('match_mask')} = ({sub} AND p.{q('position')} = {query_t}.{q('k')}), "
        f"{q('present_mask')} = ({sub} AND p.{q('position')} IS NOT NULL), "
        f"{', '.join(band_sets)} "
        f"WHERE {q('study_id')} = %s AND {q('status')} = %s"
    )
    params: list = [*set_params, study.pk, Query.Status.ANSWERED]
    total = 0
    with connection.cursor() as cur:
        if item_ids is None:
            cur.execute(sql, params)
            return cur.rowcount
        for start in range(0, len(item_ids), IN_LIST_MAX):
            batch = item_ids[start:start + IN_LIST_MAX]
            marks = ", ".join(["%s"] * len(batch))
            cur.execute(f"{sql} AND {q('item_id')} IN ({marks})", [*params, *batch])
            total += cur.rowcount
    return total


def systems_reference_refresh(*, study: Study) -> None:
    """Accuracy of each system on items with a hidden gold label (validation only)."""
    stats = (
        Prediction.objects.filter(
            system__study=study, item__gold_option__isnull=False, item__is_quality_check=False
        )
        .values("system_id")
        .annotate(n=Count("id"), correct=Count("id", filter=Q(option=F("item__gold_option"))))
        .order_by()
    )
    found = {r["system_id"]: r for r in stats}
    for system in AISystem.objects.filter(study=study):
        r = found.get(system.pk, {"n": 0, "correct": 0})
        system.reference_n, system.reference_correct = r["n"], r["correct"]
        system.save(update_fields=["reference_n", "reference_correct"])


@transaction.atomic
def confidence_bands_set(*, study: Study, scheme: str, n_bands: int = DEFAULT_N_BANDS,
                         edges: list | None = None) -> ConfidenceBands:
    """Set how the study bands its systems' confidences, re-band every system and the
    answered queries, and schedule a recompute. Refuses edges that are not increasing
    numbers strictly between 0 and 1 and band counts outside 2..7."""
    from annotations.core.services.recompute import study_recompute_schedule

    if scheme not in ConfidenceBands.Scheme.values:
        raise DomainError(f"Unknown scheme '{scheme}'; use quantile or fixed.", field="scheme")
    if scheme == ConfidenceBands.Scheme.FIXED:
        problem = edges_problem(edges)
        if problem:
            raise DomainError(f"edges: {problem}.", field="edges")
    elif not 2 <= n_bands <= MAX_CONFIDENCE_BANDS:
        raise DomainError(f"n_bands: between 2 and {MAX_CONFIDENCE_BANDS}.", field="n_bands")
    bands, _ = ConfidenceBands.objects.update_or_create(
        study=study, defaults={"scheme": scheme, "n_bands": n_bands,
                               "edges": list(edges or []) if scheme == "fixed" else []})
    study.confidence_bands = bands
    if systems_bands_refresh(study=study):
        query_masks_refresh(study=study)
    study_id = study.pk
    transaction.on_commit(lambda: study_recompute_schedule(study_id))
    return bands
