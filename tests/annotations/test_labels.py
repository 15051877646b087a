"""Answers: idempotent, holder-only, masks, audit rows, recompute scheduled."""

from __future__ import annotations

import pytest

from annotations.errors import AlreadyAnswered, DomainError
from annotations.models import EstimateSnapshot, Query, QueryEvent
from annotations.services.labels import background_recomputes_join, label_submit
from annotations.services.routing import query_lease_next
from assistants.models import Prediction
from tests.factories import make_study, specialist

pytestmark = pytest.mark.django_db


def test_submit_stores_answer_time_and_audit_row():
    study = make_study(k=3, n_items=9)
    user = specialist(study, 1)
    q = query_lease_next(study=study, user=user)
    result = label_submit(query_id=q.pk, user=user, answer="no")
    q.refresh_from_db()
    assert result.created is True
    assert (q.status, q.answer, q.answered_by_id) == ("answered", "no", user.pk)
    assert q.time_on_task_ms is not None and q.time_on_task_ms >= 0
    assert q.lease_expires_at is None
    assert QueryEvent.objects.filter(query=q, kind="answered").count() == 1


def test_same_answer_twice_is_idempotent_and_counted_once(django_capture_on_commit_callbacks,
                                                          settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # recompute in-process, even with a broker
    study = make_study(k=3, n_items=9, systems={"m": 0.7})
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    with django_capture_on_commit_callbacks(execute=True):
        label_submit(query_id=q.pk, user=user, answer="yes")
    with django_capture_on_commit_callbacks(execute=True) as replayed:
        replay = label_submit(query_id=q.pk, user=user, answer="yes")
    assert replayed == []  # a replay schedules no recompute
    assert replay.created is False
    assert Query.objects.filter(study=study, status="answered").count() == 1
    assert QueryEvent.objects.filter(query=q, kind="answered").count() == 1
    snap = EstimateSnapshot.objects.filter(study=study).latest()
    assert snap.n_answered == 1


def test_changing_an_answer_is_refused():
    study = make_study(k=3, n_items=9)
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    label_submit(query_id=q.pk, user=user, answer="yes")
    with pytest.raises(AlreadyAnswered):
        label_submit(query_id=q.pk, user=user, answer="no")
    q.refresh_from_db()
    assert q.answer == "yes"


def test_unknown_answer_is_refused():
    study = make_study(k=3, n_items=9)
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    with pytest.raises(DomainError, match="Unknown answer"):
        label_submit(query_id=q.pk, user=user, answer="maybe")
    q.refresh_from_db()
    assert q.status == "leased"


def test_masks_record_which_systems_predicted_the_asked_class():
    study = make_study(k=4, n_items=40, systems={"a": 0.9, "b": 0.3, "c": 0.5})
    user = specialist(study, 2)
    q = query_lease_next(study=study, user=user)
    label_submit(query_id=q.pk, user=user, answer="no")
    q.refresh_from_db()
    for p in Prediction.objects.filter(item=q.item).select_related("system"):
        bit = 1 << p.system.ordinal
        assert bool(q.match_mask & bit) == (p.position == q.k)
        assert bool(q.present_mask & bit) == (p.position is not None)


def test_each_answer_triggers_a_recompute_snapshot(django_capture_on_commit_callbacks, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # recompute in-process, even with a broker
    study = make_study(k=3, n_items=9, systems={"m": 0.7})
    user = specialist(study, 0)
    before = EstimateSnapshot.objects.filter(study=study).count()
    q = query_lease_next(study=study, user=user)
    with django_capture_on_commit_callbacks(execute=True):
        label_submit(query_id=q.pk, user=user, answer="no")
    assert EstimateSnapshot.objects.filter(study=study).count() == before + 1


@pytest.mark.django_db(transaction=True)
def test_embedded_mode_recomputes_once_in_the_background_after_a_burst(settings):
    """No broker, debounce on: answers return at once and one background recompute covers
    the whole burst."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 0.5
    from django.core.cache import cache

    cache.clear()
    study = make_study(k=3, n_items=30, systems={"m": 0.7})
    users = [specialist(study, k) for k in range(3)]
    for user in users:
        q = query_lease_next(study=study, user=user)
        label_submit(query_id=q.pk, user=user, answer="no")
    assert not EstimateSnapshot.objects.filter(study=study).exists()  # not in the request
    # one timer for the burst (SQLite's shared in-memory test database locks whole tables,
    # so wait for the thread instead of reading while it writes)
    assert background_recomputes_join() == 1
    snapshots = list(EstimateSnapshot.objects.filter(study=study))
    assert [s.n_answered for s in snapshots] == [3]
