"""Rubrics of a study: importing one from JSONL (all or nothing, every problem named by file,
line and field), its snapshot (what an audit stores when it starts) and the library rubric
(``estimators.nodata.rubrics.Rubric``) built from a snapshot.

Rubric file (JSONL, one criterion per line, in rubric order; blank lines skipped):

    {"name": "mentions_price", "check": "contains", "text": "price"}
    {"name": "has_number", "check": "regex", "text": "\\d+"}
    {"name": "long", "check": "length_above", "number": 200}
    {"name": "verdict_yes", "check": "field_equals", "field": "verdict", "value": "yes"}

Fields: ``name`` (distinct), ``check`` (``services.checks.CHECKS``), and the check's
parameters ``text``, ``number``, ``field``, ``value`` (``checks`` module docstring).
"""

from __future__ import annotations

import io

from django.conf import settings
from django.db import IntegrityError, transaction

from annotations.audit.models import Criterion, Rubric
from annotations.audit.services.checks import build_criterion, criterion_problems
from annotations.audit.services.files import jsonl_stream
from annotations.core.errors import ImportFailed
from annotations.core.inputs import file_too_large_message
from annotations.core.models import Study
from annotations.core.services.records import KeysSeen, unknown_fields
from estimators.nodata.aggregators import AllOf, AnyOf, MajorityVote
from estimators.nodata.rubrics import Rubric as CoreRubric

FIELDS = ("name", "check", "text", "number", "field", "value")
AGGREGATORS = {Rubric.Aggregator.MAJORITY: MajorityVote(tie=1),
               Rubric.Aggregator.ANY: AnyOf(), Rubric.Aggregator.ALL: AllOf()}


def parse_rubric(data: bytes, *, source: str) -> list[dict]:
    """The criteria of a rubric file (module docstring), or ImportFailed listing every
    problem as "file:line: field: message", in line order (the reader's and the
    criteria's together: the file is streamed, each line checked as it is read)."""
    if len(data) > settings.OVERSIGHT_IMPORT_MAX_BYTES:
        raise ImportFailed([file_too_large_message(source, len(data))])
    problems: list[str] = []
    rows: list[dict] = []
    names = KeysSeen()
    for line, record in jsonl_stream(io.BytesIO(data), name=source, problems=problems):
        where = f"{source}:{line}"
        problems += [f"{where}: {p}" for p in unknown_fields(record, FIELDS)]
        row = {"name": record.get("name", ""), "kind": record.get("check", ""),
               "text": record.get("text", ""), "number": record.get("number"),
               "field": record.get("field", ""), "value": record.get("value")}
        if "check" not in record:
            problems.append(f"{where}: check: missing")
            continue
        found = criterion_problems(**row)
        problems += [f"{where}: {field}: {msg}" for field, msg in found]
        if found:
            continue
        repeated = names.problem(row["name"], line, field="name")
        if repeated:
            problems.append(f"{where}: {repeated}")
            continue
        rows.append(row)
    if not rows and not problems:
        problems.append(f"{source}: no criteria (one JSON object per line)")
    if problems:
        raise ImportFailed(problems)
    return rows


@transaction.atomic
def rubric_import(*, study: Study, name: str, aggregator: str, data: bytes,
                  source: str) -> Rubric:
    """A new rubric of ``study`` from a rubric file; nothing is stored when the file or the
    name has a problem (ImportFailed)."""
    rows = parse_rubric(data, source=source)
    name = (name or "").strip()
    if not name:
        raise ImportFailed([f"{source}: the rubric needs a name"])
    if aggregator not in AGGREGATORS:
        raise ImportFailed([f"aggregator: one of {', '.join(AGGREGATORS)}, got {aggregator!r}"])
    try:
        with transaction.atomic():
            rubric = Rubric.objects.create(study=study, name=name[:120], aggregator=aggregator)
    except IntegrityError:
        raise ImportFailed([f"{source}: this study already has a rubric named {name!r}"]
                           ) from None
    Criterion.objects.bulk_create(Criterion(rubric=rubric, position=i, **row)
                                  for i, row in enumerate(rows))
    return rubric


def rubric_snapshot(rubric: Rubric) -> dict:
    """The rubric as plain data (stored on an audit when it starts)."""
    return {"name": rubric.name, "aggregator": rubric.aggregator,
            "criteria": [{"name": c.name, "kind": c.kind, "text": c.text, "number": c.number,
                          "field": c.field, "value": c.value}
                         for c in rubric.criteria.order_by("position", "pk")]}


def rubric_problems(snapshot: dict) -> list[str]:
    """Why a rubric cannot be used ("criterion c, field f: message" each; [] when usable)."""
    criteria = snapshot.get("criteria", [])
    if not criteria:
        return ["the rubric has no criteria"]
    problems = [f"criterion {c.get('name') or '#' + str(i + 1)}, field {f}: {m}"
                for i, c in enumerate(criteria) for f, m in criterion_problems(**c)]
    names = [c.get("name") for c in criteria]
    problems += [f"criterion {n}, field name: used twice" for n in sorted(
        {n for n in names if names.count(n) > 1})]
    return problems


def core_rubric(snapshot: dict) -> CoreRubric:
    """The library's rubric of a usable snapshot (``rubric_problems`` is empty)."""
    return CoreRubric(tuple(build_criterion(**c) for c in snapshot["criteria"]),
                      AGGREGATORS[snapshot["aggregator"]], snapshot.get("name", ""))
