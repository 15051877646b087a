"""Rating tasks on the task engine: lease, heartbeat, expiry and reclaim, skip, answer (min
time, idempotent replay, per-arm scales), item order, and no rater rating a sentence twice."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import numpy as np
import pytest
from django.utils import timezone
from scipy import stats

from annotations.assisted.services import rating as rating_module
from annotations.assisted.services.exposure import task_show
from annotations.assisted.services.rating import (
    RATING_KIND,
    RatingInput,
    rater_progress,
    rating_heartbeat,
    rating_lease_next,
    rating_mark_rendered,
    rating_skip,
    rating_submit,
)
from annotations.assisted.services.signals import rating_recorded
from annotations.core import engine
from annotations.core.errors import (
    AlreadyAnswered,
    AnsweredTooSoon,
    DomainError,
    LeaseExpired,
    StudyNotOpen,
)
from annotations.core.services.studies import study_close
from annotations.models import (
    Exposure,
    RaterAssignment,
    Rating,
    RatingSkip,
    RatingTask,
    RatingTaskEvent,
    Sentence,
)
from tests.annotations.assisted.helpers import add_rater, make_assisted_study, rater_in_arm

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_min_time(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0


def rate(user, task, label="accurate", confidence=2, helpfulness=None):
    return rating_submit(user=user, public_id=task.public_id,
                         data=RatingInput(label, confidence, helpfulness))


def test_rating_kind_is_registered_with_the_engine():
    assert RATING_KIND in engine.task_kinds()
    assert RATING_KIND.model is RatingTask and RATING_KIND.event_model is RatingTaskEvent


def test_lease_resume_answer_and_audit():
    study = make_assisted_study(n_sentences=3)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    assert (task.status, task.holder_id, task.times_issued) == ("leased", user.pk, 1)
    assert rating_lease_next(study=study, user=user).pk == task.pk  # resumed
    rating_mark_rendered(task=task)
    result = rate(user, task, "inaccurate", 3)
    task.refresh_from_db()
    assert result.created and task.status == "answered" and task.answered_by_id == user.pk
    rating = Rating.objects.get(task=task)
    assert (rating.label, rating.confidence, rating.helpfulness, rating.rater_id,
            rating.arm_version) == ("inaccurate", 3, None, user.pk, 1)
    assert rating.time_on_task_ms is not None and rating.time_on_task_ms >= 0
    kinds = list(task.events.order_by("at", "pk").values_list("kind", flat=True))
    assert kinds == ["routed", "issued", "rendered", "answered"]


def test_replay_is_idempotent_and_a_change_is_refused():
    study = make_assisted_study(n_sentences=2)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    rate(user, task, "accurate", 1)
    again = rate(user, task, "accurate", 1)
    assert not again.created and Rating.objects.filter(task=task).count() == 1
    with pytest.raises(AlreadyAnswered):
        rate(user, task, "disputed", 1)


def test_answer_before_the_minimum_time_is_refused(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 60_000
    study = make_assisted_study(n_sentences=2)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    rating_mark_rendered(task=task)
    with pytest.raises(AnsweredTooSoon):
        rate(user, task)
    assert not Rating.objects.exists()


def test_scales_per_arm(settings):
    study = make_assisted_study(n_sentences=2, arms={"E": ["search", "evidence"]})
    assisted, baseline = rater_in_arm(study, "E"), rater_in_arm(study, "Baseline")
    t_a = rating_lease_next(study=study, user=assisted)
    t_b = rating_lease_next(study=study, user=baseline)
    with pytest.raises(DomainError) as exc:
        rate(assisted, t_a)
    assert exc.value.field == "helpfulness"
    with pytest.raises(DomainError) as exc:
        rate(baseline, t_b, helpfulness=1)
    assert exc.value.field == "helpfulness"
    with pytest.raises(DomainError) as exc:  # a comment in every arm, of at most 5 000
        rating_submit(user=baseline, public_id=t_b.public_id,
                      data=RatingInput("accurate", 1, None, "x" * 5001))
    assert exc.value.field == "comment"
    for label, confidence, field in (("true", 1, "label"), ("accurate", 4, "confidence"),
                                     ("skip", 1, "label")):
        with pytest.raises(DomainError) as exc:
            rate(baseline, t_b, label, confidence)
        assert exc.value.field == field
    rating_submit(user=assisted, public_id=t_a.public_id,
                  data=RatingInput("cant_assess", 0, 2, "  the evidence was off  "))
    r = Rating.objects.get(task=t_a)
    assert (r.label, r.helpfulness, r.comment) == ("cant_assess", 2, "the evidence was off")
    # issue 27: the baseline arm comments too (it was refused: no box, no m)
    rating_submit(user=baseline, public_id=t_b.public_id,
                  data=RatingInput("disputed", 1, None, " two sources disagree "))
    r = Rating.objects.get(task=t_b)
    assert (r.label, r.helpfulness, r.comment) == ("disputed", None, "two sources disagree")


def test_heartbeat_extends_and_expiry_returns_the_task_to_the_pool():
    study = make_assisted_study(n_sentences=2)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    first = task.lease_expires_at
    extended = rating_heartbeat(user=user, public_id=task.public_id)
    assert extended.lease_expires_at >= first
    later = timezone.now() + dt.timedelta(hours=5)
    assert engine.leases_reclaim_all(now=later)["rating"] == 1
    task.refresh_from_db()
    assert (task.status, task.holder_id) == ("pending", None)
    assert task.events.filter(kind="reclaimed").count() == 1
    with pytest.raises(DomainError):
        rate(user, task)
    RatingTask.objects.filter(pk=task.pk).update(
        status="leased", holder=user, lease_expires_at=timezone.now() - dt.timedelta(1))
    with pytest.raises(LeaseExpired):
        rate(user, task)


def test_skip_hands_back_and_never_offers_the_sentence_again():
    study = make_assisted_study(n_sentences=2, ratings_per_item=1)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    skip = rating_skip(user=user, public_id=task.public_id)
    task.refresh_from_db()
    assert task.status == "pending" and task.holder_id is None
    assert skip.sentence_id == task.sentence_id and skip.time_on_task_ms is not None
    nxt = rating_lease_next(study=study, user=user)
    assert nxt.sentence_id != task.sentence_id
    rate(user, nxt)
    assert rating_lease_next(study=study, user=user) is None  # the skipped one is not back
    other = add_rater(study)
    assert rating_lease_next(study=study, user=other).pk == task.pk
    assert rater_progress(study=study, user=user) == {"rated": 1, "skipped": 1,
                                                      "remaining": 0}


def test_no_rater_rates_a_sentence_twice_and_every_slot_is_filled():
    study = make_assisted_study(n_sentences=6, ratings_per_item=3)
    raters = [add_rater(study) for _ in range(4)]
    done = set()
    while len(done) < len(raters):
        for user in raters:
            if user.pk in done:
                continue
            task = rating_lease_next(study=study, user=user)
            if task is None:
                done.add(user.pk)
            else:
                rate(user, task)
    ratings = list(Rating.objects.filter(study=study).values_list("sentence_id", "rater_id"))
    assert len(ratings) == len(set(ratings))  # (sentence, rater) never repeats
    assert Counter(s for s, _ in ratings) == {s.pk: 3 for s in Sentence.objects.filter(
        study=study)}
    assert not RatingTask.objects.filter(study=study).exclude(status="answered").exists()


def order_of(user, study) -> list[str]:
    seen = []
    while (task := rating_lease_next(study=study, user=user)) is not None:
        seen.append(task.sentence.external_id)
        rate(user, task)
    return seen


def test_per_rater_order_leases_the_first_task_at_or_after_a_random_start(monkeypatch):
    study = make_assisted_study(n_sentences=8, ratings_per_item=1, item_order="per_rater")
    user = add_rater(study)
    arm = RaterAssignment.objects.get(user=user).arm_id
    ranks = sorted(RatingTask.objects.filter(study=study, arm_id=arm)
                   .values_list("rank", flat=True))
    starts = iter([ranks[3], ranks[3] + 1, ranks[-1] + 1])
    monkeypatch.setattr(rating_module._random, "getrandbits", lambda bits: next(starts))
    first = rating_lease_next(study=study, user=user)
    assert first.rank == ranks[3]  # at the start itself
    rate(user, first)
    assert rating_lease_next(study=study, user=user).rank == ranks[4]  # the next one after
    rate(user, RatingTask.objects.get(holder=user, status="leased"))
    assert rating_lease_next(study=study, user=user).rank == ranks[0]  # past the end: wraps


def test_per_rater_order_draws_each_next_sentence_uniformly(monkeypatch):
    """Each rater's first sentence, over 180 raters: every sentence equally likely
    (chi-square), and raters' sequences differ."""
    monkeypatch.setattr(rating_module, "_random", random.Random(5))
    study = make_assisted_study(n_sentences=6, ratings_per_item=90, item_order="per_rater")
    firsts: Counter = Counter()
    for _ in range(180):
        user = add_rater(study)
        firsts[rating_lease_next(study=study, user=user).sentence_id] += 1
    assert len(firsts) == 6
    assert stats.chisquare(list(firsts.values())).pvalue > 0.001, firsts
    a, b = add_rater(study), add_rater(study)
    assert order_of(a, study) != order_of(b, study)


