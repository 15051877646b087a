"""Routing: uniform, stored draws; leases; no double assignment."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from django.utils import timezone
from scipy import stats

from annotations.core.errors import LeaseExpired, NotLeaseHolder, NotPermitted, StudyNotOpen
from annotations.models import Item, Query, QueryEvent
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import leases_reclaim, query_lease_next
from tests.factories import make_study, specialist

pytestmark = pytest.mark.django_db


def test_opening_routes_every_item_once_with_stored_draws():
    # given a draft study
    study = make_study(k=5, n_items=50, open_=False)
    assert Query.objects.filter(study=study).count() == 0
    # when it opens
    from annotations.core.services.studies import study_open

    routed = study_open(study=study)
    # then each item has exactly one pending query whose class is the first stored draw
    assert routed == 50
    for item in Item.objects.filter(study=study):
        assert sorted(item.option_order) == list(range(5))
        (query,) = item.queries.all()
        assert query.k == item.class_order[0]
        assert query.status == Query.Status.PENDING


def test_class_draw_is_uniform_over_k():
    study = make_study(k=6, n_items=3000, seed=11)
    ks = np.array(Query.objects.filter(study=study).values_list("k", flat=True))
    observed = np.bincount(ks, minlength=6)
    assert stats.chisquare(observed).pvalue > 0.001


def test_option_shuffle_is_uniform_per_position():
    study = make_study(k=4, n_items=4000, seed=12)
    orders = np.array(Item.objects.filter(study=study).values_list("option_order", flat=True))
    counts = np.stack([np.bincount(orders[:, p], minlength=4) for p in range(4)])
    assert stats.chisquare(counts.ravel()).pvalue > 0.001


def test_specialist_gets_only_their_class_and_resumes_own_lease():
    study = make_study(k=3, n_items=30)
    user = specialist(study, 1)
    first = query_lease_next(study=study, user=user)
    assert first.k == 1 and first.holder == user and first.status == Query.Status.LEASED
    again = query_lease_next(study=study, user=user)
    assert again.pk == first.pk
    assert QueryEvent.objects.filter(query=first, kind="issued").count() == 1


def test_two_specialists_of_one_class_never_share_a_query():
    study = make_study(k=3, n_items=30, specialists_per_class=2)
    a, b = specialist(study, 0, 0), specialist(study, 0, 1)
    qa = query_lease_next(study=study, user=a)
    qb = query_lease_next(study=study, user=b)
    assert qa.pk != qb.pk


def test_pool_empty_returns_none():
    study = make_study(k=2, n_items=2, seed=3)
    user = specialist(study, 0)
    pending = Query.objects.filter(study=study, k=0).count()
    for _ in range(pending):
        q = query_lease_next(study=study, user=user)
        label_submit(query_id=q.pk, user=user, answer="no")
    assert query_lease_next(study=study, user=user) is None


def test_expired_lease_returns_to_same_class_pool_unchanged():
    study = make_study(k=3, n_items=12)
    user = specialist(study, 2)
    q = query_lease_next(study=study, user=user)
    Query.objects.filter(pk=q.pk).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert leases_reclaim() == 1
    q.refresh_from_db()
    assert (q.status, q.holder_id, q.k) == (Query.Status.PENDING, None, 2)
    assert QueryEvent.objects.filter(query=q, kind="reclaimed").count() == 1


def test_answer_after_expiry_is_refused_and_changes_nothing():
    study = make_study(k=3, n_items=12)
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    Query.objects.filter(pk=q.pk).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
    with pytest.raises(LeaseExpired):
        label_submit(query_id=q.pk, user=user, answer="yes")
    q.refresh_from_db()
    assert (q.status, q.answer, q.answered_at) == (Query.Status.LEASED, "", None)


def test_non_member_and_closed_study_are_refused():
    study = make_study(k=3, n_items=6)
    outsider = specialist(make_study(k=3, n_items=3, seed=99), 0)
    with pytest.raises(NotPermitted):
        query_lease_next(study=study, user=outsider)
    from annotations.core.services.studies import study_close

    study_close(study=study)
    with pytest.raises(StudyNotOpen):
        query_lease_next(study=study, user=specialist(study, 0))


def test_other_specialist_cannot_answer_a_held_query():
    study = make_study(k=3, n_items=6, specialists_per_class=2)
    q = query_lease_next(study=study, user=specialist(study, 0, 0))
    with pytest.raises(NotLeaseHolder):
        label_submit(query_id=q.pk, user=specialist(study, 0, 1), answer="yes")
    with pytest.raises(NotLeaseHolder):
        label_submit(query_id=q.pk, user=specialist(study, 1, 0), answer="yes")
    q.refresh_from_db()
    assert q.status == Query.Status.LEASED and q.answer == ""


def test_multiple_queries_per_item_draw_distinct_classes_and_stop_at_yes():
    study = make_study(k=4, n_items=40, queries_per_item=3, seed=5)
    from annotations.partitioned.services.simulation import study_simulate

    study_simulate(study=study)
    for item in Item.objects.filter(study=study, is_quality_check=False):
        asked = list(item.queries.order_by("sequence").values_list("k", "answer"))
        ks = [k for k, _ in asked]
        assert ks == item.class_order[: len(ks)]
        assert len(set(ks)) == len(ks)
        answers = [a for _, a in asked]
        assert "yes" not in answers[:-1]
        if answers[-1] != "yes":
            assert len(answers) == 3


def test_quality_checks_interleave_at_the_configured_rate_and_are_scored():
    study = make_study(k=3, n_items=300, checks=200, gold_rate=0.2, seed=8)
    user = specialist(study, 0)
    checks = 0
    for _ in range(80):
        q = query_lease_next(study=study, user=user)
        checks += q.is_quality_check
        truth = q.item.position_of(q.item.gold_option) == q.k
        label_submit(query_id=q.pk, user=user, answer="yes" if truth else "no")
    assert 5 <= checks <= 30  # Binomial(80, 0.2): mean 16, sd 3.6
    answered = Query.objects.filter(study=study, is_quality_check=True, answered_by=user)
    assert answered.count() == checks
    assert set(answered.values_list("qc_correct", flat=True)) == {True}


def test_a_quality_check_is_leased_with_as_many_statements_as_a_routed_query():
    """Same observable cost: a check is handed out by one INSERT … SELECT, as a routed query
    by one UPDATE … SELECT (the old count-then-pick path took two statements more)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotations.models import Study

    counts = {}
    for gold_rate in (1e-12, 1.0):  # both draw the check coin; only the second wins it
        study = make_study(k=3, n_items=12, checks=3, seed=44, name=f"t{gold_rate}")
        Study.objects.filter(pk=study.pk).update(gold_rate=gold_rate)
        study.refresh_from_db()
        user = specialist(study, 0)
        with CaptureQueriesContext(connection) as ctx:
            q = query_lease_next(study=study, user=user)
        assert q.is_quality_check == (gold_rate == 1.0)
        counts[gold_rate] = [s["sql"].split()[0] for s in ctx.captured_queries]
    assert len(counts[1e-12]) == len(counts[1.0])


