"""Twenty raters at once on PostgreSQL, in both item orders: every slot filled exactly once,
no task held by two raters, and no rater rating a sentence twice."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from annotations.assisted.services.rating import RatingInput, rating_lease_next, rating_submit
from annotations.models import Rating, RatingTask, Sentence
from tests.annotations.assisted.helpers import add_rater, make_assisted_study

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("order", ["per_rater", "shared"])
def test_concurrent_raters_fill_every_slot_once(order, settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_assisted_study(n_sentences=40, ratings_per_item=3, item_order=order,
                                seed=31)
    raters = [add_rater(study) for _ in range(20)]
    leased: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(raters))

    def work(user):
        try:
            barrier.wait()
            while (task := rating_lease_next(study=study, user=user)) is not None:
                with lock:
                    leased.append((task.pk, user.pk))
                rating_submit(user=user, public_id=task.public_id,
                              data=RatingInput("accurate", 1))
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(u,)) for u in raters]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not errors, errors[:3]
    assert max(Counter(pk for pk, _ in leased).values()) == 1
    pairs = list(Rating.objects.filter(study=study).values_list("sentence_id", "rater_id"))
    assert len(pairs) == len(set(pairs)) == 40 * 3
    sentences = Sentence.objects.filter(study=study).values_list("pk", flat=True)
    assert Counter(s for s, _ in pairs) == dict.fromkeys(sentences, 3)
    assert not RatingTask.objects.filter(study=study).exclude(status="answered").exists()
