"""Reads of partitioned studies: the specialist's view of a query (hidden information is
filtered here), their progress, the label counts and columns the estimators read, quality
checks and the researcher's setup checklist."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
from django.db import OperationalError, connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Sum, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from annotations.core.exclusion_models import answers_kept_sql, answers_left_out
from annotations.core.models import Item, ItemFlag, Study, StudyMembership, User
from annotations.core.selectors import row_id_possible, study_classes
from annotations.core.services.bulk import IN_LIST_MAX
from annotations.partitioned.models import (
    Query,
    QuerySkip,
    RoutingDesign,
    TallyEntry,
    TallyState,
)
from assistants.models import AISystem, Prediction

Role = StudyMembership.Role

# (stratum, k, answer) of each group in ORDER BY order, its number of queries, and the
# queries' CODE_COLUMNS as uint64 (queries, 5), group after group.
Answered = tuple[list[tuple[str, int, str]], list[int], np.ndarray]
# the strata's names, each label's stratum (an index into the names), and the labels'
# columns as int64 (labels, 5 or 8): item id, k, 1 for 'yes', match and present masks
# [, band bits 0–2]
LabelRows = tuple[list[str], np.ndarray, np.ndarray]



def specialist_membership_of(*, user: User, study_id: int) -> StudyMembership | None:
    """The user's specialist membership of study ``study_id`` with its study and class, in
    one statement (the labelling views read it once per request and pass it down); None if
    they are not a specialist there (also for an id no database row can have: the id comes
    from the URL, and SQLite refuses integers beyond 64 bits)."""
    if not row_id_possible(study_id):
        return None
    return (
        StudyMembership.objects.select_related("study", "study_class")
        .filter(user=user, study_id=study_id, role=Role.SPECIALIST)
        .first()
    )


def specialist_membership(*, user: User, study: Study) -> StudyMembership | None:
    return (
        StudyMembership.objects.select_related("study_class")
        .filter(user=user, study=study, role=Role.SPECIALIST)
        .first()
    )


# --- the specialist's view of a query (hidden information filtered here) --------------------
@dataclass(frozen=True)
class QueryForSpecialist:
    """Exactly what a specialist may see: no gold label, no AI prediction, no other answers,
    and nothing that tells a quality check from a routed query (``id`` is the random public
    id, never the database id)."""

    id: str
    study_id: int
    item_text: str
    options: list[tuple[str, str]]  # (class name = position label, option text)
    class_index: int
    class_name: str
    class_description: str
    lease_expires_at: object
    issued_at: object


def query_for_specialist(*, query: Query, study: Study | None = None) -> QueryForSpecialist:
    """The specialist's view of ``query`` (pass its study if at hand: one query fewer)."""
    item = Item.objects.only("text", "options", "option_order").get(pk=query.item_id)
    classes = study_classes(study=study if study is not None else query.study)
    names = [c.name for c in classes]
    asked = classes[query.k]
    return QueryForSpecialist(
        id=query.public_id,
        study_id=query.study_id,
        item_text=item.text,
        options=list(zip(names, item.displayed_options(names), strict=True)),
        class_index=query.k,
        class_name=asked.name,
        class_description=asked.description,
        lease_expires_at=query.lease_expires_at,
        issued_at=query.issued_at,
    )


def specialist_progress(*, user: User, study: Study, since=None,
                        membership: StudyMembership | None = None,
                        holding: bool = False) -> dict[str, int]:
    """What the labelling page counts: ``answered`` (all of this user's answers in the
    study), ``session`` (those since ``since``) and ``remaining`` in their class. Pass the
    specialist ``membership`` when it is at hand (read once per request); otherwise it is
    read here. Two statements: the user's counts, the class's counts (:func:`_class_counts`).

    ``remaining`` = the class's pending queries this user may still get (routed ones they
    did not skip) − quality checks of the class that are leased or answered − checks they
    skipped, floored at 0. Quality checks are made on demand, outside the pool; counted
    this way a check moves the figure exactly as a routed query does (−1 when handed out,
    0 when answered, 0 when skipped — it never comes back to them — and +1 when expired),
    so it cannot be recognised by it. The price: the figure undercounts the pool by the
    checks issued so far. So that it does not read 0 while queries are still to come, it is
    at least 1 while a routed query is pending for the user and none is on their screen
    (``holding`` False: with no query shown there is nothing the floor could give away).
    ``waiting``: those pending routed queries; when none could be leased they are
    follow-ups held for their answer's undo window, and the page says more will come
    rather than "no queries left"."""
    if membership is None:
        membership = specialist_membership(user=user, study=study)
    mine = Query.objects.filter(study=study, answered_by=user).aggregate(
        answered=Count("id"),
        session=Count("id", filter=Q(answered_at__gte=since)) if since is not None
        else Count("id"))
    remaining = free = 0
    if membership is not None:
        pending, checks, skipped_routed, skipped_checks = _class_counts(
            study, membership.study_class.index, user)
        free = pending - skipped_routed
        remaining = max(0 if holding else min(free, 1), free - skipped_checks - checks)
    return {"answered": mine["answered"], "session": mine["session"], "remaining": remaining,
            "waiting": free}


def _class_counts(study: Study, k: int, user: User) -> tuple[int, int, int, int]:
    """In one statement, of class k's queries: pending routed ones (of items not withdrawn),
    checks leased or answered, and the pending routed ones (not withdrawn) and pending
    checks ``user`` skipped."""
    q = connection.ops.quote_name
    table, skips = Query._meta.db_table, QuerySkip._meta.db_table
    pending = Query.Status.PENDING

    def skipped(check: bool) -> str:
        routed = "" if check else (
            "NOT p.is_quality_check AND " + ItemFlag.not_withdrawn_sql("p.study_id", "p.item_id"))
        return (f"(SELECT COUNT(*) FROM {skips} s JOIN {table} p ON p.id = s.query_id "
                f"WHERE s.user_id = %s AND p.study_id = %s AND p.k = %s AND p.status = %s "
                f"AND {'p.is_quality_check' if check else routed})")

    # a withdrawn item's pending queries are never handed out: not counted as remaining
    live = ItemFlag.not_withdrawn_sql(f"{table}.{q('study_id')}", f"{table}.{q('item_id')}")
    sql = (f"SELECT COALESCE(SUM(CASE WHEN {q('status')} = %s AND NOT {q('is_quality_check')} "
           f"AND {live} THEN 1 ELSE 0 END), 0), "
           f"COALESCE(SUM(CASE WHEN {q('is_quality_check')} AND {q('status')} <> %s "
           f"THEN 1 ELSE 0 END), 0), {skipped(False)}, {skipped(True)} "
           f"FROM {table} WHERE {q('study_id')} = %s AND {q('k')} = %s")
    with connection.cursor() as cursor:
        cursor.execute(sql, [pending, pending, user.pk, study.pk, k, pending,
                             user.pk, study.pk, k, pending, study.pk, k])
        return tuple(int(v) for v in cursor.fetchone())


# --- counts for the estimators -------------------------------------------------------------
@dataclass(frozen=True)
class LabelCounts:
    """Answered, non-quality-check queries grouped by (stratum, class k, answer).

    ``n[g]`` queries in group g; ``match[g, s]`` of them where system s predicted class k;
    ``present[g, s]`` where system s gave a parseable prediction."""

    strata: np.ndarray
    k: np.ndarray
    answer: np.ndarray
    n: np.ndarray
    match: np.ndarray
    present: np.ndarray


