"""Exclusions (``core.reviews.exclusions``, ``core.exclusion_models``), every study type:
excluding a worker gives exactly the estimates of the study recomputed without their
answers; an undo gives the estimates back; standing rules catch later answers; rules that
overlap; leases released and no more handed out; the trail; refusals naming the field; the
exports' default view and their column; the dashboards' count."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.db.models import Q
from django.test.utils import override_settings
from django.urls import reverse

from annotations.core.errors import NotPermitted
from annotations.core.exclusion_models import ExcludedAnswer, Exclusion
from annotations.core.exports import export_write
from annotations.core.reviews.exclusions import (
    InvalidExclusion,
    NothingToUndo,
    exclusion_add,
    exclusion_undo,
)
from annotations.core.reviews.registry import reviewable
from annotations.core.services.flags import flaggable
from annotations.models import Query, Study, StudyEvent
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.annotations.core.review_helpers import (
    estimates_of,
    estimates_without,
    researcher_of,
)
from tests.factories import make_study, specialist

pytestmark = pytest.mark.django_db



def _author(study, model, answer_id) -> int:
    field = reviewable(study.kind).worker_field
    return model.objects.filter(pk=answer_id).values_list(f"{field}_id", flat=True)[0]


def _theirs(study, worker_id) -> list[int]:
    r = reviewable(study.kind)
    return sorted(r.answers(study).filter(**{f"{r.worker_field}_id": worker_id})
                  .values_list("pk", flat=True))


def _tallies_agree(study) -> None:
    """A partitioned study's maintained statistics equal the full recompute (the
    triggers moved every excluded query)."""
    if study.kind == Study.Kind.PARTITIONED:
        from annotations.partitioned.services.consistency import tallies_check

        check = tallies_check(study_id=study.pk, repair=False)
        assert check.ok, check.detail


def test_excluding_a_worker_gives_the_estimates_without_their_answers_and_undo_restores(
        answered, django_capture_on_commit_callbacks):
    study, model, ids = answered
    researcher = researcher_of(study)
    worker = _author(study, model, ids[0])
    theirs = _theirs(study, worker)
    before = estimates_of(study)
    without = estimates_without(study, model, theirs)
    assert without != before  # their answers count

    with django_capture_on_commit_callbacks() as callbacks:
        rule = exclusion_add(study=study, by=researcher, kind="worker", worker_id=worker,
                             reason=" Answered every item in under a second. ")
    assert len(callbacks) == 2  # a second sync once committed, and the study's recompute
    assert (rule.answers, rule.reason, rule.created_by_id) == (
        len(theirs), "Answered every item in under a second.", researcher.pk)
    assert sorted(ExcludedAnswer.objects.filter(study=study)
                  .values_list("answer_id", flat=True)) == theirs
    assert model.objects.filter(pk__in=theirs).count() == len(theirs)  # kept
    assert estimates_of(study) == without
    _tallies_agree(study)

    exclusion_undo(study=study, exclusion_id=rule.pk, by=researcher, reason="Checked again")
    assert estimates_of(study) == before
    _tallies_agree(study)
    rule.refresh_from_db()
    assert (rule.undone_by_id, rule.undo_reason) == (researcher.pk, "Checked again")
    assert not ExcludedAnswer.objects.filter(study=study).exists()
    events = list(StudyEvent.objects.filter(study=study, kind__in=[
        "answers_excluded", "exclusion_undone"]).values_list("kind", "actor_id"))
    assert events == [("answers_excluded", researcher.pk), ("exclusion_undone", researcher.pk)]
    with pytest.raises(NothingToUndo):
        exclusion_undo(study=study, exclusion_id=rule.pk, by=researcher)


def test_a_time_window_excludes_exactly_the_answers_on_its_side(answered):
    study, model, ids = answered
    r = reviewable(study.kind)
    stamps = dict(r.answers(study).values_list("pk", r.at_field))
    cut = sorted(stamps.values())[len(stamps) // 2]
    rule = exclusion_add(study=study, by=researcher_of(study), kind="before", at=cut,
                         reason="A bug in the page until then")
    expected = sorted(pk for pk, at in stamps.items() if at < cut)
    assert sorted(rule.excluded_answers.values_list("answer_id", flat=True)) == expected
    assert estimates_of(study) == estimates_without(study, model, expected)
    _tallies_agree(study)


def test_a_threshold_takes_out_faster_answers_and_catches_later_ones():
    study = make_study(k=2, n_items=8, systems={"sys": 0.75})
    researcher = researcher_of(study)
    rule = exclusion_add(study=study, by=researcher, kind="faster", faster_than_seconds=3600,
                         reason="Every answer here is faster than an hour: a test")
    assert rule.answers == 0
    user = specialist(study, 0)
    query = query_lease_next(study=study, user=user)
    label_submit(query_id=query.pk, user=user, answer="yes")
    excluded = ExcludedAnswer.objects.get(answer_id=query.pk)
    assert (excluded.exclusion_id, excluded.worker_id) == (rule.pk, user.pk)
    _tallies_agree(study)
    exclusion_undo(study=study, exclusion_id=rule.pk, by=researcher)
    assert not ExcludedAnswer.objects.filter(study=study).exists()
    _tallies_agree(study)


def test_an_answer_two_rules_hold_stays_out_until_both_are_undone(answered):
    study, model, ids = answered
    researcher = researcher_of(study)
    worker = _author(study, model, ids[0])
    by_worker = exclusion_add(study=study, by=researcher, kind="worker", worker_id=worker,
                              reason="one")
    by_time = exclusion_add(study=study, by=researcher, kind="faster", worker_id=worker,
                            faster_than_seconds=3600, reason="two")
    theirs = _theirs(study, worker)
    assert by_time.answers == 0  # the first rule holds them
    exclusion_undo(study=study, exclusion_id=by_worker.pk, by=researcher)
    held = dict(ExcludedAnswer.objects.filter(study=study)
                .values_list("answer_id", "exclusion_id"))
    timed = sorted(reviewable(study.kind).answers(study).filter(
        pk__in=theirs, **{f"{reviewable(study.kind).ms_field}__lt": 3_600_000})
        .values_list("pk", flat=True))
    assert sorted(held) == timed and set(held.values()) <= {by_time.pk}
    exclusion_undo(study=study, exclusion_id=by_time.pk, by=researcher)
    assert not ExcludedAnswer.objects.filter(study=study).exists()


def test_an_excluded_worker_loses_their_leases_and_is_given_nothing_more_until_undone():
    study = make_study(k=2, n_items=6, systems={"sys": 0.75}, specialists_per_class=2)
    researcher = researcher_of(study)
    user = specialist(study, 0)
    held = query_lease_next(study=study, user=user)
    assert held is not None
    rule = exclusion_add(study=study, by=researcher, kind="worker", worker_id=user.pk,
                         reason="Spam answers")
    assert rule.released == 1
    held.refresh_from_db()
    assert (held.status, held.holder_id) == ("pending", None)
    kind = flaggable(study.kind).task_kind
    assert kind.event_model.objects.filter(query=held, kind="reclaimed",
                                           detail__reason="worker excluded").exists()
    assert query_lease_next(study=study, user=user) is None
    other = specialist(study, 0, 1)
    assert query_lease_next(study=study, user=other) is not None  # the pool is not empty
    exclusion_undo(study=study, exclusion_id=rule.pk, by=researcher)
    assert query_lease_next(study=study, user=user) is not None


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"kind": "worker", "reason": ""}, "reason"),
    ({"kind": "worker", "reason": "x" * 2001}, "reason"),
    ({"kind": "sometimes", "reason": "r"}, "kind"),
    ({"kind": "worker", "reason": "r"}, "worker"),
    ({"kind": "worker", "reason": "r", "worker_id": 10**9}, "worker"),
    ({"kind": "before", "reason": "r"}, "at"),
    ({"kind": "after", "reason": "r", "at": dt.datetime(2026, 1, 1)}, "at"),  # noqa: DTZ001 - naive on purpose
    ({"kind": "faster", "reason": "r"}, "faster_than_seconds"),
    ({"kind": "faster", "reason": "r", "faster_than_seconds": 0}, "faster_than_seconds"),
    ({"kind": "faster", "reason": "r", "faster_than_seconds": 10**6}, "faster_than_seconds"),
])
def test_refusals_name_the_field_and_change_nothing(kwargs, field):
    study = make_study(k=2, n_items=4)
    with pytest.raises(InvalidExclusion) as caught:
        exclusion_add(study=study, by=researcher_of(study), **kwargs)
    assert caught.value.field == field
    assert not Exclusion.objects.exists()


def test_only_researchers_exclude():
    study = make_study(k=2, n_items=4)
    user = specialist(study, 0)
    with pytest.raises(NotPermitted):
        exclusion_add(study=study, by=user, kind="faster", faster_than_seconds=1, reason="r")


def _export(study, what, excluded=False):
    out = io.StringIO()
    export_write(study, what, out, "csv", excluded=excluded)
    return list(csv.DictReader(io.StringIO(out.getvalue())))


def test_exports_leave_excluded_answers_out_unless_asked_with_a_column(answered):
    study, model, ids = answered
    worker = _author(study, model, ids[0])
    theirs = {str(pk) for pk in _theirs(study, worker)}
    exclusion_add(study=study, by=researcher_of(study), kind="worker", worker_id=worker,
                  reason="r")
    what = {"partitioned": "labels", "assisted": "ratings", "critique": "outputs"}[study.kind]
    key = {"partitioned": "query_id", "assisted": "rating_id", "critique": "output_id"}[
        study.kind]
    default = _export(study, what)
    assert "excluded" not in default[0] and not {r[key] for r in default} & theirs
    every = _export(study, what, excluded=True)
    assert {r[key] for r in every if r["excluded"] == "True"} == theirs
    assert len(every) == len(default) + len(theirs)


def test_dashboard_and_export_links_say_how_many_answers_are_excluded(client, answered):
    study, model, ids = answered
    researcher = researcher_of(study)
    worker = _author(study, model, ids[0])
    rule = exclusion_add(study=study, by=researcher, kind="worker", worker_id=worker,
                         reason="r")
    client.force_login(researcher)
    page = client.get(reverse("dashboard", args=[study.pk]), follow=True).content.decode()
    assert f'data-testid="excluded-note">{rule.answers} ' in page
    assert "excluded=include" in page
    response = client.get(reverse("study-export", args=[study.pk]) + "?excluded=include")
    assert "excluded" in b"".join(response.streaming_content).decode().splitlines()[0]


def test_an_undone_answer_leaves_the_exclusion_table():
    study = make_study(k=2, n_items=4, systems={"sys": 0.75})
    researcher = researcher_of(study)
    user = specialist(study, 0)
    exclusion_add(study=study, by=researcher, kind="faster", faster_than_seconds=3600,
                  reason="r")
    query = query_lease_next(study=study, user=user)
    label_submit(query_id=query.pk, user=user, answer="no")
    assert ExcludedAnswer.objects.filter(answer_id=query.pk).exists()
    from annotations.partitioned.services.labels import label_undo

    label_undo(study=study, user=user)
    assert not ExcludedAnswer.objects.filter(answer_id=query.pk).exists()
    assert Query.objects.get(pk=query.pk).status == "leased"
    _tallies_agree(study)


def test_an_answer_that_missed_a_new_rule_is_caught_once_the_rule_commits(
        django_capture_on_commit_callbacks):
    study = make_study(k=2, n_items=4, systems={"sys": 0.75})
    user = specialist(study, 0)
    with django_capture_on_commit_callbacks() as callbacks:
        rule = exclusion_add(study=study, by=researcher_of(study), kind="faster",
                             faster_than_seconds=3600, reason="r")
    # an answer whose transaction read the study before the rule committed: it saw none
    Study.objects.filter(pk=study.pk).update(exclusions_standing=0)
    query = query_lease_next(study=study, user=user)
    label_submit(query_id=query.pk, user=user, answer="yes")
    assert not ExcludedAnswer.objects.filter(answer_id=query.pk).exists()
    Study.objects.filter(pk=study.pk).update(exclusions_standing=1)
    callbacks[0]()  # the sync once the rule committed
    assert ExcludedAnswer.objects.get(answer_id=query.pk).exclusion_id == rule.pk
    _tallies_agree(study)


def test_a_large_exclusion_moves_its_answers_in_a_job_and_its_page_says_so(
        answered, client, settings, django_capture_on_commit_callbacks):
    """Over OVERSIGHT_EXCLUSION_INLINE_MAX answers, the request saves the rule, ends the
    leases and counts it as standing; the job (``exclusion_apply``) takes the answers out,
    records the event and gives the same estimates as the small path; the page's list polls
    while it runs. Undone, a large rule's answers go back by a job too."""
    from annotations.core.reviews.exclusions import exclusion_apply

    study, model, ids = answered
    settings.OVERSIGHT_EXCLUSION_INLINE_MAX = 1
    researcher = researcher_of(study)
    worker = _author(study, model, ids[0])
    theirs = _theirs(study, worker)
    assert len(theirs) > 1
    before, without = estimates_of(study), estimates_without(study, model, theirs)
    client.force_login(researcher)
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(reverse("workers-exclude", args=[study.pk]), {
            "kind": "worker", "worker": worker, "reason": "Too fast"}, follow=True)
    assert "being taken out in the background" in response.content.decode()
    rule = Exclusion.objects.get(study=study)
    assert rule.applying and len(queued) == 1  # the job, once committed
    assert not ExcludedAnswer.objects.filter(study=study).exists()
    assert Study.objects.get(pk=study.pk).exclusions_standing == 1  # new answers: caught
    part = client.get(reverse("workers-exclusions", args=[study.pk])).content.decode()
    assert 'hx-trigger="every 2s"' in part and 'data-testid="exclusion-applying"' in part

    with django_capture_on_commit_callbacks():  # the job's own sync and recompute
        assert exclusion_apply(exclusion_id=rule.pk) is True
    assert exclusion_apply(exclusion_id=rule.pk) is False  # twice: nothing more
    rule.refresh_from_db()
    assert (rule.applying, rule.answers) == (False, len(theirs))
    assert sorted(ExcludedAnswer.objects.filter(study=study)
                  .values_list("answer_id", flat=True)) == theirs
    assert estimates_of(study) == without
    _tallies_agree(study)
    made = StudyEvent.objects.get(study=study, kind="answers_excluded")  # at the request
    assert (made.actor_id, made.detail["answers"], made.detail["job"]) == (
        researcher.pk, None, True)
    done = StudyEvent.objects.get(study=study, kind="exclusion_applied")
    assert done.detail["answers"] == len(theirs)
    part = client.get(reverse("workers-exclusions", args=[study.pk])).content.decode()
    assert "hx-trigger" not in part and f"{len(theirs)} {reviewable(study.kind).noun}s" in part

    rule = exclusion_undo(study=study, exclusion_id=rule.pk, by=researcher, reason="ok")
    assert rule.applying and ExcludedAnswer.objects.filter(study=study).count() == len(theirs)
    assert exclusion_apply(exclusion_id=rule.pk) is True
    assert not ExcludedAnswer.objects.filter(study=study).exists()
    assert estimates_of(study) == before
    _tallies_agree(study)
    assert StudyEvent.objects.get(study=study, kind="exclusion_undone").detail["job"] is True
    assert [e.detail.get("answers_back") for e in StudyEvent.objects.filter(
        study=study, kind="exclusion_applied").order_by("pk")] == [None, len(theirs)]


