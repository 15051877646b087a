"""Importing items: atomic (all or nothing), every error names file, line and field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from django.db import transaction
from django.db.models import Count, OuterRef, Subquery
from django.utils import timezone

from annotations.core.errors import ImportFailed, InvalidStudy
from annotations.core.inputs import OPTION_MAX, json_kind
from annotations.core.models import Item, Study
from annotations.core.services.bulk import IN_LIST_MAX, gc_paused, rows_insert, rows_update
from annotations.core.services.item_options import option_order_for, options_conflict
from annotations.core.services.progress import progress_phase
from annotations.core.services.records import (
    KeysSeen,
    already_in_study,
    option_index,
    option_text,
    parse_bool,
    parse_json_cell,
    read_records,
    unknown_fields,
)
from annotations.core.words import counted
from annotations.partitioned.models import Query
from annotations.partitioned.services.routing import (
    first_queries_create,
    items_route,
    option_orders_draw,
    routing_draw,
    study_rng,
)

ITEM_FIELDS = {"id", "text", "options", "stratum", "gold", "gold_index", "quality_check",
               "metadata"}
# Input fields stored in a column: read_records refuses objects there and over-long text.
ITEM_COLUMNS = {"id": Item._meta.get_field("external_id"), "text": Item._meta.get_field("text"),
                "stratum": Item._meta.get_field("stratum")}


@dataclass(frozen=True)
class ImportResult:
    created: int
    updated: int
    routed: int = 0
    unchanged: int = 0  # update: records identical to the stored item

    def summary(self) -> str:
        """One line for the admin message and the command output."""
        text = f"{self.created} created, {self.updated} updated"
        if self.unchanged:
            text += f", {self.unchanged} unchanged"
        return text + (f", {self.routed} routed." if self.routed else ".")

    def details(self) -> list[tuple[str, str, str]]:
        """The summary's own rows (``import_jobs.import_summary``)."""
        rows = [("Unchanged", f"{self.unchanged:,}", "unchanged")]
        if self.routed:
            rows.append(("Routed at once (the study is open)", f"{self.routed:,}", "routed"))
        return rows

    def next_step(self) -> str:
        if self.routed:
            return ("The new items' first queries are routed: specialists get them now, and "
                    "the dashboard counts their answers.")
        return ("Import the AI predictions of these items, then open the study (its page "
                "says what is still missing).")