_uniform_part: ContextVar[bool] = ContextVar("uniform_part", default=False)


@contextmanager
def uniform_part_only() -> Iterator[None]:
    """Within this block the estimators' reads (:func:`estimated_queries`,
    :func:`_answered_sql`: every count, label and first-query read below) see only the
    **uniform part** of the study's draws — queries of the uniform design and of items whose
    targeted-design coin chose the uniform component (``Query.draw_uniform``): an exact
    uniform-design sub-study, on which the paper's estimators and the checks that assume
    uniform draws stay valid (``estimators.partitioned.designs``)."""
    token = _uniform_part.set(True)
    try:
        yield
    finally:
        _uniform_part.reset(token)


UNIFORM_PART = Q(draw_uniform__isnull=True) | Q(draw_uniform=True)


def estimated_queries(study: Study, queries: QuerySet[Query]) -> QuerySet[Query]:
    """``queries`` less those the estimates leave out: of withdrawn items (flags) and with
    an answer rejected (reviews) or excluded (``answers_left_out``); inside
    :func:`uniform_part_only`, also those outside the uniform part. The ORM twin of
    :func:`_answered_sql`."""
    if _uniform_part.get():
        queries = queries.filter(UNIFORM_PART)
    return (queries.exclude(item_id__in=ItemFlag.withdrawn_ids(study))
            .exclude(answers_left_out(study, Query)))


def study_label_counts(*, study: Study, ordinals: list[int]) -> LabelCounts:
    """One SQL aggregation over the study's answered queries (bit sums over the masks)."""
    aggregates = {}
    for o in ordinals:
        aggregates[f"m{o}"] = Sum(F("match_mask").bitrightshift(o).bitand(1))
        aggregates[f"p{o}"] = Sum(F("present_mask").bitrightshift(o).bitand(1))
    rows = list(
        estimated_queries(study, Query.objects.filter(
            study=study, status=Query.Status.ANSWERED, is_quality_check=False))
        .values("stratum", "k", "answer")
        .annotate(n=Count("id"), **aggregates)
        .order_by("stratum", "k", "answer")
    )
    g = len(rows)
    match = np.zeros((g, len(ordinals)))
    present = np.zeros((g, len(ordinals)))
    for i, row in enumerate(rows):
        for j, o in enumerate(ordinals):
            match[i, j] = float(row[f"m{o}"] or 0)
            present[i, j] = float(row[f"p{o}"] or 0)
    return LabelCounts(
        strata=np.array([r["stratum"] for r in rows], dtype=object),
        k=np.array([r["k"] for r in rows], dtype=int),
        answer=np.array([r["answer"] for r in rows], dtype=object),
        n=np.array([r["n"] for r in rows], dtype=float),
        match=match,
        present=present,
    )


@dataclass(frozen=True)
class BandCounts:
    """The groups of :class:`LabelCounts` split by confidence band
    (``annotations.partitioned.services.banding``):
    ``n[g, b, j]`` answered queries of group g whose item banded system j puts in band
    b + 1; ``match`` / ``present`` of them where system j predicted class k / anything."""

    n: np.ndarray
    match: np.ndarray
    present: np.ndarray


def _band_mask_sql(band: int) -> str:
    """SQL for the mask of systems whose band index (three bit planes) is ``band``."""
    planes = [f"COALESCE({connection.ops.quote_name(f'band_bit{plane}')}, 0)"
              for plane in range(3)]
    return " & ".join(p if band >> plane & 1 else f"~{p}" for plane, p in enumerate(planes))


# Grouping by the bit planes themselves adds at most (bands + 1) ** banded systems groups
# per (stratum, k, answer) and no expression: the cheap strategy while that stays small.
GROUPED_BAND_COMBOS_MAX = 64


def study_label_counts_banded(*, study: Study, ordinals: list[int], banded: list[int],
                              n_bands: int, strategy: str | None = None
                              ) -> tuple[LabelCounts, BandCounts]:
    """:func:`study_label_counts` and, in the same single pass, the counts per
    confidence band (1..``n_bands``) of the ``banded`` systems' ordinals.

    Three ways to the same numbers (``strategy``; None: "arrays" on PostgreSQL, else by
    size). "grouped": the GROUP BY also takes the three bit planes, whose distinct values
    are few when few systems are banded, and each group's band per system is decoded here —
    the plain aggregation's cost.
    "sums": each band's mask is built once per row from the planes (a fenced subquery), then
    bit sums of mask, mask ∧ match and mask ∧ present per banded system — a cost that grows
    with banded systems × bands. "arrays" (the default on PostgreSQL): each answered
    query's group and bit columns are read once (on PostgreSQL a few packed int8 per query
    in one bytea, by binary COPY) and counted in numpy (:func:`_band_tallies`) — about the
    plain aggregation's cost whatever the systems and bands. Counts are floats, groups in
    the order of ``ORDER BY stratum, k, answer`` in every strategy."""
    if strategy is None:
        strategy = ("arrays" if connection.vendor == "postgresql"
                    else "grouped" if (n_bands + 1) ** len(banded) <= GROUPED_BAND_COMBOS_MAX
                    else "sums")
    if strategy == "arrays":
        return _banded_arrays(study, ordinals, banded, n_bands)
    if strategy == "grouped":
        return _banded_grouped(study, ordinals, banded, n_bands)
    return _banded_sums(study, ordinals, banded, n_bands)


def _banded_query(sql: str, params: list) -> list[tuple]:
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # compiling hundreds of sums costs PostgreSQL's JIT seconds; it saves nothing
            cursor.execute("SET LOCAL jit = off")
        cursor.execute(sql, params)
        return cursor.fetchall()


def _answered_sql() -> str:
    """The answered routed queries of items not withdrawn (flags) whose answer is not
    rejected (reviews) — of the uniform part only inside :func:`uniform_part_only`:
    FROM … WHERE."""
    q = connection.ops.quote_name
    table = Query._meta.db_table
    study_column = f"{table}.{q('study_id')}"
    uniform = (f"({q('draw_uniform')} IS NULL OR {q('draw_uniform')}) AND "
               if _uniform_part.get() else "")
    return (f"FROM {table} WHERE {q('study_id')} = %s AND {q('status')} = %s "
            f"AND NOT {q('is_quality_check')} AND {uniform}"
            + ItemFlag.not_withdrawn_sql(study_column, f"{table}.{q('item_id')}") + " AND "
            + answers_kept_sql(Query, study_column, f"{table}.{q('id')}"))