def test_shared_order_follows_the_stored_ranks():
    study = make_assisted_study(n_sentences=8, ratings_per_item=1, item_order="shared")
    user = add_rater(study)
    ranks = dict(RatingTask.objects.filter(study=study).values_list("sentence__external_id",
                                                                    "rank"))
    assert order_of(user, study) == sorted(ranks, key=ranks.get)
    assert np.all(np.diff(sorted(ranks.values())) > 0)


def test_closing_the_study_stops_answers():
    study = make_assisted_study(n_sentences=2)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    study_close(study=study)
    with pytest.raises(StudyNotOpen):
        rate(user, task)
    with pytest.raises(StudyNotOpen):
        rating_lease_next(study=study, user=user)


def test_a_rating_records_its_exposure_and_signals_after_commit(
        django_capture_on_commit_callbacks):
    study = make_assisted_study(n_sentences=2, arms={"E": ["search", "evidence"]})
    user = rater_in_arm(study, "E")
    task = rating_lease_next(study=study, user=user)
    shown = task_show(task=task, user=user, via=Exposure.Via.PAGE)
    received = []

    def listener(sender, study_id, rating_id, **kwargs):
        received.append((study_id, rating_id))

    rating_recorded.connect(listener)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            rating = rate(user, task, helpfulness=1).rating
    finally:
        rating_recorded.disconnect(listener)
    assert rating.exposure_id == shown.exposure.pk
    assert received == [(study.pk, rating.pk)]
    assert RatingSkip.objects.count() == 0


