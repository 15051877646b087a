"""A partitioned study's maintained statistics: the log the database triggers write
(``models.TallyEntry``, migration 0036) folded into per-group counts (``models.TallyGroup``),
so a recompute reads a few hundred groups instead of every answer.

Contract:

* **Fold** (:func:`tallies_fold`): under the study's ``TallyState`` row lock, take the
  study's visible entries out of the log (``DELETE … RETURNING``: exactly the rows that
  statement sees, in one statement, so an entry committed meanwhile stays for the next
  fold), add their signed counts to the groups, commit. One transaction per batch: a worker
  killed mid-fold rolls back — the entries are still in the log, the groups as they were —
  and the next fold redoes it. Cost: the new entries, not the study.
* **Build** (:func:`tallies_build`): the groups from the queries themselves (one grouped
  read: on PostgreSQL one binary COPY, ``_rows_copied``), replacing the study's groups and
  dropping exactly the entries that read already includes (PostgreSQL: REPEATABLE READ —
  the read and the delete see one snapshot). Runs when a study has no ``TallyState`` (new,
  migrated, bulk-seeded with the triggers off) and after a failed consistency check.
* **Check** (:func:`tallies_check`): the estimates from the groups against the full
  recompute from the queries (``services.estimates``), every number to 1e-9; a difference
  is logged and recorded (``TallyState.check_*``: /healthz and the dashboard report it),
  then the groups are rebuilt — with the log line, never silently.
* **Clustered sums** (several queries per item, ``services.tally_moments``): each batch also
  moves the item-clustered variance's sums by the touched items' labels now less before,
  those labels read in the batch's own snapshot; a build computes them from every label.
* **Design types** (a targeted routing design, ``services.tally_designs``): each batch also
  reads the steps of the items its entries name and moves their types' counts (the old
  share out by the keys ``TallyItem`` stored, the new one in); a build types every item.

Why a log folded by a worker rather than counts updated in the answer's transaction: a
count row per group would be one hot row that every concurrent answer of the group must
lock until it commits (200 specialists, a handful of groups); an insert into the log takes
no lock another answer waits for."""

from __future__ import annotations

import logging
import time

import numpy as np
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from annotations.core.exclusion_models import ExcludedAnswer
from annotations.core.models import AnswerReview, ItemFlag, Study
from annotations.partitioned.models import (
    Query,
    QuerySkip,
    RoutingDesign,
    TallyEntry,
    TallyGroup,
    TallyKey,
    TallyState,
)
from annotations.partitioned.selectors import (
    CODE_COLUMNS,
    _copy_tuples,
    _system_codes,
    codes_fetched,
)
from annotations.partitioned.services import tally_designs, tally_moments
from annotations.partitioned.tally_counts import ANSWERS, CODES, Tallies
from assistants.models import AISystem

log = logging.getLogger(__name__)

FOLD_BATCH = 200_000  # entries per transaction


def _ordinals(study_id: int) -> list[int]:
    """The systems whose codes are kept: ordinals 0 … the study's highest."""
    top = (AISystem.objects.filter(study_id=study_id).order_by("-ordinal")
           .values_list("ordinal", flat=True).first())
    return list(range(top + 1)) if top is not None else []


def _key(raw: tuple) -> tuple:
    """A ``TallyKey`` tuple with Python types (SQLite gives 0/1 for booleans)."""
    stratum, k, state, *flags = raw
    return (stratum, int(k), state, *(bool(f) for f in flags))


def _lock(study_id: int) -> TallyState:
    """The study's ``TallyState`` row, locked for this transaction (an UPDATE: on SQLite it
    takes the write lock at once, so no writer commits between this fold's reads)."""
    if not TallyState.objects.filter(study_id=study_id).update(folded_at=timezone.now()):
        TallyState.objects.get_or_create(study_id=study_id)
        TallyState.objects.filter(study_id=study_id).update(folded_at=timezone.now())
    return TallyState.objects.get(study_id=study_id)