def _banded_grouped(study: Study, ordinals: list[int], banded: list[int],
                    n_bands: int) -> tuple[LabelCounts, BandCounts]:
    q = connection.ops.quote_name
    planes = [f"COALESCE({q(f'band_bit{plane}')}, 0)" for plane in range(3)]
    sums = "".join(f", SUM(({q('match_mask')} >> {o}) & 1), SUM(({q('present_mask')} >> {o}) "
                   f"& 1)" for o in ordinals)
    sql = (f"SELECT {q('stratum')}, {q('k')}, {q('answer')}, {', '.join(planes)}, COUNT(*)"
           f"{sums} {_answered_sql()} GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3")
    rows = _banded_query(sql, [study.pk, Query.Status.ANSWERED])
    keys = list(dict.fromkeys((r[0], r[1], r[2]) for r in rows))  # the SQL's order
    group = {key: g for g, key in enumerate(keys)}
    s, b = len(ordinals), len(banded)
    n, match, present = np.zeros(len(keys)), np.zeros((len(keys), s)), np.zeros((len(keys), s))
    band_n = np.zeros((len(keys), n_bands, b))
    band_m, band_p = np.zeros_like(band_n), np.zeros_like(band_n)
    column = {o: j for j, o in enumerate(ordinals)}
    for row in rows:
        g = group[(row[0], row[1], row[2])]
        data = np.asarray(row[6:], dtype=float)
        n[g] += data[0]
        match[g] += data[1::2]
        present[g] += data[2::2]
        for j, o in enumerate(banded):
            band = sum(((row[3 + plane] >> o) & 1) << plane for plane in range(3))
            if 1 <= band <= n_bands:
                band_n[g, band - 1, j] += data[0]
                band_m[g, band - 1, j] += data[1 + 2 * column[o]]
                band_p[g, band - 1, j] += data[2 + 2 * column[o]]
    counts = LabelCounts(strata=np.array([k[0] for k in keys], dtype=object),
                         k=np.array([k[1] for k in keys], dtype=int),
                         answer=np.array([k[2] for k in keys], dtype=object),
                         n=n, match=match, present=present)
    return counts, BandCounts(n=band_n, match=band_m, present=band_p)


def _banded_sums(study: Study, ordinals: list[int], banded: list[int],
                 n_bands: int) -> tuple[LabelCounts, BandCounts]:
    q = connection.ops.quote_name
    masks = ", ".join(f"{_band_mask_sql(b)} AS b{b}" for b in range(1, n_bands + 1))
    inner = (f"SELECT {q('stratum')} AS st, {q('k')} AS k, {q('answer')} AS an, "
             f"{q('match_mask')} AS m, {q('present_mask')} AS p"
             f"{', ' + masks if masks else ''} {_answered_sql()}"
             f"{' OFFSET 0' if connection.vendor == 'postgresql' else ''}")
    sums = [f"SUM((m >> {o}) & 1), SUM((p >> {o}) & 1)" for o in ordinals]
    sums += [f"SUM((b{b} >> {o}) & 1), SUM(((b{b} & m) >> {o}) & 1), "
             f"SUM(((b{b} & p) >> {o}) & 1)"
             for b in range(1, n_bands + 1) for o in banded]
    sql = (f"SELECT st, k, an, COUNT(*){''.join(', ' + x for x in sums)} FROM ({inner}) t "
           "GROUP BY st, k, an ORDER BY st, k, an")
    rows = _banded_query(sql, [study.pk, Query.Status.ANSWERED])
    s, b = len(ordinals), len(banded)
    data = np.array([r[3:] for r in rows], dtype=float).reshape(len(rows), 1 + 2 * s
                                                                  + 3 * n_bands * b)
    base = data[:, 1:1 + 2 * s].reshape(len(rows), s, 2)
    bands = data[:, 1 + 2 * s:].reshape(len(rows), n_bands, b, 3)
    counts = LabelCounts(
        strata=np.array([r[0] for r in rows], dtype=object),
        k=np.array([r[1] for r in rows], dtype=int),
        answer=np.array([r[2] for r in rows], dtype=object),
        n=data[:, 0].copy(), match=base[:, :, 0].copy(), present=base[:, :, 1].copy(),
    )
    return counts, BandCounts(n=bands[..., 0].copy(), match=bands[..., 1].copy(),
                              present=bands[..., 2].copy())


@dataclass(frozen=True)
class AnsweredColumns:
    """A study's answered queries (quality checks excluded), one entry per query: ``group``
    its (stratum, k, answer) group, an index into ``strata`` / ``k`` / ``answer`` (the
    groups that have queries, in the SQL strategies' ORDER BY); ``codes`` uint8 (queries,
    systems in the ``ordinals`` order asked for): present | match << 1 | band index << 2."""

    strata: np.ndarray
    k: np.ndarray
    answer: np.ndarray
    group: np.ndarray
    codes: np.ndarray


# The bit columns read, in the order of their bit in a code (band index: bits 2..4).
CODE_COLUMNS = ("present_mask", "match_mask", "band_bit0", "band_bit1", "band_bit2")


def _banded_arrays(study: Study, ordinals: list[int], banded: list[int],
                   n_bands: int) -> tuple[LabelCounts, BandCounts]:
    try:
        columns = study_answered_columns(study=study, ordinals=ordinals)
    except OperationalError:  # a group's bytea past 1 GB (some 60 million queries)
        return _banded_sums(study, ordinals, banded, n_bands)
    n, match, present, band_n, band_m, band_p = _band_tallies(
        columns.group, len(columns.k), columns.codes, [ordinals.index(o) for o in banded],
        n_bands)
    counts = LabelCounts(strata=columns.strata, k=columns.k, answer=columns.answer,
                         n=n, match=match, present=present)
    return counts, BandCounts(n=band_n, match=band_m, present=band_p)


def _band_tallies(group: np.ndarray, n_groups: int, codes: np.ndarray, banded: list[int],
                  n_bands: int) -> tuple[np.ndarray, ...]:
    """(n, match, present, band_n, band_match, band_present) as floats, shaped like
    :class:`LabelCounts` / :class:`BandCounts`, from each query's ``group`` and per-system
    ``codes`` (:class:`AnsweredColumns`; ``banded``: their columns with bands). One
    ``bincount`` per system over group × code gives every count of that system."""
    n = np.bincount(group, minlength=n_groups).astype(float)
    tally = np.empty((codes.shape[1], n_groups, 32))
    offset = group.astype(np.int64) * 32
    for j in range(codes.shape[1]):
        tally[j] = np.bincount(offset + codes[:, j], minlength=n_groups * 32).reshape(-1, 32)
    return (n, *counts_of_codes(tally, banded, n_bands))


def counts_of_codes(tally: np.ndarray, banded: list[int], n_bands: int
                    ) -> tuple[np.ndarray, ...]:
    """(match, present, band_n, band_match, band_present) as floats, shaped like
    :class:`LabelCounts` / :class:`BandCounts`, from ``tally[j, g, c]``: the queries of group
    g whose code for system column j is c (:class:`AnsweredColumns`; ``banded``: the
    columns with bands)."""
    n_groups = tally.shape[1]
    code = np.arange(32)
    match = tally[:, :, (code >> 1 & 1) == 1].sum(axis=2).T
    present = tally[:, :, (code & 1) == 1].sum(axis=2).T
    per_band = tally[banded].reshape(len(banded), n_groups, 8, 4)  # band, then match/present
    band = per_band[:, :, 1:n_bands + 1].transpose(1, 2, 0, 3)  # (groups, bands, banded, 4)
    return (match, present, band.sum(axis=3), band[..., 2:].sum(axis=3),
            band[..., 1::2].sum(axis=3))


