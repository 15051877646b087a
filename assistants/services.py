"""Writes of the assistants app: AI systems and their predictions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from django.db import connection, transaction
from django.db.models import Count, F, Max, Q

from annotations.errors import ImportFailed
from annotations.models import Item, Query, Study
from annotations.services.records import read_records
from assistants.models import MAX_SYSTEMS_PER_STUDY, AISystem, Prediction

PREDICTION_FIELDS = {"item_id", "system", "prediction"}
# Input fields stored in a column: read_records refuses objects there and over-long text.
PREDICTION_COLUMNS = {"item_id": Item._meta.get_field("external_id"),
                      "system": AISystem._meta.get_field("name")}


@dataclass(frozen=True)
class PredictionImportResult:
    created: int
    updated: int
    systems_created: list[str]


def system_create(*, study: Study, name: str, description: str = "") -> AISystem:
    """Create an AI system with the study's next free ordinal (its bit in the query masks)."""
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()
        top = AISystem.objects.filter(study=study).aggregate(m=Max("ordinal"))["m"]
        ordinal = 0 if top is None else top + 1
        if ordinal >= MAX_SYSTEMS_PER_STUDY:
            raise ImportFailed([f"study '{study}': at most {MAX_SYSTEMS_PER_STUDY} AI systems"])
        return AISystem.objects.create(
            study=study, name=name, description=description, ordinal=ordinal
        )


def _parse_prediction(value, item: Item, class_names: list[str]) -> int | None:
    """Original option index of a prediction, or None when missing/unparseable (scored as a
    wrong answer, METHODS.md M1)."""
    options = item.options or class_names
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    if text.isdigit() and int(text) < len(options):
        return int(text)
    if text in options:
        return options.index(text)
    return None


@transaction.atomic
def predictions_import(
    *,
    study: Study,
    source: IO | str,
    name: str | None = None,
    fmt: str | None = None,
    update: bool = False,
) -> PredictionImportResult:
    """Import predictions (fields item_id, system, prediction) from CSV or JSONL.

    ``prediction`` is a 0-based option index or the option's text; anything else is kept
    raw and scored as a missing answer. Unknown item ids and duplicates are errors naming
    file and line; existing (system, item) pairs are errors unless ``update``. Unknown system
    names create the system. Answered queries' masks are refreshed in the same transaction."""
    label = name or getattr(source, "name", None) or str(source)
    class_names = list(study.classes.order_by("index").values_list("name", flat=True))
    errors: list[str] = []
    rows: list[tuple[int, str, str, object]] = []
    seen: dict[tuple[str, str], int] = {}
    for line, rec in read_records(source, name=name, fmt=fmt, columns=PREDICTION_COLUMNS):
        where = f"{label}:{line}"
        unknown = set(rec) - PREDICTION_FIELDS
        if unknown:
            errors.append(
                f"{where}: {sorted(unknown)[0]}: unknown field (expected item_id, "
                f"system, prediction)"
            )
            continue
        item_id = str(rec.get("item_id") or "").strip()
        system = str(rec.get("system") or "").strip()
        if not item_id:
            errors.append(f"{where}: item_id: missing")
            continue
        if not system:
            errors.append(f"{where}: system: missing")
            continue
        if (system, item_id) in seen:
            errors.append(
                f"{where}: item_id: '{item_id}' for system '{system}' repeats line "
                f"{seen[(system, item_id)]}"
            )
            continue
        seen[(system, item_id)] = line
        rows.append((line, item_id, system, rec.get("prediction")))
    items = {
        i.external_id: i
        for i in Item.objects.filter(study=study, external_id__in={r[1] for r in rows}).only(
            "pk", "external_id", "options", "option_order"
        )
    }
    for line, item_id, _, _ in rows:
        if item_id not in items:
            errors.append(f"{label}:{line}: item_id: unknown item '{item_id}' in study '{study}'")
    systems = {s.name: s for s in AISystem.objects.filter(study=study)}
    new_names = sorted({r[2] for r in rows} - set(systems))
    if len(systems) + len(new_names) > MAX_SYSTEMS_PER_STUDY:
        errors.append(
            f"{label}: system: {len(new_names)} new systems would exceed "
            f"{MAX_SYSTEMS_PER_STUDY} per study"
        )
    if errors:
        raise ImportFailed(errors)
    for system_name in new_names:
        systems[system_name] = system_create(study=study, name=system_name)
    existing = {
        (p.system_id, p.item_id): p
        for p in Prediction.objects.filter(
            system__study=study, item_id__in=[i.pk for i in items.values()]
        )
    }
    new: list[Prediction] = []
    changed: list[Prediction] = []
    for line, item_id, system_name, value in rows:
        item, system = items[item_id], systems[system_name]
        option = _parse_prediction(value, item, class_names)
        position = item.position_of(option)
        raw = "" if value is None else str(value)
        found = existing.get((system.pk, item.pk))
        if found is None:
            new.append(
                Prediction(system=system, item=item, option=option, position=position, raw=raw)
            )
        elif not update:
            errors.append(
                f"{label}:{line}: item_id: '{item_id}' already has a prediction "
                f"from '{system_name}' (rewriting existing ids is off)"
            )
        else:
            found.option, found.position, found.raw = option, position, raw
            changed.append(found)
    if errors:
        raise ImportFailed(errors)
    Prediction.objects.bulk_create(new, batch_size=5000)
    Prediction.objects.bulk_update(changed, ["option", "position", "raw"], batch_size=5000)
    query_masks_refresh(study=study)
    systems_reference_refresh(study=study)
    return PredictionImportResult(created=len(new), updated=len(changed), systems_created=new_names)


def query_masks_refresh(*, study: Study) -> int:
    """Recompute match/present masks of every answered query of the study in one UPDATE."""
    q = connection.ops.quote_name
    query_t, pred_t, sys_t = (
        Query._meta.db_table,
        Prediction._meta.db_table,
        AISystem._meta.db_table,
    )
    bit = f"(CAST(1 AS BIGINT) << s.{q('ordinal')})"
    sub = (
        f"SELECT COALESCE(SUM({bit}), 0) FROM {pred_t} p JOIN {sys_t} s "
        f"ON s.{q('id')} = p.{q('system_id')} WHERE p.{q('item_id')} = {query_t}.{q('item_id')}"
    )
    sql = (
        f"UPDATE {query_t} SET "
        f"{q('match_mask')} = ({sub} AND p.{q('position')} = {query_t}.{q('k')}), "
        f"{q('present_mask')} = ({sub} AND p.{q('position')} IS NOT NULL) "
        f"WHERE {q('study_id')} = %s AND {q('status')} = %s"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [study.pk, Query.Status.ANSWERED])
        return cur.rowcount


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