def gold_option(text, index, options: list[str]) -> tuple[int | None, str | None]:
    """The gold option of an item record, by the same rule as predictions — never guessed:
    ``gold`` is the right option's text (the class name for items without options),
    matched exactly after trimming spaces (a JSON number is read as its text: 3 and 3.0
    mean the option "3"); ``gold_index`` is its 0-based index in ``options`` (2, 2.0 or
    "2"). Returns (index or None, None) or (None, "field: problem")."""
    if option_text(text) and option_text(index):
        return None, ("gold_index: give gold (the option's text) or gold_index (its index "
                      "from 0), not both")
    if option_text(index):
        try:
            return option_index(index, len(options)), None
        except ValueError as exc:
            return None, f"gold_index: {exc}"
    raw = option_text(text)
    if not raw:
        return None, None
    if raw in options:
        return options.index(raw), None
    hint = (" (an index from 0 goes in gold_index)"
            if raw.isdigit() and int(raw) < len(options) else "")
    return None, f"gold: '{raw}' is not one of the options{hint}"


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
    (the right option's text) or gold_index (its 0-based index) — hidden, never guessed
    (``gold_option``) —, quality_check (bool; needs gold), metadata.
    Existing ids are an error unless ``update`` is set, which rewrites text, stratum, gold
    and metadata of existing items — never their options or quality-check flag, and never
    an item with answered queries (refused with the reason; a record identical to the
    stored item counts as unchanged). Items of an open study are routed at once."""
    with gc_paused():
        return _items_import(study=study, source=source, name=name, fmt=fmt, update=update)


def _items_import(*, study: Study, source: IO | str, name: str | None, fmt: str | None,
                  update: bool) -> ImportResult:
    classes = list(study.classes.order_by("index").values_list("name", flat=True))
    k = len(classes)
    errors: list[str] = []
    if k < 2:
        raise ImportFailed([f"study '{study}': needs at least 2 classes before items (has {k})"])
    records: list[tuple[int, dict]] = []
    label = name or getattr(source, "name", None) or str(source)
    seen = KeysSeen()
    for line, rec in read_records(source, name=name, fmt=fmt, columns=ITEM_COLUMNS,
                                  problems=errors):
        record, problems = _item_line(rec, line, seen, classes)
        if problems:
            errors += [f"{label}:{line}: {problem}" for problem in problems]
        else:
            records.append((line, record))
    if errors:
        raise ImportFailed(errors)
    return _items_write(study, records, label=label, update=update, k=k)


def _item_options(value, classes: list[str]) -> tuple[list[str], str | None]:
    """An item's own options (texts) and the first problem with them, if any."""
    try:
        given = parse_json_cell(value, expect=list)
    except (ValueError, TypeError) as exc:
        return [], f"options: {exc}"
    odd = next((i for i, o in enumerate(given) if isinstance(o, dict | list)), None)
    if odd is not None:
        return [], f"options[{odd}]: must be text or a number, not {json_kind(given[odd])}"
    options = [str(o) for o in given]
    long = next((i for i, o in enumerate(options) if len(o) > OPTION_MAX), None)
    if long is not None:
        return [], (f"options[{long}]: {len(options[long])} characters; at most "
                    f"{OPTION_MAX} fit")
    if options and len(options) != len(classes):
        return [], (f"options: {counted(len(options), 'option')} but the study has "
                    f"K={len(classes)}")
    if (conflict := options_conflict(options, classes)) is not None:
        return [], f"options: {conflict}"
    return options, None


def _item_line(rec: dict, line: int, seen: KeysSeen, classes: list[str]
                 ) -> tuple[dict, list[str]]:
    """One line of an items file as the item's fields, or every problem of the line (each
    field checked; a field that depends on another — gold on the options — only once that
    one is right)."""
    problems = unknown_fields(rec, ITEM_FIELDS)
    ext = str(rec.get("id") or "").strip()
    if problem := seen.problem(ext, line):
        problems.append(problem)
    text = str(rec.get("text") or "").strip()
    if not text:
        problems.append("text: missing")
    options, problem = _item_options(rec.get("options"), classes)
    gold = None
    if problem:
        problems.append(problem)
    else:
        gold, problem = gold_option(rec.get("gold"), rec.get("gold_index"), options or classes)
        if problem:
            problems.append(problem)
    qc = False
    try:
        qc = parse_bool(rec.get("quality_check"))
    except ValueError as exc:
        problems.append(f"quality_check: {exc}")
    if qc and gold is None and not any(p.startswith(("gold", "options")) for p in problems):
        problems.append("gold: a quality-check item needs a gold answer")
    metadata = {}
    try:
        metadata = parse_json_cell(rec.get("metadata"), expect=dict)
    except (ValueError, TypeError) as exc:
        problems.append(f"metadata: {exc}")
    return {"external_id": ext, "text": text, "options": options, "gold_option": gold,
            "is_quality_check": qc, "metadata": metadata,
            "stratum": str(rec.get("stratum") or "").strip()}, problems


def _items_write(study: Study, records: list[tuple[int, dict]], *, label: str, update: bool,
                 k: int) -> ImportResult:
    """Create new items (option shuffle drawn, routed at once in an open study) and, with
    ``update``, rewrite existing ones that no answer depends on."""
    errors: list[str] = []
    ids = {r["external_id"] for _, r in records}
    existing_qs = Item.objects.filter(study=study)
    if len(ids) <= IN_LIST_MAX:
        existing_qs = existing_qs.filter(external_id__in=ids)
    existing = {i.external_id: i for i in existing_qs.only(
        "pk", "external_id", "options", "is_quality_check", *Item.CONTENT_FIELDS)
        if i.external_id in ids}
    if existing and not update:
        for line, r in records:
            if r["external_id"] in existing:
                errors.append(f"{label}:{line}: " + already_in_study(
                    "id", f"'{r['external_id']}'", updatable=True))
        raise ImportFailed(errors)
    answered: set[int] = set()
    leased: set[int] = set()  # someone is reading the stored text: it may not change now
    if existing:
        held = Query.objects.filter(study=study, status__in=[Query.Status.ANSWERED,
                                                              Query.Status.LEASED])
        if len(existing) <= IN_LIST_MAX:
            held = held.filter(item_id__in=[i.pk for i in existing.values()])
        for item_id, state in held.values_list("item_id", "status").distinct():
            (answered if state == Query.Status.ANSWERED else leased).add(item_id)
    to_update: list[Item] = []
    new: list[dict] = []
    unchanged = 0
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
        if all(getattr(item, f) == r[f] for f in Item.CONTENT_FIELDS):
            unchanged += 1
            continue
        if item.pk in answered:
            errors.append(f"{label}:{line}: id: item '{item.external_id}' has answered "
                          f"queries; {Item.ANSWERED_FIXED}")
            continue
        if item.pk in leased and item.text != r["text"]:
            errors.append(f"{label}:{line}: text: item '{item.external_id}': "
                          f"{Item.LEASED_FIXED}")
            continue
        for f in Item.CONTENT_FIELDS:
            setattr(item, f, r[f])
        to_update.append(item)
    if errors:
        raise ImportFailed(errors)
    # rows to write: updated items, new items and, in an open study, their first queries
    routing = study.status == Study.Status.OPEN
    progress_phase("writing", total=len(to_update) + len(new) + (
        sum(not r["is_quality_check"] for r in new) if routing else 0))
    if to_update:
        rows_update(Item, Item.CONTENT_FIELDS,
                    [(i.pk, *[getattr(i, f) for f in Item.CONTENT_FIELDS]) for i in to_update])
        _query_strata_sync([i.pk for i in to_update])
    created, routed = _items_create(study, new)
    if study.status == Study.Status.OPEN and created and routed < created:
        routed += items_route(study=study)  # defensive: any item left unrouted
    if created or to_update:
        study_stratum_sizes_refresh(study=study)
    if to_update:
        from annotations.partitioned.services.predictions import systems_reference_refresh

        systems_reference_refresh(study=study)
    return ImportResult(created=created, updated=len(to_update), routed=routed,
                        unchanged=unchanged)


def _items_create(study: Study, records: list[dict]) -> tuple[int, int]:
    """Insert new items with their option shuffle drawn from the study's seeded stream;
    in an open study, route them as they are inserted (the same draws ``items_route``
    makes, without rewriting every new row). Returns (created, routed)."""
    if not records:
        return 0, 0
    classes = list(study.classes.order_by("index").values_list("name", flat=True))
    rng = study_rng(study, 0, Item.objects.filter(study=study).count())
    orders = option_orders_draw(rng, len(records), len(classes),
                                study.shuffle_options).tolist()
    # Named categories are never shuffled: class k must stay category k (item_options).
    rows = [{"study_id": study.pk, "option_order": option_order_for(r["options"], classes, o),
             **r} for r, o in zip(records, orders, strict=True)]
    to_route = [row for row in rows if not row["is_quality_check"]]
    study = Study.objects.select_for_update().get(pk=study.pk)
    route_now = (study.status == Study.Status.OPEN and to_route and not Item.objects.filter(
        study=study, routed_at__isnull=True, is_quality_check=False).exists())
    if route_now:
        # rows are inserted in this order, so primary-key order = the order of the draws
        draws = routing_draw(study=study, n=len(to_route),
                             strata=[row.get("stratum", "") for row in to_route])
        now = timezone.now()
        for row, order in zip(to_route, draws.orders, strict=True):
            row["class_order"], row["routed_at"] = order, now
    rows_insert(Item, rows)
    if not route_now:
        return len(rows), 0
    pks = dict(Item.objects.filter(study=study, routed_at=now).values_list("external_id", "pk"))
    first_queries_create(study=study, routed=[
        (pks[row["external_id"]], row["stratum"], order, rank, fields)
        for row, order, rank, fields in zip(to_route, draws.orders, draws.ranks, draws.fields,
                                            strict=True)])
    return len(rows), len(to_route)


def _query_strata_sync(item_ids: list[int]) -> None:
    """Copy each item's stratum onto its queries (the label counts group by it)."""
    stratum = Item.objects.filter(pk=OuterRef("item_id")).values("stratum")[:1]
    for start in range(0, len(item_ids), IN_LIST_MAX):
        Query.objects.filter(item_id__in=item_ids[start:start + IN_LIST_MAX]).update(
            stratum=Subquery(stratum))


def _item_record(item: Item) -> dict:
    return {f: getattr(item, f) for f in ("external_id", "text", "options", "gold_option",
                                          "is_quality_check", "metadata", "stratum")}


@transaction.atomic
def item_create(*, item: Item) -> Item:
    """Add one item built by a form (the admin): validated like a model, then stored as an
    import stores it (option shuffle drawn, routed at once in an open study)."""
    item.full_clean()
    study = Study.objects.select_for_update().get(pk=item.study_id)
    k = study.classes.count()
    if k < 2:
        raise InvalidStudy(f"The study needs at least 2 classes before items (has {k}).",
                           field="study")
    _items_write(study, [(1, _item_record(item))], label="form", update=False, k=k)
    return Item.objects.get(study=study, external_id=item.external_id)


@transaction.atomic
def item_update(*, item: Item) -> Item:
    """Save an edited item (the admin). Refused (``Item.clean``): moving it to another
    study, new options or quality-check flag once routed, any rewrite once answered."""
    item.full_clean()
    item.save()
    _query_strata_sync([item.pk])
    study_stratum_sizes_refresh(study=item.study)
    from annotations.partitioned.services.predictions import systems_reference_refresh

    systems_reference_refresh(study=item.study)
    return item


def study_stratum_sizes_refresh(*, study: Study) -> dict[str, int]:
    """Recount the study's items per stratum (quality checks excluded) into
    ``Study.stratum_sizes``; item imports and deletions call this."""
    rows = (Item.objects.filter(study=study, is_quality_check=False).values("stratum")
            .annotate(n=Count("id")).order_by("stratum"))
    sizes = {r["stratum"]: r["n"] for r in rows}
    Study.objects.filter(pk=study.pk).update(stratum_sizes=sizes)
    study.stratum_sizes = sizes
    return sizes