def _spread_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lookup tables (little-endian uint64) from mask bytes to eight codes' bytes: byte i of
    an entry holds bit i of the mask byte(s), at the column's bit of a code. Indexed by
    (present byte << 8 | match byte), (band_bit0 byte << 8 | band_bit1 byte), band_bit2
    byte: three lookups per eight systems instead of five."""
    v = np.arange(256, dtype=np.uint64)
    spread = [sum((v >> i & 1) << 8 * i for i in range(8)) << c
              for c in range(len(CODE_COLUMNS))]
    return ((spread[0][:, None] | spread[1][None, :]).ravel().astype("<u8"),
            (spread[2][:, None] | spread[3][None, :]).ravel().astype("<u8"),
            spread[4].astype("<u8"))


SPREAD = _spread_tables()


def _system_codes(columns: np.ndarray, ordinals: list[int]) -> np.ndarray:
    """(queries, systems) uint8 codes (:class:`AnsweredColumns`) from the five bit columns
    (``columns``: uint64 (queries, 5), in :data:`CODE_COLUMNS` order), eight systems at a
    time by table lookups (:func:`_spread_tables`)."""
    n_bytes = max(ordinals, default=0) // 8 + 1
    raw = np.ascontiguousarray(columns, dtype="<u8").view(np.uint8).reshape(-1, 5, 8)
    pairs, bands, last = SPREAD
    codes = np.empty((len(columns), n_bytes), dtype="<u8")
    for byte in range(n_bytes):
        first = raw[:, 0, byte].astype(np.intp) << 8 | raw[:, 1, byte]
        second = raw[:, 2, byte].astype(np.intp) << 8 | raw[:, 3, byte]
        codes[:, byte] = pairs[first] | bands[second] | last[raw[:, 4, byte]]
    codes = codes.view(np.uint8)  # byte 8·t + i: system 8·t + i
    if ordinals == list(range(len(ordinals))):
        return codes[:, :len(ordinals)]
    return codes[:, ordinals]


def study_answered_columns(*, study: Study, ordinals: list[int]) -> AnsweredColumns:
    """The study's answered queries as :class:`AnsweredColumns` for the systems
    ``ordinals``: on PostgreSQL one row per group holding its queries' bit columns packed
    into a few int8 each (``COPY … (FORMAT BINARY)``, decoded by numpy), elsewhere a plain
    read."""
    read = _answered_copied if connection.vendor == "postgresql" else _answered_fetched
    keys, sizes, columns = read(study, ordinals)
    return AnsweredColumns(
        strata=np.array([key[0] for key in keys], dtype=object),
        k=np.array([key[1] for key in keys], dtype=int),
        answer=np.array([key[2] for key in keys], dtype=object),
        group=np.repeat(np.arange(len(keys)), sizes),
        codes=_system_codes(columns, ordinals))


def _answered_fetched(study: Study, ordinals: list[int]) -> Answered:
    """:data:`Answered` read row by row (SQLite)."""
    q = connection.ops.quote_name
    return codes_fetched([q("stratum"), q("k"), q("answer")], _answered_sql(),
                         [study.pk, Query.Status.ANSWERED])


def codes_fetched(keys: list[str], from_where: str, params: list) -> Answered:
    """:data:`Answered` grouped by the SQL expressions ``keys`` (``from_where``: the FROM …
    WHERE of the rows), read row by row."""
    q = connection.ops.quote_name
    select = ", ".join([*keys, *(f"COALESCE({q(c)}, 0)" for c in CODE_COLUMNS)])
    positions = ", ".join(str(i + 1) for i in range(len(keys)))
    rows = _banded_query(f"SELECT {select} {from_where} ORDER BY {positions}", params)
    width = len(keys)
    sizes: dict[tuple, int] = {}
    for r in rows:
        sizes[r[:width]] = sizes.get(r[:width], 0) + 1
    columns = np.array([r[width:] for r in rows], dtype=np.int64).reshape(-1, len(CODE_COLUMNS))
    return list(sizes), list(sizes.values()), columns.view(np.uint64)


def _packing(widths: list[int]) -> list[tuple[int, int]]:
    """(word, shift) of fields of ``widths`` bits laid in order into 64-bit words."""
    out, word, used = [], 0, 0
    for width in widths:
        if used + width > 64:
            word, used = word + 1, 0
        out.append((word, used))
        used += width
    return out


def _answered_copied(study: Study, ordinals: list[int]) -> Answered:
    """:data:`Answered` from one statement: per (stratum, k, answer) group, the low bits of
    :data:`CODE_COLUMNS` that hold ``ordinals``, packed by the server into as few int8 per
    query as fit (:func:`_packing`; two for 20 systems) and concatenated into one bytea
    (``string_agg``: under 1 GB a group), sent by binary COPY — a COPY row per query would
    cost psycopg microseconds a row."""
    q = connection.ops.quote_name
    width = max(ordinals, default=0) + 1
    layout = _packing([width] * len(CODE_COLUMNS))
    words: list[list[str]] = [[] for _ in range(layout[-1][0] + 1)]
    mask = (1 << width) - 1 - (1 << 64 if width == 64 else 0)  # as a signed int8
    for column, (word, shift) in zip(CODE_COLUMNS, layout, strict=True):
        words[word].append(f"((COALESCE({q(column)}, 0) & {mask}) << {shift})")
    record = " || ".join(f"int8send({' | '.join(terms)})" for terms in words)  # (| & << alike)
    sql = (f"COPY (SELECT {q('stratum')}, {q('k')}, {q('answer')}, "
           f"string_agg({record}, ''::bytea) {_answered_sql()} GROUP BY 1, 2, 3 "
           "ORDER BY 1, 2, 3) TO STDOUT (FORMAT BINARY)")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        with cursor.cursor.copy(sql, [study.pk, Query.Status.ANSWERED]) as copy:
            raw = b"".join(copy)
    keys, sizes, chunks = [], [], []
    for stratum, k, answer, packed in _copy_tuples(raw):
        keys.append((bytes(stratum).decode(), int.from_bytes(k, "big", signed=True),
                     bytes(answer).decode()))
        sizes.append(len(packed) // (8 * len(words)))
        chunks.append(packed)
    data = np.frombuffer(b"".join(chunks), dtype=">u8").astype(np.uint64).reshape(-1, len(words))
    columns = np.column_stack([data[:, word] >> np.uint64(shift) & np.uint64(mask % (1 << 64))
                               for word, shift in layout]).reshape(-1, len(CODE_COLUMNS))
    return keys, sizes, columns


COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"


def _copy_tuples(raw: bytes) -> Iterator[list[memoryview]]:
    """The tuples of ``COPY … TO STDOUT (FORMAT BINARY)`` output (no NULL field)."""
    if raw[:11] != COPY_SIGNATURE or raw[15:19] != bytes(4):
        raise ValueError("unexpected COPY output")
    view, pos = memoryview(raw), 19
    while (n_fields := int.from_bytes(view[pos:pos + 2], "big", signed=True)) != -1:
        pos += 2
        fields = []
        for _ in range(n_fields):
            size = int.from_bytes(view[pos:pos + 4], "big", signed=True)
            if size < 0:
                raise ValueError("unexpected NULL in COPY output")
            fields.append(view[pos + 4:pos + 4 + size])
            pos += 4 + size
        yield fields


@dataclass(frozen=True)
class ItemLabels:
    """Every answered 'yes'/'no' query of a study (labels on axis 0), for the item-clustered
    variance: the label's item as an index 0..n_items−1, its class k and answer, and per AI
    system (columns, in ``ordinals`` order) the bits of its masks."""

    item: np.ndarray
    n_items: int
    item_strata: np.ndarray  # stratum of each item
    k: np.ndarray
    yes: np.ndarray  # bool: 'yes' (else 'no')
    match: np.ndarray  # (labels, systems) 0/1
    present: np.ndarray
    band: np.ndarray | None = None  # (labels, systems) confidence band index, 0 = none
    stratum: np.ndarray | None = None  # each label's own stratum, an index into ``strata``
    strata: tuple[str, ...] = ()


def study_item_labels(*, study: Study, ordinals: list[int],
                      bands: bool = False) -> ItemLabels:
    """The study's answered 'yes'/'no' queries (quality checks excluded) as integer arrays,
    mask bits unpacked in numpy; each item's stratum is the one its queries carry (the
    query's copy of its item's, as in the counts). ``bands``: also each label's confidence
    band per system (``ItemLabels.band``). PostgreSQL sends the labels as one bytea per
    stratum by binary COPY (:func:`_item_labels_copied`); elsewhere they are fetched."""
    read = _item_labels_copied if connection.vendor == "postgresql" else _item_labels_fetched
    return item_labels_of(*read(study, bands), ordinals=ordinals, bands=bands)


def item_labels_of(names: list[str], label_stratum: np.ndarray, data: np.ndarray, *,
                   ordinals: list[int], bands: bool = False) -> ItemLabels:
    """:class:`ItemLabels` from :data:`LabelRows` — each label's stratum (an index into
    ``names``) and its columns item id, k, yes (1/0), match mask, present mask and, with
    ``bands``, the three band bit planes — the masks' bits of ``ordinals`` unpacked."""
    items, first, index = np.unique(data[:, 0], return_index=True, return_inverse=True)
    bits = np.array(ordinals, dtype=np.int64)
    return ItemLabels(
        item=index.ravel(), n_items=len(items),
        item_strata=np.array(names + [""], dtype=object)[label_stratum[first]],
        k=data[:, 1].astype(int), yes=data[:, 2] == 1,
        match=((data[:, 3:4] >> bits) & 1).astype(np.int8),
        present=((data[:, 4:5] >> bits) & 1).astype(np.int8),
        band=(sum(((data[:, 5 + plane:6 + plane] >> bits) & 1) << plane for plane in range(3))
              .astype(np.int8) if bands else None),
        stratum=np.asarray(label_stratum, dtype=np.int64), strata=tuple(names),
    )


