"""Many specialists at once on PostgreSQL: no double assignment, no lost or duplicated label."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from annotations.models import Query, QueryEvent
from annotations.partitioned.services.labels import label_submit, recompute_deferred
from annotations.partitioned.services.routing import query_lease_next
from tests.factories import make_study, specialist

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_concurrent_lease_and_answer_never_double_assigns():
    # given 5 classes × 4 specialists and 400 items
    study = make_study(k=5, n_items=400, specialists_per_class=4, seed=21)
    users = [specialist(study, k, j) for k in range(5) for j in range(4)]
    leased: list[tuple[int, int]] = []
    answered: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(users))

    def work(user):
        try:
            barrier.wait()
            with recompute_deferred():
                while True:
                    q = query_lease_next(study=study, user=user)
                    if q is None:
                        break
                    with lock:
                        leased.append((q.pk, user.pk))
                    label_submit(query_id=q.pk, user=user, answer="no" if q.pk % 3 else "yes")
                    # a replayed submission (double click) must not count twice
                    label_submit(query_id=q.pk, user=user, answer="no" if q.pk % 3 else "yes")
                    with lock:
                        answered.append(q.pk)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            connection.close()

    # when 20 threads lease and answer until every pool is empty
    threads = [threading.Thread(target=work, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    # then
    assert not errors, errors[:3]
    assert len(answered) == 400
    assert len(set(answered)) == 400
    holders = Counter(pk for pk, _ in leased)
    assert max(holders.values()) == 1
    assert Query.objects.filter(study=study, status="answered").count() == 400
    assert QueryEvent.objects.filter(query__study=study, kind="answered").count() == 400
    assert QueryEvent.objects.filter(query__study=study, kind="issued").count() == 400
    stored = dict(Query.objects.filter(study=study).values_list("pk", "answered_by_id"))
    assert all(stored[pk] == uid for pk, uid in leased)