# --- fold ----------------------------------------------------------------------------------
def tallies_fold(*, study_id: int) -> int:
    """Fold the study's logged entries into its groups (building them first if they never
    were); returns the entries folded."""
    return _fold(study_id)[0]


def _fold(study_id: int, *, read: bool = False) -> tuple[int, list[tuple] | None]:
    """Fold batch after batch; with ``read``, the groups as the last batch leaves them, read
    in its transaction, under its lock (no other fold can move entries in between). Returns
    (entries folded, the groups' rows, the kept moment sums and design types, or None). A
    study that keeps the clustered variance's sums (``services.tally_moments``) or design
    types (``services.tally_designs``) rebuilds when a batch comes back full: the touched
    items are read in the batch's snapshot, which holds the entries left in the log too."""
    folded, rebuilt = 0, 0
    while True:
        sig = tally_moments.signature(study_id)
        design_sig = tally_designs.signature(study_id)
        try:
            with transaction.atomic():
                state = _lock(study_id)
                held = tally_moments.read(state.moments, sig)
                types = tally_designs.read(state.design, design_sig)
                if state.built_at is None or (sig is not None and held is None):
                    raise tally_moments.Rebuild("never built, or its sums' shape changed")
                if design_sig is not None and types is None:  # the study's first targeted
                    # design, or a system added: its types alone, from every answered step
                    log.info("design statistics of study %s built from its queries (%s)",
                             study_id, "a targeted design or another system")
                    types = tally_designs.designs_built(study_id, design_sig)
                taken, labels = _entries_taken(study_id, sig is not None)
                if (sig is not None or design_sig is not None) and len(taken) >= FOLD_BATCH:
                    raise tally_moments.Rebuild(f"{len(taken)} entries or more to fold")
                if taken:
                    _groups_add(study_id, taken)
                    if sig is not None:
                        held = tally_moments.moments_folded(study_id, sig, held, taken,
                                                            labels)
                    if design_sig is not None:
                        types = tally_designs.designs_folded(study_id, design_sig, types,
                                                             taken)
                    TallyState.objects.filter(study_id=study_id).update(
                        entries_folded=state.entries_folded + len(taken))
                if len(taken) < FOLD_BATCH:
                    if not read:
                        return folded + len(taken), None
                    rows = list(TallyGroup.objects.filter(study_id=study_id)
                                .values_list(*TallyKey.KEY, "n", "codes"))
                    design = (None if types is None
                              else tally_designs.KeptDesign(design_sig, types))
                    return folded + len(taken), (rows, held, design)
        except tally_moments.Rebuild as why:
            (log.warning if why.inconsistent else log.info)(
                "statistics of study %s rebuilt from its queries: %s", study_id, why)
            rebuilt += 1
            if rebuilt > 3:  # each build leaves foldable sums: a fourth is a fault
                raise RuntimeError(f"statistics of study {study_id}: rebuilt {rebuilt - 1} "
                                   "times in a row and still not foldable") from why
            tallies_build(study_id=study_id)
            continue
        folded += len(taken)


def _entries_taken(study_id: int, labels: bool = False) -> tuple[list[tuple], list[tuple]]:
    """Up to :data:`FOLD_BATCH` of the study's entries, deleted from the log in the same
    statement that reads them (the log's layout: ``tally_moments``); with ``labels``, also
    the current rows of the labels of the items they touch, read in the same snapshot."""
    table = TallyEntry._meta.db_table
    columns = ", ".join([*TallyKey.KEY, "sign", *CODE_COLUMNS, "item_id"])
    take = (f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE "
            f"study_id = %s ORDER BY id LIMIT %s) RETURNING {columns}")
    with connection.cursor() as cursor:
        if not labels:
            cursor.execute(take, [study_id, FOLD_BATCH])
            return cursor.fetchall(), []
        select = tally_moments.label_select(_flag_sql(study_id, exact=True))
        where = tally_moments.labels_where()
        q = connection.ops.quote_name
        item = f"{Query._meta.db_table}.{q('item_id')}"
        if connection.vendor == "postgresql":
            cursor.execute(
                f"WITH taken AS ({take}) SELECT 0, {columns} FROM taken UNION ALL SELECT 1, "
                f"{select} {where} AND {item} IN (SELECT item_id FROM taken WHERE state IN "
                "('yes', 'no'))", [study_id, FOLD_BATCH, study_id])
            rows = cursor.fetchall()
            return [r[1:] for r in rows if r[0] == 0], [r[1:] for r in rows if r[0] == 1]
        # SQLite: the fold holds the write lock, so no change commits between the two
        cursor.execute(take, [study_id, FOLD_BATCH])
        taken = cursor.fetchall()
        items, found = tally_moments.touched(taken), []
        for start in range(0, len(items), 500):
            chunk = items[start:start + 500]
            cursor.execute(f"SELECT {select} {where} AND {item} IN "
                           f"({', '.join(['%s'] * len(chunk))})", [study_id, *chunk])
            found += cursor.fetchall()
        return taken, found