def _item_label_columns(bands: bool) -> list[str]:
    q = connection.ops.quote_name
    columns = [q("item_id"), q("k"), f"CASE WHEN {q('answer')} = %s THEN 1 ELSE 0 END",
               q("match_mask"), q("present_mask")]
    return columns + ([f"COALESCE({q(f'band_bit{plane}')}, 0)" for plane in range(3)]
                      if bands else [])


def _item_labels_where(study: Study) -> tuple[str, list]:
    """The labels' FROM … WHERE and its parameters (the columns' one, 'yes', goes first)."""
    return (f"{_answered_sql()} AND {connection.ops.quote_name('answer')} IN (%s, %s)",
            [study.pk, Query.Status.ANSWERED, Query.Answer.YES, Query.Answer.NO])


def _item_labels_fetched(study: Study, bands: bool) -> LabelRows:
    """:data:`LabelRows` fetched row by row (a list of int tuples becomes one numpy array
    in C); the strata from a second, distinct query."""
    q = connection.ops.quote_name
    columns = _item_label_columns(bands)
    where, params = _item_labels_where(study)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(columns)} {where}", [Query.Answer.YES, *params])
        data = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, len(columns))
        cursor.execute(f"SELECT DISTINCT {q('item_id')}, {q('stratum')} {where}", params)
        strata = dict(cursor.fetchall())
    names = sorted(set(strata.values()))
    code = {name: i for i, name in enumerate(names)}
    items, index = np.unique(data[:, 0], return_inverse=True)
    item_stratum = np.array([code[strata[int(i)]] for i in items], dtype=np.intp)
    return names, item_stratum[index.ravel()], data