def test_bonus_rule_counts_scored_ratings_against_gold():
    from annotations.assisted.selectors import rater_bonuses

    study = make_assisted_study(n_sentences=8, ratings_per_item=1, bonus_enabled=True,
                                bonus_min_ratings=6, bonus_min_accuracy=0.8)
    Sentence.objects.filter(study=study, external_id="s7").update(gold="")  # not scored
    Sentence.objects.filter(study=study, external_id="s6").update(gold="inaccurate")
    user = add_rater(study)
    # gold: s0–s5 accurate, s6 inaccurate, s7 none
    labels = {"s0": "accurate", "s1": "accurate", "s2": "accurate", "s3": "accurate",
              "s4": "cant_assess", "s5": "no_attribution", "s6": "disputed",
              "s7": "inaccurate"}
    while (task := rating_lease_next(study=study, user=user)) is not None:
        rate(user, task, labels[task.sentence.external_id])
    (row,) = rater_bonuses(study=study)
    # scored: s0–s4 and s6 (s5 is "doesn't require attribution", s7 has no gold) = 6;
    # correct: s0–s3 and s6 (disputed binarises to inaccurate) = 5; s4 can't-assess is wrong
    assert (row.n_ratings, row.n_scored, row.n_correct) == (8, 6, 5)
    assert row.accuracy == pytest.approx(5 / 6) and row.eligible
    study.assisted.bonus_min_accuracy = 0.9
    study.assisted.save()
    assert not rater_bonuses(study=study)[0].eligible


def test_cant_assess_asks_no_confidence():
    # issue 17: "can't confidently assess" still demanded a confidence level
    study = make_assisted_study(n_sentences=3)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    assert rate(user, task, "cant_assess", None).rating.confidence is None
    task = rating_lease_next(study=study, user=user)
    assert rate(user, task, "cant_assess", 3).rating.confidence is None  # sent, not asked
    task = rating_lease_next(study=study, user=user)
    with pytest.raises(DomainError, match="confidence: choose how confident") as refused:
        rate(user, task, "accurate", None)
    assert refused.value.field == "confidence"


def test_a_rater_undoes_the_last_rating_within_the_window(settings):
    # issue 17: raters had no undo of their last answer (specialists did)
    from annotations.assisted.services.rating import rating_undo
    from annotations.core.errors import UndoRefused

    settings.OVERSIGHT_UNDO_SECONDS = 30
    study = make_assisted_study(n_sentences=4)
    user = add_rater(study)
    with pytest.raises(UndoRefused, match="no rating of yours"):
        rating_undo(study=study, user=user)
    rate(user, rating_lease_next(study=study, user=user), "accurate", 3)
    task = rating_lease_next(study=study, user=user)
    rate(user, task, "disputed", 1)
    held = rating_lease_next(study=study, user=user)  # the next sentence, now held
    back = rating_undo(study=study, user=user)
    assert back.pk == task.pk and back.status == RatingTask.Status.LEASED
    assert back.holder == user and back.times_issued == 2
    assert not Rating.objects.filter(task=task).exists()
    held.refresh_from_db()
    assert held.status == RatingTask.Status.PENDING and held.holder is None
    undone = RatingTaskEvent.objects.get(task=task, kind="undone")
    assert undone.actor == user and undone.detail["label"] == "disputed"
    with pytest.raises(UndoRefused, match="once"):
        rating_undo(study=study, user=user)
    assert rate(user, back, "accurate", 2).rating.label == "accurate"  # rated again


def test_undo_is_refused_after_the_window(settings):
    from annotations.assisted.services.rating import rating_undo
    from annotations.core.errors import UndoRefused

    settings.OVERSIGHT_UNDO_SECONDS = 0
    study = make_assisted_study(n_sentences=2)
    user = add_rater(study)
    rate(user, rating_lease_next(study=study, user=user))
    with pytest.raises(UndoRefused, match="Too late to undo: a rating can be undone for 0"):
        rating_undo(study=study, user=user)
    assert Rating.objects.filter(rater=user).count() == 1
