"""The Workers page (``core.reviews.workers``, ``workers_views``), every study type: each
worker's counts checked against the database row by row, gold checks where the type has
them, who may open it, the CSV, sorting, and excluding and undoing through the page."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from annotations.assisted.services.rating import RatingInput, rating_lease_next, rating_submit
from annotations.core.exclusion_models import Exclusion
from annotations.core.reviews.registry import reviewable
from annotations.core.reviews.workers import study_workers, workers_compact
from annotations.core.services.flags import worker_role
from annotations.models import Rating, Sentence, StudyMembership
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.annotations.assisted.helpers import add_rater, make_assisted_study
from tests.annotations.core.review_helpers import (
    researcher_of,
)
from tests.factories import UserFactory, make_study, role_user, specialist

pytestmark = pytest.mark.django_db




def test_every_worker_is_listed_with_their_answers_counted(answered):
    study, model, ids = answered
    r = reviewable(study.kind)
    rows = {row.name: row for row in study_workers(study=study)}
    counts = {}
    for author in r.answers(study).values_list(f"{r.worker_field}__username", flat=True):
        counts[author] = counts.get(author, 0) + 1
    for name, n in counts.items():
        assert rows[name].answers >= n  # partitioned also counts quality checks
        assert rows[name].member
    assert sum(row.answers for row in rows.values()) >= len(ids)


def test_assisted_gold_accuracy_and_agreement_by_hand():
    study = make_assisted_study(n_sentences=4, ratings_per_item=3)
    Sentence.objects.filter(study=study).update(gold="accurate")
    labels = {0: "accurate", 1: "accurate", 2: "inaccurate"}
    for j in range(3):
        rater = add_rater(study)
        while (task := rating_lease_next(study=study, user=rater)) is not None:
            rating_submit(user=rater, public_id=task.public_id,
                          data=RatingInput(labels[j], 2))
    rows = study_workers(study=study, sort="name")
    for row in rows:
        ratings = list(Rating.objects.filter(study=study, rater_id=row.user_id))
        right = sum(x.label == "accurate" for x in ratings)
        assert (row.gold_correct, row.gold_n) == (right, len(ratings))
        assert 0 <= row.gold_lo <= row.gold_accuracy <= row.gold_hi <= 1
    # every sentence has two "accurate" and one "inaccurate" rating in each arm it was
    # rated in: the accurate raters agree with the others' majority only where the
    # others tie (nothing said) — so the "inaccurate" rater disagrees wherever compared
    contrarian = next(r for r in rows if r.gold_correct == 0)
    assert contrarian.agree == 0 and contrarian.agree_n == contrarian.answers


def test_partitioned_quality_checks_are_the_gold_checks():
    study = make_study(k=2, n_items=40, checks=30, gold_rate=0.5, seed=3)
    user = specialist(study, 0)
    for _ in range(30):
        q = query_lease_next(study=study, user=user)
        label_submit(query_id=q.pk, user=user, answer="yes")
    row = next(r for r in study_workers(study=study) if r.user_id == user.pk)
    checks = study.queries.filter(answered_by=user, is_quality_check=True).exclude(
        qc_correct=None)
    assert row.gold_n == checks.count() > 0
    assert row.gold_correct == checks.filter(qc_correct=True).count()
    assert row.agree_n == 0  # specialists are never compared


def test_the_page_for_researchers_managers_and_not_workers(client, answered):
    study, model, ids = answered
    researcher = researcher_of(study)
    client.force_login(researcher)
    page = client.get(reverse("workers", args=[study.pk]))
    assert page.status_code == 200
    assert b'data-testid="exclusion-form"' in page.content
    assert page.content.count(b'data-testid="worker-row"') == len(study_workers(study=study))
    manager = StudyMembership.objects.filter(study=study, role="manager").first()
    if manager is not None:
        client.force_login(manager.user)
        read = client.get(reverse("workers", args=[study.pk]))
        assert read.status_code == 200 and b"exclusion-form" not in read.content
    worker = model.objects.filter(pk=ids[0]).values_list(
        f"{reviewable(study.kind).worker_field}", flat=True)[0]
    from annotations.core.models import User

    client.force_login(User.objects.get(pk=worker))
    assert client.get(reverse("workers", args=[study.pk])).status_code == 403


def test_csv_has_one_row_per_worker_in_the_order_asked(client, answered):
    study, _model, _ids = answered
    client.force_login(researcher_of(study))
    response = client.get(reverse("workers", args=[study.pk]),
                          {"format": "csv", "sort": "answers", "order": "desc"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    expected = study_workers(study=study, sort="answers", descending=True)
    assert [r["worker"] for r in rows] == [w.name for w in expected]
    assert {"median_seconds", "gold_lower_95", "gold_upper_95", "skips", "undos",
            "flags", "excluded_answers"} <= set(rows[0])


def test_excluding_and_undoing_through_the_page(client, answered):
    study, model, ids = answered
    researcher = researcher_of(study)
    client.force_login(researcher)
    url = reverse("workers-exclude", args=[study.pk])
    refused = client.post(url, {"kind": "faster", "faster_than_seconds": "soon",
                                "reason": "too fast"}, follow=True)
    assert b"is not a number of seconds" in refused.content
    assert b'aria-invalid="true"' in refused.content and not Exclusion.objects.exists()
    worker = model.objects.filter(pk=ids[0]).values_list(
        f"{reviewable(study.kind).worker_field}_id", flat=True)[0]
    done = client.post(url, {"kind": "worker", "worker": worker,
                             "reason": "Copied answers"}, follow=True)
    rule = Exclusion.objects.get()
    assert f"Excluded {rule.answers} ".encode() in done.content
    assert b'data-testid="worker-excluded"' in done.content
    assert workers_compact(study=study).excluded == rule.answers
    part = client.get(reverse("workers-compact", args=[study.pk])).content.decode()
    assert f"{rule.answers} {reviewable(study.kind).noun}" in part
    client.post(reverse("workers-exclusion-undo", args=[study.pk, rule.pk]),
                {"reason": "A mistake"}, follow=True)
    rule.refresh_from_db()
    assert rule.undone_at is not None and rule.undo_reason == "A mistake"


def test_a_manager_cannot_exclude(client):
    study = make_study(k=2, n_items=4)
    client.force_login(role_user(study, "manager"))
    response = client.post(reverse("workers-exclude", args=[study.pk]),
                           {"kind": "faster", "faster_than_seconds": "1", "reason": "r"})
    assert response.status_code == 403 and not Exclusion.objects.exists()


def test_the_workers_and_exclusions_api(client, answered):
    study, model, ids = answered
    researcher = researcher_of(study)
    client.force_login(researcher)
    rows = client.get(f"/api/studies/{study.pk}/workers/?sort=answers&order=desc").json()
    assert [r["name"] for r in rows] == [
        w.name for w in study_workers(study=study, sort="answers", descending=True)]
    assert {"gold_lower_95", "median_seconds", "seconds_histogram"} <= set(rows[0])
    url = f"/api/studies/{study.pk}/exclusions/"
    refused = client.post(url, {"kind": "faster", "reason": "too fast"},
                          content_type="application/json")
    assert refused.status_code == 400 and refused.json()["field"] == "faster_than_seconds"
    worker = model.objects.filter(pk=ids[0]).values_list(
        f"{reviewable(study.kind).worker_field}_id", flat=True)[0]
    made = client.post(url, {"kind": "worker", "worker": worker, "reason": "Copied"},
                       content_type="application/json")
    assert made.status_code == 201 and made.json()["answers"] > 0
    listed = client.get(url).json()
    assert [x["id"] for x in listed] == [made.json()["id"]]
    undone = client.post(f"{url}{made.json()['id']}/undo/", {"reason": "mistake"},
                         content_type="application/json")
    assert undone.status_code == 200 and undone.json()["undo_reason"] == "mistake"
    again = client.post(f"{url}{made.json()['id']}/undo/", content_type="application/json")
    assert again.status_code == 409
    manager = StudyMembership.objects.filter(study=study, role="manager").first()
    if manager is not None:
        client.force_login(manager.user)
        assert client.get(f"/api/studies/{study.pk}/workers/").status_code == 200
        assert client.post(url, {"kind": "worker", "worker": worker, "reason": "x"},
                           content_type="application/json").status_code == 403


def test_the_rows_are_read_once_per_snapshot_and_exclusion_change(
        answered, django_assert_max_num_queries):
    """Another sort, the CSV, the API and the compact table between two snapshots are
    served from the cache (three small queries a read: the key); an exclusion, a new
    member or a new snapshot reads the answers again."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotations.core.reviews.exclusions import exclusion_add
    from annotations.core.services.recompute import study_recompute_any

    study, model, ids = answered
    study_recompute_any(study_id=study.pk)
    first = study_workers(study=study)
    with django_assert_max_num_queries(9):  # three reads
        assert [r.user_id for r in study_workers(study=study)] == [r.user_id for r in first]
        by_answers = [r.answers for r in study_workers(study=study, sort="answers",
                                                       descending=True)]
        assert by_answers == sorted(by_answers, reverse=True)
        assert workers_compact(study=study).workers == sum(1 for r in first if r.answers)
    worker = first[0]
    exclusion_add(study=study, by=researcher_of(study), kind="worker",
                  worker_id=worker.user_id, reason="r")
    again = {r.user_id: r for r in study_workers(study=study)}
    assert again[worker.user_id].worker_excluded and not worker.worker_excluded
    assert again[worker.user_id].excluded > worker.excluded == 0  # not the cached rows
    study_recompute_any(study_id=study.pk)
    with CaptureQueriesContext(connection) as cold:
        study_workers(study=study)
    assert len(cold) > 3  # a new snapshot: the answers read once more
    with django_assert_max_num_queries(3):
        study_workers(study=study)
    newcomer = UserFactory()
    role = worker_role(study)
    StudyMembership.objects.create(study=study, user=newcomer, role=role, study_class_id=(
        StudyMembership.objects.filter(study=study, role=role)
        .values_list("study_class_id", flat=True).first()))
    assert newcomer.pk in {r.user_id for r in study_workers(study=study)}
