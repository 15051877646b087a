"""Importing items: atomic (all or nothing), every error names file, line and field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from django.db import transaction
from django.db.models import Count

from annotations.errors import ImportFailed
from annotations.models import Item, Study
from annotations.services.item_options import option_order_for, options_conflict
from annotations.services.records import parse_bool, parse_json_cell, read_records
from annotations.services.routing import items_route, option_orders_draw, study_rng

ITEM_FIELDS = {"id", "text", "options", "stratum", "gold", "quality_check", "metadata"}
# Input fields stored in a column: read_records refuses objects there and over-long text.
ITEM_COLUMNS = {"id": Item._meta.get_field("external_id"), "text": Item._meta.get_field("text"),
                "stratum": Item._meta.get_field("stratum")}


@dataclass(frozen=True)
class ImportResult:
    created: int
    updated: int
    routed: int = 0


def _option_index(value, options: list[str], what: str) -> int | None:
    """An option given as 0-based index or as its text (or class name). None when empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError(f"{what} '{value}' is not an option")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        idx = int(value)
        if not 0 <= idx < len(options):
            raise ValueError(f"{what} index {idx} is outside 0..{len(options) - 1}")
        return idx
    text = str(value).strip()
    if text in options:
        return options.index(text)
    raise ValueError(f"{what} '{text}' is not one of the options")


@transaction.atomic
def items_import(
    *,
    study: Study,
    source: IO | str,
    name: str | None = None,
    fmt: str | None = None,
    update: bool = False,
) -> ImportResult:
    """Import items from CSV (options and metadata as JSON cells) or JSONL.

    Fields: id, text, options (list of K strings; empty → the class names), stratum, gold
    (0-based index or option text; hidden), quality_check (bool; needs gold), metadata.
    Existing ids are an error unless ``update`` is set, which rewrites text, stratum, gold
    and metadata of items not yet routed. Items of an open study are routed at once."""
    classes = list(study.classes.order_by("index").values_list("name", flat=True))
    k = len(classes)
    errors: list[str] = []
    if k < 2:
        raise ImportFailed([f"study '{study}': needs at least 2 classes before items (has {k})"])
    records: list[tuple[int, dict]] = []
    label = name or getattr(source, "name", None) or str(source)
    seen: dict[str, int] = {}
    for line, rec in read_records(source, name=name, fmt=fmt, columns=ITEM_COLUMNS):
        where = f"{label}:{line}"
        unknown = set(rec) - ITEM_FIELDS
        if unknown:
            errors.append(
                f"{where}: {sorted(unknown)[0]}: unknown field (expected one of "
                f"{', '.join(sorted(ITEM_FIELDS))})"
            )
            continue
        ext = str(rec.get("id") or "").strip()
        if not ext:
            errors.append(f"{where}: id: missing")
            continue
        if ext in seen:
            errors.append(f"{where}: id: '{ext}' repeats line {seen[ext]}")
            continue
        seen[ext] = line
        text = str(rec.get("text") or "").strip()
        if not text:
            errors.append(f"{where}: text: missing")
            continue
        try:
            options = [str(o) for o in parse_json_cell(rec.get("options"), expect=list)]
        except (ValueError, TypeError) as exc:
            errors.append(f"{where}: options: {exc}")
            continue
        if options and len(options) != k:
            errors.append(f"{where}: options: {len(options)} options but the study has K={k}")
            continue
        if (conflict := options_conflict(options, classes)) is not None:
            errors.append(f"{where}: options: {conflict}")
            continue
        try:
            gold = _option_index(rec.get("gold"), options or classes, "gold")
        except ValueError as exc:
            errors.append(f"{where}: gold: {exc}")
            continue
        try:
            qc = parse_bool(rec.get("quality_check"))
        except ValueError as exc:
            errors.append(f"{where}: quality_check: {exc}")
            continue
        if qc and gold is None:
            errors.append(f"{where}: gold: a quality-check item needs a gold answer")
            continue
        try:
            metadata = parse_json_cell(rec.get("metadata"), expect=dict)
        except (ValueError, TypeError) as exc:
            errors.append(f"{where}: metadata: {exc}")
            continue
        records.append(
            (
                line,
                {
                    "external_id": ext,
                    "text": text,
                    "options": options,
                    "gold_option": gold,
                    "is_quality_check": qc,
                    "metadata": metadata,
                    "stratum": str(rec.get("stratum") or "").strip(),
                },
            )
        )
    existing = {
        i.external_id: i
        for i in Item.objects.filter(
            study=study, external_id__in=[r["external_id"] for _, r in records]
        )
    }
    if existing and not update:
        for line, r in records:
            if r["external_id"] in existing:
                errors.append(
                    f"{label}:{line}: id: '{r['external_id']}' already exists "
                    f"(rewriting existing ids is off)"
                )
    if errors:
        raise ImportFailed(errors)
    to_update: list[Item] = []
    new: list[dict] = []
    for line, r in records:
        item = existing.get(r["external_id"])
        if item is None:
            new.append(r)
            continue
        if item.options != r["options"] or item.is_quality_check != r["is_quality_check"]:
            errors.append(
                f"{label}:{line}: options: cannot change the options or the "
                f"quality-check flag of an existing item"
            )
            continue
        item.text, item.stratum = r["text"], r["stratum"]
        item.gold_option, item.metadata = r["gold_option"], r["metadata"]
        to_update.append(item)
    if errors:
        raise ImportFailed(errors)
    if to_update:
        Item.objects.bulk_update(
            to_update, ["text", "stratum", "gold_option", "metadata"], batch_size=2000
        )
        from annotations.models import Query

        for item in to_update:
            Query.objects.filter(item=item).update(stratum=item.stratum)
    rng = study_rng(study, 0, Item.objects.filter(study=study).count())
    orders = option_orders_draw(rng, len(new), k, study.shuffle_options).tolist()
    # Named categories are never shuffled: class k must stay category k (item_options).
    created = Item.objects.bulk_create(
        [
            Item(study=study, option_order=option_order_for(r["options"], classes, o), **r)
            for r, o in zip(new, orders, strict=True)
        ],
        batch_size=2000,
    )
    routed = 0
    if study.status == Study.Status.OPEN and created:
        routed = items_route(study=study, items=created)
    if created or to_update:
        study_stratum_sizes_refresh(study=study)
    if to_update:
        from assistants.services import systems_reference_refresh

        systems_reference_refresh(study=study)
    return ImportResult(created=len(created), updated=len(to_update), routed=routed)


def study_stratum_sizes_refresh(*, study: Study) -> dict[str, int]:
    """Recount the study's items per stratum (quality checks excluded) into
    ``Study.stratum_sizes``; item imports and deletions call this."""
    rows = (Item.objects.filter(study=study, is_quality_check=False).values("stratum")
            .annotate(n=Count("id")).order_by("stratum"))
    sizes = {r["stratum"]: r["n"] for r in rows}
    Study.objects.filter(pk=study.pk).update(stratum_sizes=sizes)
    study.stratum_sizes = sizes
    return sizes