def _answered_by_two(n: int = 3):
    """A partitioned study where two specialists answered ``n`` queries each."""
    study = make_study(k=2, n_items=2 * n + 2, systems={"sys": 0.75})
    for k in range(2):
        user = specialist(study, k)
        for _ in range(n):
            label_submit(query_id=query_lease_next(study=study, user=user).pk, user=user,
                         answer="no")
    return study


@override_settings(OVERSIGHT_MIN_ANSWER_MS=0)
def test_a_large_rule_undone_before_its_job_ran_leaves_nothing_out():
    from annotations.core.reviews.exclusions import exclusion_apply

    study = _answered_by_two()
    researcher = researcher_of(study)
    with override_settings(OVERSIGHT_EXCLUSION_INLINE_MAX=1):
        rule = exclusion_add(study=study, by=researcher, kind="faster",
                             faster_than_seconds=3600, reason="r")
    assert rule.applying and not ExcludedAnswer.objects.exists()
    study.refresh_from_db()
    user = specialist(study, 0)
    query = query_lease_next(study=study, user=user)
    label_submit(query_id=query.pk, user=user, answer="yes")  # caught by its own
    assert ExcludedAnswer.objects.get(answer_id=query.pk).exclusion_id == rule.pk
    rule = exclusion_undo(study=study, exclusion_id=rule.pk, by=researcher)
    assert rule.applying  # its job has not run: it now puts back what it finds
    assert Study.objects.get(pk=study.pk).exclusions_standing == 0
    assert exclusion_apply(exclusion_id=rule.pk) is True
    assert not ExcludedAnswer.objects.exists()
    _tallies_agree(study)
    trail = list(StudyEvent.objects.filter(Q(kind__startswith="ex") | Q(kind="answers_excluded"),
                                           study=study).values_list("kind", flat=True))
    assert sorted(trail) == ["answers_excluded", "exclusion_applied", "exclusion_undone"]