def _item_labels_copied(study: Study, bands: bool) -> LabelRows:
    """:data:`LabelRows` from one statement: per stratum, its labels' columns as int8
    concatenated into one bytea (``string_agg``), sent by binary COPY and decoded by numpy
    — three times faster than fetching 400 000 rows and reading the strata apart."""
    q = connection.ops.quote_name
    columns = _item_label_columns(bands)
    record = " || ".join(f"int8send(({column})::bigint)" for column in columns)
    where, params = _item_labels_where(study)
    sql = (f"COPY (SELECT {q('stratum')}, string_agg({record}, ''::bytea) "
           f"{where} GROUP BY 1 ORDER BY 1) TO STDOUT (FORMAT BINARY)")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        with cursor.cursor.copy(sql, [Query.Answer.YES, *params]) as copy:
            raw = b"".join(copy)
    names, sizes, chunks = [], [], []
    for stratum, packed in _copy_tuples(raw):
        names.append(bytes(stratum).decode())
        sizes.append(len(packed) // (8 * len(columns)))
        chunks.append(packed)
    data = np.frombuffer(b"".join(chunks), dtype=">i8").astype(np.int64)
    return (names, np.repeat(np.arange(len(names), dtype=np.intp), sizes),
            data.reshape(-1, len(columns)))


def study_label_rows(*, study: Study, item_ids: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item id, class k, 'yes' as bool) of every label the estimates read — the answered
    'yes'/'no' queries, quality checks and withdrawn items left out — one row per label
    (the evaluation service scores a submitted candidate's predictions on them). ``item_ids``:
    only those items' labels (PostgreSQL: one array parameter; elsewhere filtered here)."""
    q = connection.ops.quote_name
    where, params = _item_labels_where(study)
    sql = (f"SELECT {q('item_id')}, {q('k')}, "
           f"CASE WHEN {q('answer')} = %s THEN 1 ELSE 0 END {where}")
    params = [Query.Answer.YES, *params]
    narrowed = item_ids is not None and connection.vendor == "postgresql"
    if narrowed:
        sql += f" AND {q('item_id')} = ANY(%s)"
        params.append([int(i) for i in item_ids])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        data = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 3)
    if item_ids is not None and not narrowed:
        data = data[np.isin(data[:, 0], item_ids)]
    return data[:, 0], data[:, 1], data[:, 2] == 1


@dataclass(frozen=True)
class SubmittedItems:
    """What the evaluation service reads for a submission: ``items`` maps each external id
    found to (database id, options JSON text, option_order JSON text), and the labels of
    those items as :func:`study_label_rows` gives them (``item``, ``k``, ``yes``)."""

    items: dict[str, tuple[int, str, str]]
    item: np.ndarray
    k: np.ndarray
    yes: np.ndarray


def study_submitted_items(*, study: Study, external_ids: list[str]) -> SubmittedItems:
    """The study's items named by ``external_ids`` with their labels (the labels
    :func:`study_label_rows` reads: answered 'yes'/'no', no quality check, not withdrawn). On
    PostgreSQL one statement with one array parameter (items LEFT JOIN their labels);
    elsewhere the items in chunks, then their labels."""
    if connection.vendor != "postgresql":
        items: dict[str, tuple[int, str, str]] = {}
        for start in range(0, len(external_ids), IN_LIST_MAX):
            chunk = external_ids[start:start + IN_LIST_MAX]
            items.update({ext: (pk, json.dumps(options), json.dumps(order))
                          for ext, pk, options, order in
                          Item.objects.filter(study=study, external_id__in=chunk)
                          .values_list("external_id", "pk", "options", "option_order")})
        pks = np.array([v[0] for v in items.values()], dtype=np.int64)
        return SubmittedItems(items, *study_label_rows(study=study, item_ids=pks))
    item_t, query_t = Item._meta.db_table, Query._meta.db_table
    live = (ItemFlag.not_withdrawn_sql("q.study_id", "q.item_id") + " AND "
            + answers_kept_sql(Query, "q.study_id", "q.id"))
    sql = (f"SELECT i.external_id, i.id, i.options::text, i.option_order::text, q.k, "
           f"CASE WHEN q.answer = %s THEN 1 ELSE 0 END FROM {item_t} i "
           f"LEFT JOIN {query_t} q ON q.item_id = i.id AND q.study_id = i.study_id "
           f"AND q.status = %s AND NOT q.is_quality_check AND q.answer IN (%s, %s) AND {live} "
           f"WHERE i.study_id = %s AND i.external_id = ANY(%s)")
    with connection.cursor() as cursor:
        cursor.execute(sql, [Query.Answer.YES, Query.Status.ANSWERED, Query.Answer.YES,
                             Query.Answer.NO, study.pk, external_ids])
        rows = cursor.fetchall()
    items = {row[0]: (row[1], row[2], row[3]) for row in rows}
    labels = np.array([(row[1], row[4], row[5]) for row in rows if row[4] is not None],
                      dtype=np.int64).reshape(-1, 3)
    return SubmittedItems(items, labels[:, 0], labels[:, 1], labels[:, 2] == 1)


def study_population(*, study: Study) -> dict[str, int]:
    """Items per stratum that the estimates stand for (the stratified estimate's weights):
    ``Study.stratum_sizes`` less the withdrawn items (flags); one query, none without
    withdrawn items."""
    sizes = dict(study.stratum_sizes)
    for stratum, n in (Item.objects.filter(study=study, is_quality_check=False,
                                           pk__in=ItemFlag.withdrawn_ids(study))
                       .values("stratum").annotate(n=Count("id")).values_list("stratum", "n")
                       .order_by()):
        sizes[stratum] = max(0, sizes.get(stratum, 0) - n)
    return sizes


def study_first_query_answers(*, study: Study) -> dict[int, dict[str, int]]:
    """Per class: answers to the *first* query of each item (quality checks excluded) — the
    queries whose class is drawn uniformly whatever came before (the yes-share check);
    withdrawn items left out, as in the estimates."""
    out: dict[int, dict[str, int]] = {}
    for row in (estimated_queries(study, Query.objects.filter(
                    study=study, status=Query.Status.ANSWERED, is_quality_check=False,
                    sequence=0))
                .values("k", "answer").annotate(n=Count("id")).order_by()):
        out.setdefault(row["k"], {})[row["answer"]] = row["n"]
    return out


def study_rejected_answers(*, study: Study) -> dict[int, dict[str, int]]:
    """Per class: rejected answers (reviews) of routed queries of items not withdrawn, by
    answer — what the progress counts (every answer given) hold beyond the estimates. One
    query over the study's rejections (few), none over its labels."""
    out: dict[int, dict[str, int]] = {}
    for row in (Query.objects.filter(answers_left_out(study, Query), study=study,
                                     is_quality_check=False)
                .exclude(item_id__in=ItemFlag.withdrawn_ids(study))
                .values("k", "answer").annotate(n=Count("id")).order_by()):
        out.setdefault(row["k"], {})[row["answer"]] = row["n"]
    return out


@dataclass
class ClassProgress:
    index: int
    name: str
    yes: int = 0
    no: int = 0
    unsure: int = 0
    pending: int = 0
    leased: int = 0
    specialists: int = 0
    skipped: int = 0  # hand-backs (a query skipped by two specialists counts twice)

    @property
    def answered(self) -> int:
        return self.yes + self.no + self.unsure

    @property
    def routed(self) -> int:
        return self.answered + self.pending + self.leased

    @property
    def completion_rate(self) -> float | None:
        return self.answered / self.routed if self.routed else None

    @property
    def abstention_rate(self) -> float | None:
        return self.unsure / self.answered if self.answered else None

    @property
    def skip_rate(self) -> float | None:
        """Share of the class's specialists' decisions that were skips: skipped /
        (answered + skipped); None before any."""
        decided = self.answered + self.skipped
        return self.skipped / decided if decided else None


def study_class_progress_shell(*, study: Study) -> dict[int, ClassProgress]:
    """Per class index: its :class:`ClassProgress` with its specialists counted (members;
    the rest zero), for the counts to fill in."""
    classes = {
        c.index: ClassProgress(index=c.index, name=c.name) for c in study_classes(study=study)
    }
    for row in (
        StudyMembership.objects.filter(study=study, role=Role.SPECIALIST)
        .values("study_class__index")
        .annotate(n=Count("id"))
        .order_by()
    ):
        classes[row["study_class__index"]].specialists = row["n"]
    return classes


def study_class_progress(*, study: Study) -> list[ClassProgress]:
    """Per class: ordinary (yes), complementary (no), abstained, pending and leased queries,
    and skips (quality checks and withdrawn items excluded throughout, as in the
    estimates), counted over the queries (the reference ``tally_counts.Tallies.
    class_progress`` is checked against)."""
    classes = study_class_progress_shell(study=study)
    rows = (
        Query.objects.filter(study=study, is_quality_check=False)
        .exclude(item_id__in=ItemFlag.withdrawn_ids(study))
        .values("k", "status", "answer")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        cp = classes.get(row["k"])
        if cp is None:
            continue
        if row["status"] == Query.Status.ANSWERED:
            setattr(cp, row["answer"], getattr(cp, row["answer"]) + row["n"])
        else:
            setattr(cp, row["status"], getattr(cp, row["status"]) + row["n"])
    for row in (
        QuerySkip.objects.filter(study=study, is_quality_check=False)
        .values("k").annotate(n=Count("id")).order_by()
    ):
        if row["k"] in classes:
            classes[row["k"]].skipped = row["n"]
    return [classes[i] for i in sorted(classes)]


@dataclass
class QualityRow:
    label: str
    correct: int = 0
    wrong: int = 0
    unsure: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def accuracy(self) -> float | None:
        n = self.correct + self.wrong
        return self.correct / n if n else None


def quality_check_summary(*, study: Study) -> tuple[list[QualityRow], list[QualityRow]]:
    """Accuracy on interleaved gold items, per specialist and per class (researchers only)."""
    base = Query.objects.filter(study=study, is_quality_check=True, status=Query.Status.ANSWERED)
    agg = {
        "correct": Count("id", filter=Q(qc_correct=True)),
        "wrong": Count("id", filter=Q(qc_correct=False)),
        "unsure": Count("id", filter=Q(answer=Query.Answer.UNSURE)),
    }
    names = {c.index: c.name for c in study_classes(study=study)}
    per_user = [
        QualityRow(
            label=r["answered_by__username"],
            correct=r["correct"],
            wrong=r["wrong"],
            unsure=r["unsure"],
            extra={"class": names.get(r["k"], "")},
        )
        for r in base.values("answered_by__username", "k")
        .annotate(**agg)
        .order_by("answered_by__username")
    ]
    per_class = [
        QualityRow(
            label=names.get(r["k"], str(r["k"])),
            correct=r["correct"],
            wrong=r["wrong"],
            unsure=r["unsure"],
        )
        for r in base.values("k").annotate(**agg).order_by("k")
    ]
    return per_user, per_class


# --- the researcher's study page -----------------------------------------------------------
@dataclass(frozen=True)
class SetupChecklist:
    """What a study has and lacks before (and while) it runs: the study page's checklist and
    the open confirmation. ``missing`` holds plain-language warnings, empty when ready."""

    status: str
    classes: list[tuple[str, int]]  # (class name, specialists)
    managers: int
    items: int
    quality_checks: int
    routed: int
    systems: int
    missing: list[str] = field(default_factory=list)


def study_setup_checklist(*, study: Study) -> SetupChecklist:
    classes = list(study.classes.order_by("index").annotate(
        n=Count("specialists", filter=Q(specialists__role=Role.SPECIALIST))))
    items = Item.objects.filter(study=study).aggregate(
        items=Count("id", filter=Q(is_quality_check=False)),
        checks=Count("id", filter=Q(is_quality_check=True)),
        routed=Count("id", filter=Q(routed_at__isnull=False)))
    managers = StudyMembership.objects.filter(study=study, role=Role.MANAGER).count()
    systems = AISystem.objects.filter(study=study).count()
    missing = []
    if len(classes) < 2:
        missing.append(f"at least 2 classes (has {len(classes)})")
    empty = [c.name for c in classes if not c.n]
    if empty:
        missing.append("a specialist for class " + ", ".join(empty))
    if not items["items"]:
        missing.append("items (Import items)")
    if not systems:
        missing.append("AI systems (Import AI predictions)")
    if not managers:
        missing.append("a manager to read the dashboard")
    return SetupChecklist(status=study.status, classes=[(c.name, c.n) for c in classes],
                          managers=managers, items=items["items"],
                          quality_checks=items["checks"], routed=items["routed"],
                          systems=systems, missing=missing)


def study_predictions(*, study: Study) -> QuerySet[Prediction]:
    return (Prediction.objects.filter(system__study=study)
            .select_related("item", "system").order_by("item_id", "system__ordinal"))


@dataclass(frozen=True)
class DesignRows:
    """Every answered routed query the estimates read (withdrawn items and rejected answers
    left out; "not sure" answers kept, since they end an item's chain of follow-ups), for
    the design-weighted estimates (``services.design_estimates``), sorted by item and
    sequence: ``item`` an index 0..n_items−1 into ``item_ids``/``class_orders``/
    ``item_strata``/``picks``, the query's ``sequence``, class ``k``, ``answer`` (1 yes,
    0 no, 2 not sure), ``draw_p`` (NaN: the uniform default, 1/(K − sequence)),
    ``epsilon`` (NaN: a uniform design) and ``targets`` ([[class, m], …] or None), and
    ``picks[i, s]``: the class AI system s (``ordinals`` order) predicted for item i
    (−1: none parseable); ``uniform`` per row: the query is in the uniform part
    (``draw_uniform`` true or null, :data:`UNIFORM_PART`)."""

    item: np.ndarray
    sequence: np.ndarray
    k: np.ndarray
    answer: np.ndarray
    draw_p: np.ndarray
    epsilon: np.ndarray
    targets: list
    item_ids: np.ndarray
    class_orders: list
    item_strata: np.ndarray
    picks: np.ndarray
    uniform: np.ndarray | None = None


ANSWER_CODE = {Query.Answer.NO: 0, Query.Answer.YES: 1, Query.Answer.UNSURE: 2}


def study_has_targeted_answers(*, study: Study) -> bool:
    """Whether an answered routed query of the study was drawn by a targeted design's
    targeted component (outside the uniform part): then the paper's estimators need the
    uniform part and the design-weighted estimate reads every answer. A study that never had
    a targeted design is answered from the designs' table alone (the queries' scan took
    28 ms on 100 000 answered queries, on every evaluation call)."""
    if not RoutingDesign.objects.filter(study=study, kind=RoutingDesign.Kind.TARGETED).exists():
        return False
    return Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                is_quality_check=False, draw_uniform=False).exists()


def study_has_allocated_answers(*, study: Study) -> bool:
    """Whether an answered routed query of the study was asked under a Neyman allocation
    (items ordered by stratum): then the study's strata are answered at unequal rates and
    its figures for the whole study are the stratified ones. The designs' table first, as
    :func:`study_has_targeted_answers` does."""
    if not RoutingDesign.objects.filter(study=study, kind=RoutingDesign.Kind.NEYMAN).exists():
        return False
    return Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                is_quality_check=False,
                                design__kind=RoutingDesign.Kind.NEYMAN).exists()


