"""Routing: the part the statistics depend on (METHODS.md M1, protocol).

For every item entering an open study the option shuffle (drawn at import), the class order
(K classes drawn uniformly without replacement) and a random queue rank are drawn from a
seeded numpy Generator and **stored**; nothing is ever recomputed. The first class of the
order is uniform over all K and independent of the item, the truth and the annotator, which
is what makes complementary labels uniform over the wrong classes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import numpy as np
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from annotations.errors import NotPermitted, StudyNotOpen
from annotations.models import Item, Query, QueryEvent, Study, StudyMembership, User
from annotations.services.bulk import rows_insert, rows_update

RANK_MAX = 2**62
BULK_BATCH = 2000
ANALYZE_AFTER = 5000


def study_rng(study: Study, *stream: int) -> np.random.Generator:
    """Generator for one named stream of a study's draws: seeded by (study.seed, *stream)."""
    return np.random.default_rng([study.seed, *stream])


def option_orders_draw(rng: np.random.Generator, n_items: int, k: int, shuffle: bool) -> np.ndarray:
    """Uniform random permutations of K positions, one row per item (identity if not shuffled)."""
    if not shuffle:
        return np.tile(np.arange(k), (n_items, 1))
    return rng.random((n_items, k)).argsort(axis=1)


@transaction.atomic
def items_route(*, study: Study, items: Iterable[Item] | None = None) -> int:
    """Draw class order and queue rank for not-yet-routed, non-quality-check items and create
    each item's first query. Returns the number of items routed."""
    if study.status != Study.Status.OPEN:
        raise StudyNotOpen(f"Study '{study}' is {study.status}; open it to route items.")
    study = Study.objects.select_for_update().get(pk=study.pk)
    qs = Item.objects.filter(study=study, routed_at__isnull=True, is_quality_check=False)
    if items is not None:
        qs = qs.filter(pk__in=[i.pk for i in items])
    pending = list(qs.order_by("pk").values_list("pk", "stratum"))
    if not pending:
        return 0
    class_orders, ranks = routing_draw(study=study, n=len(pending))
    now = timezone.now()
    # bulk writes (PostgreSQL: COPY): bulk_update and bulk_create took over a minute for
    # 200 000 items
    rows_update(Item, ["class_order", "routed_at"],
                [(pk, order, now) for (pk, _), order in zip(pending, class_orders, strict=True)])
    first_queries_create(study=study, routed=[
        (pk, stratum, order, rank)
        for (pk, stratum), order, rank in zip(pending, class_orders, ranks, strict=True)])
    return len(pending)


def routing_draw(*, study: Study, n: int) -> tuple[list[list[int]], list[int]]:
    """The draws of one routing batch of ``n`` items (in primary-key order): each item's
    class order (K classes without replacement, cut at queries_per_item) and queue rank.
    Each batch has its own stream (study seed, 1, batch number). Call under the study's
    row lock (``items_route``, or an import that routes the items it inserts)."""
    Study.objects.filter(pk=study.pk).update(routing_batches=F("routing_batches") + 1)
    study.refresh_from_db(fields=["routing_batches"])
    k = study.classes.count()
    rng = study_rng(study, 1, study.routing_batches)
    depth = min(study.queries_per_item, k)
    class_orders = rng.random((n, k)).argsort(axis=1)[:, :depth]
    ranks = rng.integers(0, RANK_MAX, size=n)
    return class_orders.tolist(), ranks.tolist()


def first_queries_create(*, study: Study,
                         routed: list[tuple[int, str, list[int], int]]) -> None:
    """Create the first query of routed items given as (item pk, stratum, class order,
    rank)."""
    rows_insert(Query, [
        {"study_id": study.pk, "item_id": pk, "k": order[0], "sequence": 0, "rank": rank,
         "stratum": stratum}
        for pk, stratum, order, rank in routed
    ], batch_size=BULK_BATCH)
    if connection.vendor == "postgresql" and len(routed) >= ANALYZE_AFTER:
        # Fresh statistics, or the planner keeps its estimate of an empty queue and sorts
        # every pending query of a class on each lease (17 ms at 100 000 items, not 0.1).
        with connection.cursor() as cur:
            cur.execute(f"ANALYZE {Query._meta.db_table}")


def _membership(study: Study, user: User) -> StudyMembership:
    membership = (
        StudyMembership.objects.select_related("study_class")
        .filter(study=study, user=user, role=StudyMembership.Role.SPECIALIST)
        .first()
    )
    if membership is None:
        raise NotPermitted("You are not a specialist in this study.")
    return membership


def leases_reclaim(
    *, now: dt.datetime | None = None, study: Study | None = None, k: int | None = None
) -> int:
    """Return expired leases to their pool: the same query, the same class k (never redrawn).
    Expired quality-check queries are dropped (they are made per specialist on demand).
    Returns the number of queries reclaimed."""
    now = now or timezone.now()
    expired = Query.objects.filter(status=Query.Status.LEASED, lease_expires_at__lt=now)
    if study is not None:
        expired = expired.filter(study=study)
    if k is not None:
        expired = expired.filter(k=k)
    with transaction.atomic():
        rows = list(
            expired.select_for_update(skip_locked=True).values_list(
                "pk", "holder_id", "is_quality_check"
            )
        )
        if not rows:
            return 0
        routed = [pk for pk, _, qc in rows if not qc]
        checks = [pk for pk, _, qc in rows if qc]
        QueryEvent.objects.bulk_create(
            QueryEvent(query_id=pk, kind=QueryEvent.Kind.RECLAIMED, detail={"holder": holder})
            for pk, holder, qc in rows
            if not qc
        )
        Query.objects.filter(pk__in=routed).update(
            status=Query.Status.PENDING, holder=None, lease_expires_at=None
        )
        Query.objects.filter(pk__in=checks).delete()
    return len(rows)


