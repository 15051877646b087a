"""Routing: the part the statistics depend on (METHODS.md M1, protocol).

For every item entering an open study the option shuffle (drawn at import), the class order
and a random queue rank are drawn from a seeded numpy Generator and **stored**; nothing is
ever recomputed. Under the uniform design (the default, the paper's) the order is K classes
drawn uniformly without replacement: the first class is uniform over all K and independent
of the item, the truth and the annotator, which is what makes complementary labels uniform
over the wrong classes. Under a targeted design (``services.designs``) the order is drawn
from the item's AI predictions (``estimators.partitioned.designs``), still independently of
the truth, and each query stores the probability of its class (``Query.draw_p`` and what
recomputes it), which the design-weighted estimates divide by.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext

from annotations.core import engine
from annotations.core.engine import lease_length
from annotations.core.errors import NotPermitted, StudyNotOpen
from annotations.core.models import Item, ItemFlag, Study, StudyMembership, User
from annotations.core.services.bulk import rows_insert, rows_update
from annotations.core.task_models import new_public_id
from annotations.core.words import no_longer_accepted
from annotations.partitioned.models import Query, QueryEvent, QuerySkip, RoutingDesign
from estimators.partitioned.allocation import stretched_ranks
from estimators.partitioned.designs import (
    mixture_conditional,
    mixture_orders_draw,
    mixture_step_probabilities,
    uniform_orders_draw,
)

RANK_MAX = 2**62
CHECK_ORDER_PRIME = 2_147_483_647  # 2**31 − 1: (id·a + b) stays below 2**62 for ids < 2**31
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
    draws = routing_draw(study=study, item_ids=[pk for pk, _ in pending],
                         strata=[stratum for _, stratum in pending])
    now = timezone.now()
    # bulk writes (PostgreSQL: COPY): bulk_update and bulk_create took over a minute for
    # 200 000 items
    rows_update(Item, ["class_order", "routed_at"],
                [(pk, order, now) for (pk, _), order in zip(pending, draws.orders, strict=True)])
    first_queries_create(study=study, routed=[
        (pk, stratum, order, rank, fields) for (pk, stratum), order, rank, fields
        in zip(pending, draws.orders, draws.ranks, draws.fields, strict=True)])
    return len(pending)


def study_design(study: Study) -> RoutingDesign | None:
    """The study's current routing design: its latest ``RoutingDesign`` (None: uniform, the
    default, which no row records)."""
    return RoutingDesign.objects.filter(study=study).order_by("-number").first()


@dataclass(frozen=True)
class RoutingDraws:
    """One routing batch's draws, per item: its class order (cut at queries_per_item), its
    queue rank and its first query's design fields (``Query.design`` … ``draw_targets``;
    empty under the uniform default)."""

    orders: list[list[int]]
    ranks: list[int]
    fields: list[dict]


def predicted_counts(*, study: Study, item_ids: list[int] | None, n: int, k: int
                     ) -> np.ndarray:
    """m (n, K): how many of the study's AI systems predicted each class for each item of
    ``item_ids`` (rows in that order; None: items not inserted yet, which have none)."""
    from assistants.models import Prediction

    counts = np.zeros((n, k))
    if not item_ids:
        return counts
    row = {pk: i for i, pk in enumerate(item_ids)}
    for start in range(0, len(item_ids), BULK_BATCH):
        chunk = item_ids[start:start + BULK_BATCH]
        for item_id, position in (Prediction.objects.filter(
                item_id__in=chunk, system__study=study, position__isnull=False,
                position__lt=k).values_list("item_id", "position")):
            counts[row[item_id], position] += 1
    return counts


def allocation_rates(design: RoutingDesign, strata: list[str]) -> tuple[np.ndarray, float]:
    """A Neyman design's rate of each item's stratum (``strata``; a stratum the design has
    no rate for — items imported after it was set — at the full rate 1) and the design's
    smallest rate (``estimators.partitioned.allocation.stretched_ranks``)."""
    rates = design.allocation["rates"]
    r_min = min([*rates.values(), 1.0])
    return np.array([rates.get(h, 1.0) for h in strata], float), r_min


def routing_draw(*, study: Study, n: int | None = None, item_ids: list[int] | None = None,
                 strata: list[str] | None = None) -> RoutingDraws:
    """The draws of one routing batch of items (``item_ids`` in primary-key order, or ``n``
    items not inserted yet; ``strata``: each item's stratum, which a Neyman design reads):
    each item's class order, queue rank and design fields, under the study's current
    design. Each batch has its own stream (study seed, 1, batch number); the uniform design
    draws exactly what it always drew, and a Neyman design the same classes, with each
    rank stretched by its stratum's rate. Call under the study's row lock (``items_route``,
    ``queries_redraw``, or an import that routes the items it inserts)."""
    n = len(item_ids) if item_ids is not None else int(n or 0)
    Study.objects.filter(pk=study.pk).update(routing_batches=F("routing_batches") + 1)
    study.refresh_from_db(fields=["routing_batches"])
    k = study.classes.count()
    rng = study_rng(study, 1, study.routing_batches)
    depth = min(study.queries_per_item, k)
    design = study_design(study)
    if design is None or design.kind != RoutingDesign.Kind.TARGETED:
        class_orders = uniform_orders_draw(rng, n, k, depth)
        ranks = rng.integers(0, RANK_MAX, size=n)
        if design is not None and design.kind == RoutingDesign.Kind.NEYMAN:
            ranks = stretched_ranks(ranks, *allocation_rates(design, strata or [""] * n))
        fields = ([{}] * n if design is None else
                  [{"design_id": design.pk, "draw_uniform": True, "draw_p": 1.0 / k}] * n)
        return RoutingDraws(class_orders.tolist(), ranks.tolist(), fields)
    counts = predicted_counts(study=study, item_ids=item_ids, n=n, k=k)
    class_orders, coins = mixture_orders_draw(rng, counts, design.epsilon, depth)
    ranks = rng.integers(0, RANK_MAX, size=n)
    first_p = mixture_step_probabilities(counts, design.epsilon, class_orders[:, :1])[:, 0]
    fields = [{"design_id": design.pk, "draw_uniform": bool(coin), "draw_p": float(p),
               "draw_targets": targets_of(row)}
              for coin, p, row in zip(coins, first_p, counts, strict=True)]
    return RoutingDraws(class_orders.tolist(), ranks.tolist(), fields)


def targets_of(counts_row: np.ndarray) -> list[list[int]]:
    """[[class, m], …] of one item's predicted-class counts (classes with m > 0)."""
    return [[int(c), int(m)] for c, m in enumerate(counts_row) if m > 0]


def counts_of(targets: list | None, k: int) -> np.ndarray:
    """The (K,) counts m back from ``Query.draw_targets``."""
    counts = np.zeros(k)
    for c, m in targets or []:
        counts[int(c)] = m
    return counts


def follow_up_fields(query: Query, order: list[int], step: int) -> dict:
    """The design fields of an item's query at ``step`` (its class ``order[step]``), from
    its first query's (``query``: any earlier query of the item): the same design, coin and
    targets, and π_j(k_j | the classes asked before)."""
    if query.design_id is None:
        return {}
    k = query.study.classes.count()
    fields = {"design_id": query.design_id, "draw_uniform": query.draw_uniform,
              "draw_targets": query.draw_targets}
    if query.draw_targets is None:  # a uniform design's row
        fields["draw_p"] = 1.0 / (k - step)
        return fields
    eps = query.design.epsilon
    p = mixture_conditional(counts_of(query.draw_targets, k)[None], eps,
                            [order[:step]], [[order[step]]])
    fields["draw_p"] = float(p[0, 0])
    return fields


def first_queries_create(*, study: Study,
                         routed: list[tuple[int, str, list[int], int, dict]]) -> None:
    """Create the first query of routed items given as (item pk, stratum, class order,
    rank, design fields)."""
    rows_insert(Query, [
        {"study_id": study.pk, "item_id": pk, "k": order[0], "sequence": 0, "rank": rank,
         "stratum": stratum, **fields}
        for pk, stratum, order, rank, fields in routed
    ], batch_size=BULK_BATCH)
    if connection.vendor == "postgresql" and len(routed) >= ANALYZE_AFTER:
        # Fresh statistics, or the planner keeps its estimate of an empty queue and sorts
        # every pending query of a class on each lease (17 ms at 100 000 items, not 0.1).
        with connection.cursor() as cur:
            cur.execute(f"ANALYZE {Query._meta.db_table}")


def may_still_work(query: Query, user: User) -> None:
    """The study is open and ``user`` is still a specialist of the query's class: closing a
    study, removing a membership or moving a specialist to another class stops their
    answers, heartbeats and skips at once."""
    if query.study.status != Study.Status.OPEN:
        raise StudyNotOpen(no_longer_accepted(query.study, query.study.status))
    if getattr(query, "in_class_checked_for", None) == user.pk:
        in_class = query.holder_in_class  # read with the query's lock (labels.label_submit)
    else:
        in_class = StudyMembership.objects.filter(
            study_id=query.study_id, user=user, role=StudyMembership.Role.SPECIALIST,
            study_class__index=query.k,
        ).exists()
    if not in_class:
        raise NotPermitted(gettext("You no longer answer this class in this study; ask a "
                                   "researcher if this is a mistake."))


# Partitioned queries as a kind of the task engine: quality checks are made per specialist
# on demand, so a lease that ends drops them instead of returning them to a pool.
QUERY_KIND = engine.task_kind_register(engine.TaskKind(
    name="query", model=Query, event_model=QueryEvent, event_task_field="query",
    lease_for=lambda query: lease_length(query.study), noun="query",
    may_still_work=may_still_work, drop_on_return=Q(is_quality_check=True),
    locked_related=("study",), item_field="item",
))


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
    filters = {} if study is None else {"study": study}
    if k is not None:
        filters["k"] = k
    return engine.leases_reclaim(QUERY_KIND, now=now, **filters)


def leases_return(leases, *, reason: str | None = None) -> int:
    """Give the (locked) leased queries ``leases`` back to their pools, as on expiry (the
    engine's ``leases_return``: routed queries pending again, same k, audited; quality
    checks dropped). Call inside a transaction. Returns how many leases ended."""
    return engine.leases_return(QUERY_KIND, leases, reason=reason)


def _quality_check_lease(
    study: Study, membership: StudyMembership, user: User, draw: int, now: dt.datetime
) -> Query | None:
    """With probability ``study.gold_rate`` (seeded by study, user and the user's draw
    counter; the outcome is stored as ``is_quality_check``), lease a gold item the
    specialist has not seen, asking their own class — only while a routed query of their
    class could be handed to them instead (``_routed_pool``)."""
    if study.gold_rate <= 0:
        return None
    rng = study_rng(study, 2, user.pk, draw)
    if rng.random() >= study.gold_rate:
        return None
    # One statement, like the routed lease (``_pending_lease``): pick a gold item the user
    # has neither answered, held nor skipped, in a pseudo-random order drawn from the same
    # seeded stream ((id·a + b) mod p, p prime > any id), and insert its leased query. The
    # old count-then-pick path made checks measurably slower to hand out than routed queries.
    a = int(rng.integers(1, CHECK_ORDER_PRIME))
    b = int(rng.integers(0, CHECK_ORDER_PRIME))
    table, items, skips = Query._meta.db_table, Item._meta.db_table, QuerySkip._meta.db_table
    k = membership.study_class.index
    pool, pool_params = _routed_pool(study, k, user, now)
    sql = (
        f"INSERT INTO {table} (study_id, public_id, item_id, k, sequence, rank, stratum, "
        "is_quality_check, status, holder_id, issued_at, rendered_at, lease_expires_at, "
        "answered_at, answer, answered_by_id, time_on_task_ms, qc_correct, times_issued, "
        "match_mask, present_mask) "
        "SELECT %s, %s, i.id, %s, 0, 0, i.stratum, %s, %s, %s, %s, NULL, %s, NULL, '', NULL, "
        f"NULL, NULL, 1, 0, 0 FROM {items} i WHERE i.study_id = %s AND i.is_quality_check "
        f"AND NOT EXISTS (SELECT 1 FROM {table} q WHERE q.item_id = i.id "
        "AND (q.answered_by_id = %s OR q.holder_id = %s)) "
        f"AND {ItemFlag.not_withdrawn_sql('i.study_id', 'i.id')} "
        f"AND NOT EXISTS (SELECT 1 FROM {table} q JOIN {skips} s ON s.query_id = q.id "
        "WHERE q.item_id = i.id AND s.user_id = %s) "
        # only while a routed query could be handed out instead: past the end of the
        # class's pool, a query offered after "no queries left" would be a check
        f"AND EXISTS (SELECT 1 FROM {table} q WHERE q.status = %s AND ({pool})) "
        "ORDER BY (i.id * %s + %s) %% %s LIMIT 1 RETURNING *"
    )
    params = [study.pk, new_public_id(), k, True,
              Query.Status.LEASED, user.pk, now, now + lease_length(study), study.pk,
              user.pk, user.pk, user.pk, Query.Status.PENDING, *pool_params,
              a, b, CHECK_ORDER_PRIME]
    rows = list(Query.objects.raw(sql, params))
    if not rows:
        return None
    query = rows[0]
    engine.task_event(QUERY_KIND, query, QueryEvent.Kind.ISSUED, actor=user)
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
def query_lease_next(*, study: Study, user: User,
                     membership: StudyMembership | None = None) -> Query | None:
    """Give a specialist a query of their class under a lease, or None if the pool is empty.

    A specialist's unexpired lease is resumed first. Otherwise the next pending query of
    their class in stored random order is locked with ``SELECT … FOR UPDATE SKIP LOCKED``,
    so concurrent requests never get the same query. ``membership``: the user's specialist
    membership of ``study`` (with its class) when the caller read it in this request;
    otherwise it is read here."""
    if membership is None:
        membership = _membership(study, user)
    elif (membership.study_id, membership.user_id, membership.role) != (
            study.pk, user.pk, StudyMembership.Role.SPECIALIST):
        raise NotPermitted("You are not a specialist in this study.")
    if study.status != Study.Status.OPEN:
        raise StudyNotOpen(f"Study '{study}' is not open.")
    now = timezone.now()
    k = membership.study_class.index
    current = query_current_lease(study=study, user=user, now=now, k=k)
    if current is not None:
        return current
    if study.gold_rate > 0:
        check = _quality_check_lease(study, membership, user, _draw_count_next(membership), now)
        if check is not None:
            return check
    for attempt in range(2):
        query = _pending_lease(study, k, user, now)
        if query is not None:
            return query
        if attempt == 0 and not leases_reclaim(now=now, study=study, k=k):
            break
    return None


def _pending_lease(study: Study, k: int, user: User, now: dt.datetime) -> Query | None:
    """Lease (through the engine's one statement) the first pending routed query of class k
    in stored random order, passing over queries this user skipped (one probe of the
    (user, query) unique index per candidate) and follow-ups still held for their answer's
    undo window (a pending query's ``lease_expires_at``: not before then; see
    ``labels.label_undo``)."""
    pool, pool_params = _routed_pool(study, k, user, now)
    return engine.lease_first(QUERY_KIND, pool_sql=pool, pool_params=pool_params,
                              user=user, now=now, expires=now + lease_length(study))


def _routed_pool(study: Study, k: int, user: User, now: dt.datetime) -> tuple[str, list]:
    """The condition (on a pending query ``q``) and its parameters for the routed queries
    of class k that ``user`` may be handed now: not checks, not skipped by them, not a
    follow-up still held for its answer's undo window."""
    skips = QuerySkip._meta.db_table
    pool = ("q.study_id = %s AND q.k = %s AND NOT q.is_quality_check "
            "AND (q.lease_expires_at IS NULL OR q.lease_expires_at <= %s) AND NOT EXISTS "
            f"(SELECT 1 FROM {skips} s WHERE s.user_id = %s AND s.query_id = q.id)")
    return pool, [study.pk, k, now, user.pk]


def query_current_lease(
    *, study: Study, user: User, now: dt.datetime | None = None, k: int | None = None
) -> Query | None:
    """The user's unexpired lease in the study (of class ``k`` if given: a lease of a class
    the specialist no longer answers is not resumed; it expires and returns to its pool)."""
    queries = Query.objects.filter(study=study)
    if k is not None:
        queries = queries.filter(k=k)
    return engine.lease_current(QUERY_KIND, queries, user=user, now=now)


def query_for_holder(*, user: User, query_id: int | None = None,
                     public_id: str | None = None) -> Query:
    """The query (by database or public id) locked and checked to be held by ``user`` under
    an unexpired lease, in an open study whose specialist of this class they still are."""
    query = engine.task_locked(QUERY_KIND, pk=query_id, public_id=public_id)
    return engine.task_for_holder(QUERY_KIND, query, user,
                                  describe_answer=lambda q: q.answer)


@transaction.atomic
def query_heartbeat(*, user: User, query_id: int | None = None,
                    public_id: str | None = None) -> Query:
    """Extend the lease of an active specialist (the page calls this while they work).
    Refused like an answer: only the holder, only an unexpired lease of an unanswered query,
    only while the study is open and the user still answers the query's class."""
    query = query_for_holder(user=user, query_id=query_id, public_id=public_id)
    return engine.task_heartbeat(QUERY_KIND, query)


@transaction.atomic
def query_skip(*, user: User, query_id: int | None = None, public_id: str | None = None) -> Query:
    """Hand a held query back to its class's pool for another specialist; it is never offered
    to this user again (``QuerySkip``, excluded by the lease statement). A quality check is
    handed back the same way (its row stays, pending and never leased, so that the item is
    not offered to this user again). Audit row ``skipped`` in the same transaction."""
    query = query_for_holder(user=user, query_id=query_id, public_id=public_id)
    QuerySkip.objects.create(query=query, user=user, study_id=query.study_id, k=query.k,
                             is_quality_check=query.is_quality_check)
    return engine.task_hand_back(QUERY_KIND, query, user=user)


def query_mark_rendered(*, query: Query) -> None:
    """Record (once per lease) when the server first rendered the query to its holder."""
    engine.task_mark_rendered(QUERY_KIND, query)