def _groups_add(study_id: int, taken: list[tuple]) -> None:
    """Add the signed entries ``taken`` to the study's groups."""
    width = len(TallyKey.KEY)
    keys = [_key(row[:width]) for row in taken]
    distinct = list(dict.fromkeys(keys))
    index = {key: g for g, key in enumerate(distinct)}
    group = np.array([index[key] for key in keys], dtype=np.int64)
    sign = np.array([row[width] for row in taken], dtype=np.int64)
    n = np.bincount(group, weights=sign, minlength=len(distinct)).astype(np.int64)
    ordinals = _ordinals(study_id)
    columns = np.array([row[width + 1:width + 1 + len(CODE_COLUMNS)] for row in taken],
                       dtype=np.int64).view(np.uint64)
    codes = _code_counts(group, len(distinct), columns, ordinals, sign)
    _groups_merge(study_id, distinct, n, codes, ordinals)


def _code_counts(group: np.ndarray, n_groups: int, columns: np.ndarray, ordinals: list[int],
                 sign: np.ndarray | None = None) -> np.ndarray:
    """``counts[g, j, c]``: the rows of group g (``group``, per row) whose code for system
    ``ordinals[j]`` is c (``selectors.CODE_COLUMNS`` in ``columns``), each row counted
    ``sign`` times (None: once)."""
    counts = np.zeros((n_groups, len(ordinals), CODES), dtype=np.int64)
    if not ordinals or not len(group):
        return counts
    per = _system_codes(columns, ordinals).astype(np.int64)
    flat = (group[:, None] * len(ordinals) + np.arange(len(ordinals))) * CODES + per
    weights = None if sign is None else np.repeat(sign, len(ordinals))
    return (np.bincount(flat.ravel(), weights=weights, minlength=counts.size)
            .astype(np.int64).reshape(counts.shape))


def _groups_merge(study_id: int, keys: list[tuple], n: np.ndarray, codes: np.ndarray,
                  ordinals: list[int], *, replace: bool = False) -> None:
    """Add (``replace``: set) the counts of ``keys`` to the study's stored groups; a group
    left with no query is deleted."""
    stored = {} if replace else {
        _key(row[:-3]): row[-3:] for row in TallyGroup.objects.filter(study_id=study_id)
        .values_list(*TallyKey.KEY, "id", "n", "codes")}
    if replace:
        TallyGroup.objects.filter(study_id=study_id).delete()
    create, update, delete = [], [], []
    for g, key in enumerate(keys):
        pk, total, by_system = stored.get(key, (None, 0, {}))
        total += int(n[g])
        by_system = {o: dict(c) for o, c in by_system.items()}
        for j, ordinal in enumerate(ordinals):
            if key[2] not in ANSWERS:
                break  # open queries and skips carry no codes
            for code in np.flatnonzero(codes[g, j, 1:]) + 1:
                slot = by_system.setdefault(str(ordinal), {})
                slot[str(code)] = slot.get(str(code), 0) + int(codes[g, j, code])
                if slot[str(code)] == 0:
                    del slot[str(code)]
            if not by_system.get(str(ordinal), True):
                del by_system[str(ordinal)]
        if pk is not None and total == 0 and not by_system:
            delete.append(pk)
        elif pk is not None:
            update.append(TallyGroup(pk=pk, n=total, codes=by_system))
        elif total or by_system:
            create.append(TallyGroup(study_id=study_id, n=total, codes=by_system,
                                     **dict(zip(TallyKey.KEY, key, strict=True))))
    TallyGroup.objects.filter(pk__in=delete).delete()
    TallyGroup.objects.bulk_update(update, ["n", "codes"])
    TallyGroup.objects.bulk_create(create)