def _quality_check_lease(
    study: Study, membership: StudyMembership, user: User, draw: int, now: dt.datetime
) -> Query | None:
    """With probability ``study.gold_rate`` (seeded by study, user and the user's draw
    counter; the outcome is stored as ``is_quality_check``), lease a gold item the
    specialist has not seen, asking their own class."""
    if study.gold_rate <= 0:
        return None
    rng = study_rng(study, 2, user.pk, draw)
    if rng.random() >= study.gold_rate:
        return None
    candidates = (
        Item.objects.filter(study=study, is_quality_check=True)
        .exclude(queries__answered_by=user)
        .exclude(queries__holder=user)
    )
    n = candidates.count()
    if n == 0:
        return None
    item = candidates.order_by("pk")[int(rng.integers(0, n))]
    query = Query.objects.create(
        study=study,
        item=item,
        k=membership.study_class.index,
        sequence=0,
        rank=0,
        stratum=item.stratum,
        is_quality_check=True,
        status=Query.Status.LEASED,
        holder=user,
        issued_at=now,
        lease_expires_at=now + dt.timedelta(minutes=study.lease_minutes),
        times_issued=1,
    )
    QueryEvent.objects.create(query=query, kind=QueryEvent.Kind.ISSUED, actor=user)
    return query


def _draw_count_next(membership: StudyMembership) -> int:
    """Atomically count one more draw for this specialist and return the new count (it
    seeds the quality-check draw, so every draw is reproducible)."""
    table = StudyMembership._meta.db_table
    with connection.cursor() as cur:
        cur.execute(f"UPDATE {table} SET draws = draws + 1 WHERE id = %s RETURNING draws",
                    [membership.pk])
        membership.draws = cur.fetchone()[0]
    return membership.draws


@transaction.atomic
def query_lease_next(*, study: Study, user: User) -> Query | None:
    """Give a specialist a query of their class under a lease, or None if the pool is empty.

    A specialist's unexpired lease is resumed first. Otherwise the next pending query of
    their class in stored random order is locked with ``SELECT … FOR UPDATE SKIP LOCKED``,
    so concurrent requests never get the same query."""
    membership = _membership(study, user)
    if study.status != Study.Status.OPEN:
        raise StudyNotOpen(f"Study '{study}' is not open.")
    now = timezone.now()
    current = query_current_lease(study=study, user=user, now=now)
    if current is not None:
        return current
    if study.gold_rate > 0:
        check = _quality_check_lease(study, membership, user, _draw_count_next(membership), now)
        if check is not None:
            return check
    k = membership.study_class.index
    for attempt in range(2):
        query = _pending_lease(study, k, user, now)
        if query is not None:
            QueryEvent.objects.create(query=query, kind=QueryEvent.Kind.ISSUED, actor=user)
            return query
        if attempt == 0 and not leases_reclaim(now=now, study=study, k=k):
            break
    return None


def _pending_lease(study: Study, k: int, user: User, now: dt.datetime) -> Query | None:
    """Lease the first pending query of class k in stored random order, in one statement:
    ``UPDATE … WHERE id = (SELECT … ORDER BY rank LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING``.
    The row lock makes concurrent requests skip to the next query (never the same one);
    SQLite, which serialises writers, runs it without the lock clause."""
    table = Query._meta.db_table
    lock = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked \
        else ""
    sql = (
        f"UPDATE {table} SET status = %s, holder_id = %s, issued_at = %s, rendered_at = NULL, "
        f"lease_expires_at = %s, times_issued = times_issued + 1 WHERE id = ("
        f"SELECT id FROM {table} WHERE study_id = %s AND k = %s AND status = %s "
        f"AND NOT is_quality_check ORDER BY rank LIMIT 1{lock}) RETURNING *"
    )
    expires = now + dt.timedelta(minutes=study.lease_minutes)
    rows = list(Query.objects.raw(sql, [Query.Status.LEASED, user.pk, now, expires, study.pk, k,
                                        Query.Status.PENDING]))
    return rows[0] if rows else None


def query_current_lease(
    *, study: Study, user: User, now: dt.datetime | None = None
) -> Query | None:
    now = now or timezone.now()
    return (
        Query.objects.filter(
            study=study, holder=user, status=Query.Status.LEASED, lease_expires_at__gt=now
        )
        .order_by("issued_at")
        .first()
    )


@transaction.atomic
def query_heartbeat(*, query_id: int, user: User) -> Query:
    """Extend the lease of an active specialist (the page calls this while they work)."""
    from annotations.services.labels import _locked_query_for_holder

    query = _locked_query_for_holder(query_id, user)
    query.lease_expires_at = timezone.now() + dt.timedelta(minutes=query.study.lease_minutes)
    query.save(update_fields=["lease_expires_at"])
    return query


def query_mark_rendered(*, query: Query) -> None:
    """Record (once per lease) when the server first rendered the query to its holder."""
    if query.rendered_at is None:
        now = timezone.now()
        updated = Query.objects.filter(pk=query.pk, rendered_at__isnull=True).update(
            rendered_at=now
        )
        if updated:
            query.rendered_at = now
            QueryEvent.objects.create(
                query=query, kind=QueryEvent.Kind.RENDERED, actor=query.holder
            )