def _json_decoded(rows: list[tuple], columns: tuple[int, ...]) -> list[list]:
    """``rows`` (as lists) with the JSON texts in ``columns`` decoded (None stays None),
    every value of a column by one ``json.loads`` of their array."""
    out = [list(r) for r in rows]
    for c in columns:
        texts = ",".join("null" if r[c] is None else r[c] for r in out)
        for row, value in zip(out, json.loads(f"[{texts}]"), strict=True):
            row[c] = value
    return out


def study_design_rows(*, study: Study, ordinals: list[int],
                      item_ids: list[int] | np.ndarray | None = None) -> DesignRows:
    """The study's answered routed queries with their draws and the items' AI picks
    (:class:`DesignRows`). ``item_ids``: only those items' queries (the evaluation service
    reads the submitted items: on PostgreSQL one array parameter, ``= ANY``; elsewhere
    filtered here). With no ``ordinals`` no prediction is read (``picks`` has no column)."""
    queries = estimated_queries(study, Query.objects.filter(
        study=study, status=Query.Status.ANSWERED, is_quality_check=False))
    narrowed = item_ids is not None and connection.vendor == "postgresql"
    if narrowed:
        queries = queries.filter(item_id__in=RawSQL("SELECT unnest(%s::bigint[])",
                                                    ([int(i) for i in item_ids],)))
    # the two JSON columns as text, decoded below in one call (a decode per value was a
    # third of the read: 1.8 s for 100 000 queries)
    rows = list(queries.order_by("item_id", "sequence").annotate(
        targets_text=Cast("draw_targets", TextField()),
        order_text=Cast("item__class_order", TextField())).values_list(
        "item_id", "sequence", "k", "answer", "draw_p", "design__epsilon", "targets_text",
        "order_text", "item__stratum", "draw_uniform"))
    rows = _json_decoded(rows, (6, 7))
    if item_ids is not None and not narrowed:
        wanted = {int(i) for i in item_ids}
        rows = [r for r in rows if r[0] in wanted]
    item_ids, first, index = np.unique(np.array([r[0] for r in rows], dtype=np.int64),
                                       return_index=True, return_inverse=True)
    picks = item_picks(study=study, item_ids=item_ids.tolist(), ordinals=ordinals)
    nan = float("nan")
    return DesignRows(
        item=index.ravel().astype(np.int64),
        sequence=np.array([r[1] for r in rows], dtype=np.int64),
        k=np.array([r[2] for r in rows], dtype=np.int64),
        answer=np.array([ANSWER_CODE[r[3]] for r in rows], dtype=np.int64),
        draw_p=np.array([nan if r[4] is None else r[4] for r in rows], dtype=float),
        epsilon=np.array([nan if r[5] is None else r[5] for r in rows], dtype=float),
        targets=[r[6] for r in rows],
        item_ids=item_ids,
        class_orders=[rows[i][7] for i in first],
        item_strata=np.array([rows[i][8] for i in first] or [], dtype=object),
        picks=picks,
        uniform=np.array([r[9] is not False for r in rows], dtype=bool),
    )