@override_settings(OVERSIGHT_MIN_ANSWER_MS=0)
def test_an_older_rule_waiting_for_its_job_takes_its_answers_from_a_newer_one(
        django_capture_on_commit_callbacks):
    """An answer is held by the oldest standing rule that matches it: a small rule made
    while a large older one waits for its job takes the answers at once; the job gives them
    to the older rule, and the newer rule's second pass leaves the pending rule alone."""
    from annotations.core.reviews.exclusions import exclusion_apply

    study = _answered_by_two()
    researcher = researcher_of(study)
    with override_settings(OVERSIGHT_EXCLUSION_INLINE_MAX=1):
        older = exclusion_add(study=study, by=researcher, kind="faster",
                              faster_than_seconds=3600, reason="everyone")
    worker = specialist(study, 0)
    with django_capture_on_commit_callbacks(execute=True):
        newer = exclusion_add(study=study, by=researcher, kind="worker",
                              worker_id=worker.pk, reason="one")
    theirs = _theirs(study, worker.pk)
    held = dict(ExcludedAnswer.objects.values_list("answer_id", "exclusion_id"))
    assert held == dict.fromkeys(theirs, newer.pk)  # the pending rule took nothing
    assert exclusion_apply(exclusion_id=older.pk) is True
    every = _theirs(study, worker.pk) + _theirs(study, specialist(study, 1).pk)
    held = dict(ExcludedAnswer.objects.values_list("answer_id", "exclusion_id"))
    assert held == dict.fromkeys(every, older.pk)
    older.refresh_from_db()
    newer.refresh_from_db()
    assert (older.answers, older.applying) == (len(every), False)
    _tallies_agree(study)
    exclusion_undo(study=study, exclusion_id=older.pk, by=researcher)  # small: at once
    held = dict(ExcludedAnswer.objects.values_list("answer_id", "exclusion_id"))
    assert held == dict.fromkeys(theirs, newer.pk)
    _tallies_agree(study)


