"""Reviews of answers (``core.reviews``), every study type: a rejected answer leaves the
estimates exactly as if it had never been given, an undo brings it back, who may review,
the disagreements each type finds, and the dashboards' count of rejected answers."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.urls import reverse

from annotations.core.errors import NotPermitted
from annotations.core.reviews.registry import reviewable
from annotations.core.reviews.selectors import (
    UnknownAnswer,
    item_in_context,
    study_answer,
    study_answers,
    study_disagreements,
    study_review_counts,
)
from annotations.core.reviews.services import (
    InvalidReview,
    NothingToUndo,
    answer_rejection_undo,
    answer_review,
)
from annotations.core.services.studies import study_roles
from annotations.models import AnswerReview, Study, StudyEvent, StudyMembership
from tests.annotations.core.review_helpers import (
    assisted_answered,
    critique_answered,
    estimates_of,
    estimates_without,
    partitioned_answered,
    researcher_of,
    reviewer_of,
)
from tests.factories import UserFactory, role_user

pytestmark = pytest.mark.django_db



def test_every_study_type_offers_the_reviewer_role_on_its_members_page():
    for kind in Study.Kind.values:
        assert StudyMembership.Role.REVIEWER in dict(study_roles(kind))


def test_a_rejected_answer_leaves_the_estimates_as_if_never_given_and_undo_restores_it(
        answered, django_capture_on_commit_callbacks):
    study, model, ids = answered
    reviewer = reviewer_of(study)
    answer_id = ids[0]
    before = estimates_of(study)
    without = estimates_without(study, model, [answer_id])
    assert without != before  # the answer counts: leaving it out changes the estimates

    with django_capture_on_commit_callbacks() as callbacks:
        review = answer_review(study=study, answer_id=answer_id, accept=False,
                               reason=" Answered without reading the item. ", by=reviewer)
    assert len(callbacks) == 1  # the study's recompute (study_recompute_schedule)
    assert (review.state, review.reason, review.reviewed_by_id) == (
        "rejected", "Answered without reading the item.", reviewer.pk)
    assert estimates_of(study) == without
    assert model.objects.filter(pk=answer_id).exists()  # kept, with its reason

    with django_capture_on_commit_callbacks() as callbacks:
        undone = answer_rejection_undo(study=study, answer_id=answer_id, by=reviewer)
    assert len(callbacks) == 1
    assert (undone.state, undone.reason, undone.undone_by_id) == (
        "undone", "Answered without reading the item.", reviewer.pk)
    assert estimates_of(study) == before
    kinds = list(StudyEvent.objects.filter(study=study, kind__startswith="answer_")
                 .values_list("kind", flat=True))
    assert kinds == ["answer_rejected", "answer_restored"]


def test_accepting_keeps_the_answer_and_does_not_recompute(answered,
                                                           django_capture_on_commit_callbacks):
    study, _model, ids = answered
    before = estimates_of(study)
    with django_capture_on_commit_callbacks() as callbacks:
        review = answer_review(study=study, answer_id=ids[1], accept=True, by=reviewer_of(study))
    assert review.state == "accepted" and callbacks == []
    assert estimates_of(study) == before
    assert study_answer(study=study, answer_id=ids[1]).state == "accepted"


def test_accepting_a_rejected_answer_brings_it_back(answered):
    study, _model, ids = answered
    reviewer = reviewer_of(study)
    before = estimates_of(study)
    answer_review(study=study, answer_id=ids[0], accept=False, reason="wrong", by=reviewer)
    assert estimates_of(study) != before
    answer_review(study=study, answer_id=ids[0], accept=True, by=researcher_of(study))
    assert estimates_of(study) == before
    assert AnswerReview.objects.filter(study=study).count() == 1


def test_a_rejection_needs_a_reason_and_an_undo_a_rejection(answered):
    study, _model, ids = answered
    reviewer = reviewer_of(study)
    with pytest.raises(InvalidReview):
        answer_review(study=study, answer_id=ids[0], accept=False, reason="  ", by=reviewer)
    with pytest.raises(InvalidReview):
        answer_review(study=study, answer_id=ids[0], accept=False, reason="x" * 2001,
                      by=reviewer)
    with pytest.raises(NothingToUndo):
        answer_rejection_undo(study=study, answer_id=ids[0], by=reviewer)
    assert not AnswerReview.objects.filter(study=study).exists()


def test_only_the_studys_reviewers_and_researchers_review_and_never_another_studys_answers():
    study, _model, ids = partitioned_answered()
    other, _m, other_ids = partitioned_answered()
    outsider_reviewer = reviewer_of(other)
    for user in (role_user(study, "manager"), role_user(study, "spec0-0"), UserFactory(),
                 outsider_reviewer):
        with pytest.raises(NotPermitted):
            answer_review(study=study, answer_id=ids[0], accept=False, reason="no",
                          by=user)
    # the study's own reviewer may not reach another study's answer through it
    with pytest.raises(UnknownAnswer):
        answer_review(study=study, answer_id=other_ids[0], accept=False, reason="no",
                      by=reviewer_of(study))
    assert not AnswerReview.objects.exists()
    answer_review(study=study, answer_id=ids[0], accept=False, reason="no",
                  by=role_user(study, "researcher"))
    assert AnswerReview.objects.get().study_id == study.pk


def test_quality_checks_and_ai_outputs_are_not_answers_to_review():
    study, _model, _ids = critique_answered()
    from annotations.models import CritiqueOutput

    ai = CritiqueOutput.objects.filter(study=study, author_kind="ai").first()
    if ai is not None:
        with pytest.raises(UnknownAnswer):
            study_answer(study=study, answer_id=ai.pk)
    with pytest.raises(UnknownAnswer):
        study_answer(study=study, answer_id=2**70)


def test_the_answer_list_filters_by_review(answered):
    study, _model, ids = answered
    reviewer = reviewer_of(study)
    answer_review(study=study, answer_id=ids[0], accept=False, reason="wrong", by=reviewer)
    answer_review(study=study, answer_id=ids[1], accept=True, by=reviewer)
    rejected, n = study_answers(study=study, state="rejected")
    assert n == 1 and [a.answer.id for a in rejected] == [ids[0]]
    assert rejected[0].reason == "wrong" and rejected[0].reviewed_by == reviewer.username
    _, n_all = study_answers(study=study, state="all")
    assert n_all == reviewable(study.kind).answers(study).count()
    _, n_open = study_answers(study=study, state="unreviewed")
    assert n_open == n_all - 2
    answer_rejection_undo(study=study, answer_id=ids[0], by=reviewer)
    _, n_open = study_answers(study=study, state="unreviewed")
    assert n_open == n_all - 1  # a rejection undone is to be reviewed again
    assert study_review_counts(study=study) == {"accepted": 1, "rejected": 0, "undone": 1}


def test_an_item_in_context_shows_every_answer_and_no_gold(answered):
    study, _model, ids = answered
    view = study_answer(study=study, answer_id=ids[0]).answer
    context = item_in_context(study=study, item_id=view.item_id)
    assert ids[0] in [a.answer.id for a in context.answers]
    assert context.item.text and context.item.external_id == view.item
    assert "gold" not in json.dumps(context.item.__dict__, default=str)


def test_assisted_disagreements_are_sentences_whose_raters_differ():
    study, _model, _ids = assisted_answered()
    found = study_disagreements(study=study)
    assert found, "the raters' first sentences disagree"
    for d in found:
        labels = set(study.ratings.filter(sentence_id=d.item_id).values_list("label",
                                                                               flat=True))
        assert len(labels) >= 2 and len(d.answer_ids) >= 2 and "×" in d.summary


def test_critique_disagreements_are_questions_whose_votes_differ():
    study, _model, _ids = critique_answered()
    found = study_disagreements(study=study)
    assert found
    from annotations.models import CritiqueOutput

    for d in found:
        finals = CritiqueOutput.objects.filter(question_id=d.item_id, author_kind="human")
        assert finals.values("level", "final").distinct().count() > finals.values(
            "level").distinct().count()


def test_partitioned_disagreements_are_items_whose_queries_contradict(settings):
    from annotations.partitioned.services.labels import label_submit
    from annotations.partitioned.services.routing import query_lease_next
    from tests.factories import make_study, specialist

    settings.OVERSIGHT_UNDO_SECONDS = 0
    study = make_study(k=2, n_items=4, queries_per_item=2)
    for _round in range(2):
        for c in (0, 1):
            user = specialist(study, c)
            while (q := query_lease_next(study=study, user=user)) is not None:
                label_submit(query_id=q.pk, user=user, answer="no")  # no to both classes
    found = study_disagreements(study=study)
    assert found and all(d.summary == "No ×2" and len(d.answer_ids) == 2 for d in found)


# --- the dashboards ----------------------------------------------------------------------

def test_each_dashboard_says_how_many_answers_were_rejected(answered, client):
    study, _model, ids = answered
    researcher = researcher_of(study)
    client.force_login(researcher)
    dashboard = reverse("dashboard", args=[study.pk])
    assert 'data-testid="rejected-note"' not in client.get(dashboard).content.decode()
    answer_review(study=study, answer_id=ids[0], accept=False, reason="wrong",
                  by=reviewer_of(study))
    answer_review(study=study, answer_id=ids[1], accept=False, reason="wrong",
                  by=reviewer_of(study, "second-reviewer"))
    noun = reviewable(study.kind).noun
    html = client.get(dashboard).content.decode()
    assert f"2 {noun}s rejected by reviewers, left out of the estimates" in html
    assert reverse("review", args=[study.pk]) in html


def test_every_partitioned_label_reader_leaves_a_rejected_label_out():
    """The raw statements (bands, item labels, the evaluation service's rows) as well as the
    ORM counts: one shared condition, ``AnswerReview.not_rejected_sql``."""
    from annotations.partitioned.selectors import (
        study_first_query_answers,
        study_label_counts,
        study_label_counts_banded,
        study_label_rows,
    )

    study, _model, ids = partitioned_answered()
    rejected = ids[0]

    def counts():
        banded = [float(study_label_counts_banded(study=study, ordinals=[0], banded=[0],
                                                  n_bands=2, strategy=s)[0].n.sum())
                  for s in ("grouped", "sums", *(("arrays",) if connection.vendor ==
                                                 "postgresql" else ()))]
        firsts = sum(sum(v.values()) for v in study_first_query_answers(study=study).values())
        return (float(study_label_counts(study=study, ordinals=[0]).n.sum()), *banded, firsts,
                len(study_label_rows(study=study)[0]))

    before = counts()
    answer_review(study=study, answer_id=rejected, accept=False, reason="wrong",
                  by=reviewer_of(study))
    after = counts()
    assert after[:-1] == tuple(n - 1 for n in before[:-1])
    from annotations.models import Query

    if Query.objects.get(pk=rejected).answer in ("yes", "no"):  # item rows: yes/no only
        assert after[-1] == before[-1] - 1


def test_a_partitioned_label_taken_back_by_its_specialist_loses_its_review(settings):
    """Undo reuses the query for the next answer: a rejection of the answer taken back must
    not leave the next answer out of the estimates."""
    from annotations.models import Query
    from annotations.partitioned.services.labels import label_submit, label_undo
    from annotations.partitioned.services.routing import query_lease_next
    from tests.factories import make_study, specialist

    settings.OVERSIGHT_UNDO_SECONDS = 3600
    study = make_study(k=2, n_items=2)
    user = specialist(study, 0)
    q = query_lease_next(study=study, user=user)
    label_submit(query_id=q.pk, user=user, answer="yes")
    answer_review(study=study, answer_id=q.pk, accept=False, reason="too fast",
                  by=reviewer_of(study))
    label_undo(study=study, user=user)
    assert not AnswerReview.objects.filter(study=study).exists()
    label_submit(query_id=q.pk, user=user, answer="no")
    assert Query.objects.get(pk=q.pk).answer == "no"
    assert study_answer(study=study, answer_id=q.pk).state == ""