@dataclass(frozen=True)
class DesignRow:
    """One routing design of a study with the answers drawn under it (number 0, kind
    uniform: the default before any change)."""

    number: int
    kind: str
    label: str
    epsilon: float | None
    created_at: object
    created_by: str
    answered: int
    pending: int
    allocation: dict | None = None  # Neyman: rates, spreads, weights, ratio, pilot


def study_designs(*, study: Study, counts: dict | None = None) -> list[DesignRow]:
    """The study's routing designs, oldest first, each with its answered and pending routed
    queries; the uniform default comes first while any query was drawn under it.
    ``counts``: {design id (None: the default): (answered, pending)} kept by the study's
    statistics (``services.tally_designs``), instead of counting the queries."""
    if counts is not None:
        tallies = {d: {"answered": a, "pending": p} for d, (a, p) in counts.items()}
    else:
        tallies = {
            row["design_id"]: row for row in Query.objects.filter(
                study=study, is_quality_check=False).values("design_id").annotate(
                answered=Count("id", filter=Q(status=Query.Status.ANSWERED)),
                pending=Count("id", filter=Q(status__in=[Query.Status.PENDING,
                                                         Query.Status.LEASED]))).order_by()}
    rows = []
    default = tallies.get(None)
    if default is not None or not RoutingDesign.objects.filter(study=study).exists():
        rows.append(DesignRow(0, RoutingDesign.Kind.UNIFORM,
                              RoutingDesign.Kind.UNIFORM.label, None, study.opened_at, "",
                              default["answered"] if default else 0,
                              default["pending"] if default else 0))
    for d in RoutingDesign.objects.filter(study=study).select_related("created_by"):
        t = tallies.get(d.pk, {})
        rows.append(DesignRow(d.number, d.kind, d.get_kind_display(), d.epsilon,
                              d.created_at, str(d.created_by or ""),
                              t.get("answered", 0), t.get("pending", 0), d.allocation))
    return rows


def study_item_picks(*, study: Study, ordinals: list[int], limit: int = 2000) -> np.ndarray:
    """(items, systems) the class each AI system (``ordinals`` order) picked for up to
    ``limit`` of the study's items, spread evenly over them by primary key (−1: none) —
    the routing-design planner's sample of the study's own items."""
    ids = list(Item.objects.filter(study=study, is_quality_check=False)
               .order_by("pk").values_list("pk", flat=True))
    if len(ids) > limit:
        ids = [ids[round(i * (len(ids) - 1) / (limit - 1))] for i in range(limit)]
    return item_picks(study=study, item_ids=ids, ordinals=ordinals)


PICK = np.dtype([("item", ">i8"), ("system", ">i4"), ("position", ">i4")])
PICKS_WHOLE = 20_000  # items above which item_picks reads the study's every prediction


def _picks_copied(study: Study, item_ids, ordinals: list[int]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item, column, position) of the predictions of ``item_ids`` by the study's systems
    of ``ordinals`` (column: the index into them) that name a class: packed by the server
    into one bytea per range of 16 384 item ids (16 bytes a prediction, ``PICK``), sent by
    binary COPY and decoded by numpy — a COPY row per prediction cost psycopg 5 µs each
    (10 s for 2 100 000), the ORM's tuples more. Many items: every prediction of those
    systems (``system_id = ANY``: one pass over the heap, hashed into the ranges: 0.85 s
    for 2 000 000, where an index scan per system and a sort took 2.7 s), the items not
    asked for dropped by the caller; few: an index probe per item and system (``unnest``:
    ``= ANY`` of a parameter array of items would be a linear scan per row)."""
    column = {o: j for j, o in enumerate(ordinals)}
    systems = {pk: column[o] for pk, o in AISystem.objects.filter(
        study=study, ordinal__in=ordinals).values_list("pk", "ordinal")}
    if not systems:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    q = connection.ops.quote_name
    whole = len(item_ids) > PICKS_WHOLE
    join = f"JOIN unnest(%s::bigint[]) w(id) ON w.id = p.{q('item_id')} "
    sql = (f"COPY (SELECT string_agg(int8send(p.{q('item_id')}) || "
           f"int4send(p.{q('system_id')}::int4) || int4send(p.{q('position')}::int4), "
           f"''::bytea) FROM {q(Prediction._meta.db_table)} p {'' if whole else join}WHERE "
           f"p.{q('system_id')} = ANY(%s::bigint[]) AND p.{q('position')} IS NOT NULL "
           f"GROUP BY p.{q('item_id')} >> 14) TO STDOUT (FORMAT BINARY)")
    params = ([] if whole else [[int(i) for i in item_ids]]) + [list(systems)]
    with transaction.atomic(), connection.cursor() as cursor:
        for setting in ("jit = off", "enable_sort = off", "work_mem = '128MB'"):
            cursor.execute(f"SET LOCAL {setting}")
        with cursor.cursor.copy(sql, params) as copy:
            raw = b"".join(copy)
    rows = np.frombuffer(b"".join(bytes(block) for block, in _copy_tuples(raw)), dtype=PICK)
    ids = np.array(sorted(systems), np.int64)
    columns = np.array([systems[i] for i in ids], np.int64)
    system = rows["system"].astype(np.int64)
    return (rows["item"].astype(np.int64), columns[np.searchsorted(ids, system)],
            rows["position"].astype(np.int64))


def item_picks(*, study: Study, item_ids: list[int], ordinals: list[int]) -> np.ndarray:
    """(items, systems): the class (position) each of the study's AI systems (``ordinals``
    order) predicted for each of ``item_ids`` (rows in that order); −1 where it predicted
    nothing parseable. No ordinals: no read, no column."""
    picks = np.full((len(item_ids), len(ordinals)), -1, dtype=np.int64)
    if not ordinals:
        return picks
    if connection.vendor == "postgresql" and len(item_ids):
        items, column, position = _picks_copied(study, item_ids, ordinals)
        wanted = np.asarray(item_ids, np.int64)
        order = np.argsort(wanted, kind="stable")
        row = np.minimum(np.searchsorted(wanted[order], items), len(wanted) - 1)
        asked = wanted[order][row] == items  # the study's other items: not asked for
        picks[order[row[asked]], column[asked]] = position[asked]
        return picks
    row = {int(pk): i for i, pk in enumerate(item_ids)}
    column = {o: j for j, o in enumerate(ordinals)}
    for start in range(0, len(item_ids), IN_LIST_MAX):
        for item_id, ordinal, position in Prediction.objects.filter(
                item_id__in=item_ids[start:start + IN_LIST_MAX], system__study=study,
                position__isnull=False).values_list("item_id", "system__ordinal", "position"):
            if ordinal in column:
                picks[row[item_id], column[ordinal]] = position
    return picks


def study_consistency_failure(*, study: Study) -> TallyState | None:
    """The study's statistics state when its last consistency check found a difference
    from the full recompute (``services.consistency``), else None (the dashboard's alert)."""
    return TallyState.objects.filter(study=study, check_ok=False).first()


def studies_with_unfolded_changes(study_ids: list[int]) -> list[int]:
    """Those of ``study_ids`` whose statistics' log holds changes not yet folded (so not in
    their snapshot either): the catch-up sweeper's check. One probe of the log's
    (study_id, id) index per study — nothing counted, whatever the study's size."""
    pending = TallyEntry.objects.filter(study_id=OuterRef("pk"))
    return list(Study.objects.filter(pk__in=study_ids).filter(Exists(pending))
                .values_list("pk", flat=True))