# --- build ---------------------------------------------------------------------------------
FLAGS = ("first", "uniform", "neyman", "rejected", "withdrawn")  # bits 0..4 of the key's int


def _flag_sql(study_id: int, *, exact: bool = False) -> list[str]:
    """The five flags of :data:`FLAGS` of a row of the study's queries as SQL expressions —
    what the triggers of migration 0036 write. A membership test is a hashed set of the
    study's designs, rejections or withdrawals; without ``exact``, FALSE when the study has
    none (the triggers' per-row EXISTS would probe an index per query; that check is a
    statement of its own, so only a read in one snapshot with it — the build's — may skip)."""
    q = connection.ops.quote_name
    t = Query._meta.db_table
    sid = int(study_id)

    def member(column: str, subquery: str, *present: QuerySet) -> str:
        if not exact and not any(rows.filter(study_id=sid).exists() for rows in present):
            return "FALSE"
        return f"COALESCE({t}.{q(column)} IN ({subquery}), FALSE)"

    query_type = ("(SELECT id FROM django_content_type WHERE app_label = 'annotations' AND "
                  "model = 'query')")

    return [
        f"{t}.{q('sequence')} = 0",
        f"COALESCE({t}.{q('draw_uniform')}, TRUE)",
        member("design_id", "SELECT d.id FROM annotations_routingdesign d "
               f"WHERE d.study_id = {sid} AND d.kind = 'neyman'",
               RoutingDesign.objects.filter(kind="neyman")),
        # left out: rejected by a review or excluded (the column is named for the first)
        member("id", "SELECT v.answer_id FROM annotations_answerreview v WHERE v.study_id = "
               f"{sid} AND v.answer_type_id = {query_type} AND v.state = 'rejected' UNION "
               "SELECT e.answer_id FROM annotations_excludedanswer e WHERE e.study_id = "
               f"{sid} AND e.answer_type_id = {query_type}",
               AnswerReview.objects.filter(state="rejected"), ExcludedAnswer.objects.all()),
        member("item_id", "SELECT f.item_id FROM annotations_itemflag f WHERE "
               f"f.study_id = {sid} AND f.resolution = 'withdrawn'",
               ItemFlag.objects.filter(resolution="withdrawn")),
    ]


def _key_sql(study_id: int) -> list[str]:
    """The ``TallyKey`` of a row of the study's queries as four SQL expressions — stratum,
    k, state and the five flags (:func:`_flag_sql`) packed into an int (bit i:
    :data:`FLAGS` [i])."""
    q = connection.ops.quote_name
    t = Query._meta.db_table
    flags = _flag_sql(study_id)
    packed = " | ".join(f"(CAST({flag} AS INTEGER) << {bit})" for bit, flag in enumerate(flags))
    state = f"CASE WHEN {t}.{q('status')} = 'answered' THEN {t}.{q('answer')} ELSE 'open' END"
    return [f"{t}.{q('stratum')}", f"{t}.{q('k')}", state, f"({packed})"]


def _flag_key(raw: tuple) -> tuple:
    """A ``TallyKey`` tuple from (stratum, k, state, packed flags)."""
    stratum, k, state, packed = raw
    return (stratum, int(k), state, *(bool(int(packed) >> bit & 1) for bit in range(len(FLAGS))))