def test_a_job_lost_is_queued_again_by_the_sweeper(settings):
    from datetime import timedelta

    from django.utils import timezone

    from annotations.core.reviews.exclusions import exclusions_catch_up

    settings.OVERSIGHT_IMPORT_RUNNER = "thread"  # here and now, on this connection
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = _answered_by_two()
    researcher = researcher_of(study)
    settings.OVERSIGHT_EXCLUSION_INLINE_MAX = 1
    stuck = exclusion_add(study=study, by=researcher, kind="faster",
                          faster_than_seconds=3600, reason="lost")  # its job never ran
    fresh = exclusion_add(study=study, by=researcher, kind="before",
                          at=timezone.now() + timedelta(days=1), reason="just made")
    Exclusion.objects.filter(pk=stuck.pk).update(
        created_at=timezone.now() - timedelta(minutes=3))
    assert exclusions_catch_up() == [stuck.pk]
    stuck.refresh_from_db()
    fresh.refresh_from_db()
    assert (stuck.applying, stuck.answers, fresh.applying) == (False, 6, True)
    assert ExcludedAnswer.objects.filter(exclusion=stuck).count() == 6


@pytest.mark.django_db(transaction=True)
def test_a_large_exclusions_job_runs_where_the_jobs_run(client, settings):
    """Committed for real: the job is queued once the rule commits and runs on the
    deployment's runner (a Celery worker process under PostgreSQL + Redis; the web process
    with the embedded defaults); the page stops polling once it has run."""
    import time

    from annotations.partitioned.services.estimates import study_recompute

    settings.OVERSIGHT_EXCLUSION_INLINE_MAX = 1
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_study(k=2, n_items=6, systems={"sys": 0.75})
    for k in range(2):
        user = specialist(study, k)
        for _ in range(3):
            label_submit(query_id=query_lease_next(study=study, user=user).pk, user=user,
                         answer="no")
    study_recompute(study_id=study.pk)
    client.force_login(researcher_of(study))
    client.post(reverse("workers-exclude", args=[study.pk]), {
        "kind": "faster", "faster_than_seconds": "3600", "reason": "all of them"})
    rule = Exclusion.objects.get(study=study)
    deadline = time.monotonic() + 30
    while rule.applying and time.monotonic() < deadline:
        time.sleep(0.1)
        rule.refresh_from_db()
    assert not rule.applying and rule.answers == 6
    assert ExcludedAnswer.objects.filter(study=study).count() == 6
    part = client.get(reverse("workers-exclusions", args=[study.pk])).content.decode()
    assert "hx-trigger" not in part