def test_no_check_is_handed_out_once_the_class_pool_is_empty():
    """A query offered after "no queries left" could only be a check (a probe at gold rate
    0.5 got five in a row while the counter read 0): checks are drawn only while a routed
    query of the class could be handed out instead — also when the rest of the pool is
    held back (skipped by this specialist)."""
    from annotations.partitioned.services.routing import query_skip

    study = make_study(k=3, n_items=30, checks=20, gold_rate=0.5, seed=9)
    user = specialist(study, 0)
    routed = checks = 0
    while (q := query_lease_next(study=study, user=user)) is not None:
        if q.is_quality_check:
            checks += 1
        else:
            routed += 1
        label_submit(query_id=q.pk, user=user, answer="no")
    assert routed == Query.objects.filter(study=study, k=0, is_quality_check=False).count()
    assert checks > 0  # checks were handed out while routed queries remained
    for _ in range(40):
        assert query_lease_next(study=study, user=user) is None
    assert Query.objects.filter(study=study, is_quality_check=True).count() == checks

    # the same when what is left of the pool is skipped by this specialist
    other = make_study(k=3, n_items=6, checks=20, gold_rate=0.5, seed=10)
    user = specialist(other, 1)
    while (q := query_lease_next(study=other, user=user)) is not None:
        if q.is_quality_check:
            label_submit(query_id=q.pk, user=user, answer="no")
        else:
            query_skip(query_id=q.pk, user=user)
    assert Query.objects.filter(study=other, k=1, is_quality_check=False,
                                status="pending").exists()
    for _ in range(40):
        assert query_lease_next(study=other, user=user) is None