def tallies_build(*, study_id: int) -> None:
    """Replace the study's groups with counts from its queries and skips, and drop the
    log entries that read includes (module docstring)."""
    for attempt in range(5):
        try:
            outermost = not connection.in_atomic_block
            with transaction.atomic():
                if connection.vendor == "postgresql" and outermost:
                    with connection.cursor() as cursor:
                        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                _lock(study_id)
                _build(study_id)
            return
        except OperationalError as exc:  # a fold committed after this snapshot: again
            if attempt == 4 or "serializ" not in str(exc).lower():
                raise
            time.sleep(0.05 * (attempt + 1))
        except IntegrityError:  # another process's first build made the study's state row
            if attempt == 4:  # after this snapshot began (it cannot see it): again
                raise
            time.sleep(0.05 * (attempt + 1))


def _build(study_id: int) -> None:
    q = connection.ops.quote_name
    where = (f"FROM {Query._meta.db_table} WHERE {q('study_id')} = %s AND NOT "
             f"{q('is_quality_check')}")
    ordinals = _ordinals(study_id)
    keys_sql = _key_sql(study_id)
    raw_keys, sizes, codes = _codes_read(study_id, keys_sql, where, ordinals)
    keys = [_flag_key(k) for k in raw_keys]
    n = np.asarray(sizes, dtype=np.int64)
    skips = [(("", k, "skip", False, True, False, False, False), count) for k, count in
             _skip_counts(study_id)]
    keys += [key for key, _ in skips]
    n = np.concatenate([n, np.array([c for _, c in skips], dtype=np.int64)])
    codes = np.concatenate([codes, np.zeros((len(skips), *codes.shape[1:]), np.int64)])
    _groups_merge(study_id, keys, n, codes, ordinals, replace=True)
    tally_moments.moments_built(study_id, tally_moments.signature(study_id))
    tally_designs.designs_built(study_id, tally_designs.signature(study_id))
    TallyEntry.objects.filter(study_id=study_id).delete()
    TallyState.objects.filter(study_id=study_id).update(built_at=timezone.now())


def _codes_read(study_id: int, keys_sql: list[str], where: str, ordinals: list[int]
                ) -> tuple[list[tuple], list[int], np.ndarray]:
    """Per group of ``keys_sql``: its key, its rows and its code counts per system
    (:func:`_code_counts`' array) — counted by PostgreSQL where it can
    (:func:`_codes_summed`), else from the rows' bits (binary COPY, or row by row)."""
    if connection.vendor == "postgresql":
        banded = AISystem.objects.filter(study_id=study_id).exclude(band_edges=[]).exists()
        summed = None if banded else _codes_summed(keys_sql, where, [study_id], ordinals)
        if summed is not None:
            return summed
        raw_keys, sizes, columns = _rows_copied(keys_sql, where, [study_id], banded)
    else:
        raw_keys, sizes, columns = codes_fetched(keys_sql, where, [study_id])
    group = np.repeat(np.arange(len(raw_keys)), sizes).astype(np.int64)
    return raw_keys, sizes, _code_counts(group, len(raw_keys), columns, ordinals)


def _codes_summed(keys_sql: list[str], where: str, params: list, ordinals: list[int]
                  ) -> tuple[list[tuple], list[int], np.ndarray] | None:
    """Per group of ``keys_sql``: its rows and, per system of ``ordinals``, how many carry
    each code (:func:`_code_counts`' array), counted by the server — one filtered count of a
    mask bit per system and mask — for a study without confidence bands, whose codes are then
    present | match << 1 alone: code 3 = the match bit (a match is a present prediction),
    code 1 = present less match, code 0 = the rest. None when some row has a match bit
    without its present bit (code 2: then the rows' bits are read, :func:`_rows_copied`).
    A few hundred rows come back instead of every query's two masks (docs/scaling.md)."""
    q = connection.ops.quote_name
    def bit(o: int) -> int:  # as a signed bigint: ordinal 63 is the sign bit
        return (1 << o) if o < 63 else -(1 << 63)

    counts = ", ".join(f"count(*) FILTER (WHERE {q(column)} & ({bit(o)})::bigint <> 0)"
                       for column in ("present_mask", "match_mask") for o in ordinals)
    stray = f"count(*) FILTER (WHERE {q('match_mask')} & ~{q('present_mask')} <> 0)"
    with transaction.atomic(), connection.cursor() as cursor:
        # the planner expects thousands of groups where there are a few hundred: it would
        # sort every row (spilling to disk) to group them, where hashing takes a third less
        cursor.execute("SET LOCAL jit = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"SELECT {', '.join(keys_sql)}, count(*), {stray}"
                       f"{', ' if counts else ''}{counts} {where} GROUP BY 1, 2, 3, 4", params)
        rows = cursor.fetchall()
        cursor.execute("RESET enable_sort")  # for the rest of a build's transaction
    if any(row[5] for row in rows):
        return None
    width = len(ordinals)
    codes = np.zeros((len(rows), width, CODES), dtype=np.int64)
    for g, row in enumerate(rows):
        present = np.array(row[6:6 + width], dtype=np.int64)
        match = np.array(row[6 + width:6 + 2 * width], dtype=np.int64)
        codes[g, :, 3] = match
        codes[g, :, 1] = present - match
        codes[g, :, 0] = row[4] - present
    return [tuple(row[:4]) for row in rows], [int(row[4]) for row in rows], codes


