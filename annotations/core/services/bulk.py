"""Writing many rows at once: PostgreSQL's COPY where Django's bulk paths are slow.

``bulk_create`` binds every value as a parameter of a multi-row INSERT after building a
model instance per row, and ``bulk_update`` builds a CASE per row; for 200 000 items or
queries that took over a minute, past gunicorn's worker timeout. Here rows are plain dicts
(attribute name → value); PostgreSQL streams them with COPY, SQLite runs prepared
``executemany`` statements, other databases use Django's bulk paths.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from django.db import connection, models, transaction
from django.utils import timezone

from annotations.core.services.progress import progress_advance

BATCH = 2000
# Above this many rows an import reads the study's rows whole instead of listing ids in an
# IN (...) clause (SQLite allows at most 32 766 parameters per statement).
IN_LIST_MAX = 5000


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while an import builds millions of small
    lists and dicts (none of them cyclic): otherwise it re-scans them again and again,
    which doubled the parsing time of 200 000 records. Reference counting still frees
    everything; the collector resumes (and runs once) afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _prepared(field: models.Field, now):
    """Value conversion for COPY text input (None: as is)."""
    if isinstance(field, models.JSONField):
        return lambda v, enc=field.encoder: None if v is None else json.dumps(v, cls=enc)
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return lambda v: now if v is None else v
    return None


def rows_insert(model: type[models.Model], rows: Sequence[dict], *,
                batch_size: int = BATCH) -> int:
    """Insert rows given as {attname: value} (missing fields take their defaults); returns
    how many. No primary keys come back: read them again when needed. Triggers and
    constraints run as for any insert. Reports each batch to the import's progress."""
    if not rows:
        return 0
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    if connection.vendor not in ("postgresql", "sqlite"):
        for start in range(0, len(rows), batch_size):
            batch = rows[start:start + batch_size]
            model._default_manager.bulk_create([model(**r) for r in batch])
            progress_advance(len(batch))
        return len(rows)
    now = timezone.now()
    plan = []
    for f in fields:
        # a callable default is called per row (get_default() would call it once: every
        # row would share one value, e.g. one Query.public_id)
        default = (f.default if callable(f.default) else f.get_default()) \
            if f.has_default() else None
        plan.append((f.attname, _prepared(f, now), f.has_default(), default))

    def values(row: dict) -> list:
        out = []
        for attname, convert, has_default, default in plan:
            if attname in row:
                value = row[attname]
            elif has_default:
                value = default() if callable(default) else default
            else:
                value = None
            out.append(value if convert is None else convert(value))
        return out

    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cur:
        if connection.vendor == "sqlite":
            # one prepared INSERT per row: SQLite's own fast path; Django's bulk_create
            # spends its time preparing every value (3 minutes for 200 000 items)
            adapt = connection.ops.adapt_datetimefield_value
            dates = [i for i, f in enumerate(fields) if isinstance(f, models.DateTimeField)]
            marks = ", ".join(["%s"] * len(fields))
            for start in range(0, len(rows), batch_size):
                prepared = []
                for row in rows[start:start + batch_size]:
                    vals = values(row)
                    for i in dates:
                        vals[i] = adapt(vals[i])
                    prepared.append(vals)
                cur.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", prepared)
                progress_advance(len(prepared))
            return len(rows)
        # COPY bypasses Django's cursor wrapper: map psycopg errors to django.db's here
        with connection.wrap_database_errors, cur.copy(
            f"COPY {table} ({columns}) FROM STDIN"
        ) as copy:
            for i, row in enumerate(rows, start=1):
                copy.write_row(values(row))
                if i % batch_size == 0:
                    progress_advance(batch_size)
            progress_advance(len(rows) % batch_size)
    return len(rows)


def rows_update(model: type[models.Model], attnames: Sequence[str],
                rows: Sequence[tuple]) -> int:
    """Set ``attnames`` of rows given as (pk, value, …) tuples. PostgreSQL: COPY into a
    temporary table, then one UPDATE … FROM; other databases: a prepared UPDATE per row.
    Reports the rows to the import's progress when done."""
    if not rows:
        return 0
    meta = model._meta
    fields = [next(f for f in meta.concrete_fields if f.attname == a) for a in attnames]
    q = connection.ops.quote_name
    table = q(meta.db_table)
    sets = ", ".join(f"{q(f.column)} = %s" for f in fields)
    if connection.vendor != "postgresql":
        def adapt(f, v):
            if isinstance(f, models.JSONField):
                return None if v is None else json.dumps(v, cls=f.encoder)
            if isinstance(f, models.DateTimeField):
                return connection.ops.adapt_datetimefield_value(v)
            return v

        with connection.cursor() as cur:
            cur.executemany(f"UPDATE {table} SET {sets} WHERE {q(meta.pk.column)} = %s",
                            [(*[adapt(f, v) for f, v in zip(fields, r[1:], strict=True)],
                              r[0]) for r in rows])
        progress_advance(len(rows))
        return len(rows)
    now = timezone.now()
    converters = [_prepared(f, now) for f in fields]
    temp = q(f"_bulk_{meta.db_table}")
    types = ", ".join(f"{q(f.column)} {f.db_type(connection)}" for f in fields)
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {temp}")
        cur.execute(f"CREATE TEMPORARY TABLE {temp} (id bigint PRIMARY KEY, {types}) "
                    "ON COMMIT DROP")
        with connection.wrap_database_errors, cur.copy(f"COPY {temp} FROM STDIN") as copy:
            for r in rows:
                copy.write_row([r[0], *[v if c is None else c(v)
                                        for c, v in zip(converters, r[1:], strict=True)]])
        assign = ", ".join(f"{q(f.column)} = t.{q(f.column)}" for f in fields)
        cur.execute(f"UPDATE {table} AS m SET {assign} FROM {temp} AS t "
                    f"WHERE m.{q(meta.pk.column)} = t.id")
        cur.execute(f"DROP TABLE {temp}")
    progress_advance(len(rows))
    return len(rows)
