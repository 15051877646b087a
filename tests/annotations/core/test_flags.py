"""Flags on items (``core.services.flags``), for every study type: who may flag which
item, a repeat flag, the researcher's resolutions, and what a withdrawn item stops doing
(being handed out, counting in the estimates)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotations.assisted.services.analysis import assisted_rows
from annotations.assisted.services.rating import (
    RatingInput,
    rater_progress,
    rating_lease_next,
    rating_skip,
    rating_submit,
)
from annotations.core.errors import NotPermitted
from annotations.core.services.flags import (
    InvalidFlag,
    UnknownTask,
    flag_item,
    flag_resolve,
)
from annotations.core.services.studies import membership_add
from annotations.critique.services.analysis import critique_payload, study_records
from annotations.critique.services.assignment import critique_task_next
from annotations.models import (
    CritiqueTask,
    ItemFlag,
    Query,
    RatingTask,
    StudyMembership,
)
from annotations.partitioned.selectors import (
    specialist_progress,
    study_first_query_answers,
    study_item_labels,
    study_label_counts,
    study_population,
)
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next, query_skip
from tests.annotations.assisted.helpers import add_rater, make_assisted_study
from tests.annotations.critique.helpers import answer_next, make_critique_study
from tests.factories import UserFactory, make_study, role_user, specialist

pytestmark = pytest.mark.django_db

Resolution = ItemFlag.Resolution


def _partitioned():
    """(study, worker, their leased task's public id, its item's id)."""
    study = make_study(k=2, n_items=6, specialists_per_class=2)
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    return study, user, q.public_id, q.item_id


def _assisted():
    study = make_assisted_study(n_sentences=4)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    return study, user, task.public_id, task.sentence_id


def _researcher(study):
    """The study's researcher (made by the partitioned and assisted builders; added here for
    critique studies)."""
    user = UserFactory(username=f"{study.pk}-researcher", is_staff=True)
    membership_add(study=study, user=user, role=StudyMembership.Role.RESEARCHER)
    return user


def _critique():
    study, users = make_critique_study(n_questions=3, top_level=1)
    _researcher(study)
    task = critique_task_next(study=study, user=users[0])
    return study, users[0], task.public_id, task.question_id


def _worker(study):
    """A new worker of the study who holds nothing yet."""
    user = UserFactory()
    if study.kind == "partitioned":
        membership_add(study=study, user=user, role=StudyMembership.Role.SPECIALIST,
                       class_index=0)
    else:
        membership_add(study=study, user=user, role=StudyMembership.Role.ANNOTATOR)
    return user


TYPES = [_partitioned, _assisted, _critique]


@pytest.fixture(params=TYPES, ids=["partitioned", "assisted", "critique"])
def held(request):
    return request.param()


def test_a_worker_flags_the_item_of_the_task_they_hold(held):
    study, user, public_id, item_id = held
    flag, created = flag_item(study=study, user=user, public_id=public_id, reason="broken",
                              note="  The options are cut off. ")
    assert created is True
    assert (flag.study_id, flag.item_id, flag.user_id, flag.reason, flag.note,
            flag.resolution) == (study.pk, item_id, user.pk, "broken",
                                 "The options are cut off.", Resolution.OPEN)


def test_a_repeat_flag_rewrites_the_first_and_reopens_it(held):
    study, user, public_id, item_id = held
    researcher = role_user(study, "researcher")
    flag_item(study=study, user=user, public_id=public_id, reason="broken")
    flag_resolve(study=study, item_id=item_id, resolution=Resolution.DISMISSED, user=researcher)
    flag, created = flag_item(study=study, user=user, public_id=public_id,
                              reason="ambiguous", note="B and C both fit.")
    assert created is False
    assert ItemFlag.objects.filter(study=study).count() == 1
    assert (flag.reason, flag.note, flag.resolution, flag.resolved_at) == (
        "ambiguous", "B and C both fit.", Resolution.OPEN, None)


def test_a_task_never_shown_to_the_worker_is_unknown_whether_or_not_it_exists(held):
    study, user, public_id, _ = held
    other = _worker(study)
    for probe in (public_id, "no-such-task"):
        with pytest.raises(UnknownTask) as refused:
            flag_item(study=study, user=other, public_id=probe, reason="broken")
        assert refused.value.message == f"No task '{probe}' of yours in this study."
    assert not ItemFlag.objects.filter(study=study).exists()


def test_only_the_study_workers_flag(held):
    study, _, public_id, _ = held
    for outsider in (UserFactory(), role_user(study, "researcher")):
        with pytest.raises(NotPermitted):
            flag_item(study=study, user=outsider, public_id=public_id, reason="broken")
    assert not ItemFlag.objects.filter(study=study).exists()


def test_reason_and_note_are_checked(held):
    study, user, public_id, _ = held
    with pytest.raises(InvalidFlag) as bad_reason:
        flag_item(study=study, user=user, public_id=public_id, reason="boring")
    with pytest.raises(InvalidFlag) as long_note:
        flag_item(study=study, user=user, public_id=public_id, reason="broken",
                  note="x" * (ItemFlag.NOTE_MAX + 1))
    assert (bad_reason.value.field, long_note.value.field) == ("reason", "note")
    assert not ItemFlag.objects.filter(study=study).exists()


def test_a_task_answered_earlier_can_still_be_flagged():
    study = make_study(k=2, n_items=6)
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    label_submit(query_id=q.pk, user=user, answer="no")
    flag, _ = flag_item(study=study, user=user, public_id=q.public_id, reason="ambiguous")
    assert flag.item_id == q.item_id


def test_resolutions_are_the_researchers_and_change_only_open_flags(held):
    study, user, public_id, item_id = held
    flag_item(study=study, user=user, public_id=public_id, reason="broken")
    with pytest.raises(NotPermitted):
        flag_resolve(study=study, item_id=item_id, resolution=Resolution.FIXED, user=user)
    researcher = role_user(study, "researcher")
    assert flag_resolve(study=study, item_id=item_id, resolution=Resolution.FIXED,
                        user=researcher) == 1
    assert flag_resolve(study=study, item_id=item_id, resolution=Resolution.DISMISSED,
                        user=researcher) == 0
    flag = ItemFlag.objects.get(study=study)
    assert (flag.resolution, flag.resolved_by_id) == (Resolution.FIXED, researcher.pk)
    assert flag.resolved_at is not None


def test_a_withdrawn_item_stays_withdrawn_when_flagged_again(held):
    study, user, public_id, item_id = held
    flag_item(study=study, user=user, public_id=public_id, reason="broken")
    flag_resolve(study=study, item_id=item_id, resolution=Resolution.WITHDRAWN,
                 user=role_user(study, "researcher"))
    flag, _ = flag_item(study=study, user=user, public_id=public_id, reason="ambiguous")
    assert flag.resolution == Resolution.WITHDRAWN
    assert list(ItemFlag.withdrawn_ids(study).values_list("item_id", flat=True)) == [item_id]


def test_a_new_flag_on_a_withdrawn_item_is_born_withdrawn(settings):
    settings.OVERSIGHT_UNDO_SECONDS = 0  # the follow-up is not held for the answer's undo
    study = make_study(k=2, n_items=4, queries_per_item=2)
    first, other = specialist(study, 0), specialist(study, 1)
    q = query_lease_next(study=study, user=first)
    label_submit(query_id=q.pk, user=first, answer="no")  # routes its class-1 query
    while (follow_up := query_lease_next(study=study, user=other)).item_id != q.item_id:
        query_skip(query_id=follow_up.pk, user=other)
    flag_item(study=study, user=first, public_id=q.public_id, reason="broken")
    flag_resolve(study=study, item_id=q.item_id, resolution=Resolution.WITHDRAWN,
                 user=role_user(study, "researcher"))
    flag, created = flag_item(study=study, user=other, public_id=follow_up.public_id,
                              reason="ambiguous")
    assert created and flag.resolution == Resolution.WITHDRAWN


# --- what withdrawing does ---------------------------------------------------------------

def test_partitioned_withdrawn_item_is_not_handed_out_and_leaves_the_estimates(settings):
    settings.OVERSIGHT_UNDO_SECONDS = 0  # the follow-up is not held for the answer's undo
    study = make_study(k=2, n_items=6, queries_per_item=2)
    first = specialist(study, 0)
    q = query_lease_next(study=study, user=first)
    label_submit(query_id=q.pk, user=first, answer="no")  # routes the item's next query
    flag_item(study=study, user=first, public_id=q.public_id, reason="broken")
    flag_resolve(study=study, item_id=q.item_id, resolution=Resolution.WITHDRAWN,
                 user=role_user(study, "researcher"))
    follow_up = Query.objects.get(item_id=q.item_id, sequence=1)
    handed = []
    for user in (first, specialist(study, 1)):
        while (nxt := query_lease_next(study=study, user=user)) is not None:
            handed.append(nxt.item_id)
            label_submit(query_id=nxt.pk, user=user, answer="no")
    assert handed and q.item_id not in handed
    assert Query.objects.get(pk=follow_up.pk).status == Query.Status.PENDING
    # nothing left to hand out: the page says so (the withdrawn item's query is not counted)
    progress = specialist_progress(user=specialist(study, 1), study=study)
    assert (progress["remaining"], progress["waiting"]) == (0, 0)

    # the estimates count every answered query except the withdrawn item's
    answered = Query.objects.filter(study=study, status="answered", is_quality_check=False)
    assert answered.filter(item_id=q.item_id).count() == 1
    assert study_label_counts(study=study, ordinals=[]).n.sum() == answered.count() - 1
    firsts = study_first_query_answers(study=study)
    assert sum(n for by_answer in firsts.values() for n in by_answer.values()) == (
        answered.filter(sequence=0).exclude(item_id=q.item_id).count())
    labels = study_item_labels(study=study, ordinals=[])
    assert labels.n_items == answered.exclude(item_id=q.item_id).values("item_id").distinct(
    ).count()
    # the dashboard's per-class table agrees: no pending query of the withdrawn item
    from annotations.partitioned.selectors import study_class_progress

    rows = study_class_progress(study=study)
    assert sum(r.pending for r in rows) == Query.objects.filter(
        study=study, status="pending", is_quality_check=False).exclude(
        item_id=q.item_id).count()
    assert sum(r.yes + r.no + r.unsure for r in rows) == answered.count() - 1


def test_assisted_withdrawn_sentence_is_not_handed_out_and_leaves_the_estimates():
    study = make_assisted_study(n_sentences=3, ratings_per_item=2)
    first = add_rater(study)
    task = rating_lease_next(study=study, user=first)
    rating_submit(user=first, public_id=task.public_id, data=RatingInput("accurate", 2))
    assert task.sentence_id in set(assisted_rows(study=study).sentence_id)
    flag_item(study=study, user=first, public_id=task.public_id, reason="ambiguous")
    flag_resolve(study=study, item_id=task.sentence_id, resolution=Resolution.WITHDRAWN,
                 user=role_user(study, "researcher"))
    handed = []
    for _ in range(4):
        rater = add_rater(study)
        while (nxt := rating_lease_next(study=study, user=rater)) is not None:
            handed.append(nxt.sentence_id)
            rating_skip(user=rater, public_id=nxt.public_id)
    assert handed and task.sentence_id not in handed
    assert rater_progress(study=study, user=add_rater(study))["remaining"] == (
        RatingTask.objects.filter(study=study, status="pending")
        .exclude(sentence_id=task.sentence_id).values("sentence_id").distinct().count())
    assert RatingTask.objects.filter(sentence_id=task.sentence_id, status="pending").exists()
    rows = assisted_rows(study=study)
    assert task.sentence_id not in set(rows.sentence_id)
    assert len(rows.rating_item) == 0  # the one rating was of the withdrawn sentence


def test_critique_withdrawn_question_is_not_handed_out_and_leaves_the_estimates():
    study, users = make_critique_study(n_questions=3, top_level=1)
    task, _ = answer_next(study, users[0])
    flag_item(study=study, user=users[0], public_id=task.public_id, reason="broken")
    flag_resolve(study=study, item_id=task.question_id, resolution=Resolution.WITHDRAWN,
                 user=_researcher(study))
    handed = []
    for user in users[1:]:
        while (done := answer_next(study, user))[0] is not None:
            handed.append(done[0].question_id)
    assert handed and task.question_id not in handed
    assert CritiqueTask.objects.filter(question_id=task.question_id, status="pending").exists()
    questions, outputs = study_records(study)
    assert task.question_id not in {q[0] for q in questions}
    assert task.question_id not in {o[1] for o in outputs}
    payload = critique_payload(study)
    assert payload["n_questions"] == 2 == len(questions)
    level0 = next(row for row in payload["progress"] if row["level"] == 0)
    assert level0["answered"] == CritiqueTask.objects.filter(
        study=study, level=0, status="answered").exclude(question_id=task.question_id).count()


# --- the API (one endpoint for every study type) -----------------------------------------

def _api(user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    return client


def test_api_flags_in_the_same_shape_for_every_type(held):
    study, user, public_id, item_id = held
    url = reverse("api-flags", args=[study.pk])
    first = _api(user).post(url, {"task": public_id, "reason": "broken", "note": "Cut off."},
                            format="json")
    again = _api(user).post(url, {"task": public_id, "reason": "ambiguous"}, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert set(first.json()) == {"task", "reason", "note", "flagged_at"}
    assert (first.json()["task"], first.json()["reason"], first.json()["note"]) == (
        public_id, "broken", "Cut off.")
    assert (again.json()["reason"], again.json()["note"]) == ("ambiguous", "")
    # the keys above are all there is: nothing of the item (no id, no gold, no text)
    flag = ItemFlag.objects.get(study=study)
    assert (flag.item_id, flag.reason) == (item_id, "ambiguous")


def test_api_refusals_say_why_and_leak_nothing(held):
    study, user, public_id, _ = held
    url = reverse("api-flags", args=[study.pk])
    other = _worker(study)
    unseen = _api(other).post(url, {"task": public_id, "reason": "broken"}, format="json")
    missing = _api(other).post(url, {"task": "nope", "reason": "broken"}, format="json")
    assert (unseen.status_code, missing.status_code) == (404, 404)
    assert unseen.json()["code"] == missing.json()["code"] == "unknown_task"
    assert unseen.json()["detail"].replace(public_id, "?") == missing.json()["detail"].replace(
        "nope", "?")
    outsider = _api(UserFactory()).post(url, {"task": public_id, "reason": "broken"},
                                        format="json")
    assert outsider.status_code == 403
    bad = _api(user).post(url, {"task": public_id, "reason": "meh"}, format="json")
    assert bad.status_code == 400 and "reason" in bad.json()
    assert _api(user).post(reverse("api-flags", args=[10**9]),
                           {"task": public_id, "reason": "broken"},
                           format="json").status_code == 404
    assert not ItemFlag.objects.filter(study=study).exists()


def test_api_flag_endpoint_is_in_the_schema():
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    op = paths["/api/studies/{study_id}/flags/"]["post"]
    assert set(op["responses"]) >= {"200", "201", "403", "404"}


# --- the labelling pages' flag form (core.views.flag) ------------------------------------

def test_flag_form_on_the_labelling_page(held, client):
    study, user, public_id, item_id = held
    url = reverse("flag", args=[study.pk, public_id])
    client.force_login(user)
    form = client.get(url, HTTP_HX_REQUEST="true")
    assert form.status_code == 200 and b'name="reason"' in form.content
    missing = client.post(url, {"note": "?"})
    assert b"Choose a reason" in missing.content and b'name="reason"' in missing.content
    sent = client.post(url, {"reason": "broken", "note": "The text stops mid-sentence."})
    assert b"Flagged as broken" in sent.content
    assert ItemFlag.objects.get(study=study, user=user).item_id == item_id
    unseen = client.post(reverse("flag", args=[study.pk, "not-mine"]), {"reason": "broken"})
    assert b"No task &#x27;not-mine&#x27; of yours in this study." in unseen.content


def test_flag_form_is_for_the_study_labellers_only(held, client):
    study, _, public_id, _ = held
    url = reverse("flag", args=[study.pk, public_id])
    client.force_login(role_user(study, "researcher"))
    assert client.get(url).status_code == 403
    assert client.post(url, {"reason": "broken"}).status_code == 403
    assert not ItemFlag.objects.filter(study=study).exists()


@pytest.mark.parametrize("page", ["partitioned", "assisted", "critique"])
def test_every_labelling_page_offers_the_flag_key_and_button(page, client):
    study, user, public_id, _ = {"partitioned": _partitioned, "assisted": _assisted,
                                 "critique": _critique}[page]()
    client.force_login(user)
    path = {"partitioned": "label", "assisted": "rate", "critique": "critique"}[page]
    html = client.get(f"/studies/{study.pk}/{path}/").content.decode()
    assert 'data-key="!"' in html and reverse("flag", args=[study.pk, public_id]) in html
    assert "<kbd>!</kbd> flag a problem" in html


# --- the researchers' queue (core.admin.ItemFlagAdmin) ------------------------------------

QUEUE = "/admin/annotations/itemflag/"


def test_the_queue_lists_open_flags_first_with_the_item_and_counts(held, client):
    study, user, public_id, item_id = held
    flag_item(study=study, user=user, public_id=public_id, reason="ambiguous",
              note="Two options are the same.")
    researcher = role_user(study, "researcher")
    client.force_login(researcher)
    page = client.get(QUEUE, {"study__id__exact": study.pk})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Two options are the same." in html and "Open" in html
    rows = list(page.context["cl"].result_list)
    assert [(r.item_id, r.n_on_item) for r in rows] == [(item_id, 1)]
    if study.kind == "partitioned":
        assert reverse("admin:annotations_item_change", args=[item_id]) in html


def test_queue_actions_resolve_the_items_and_withdraw_recomputes(held, client,
                                                                  django_capture_on_commit_callbacks):
    study, user, public_id, item_id = held
    flag, _ = flag_item(study=study, user=user, public_id=public_id, reason="broken")
    researcher = role_user(study, "researcher")
    client.force_login(researcher)
    with django_capture_on_commit_callbacks() as callbacks:
        done = client.post(QUEUE, {"action": "withdraw_items", "_selected_action": [flag.pk]},
                           follow=True)
    assert "1 item withdrawn (1 flag)." in done.content.decode()
    assert len(callbacks) >= 1  # the study's recompute
    flag.refresh_from_db()
    assert (flag.resolution, flag.resolved_by_id) == ("withdrawn", researcher.pk)


def test_the_queue_shows_a_researcher_only_their_studies_flags(client):
    study, user, public_id, _ = _partitioned()
    flag_item(study=study, user=user, public_id=public_id, reason="broken")
    other = make_study(k=2, n_items=2)
    client.force_login(role_user(other, "researcher"))
    page = client.get(QUEUE)
    assert page.status_code == 200 and list(page.context["cl"].result_list) == []
    client.force_login(specialist(study, 0))
    assert client.get(QUEUE).status_code in (302, 403)


# --- what the dashboards say -------------------------------------------------------------

def test_each_dashboard_says_how_many_flagged_items_its_estimates_include(held, client):
    study, user, public_id, item_id = held
    dashboard = reverse("dashboard", args=[study.pk])
    researcher = role_user(study, "researcher")
    manager = UserFactory()
    membership_add(study=study, user=manager, role=StudyMembership.Role.MANAGER)
    client.force_login(researcher)
    assert 'data-testid="flagged-note"' not in client.get(dashboard).content.decode()

    flag_item(study=study, user=user, public_id=public_id, reason="broken")
    noun = {"partitioned": "item", "assisted": "sentence", "critique": "question"}[study.kind]
    html = client.get(dashboard).content.decode()
    assert f"The estimates include <strong>1 flagged {noun}</strong>" in html
    assert f'{reverse("review", args=[study.pk])}?show=flags' in html  # the queue, researchers'
    client.force_login(manager)
    html = client.get(dashboard).content.decode()
    assert f"1 flagged {noun}" in html and 'data-testid="flag-queue"' not in html

    flag_resolve(study=study, item_id=item_id, resolution=Resolution.WITHDRAWN,
                 user=researcher)
    html = client.get(dashboard).content.decode()
    assert f"1 withdrawn {noun} left out" in html and "flagged " + noun not in html


def test_partitioned_withdrawn_item_leaves_the_stratified_estimate_population():
    study = make_study(k=2, n_items=8, strata=2)
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    assert study_population(study=study) == study.stratum_sizes
    flag_item(study=study, user=user, public_id=q.public_id, reason="broken")
    flag_resolve(study=study, item_id=q.item_id, resolution=Resolution.WITHDRAWN,
                 user=role_user(study, "researcher"))
    expected = dict(study.stratum_sizes)
    expected[q.item.stratum] -= 1
    assert study_population(study=study) == expected