ARRAY_HEADER = 20  # a one-dimensional array's binary header: ndim, flags, type, size, lbound


def _rows_copied(keys_sql: list[str], where: str, params: list, banded: bool
                 ) -> tuple[list[tuple], list[int], np.ndarray]:
    """Per group of ``keys_sql`` (stratum, k, state, flags): its rows' AI bit columns
    (``selectors.CODE_COLUMNS``; the band bits only when ``banded``, else 0) as uint64
    (rows, 5), groups in order, from one binary COPY of an ``array_agg`` per column. (A COPY
    row per query would cost psycopg microseconds a row: 5 s at a million.)"""
    q = connection.ops.quote_name
    read = CODE_COLUMNS if banded else CODE_COLUMNS[:2]
    aggregates = ", ".join(f"array_agg(COALESCE({q(c)}, 0))" for c in read)
    sql = (f"COPY (SELECT {', '.join(keys_sql)}, {aggregates} {where} GROUP BY 1, 2, 3, 4) "
           "TO STDOUT (FORMAT BINARY)")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        with cursor.cursor.copy(sql, params) as copy:
            raw = b"".join(copy)
    element = np.dtype([("size", ">i4"), ("value", "<u8")])
    keys, sizes, blocks = [], [], []
    for stratum, k, state, flags, *arrays in _copy_tuples(raw):
        keys.append((bytes(stratum).decode(), int.from_bytes(k, "big", signed=True),
                     bytes(state).decode(), int.from_bytes(flags, "big", signed=True)))
        values = [np.frombuffer(a[ARRAY_HEADER:], dtype=element)["value"] for a in arrays]
        block = np.zeros((len(values[0]), len(CODE_COLUMNS)), dtype=np.uint64)
        for j, column in enumerate(values):
            block[:, j] = column.byteswap()  # big-endian int8 read as little-endian bits
        sizes.append(len(block))
        blocks.append(block)
    columns = (np.concatenate(blocks) if blocks
               else np.zeros((0, len(CODE_COLUMNS)), dtype=np.uint64))
    return keys, sizes, columns


def _skip_counts(study_id: int) -> list[tuple[int, int]]:
    return list(QuerySkip.objects.filter(study_id=study_id, is_quality_check=False)
                .values("k").annotate(n=Count("id")).values_list("k", "n").order_by())


# --- read ----------------------------------------------------------------------------------
def tallies_current(*, study_id: int) -> Tallies:
    """The study's statistics, current: the log folded and the groups read in the last
    batch's transaction, under its lock (no fold can move entries between the two)."""
    rows, moments, design = _fold(study_id, read=True)[1]
    return Tallies.of_rows([(*_key(r[:len(TallyKey.KEY)]), *r[len(TallyKey.KEY):])
                            for r in rows], moments=moments, design=design)


def orphan_entries_drop() -> int:
    """Delete log entries of studies that no longer exist (written while one was deleted)."""
    return TallyEntry.objects.exclude(study_id__in=Study.objects.values("pk")).delete()[0]
