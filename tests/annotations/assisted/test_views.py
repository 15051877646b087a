"""Rater pages: tutorial and quiz before the first sentence, the assistant's warning in
assisted arms, rating through htmx, and the interactions the page posts (stored with the
server's time, refused for anything not on the rater's screen)."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse
from django.utils import timezone

from annotations.assisted.services.design import DEFAULT_QUIZ
from annotations.assisted.services.rating import rating_lease_next
from annotations.models import Exposure, Interaction, Rating, RatingTask
from tests.annotations.assisted.helpers import add_rater, make_assisted_study, rater_in_arm

pytestmark = pytest.mark.django_db

DEBATE = ["search", "evidence", "reasoning", "judgments", "debate"]


@pytest.fixture(autouse=True)
def no_min_time(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0


def test_tutorial_quiz_then_warning_then_rating(client):
    study = make_assisted_study(n_sentences=2, arms={"E": ["search", "evidence"]})
    user = None
    while user is None:  # a fresh rater drawn into the assisted arm, quiz not yet taken
        candidate = add_rater(study, ready=False)
        if candidate.rater_assignments.get().components:
            user = candidate
    client.force_login(user)
    page = client.get(reverse("rate", args=[study.pk])).content.decode()
    assert 'data-testid="tutorial"' in page and 'data-testid="quiz"' in page
    for q in DEFAULT_QUIZ:
        assert html.escape(q["question"]) in page
    wrong = {f"q{i}": str((q["answer"] + 1) % len(q["options"]))
             for i, q in enumerate(DEFAULT_QUIZ)}
    page = client.post(reverse("rate-quiz", args=[study.pk]), wrong).content.decode()
    assert 'data-testid="quiz-failed"' in page and DEFAULT_QUIZ[0]["explain"] in page
    right = {f"q{i}": str(q["answer"]) for i, q in enumerate(DEFAULT_QUIZ)}
    response = client.post(reverse("rate-quiz", args=[study.pk]), right)
    assert response.status_code == 302
    page = client.get(reverse("rate", args=[study.pk])).content.decode()
    assert 'data-testid="assistant-warning"' in page and "makes mistakes" in page
    client.post(reverse("rate-warning", args=[study.pk]))
    page = client.get(reverse("rate", args=[study.pk])).content.decode()
    assert "Get the next sentence" in page
    fragment = client.post(reverse("rate-next", args=[study.pk]),
                           HTTP_HX_REQUEST="true").content.decode()
    task = RatingTask.objects.get(holder=user)
    assert 'data-testid="ai-panel"' in fragment and "could be misleading" in fragment
    assert f'data-query-id="{task.public_id}"' in fragment
    answer = reverse("rate-answer", args=[study.pk, task.public_id])
    refused = client.post(answer, {"label": "accurate", "confidence": "2"},
                          HTTP_HX_REQUEST="true").content.decode()
    assert "helpfulness" in refused and not Rating.objects.exists()
    done = client.post(answer, {"label": "accurate", "confidence": "2", "helpfulness": "1",
                                "comment": "useful quotes"},
                       HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="recorded"' in done and "Recorded: Accurate" in done
    rating = Rating.objects.get(rater=user)
    assert (rating.helpfulness, rating.comment) == (1, "useful quotes")
    assert rating.exposure.via == "page"


def test_a_non_member_gets_403(client):
    study = make_assisted_study(n_sentences=1)
    from tests.factories import UserFactory

    client.force_login(UserFactory())
    assert client.get(reverse("rate", args=[study.pk])).status_code == 403


def leased_on_the_page(client, arm: str):
    """An open study with an evidence arm; a rater of ``arm``, signed in, holding the task
    the rating page leased them."""
    study = make_assisted_study(n_sentences=2, arms={"E": ["search", "evidence"]})
    user = rater_in_arm(study, arm)
    client.force_login(user)
    client.post(reverse("rate-next", args=[study.pk]), HTTP_HX_REQUEST="true")
    return study, user, RatingTask.objects.get(holder=user)


def post_event(client, study, task, **body):
    return client.post(reverse("rate-event", args=[study.pk, task.public_id]), body,
                       content_type="application/json")


def test_interactions_are_stored_with_server_time_for_what_was_shown(client):
    study, user, task = leased_on_the_page(client, "E")
    before = timezone.now()
    assert post_event(client, study, task, kind="expand", section="evidence",
                      client_ms=1234).status_code == 204
    assert post_event(client, study, task, kind="open_link", section="evidence",
                      target="evidence:1").status_code == 204
    assert post_event(client, study, task, kind="open_link", section="search",
                      target="search:0:0").status_code == 204
    events = list(Interaction.objects.filter(task=task).order_by("pk"))
    assert [(e.kind, e.section, e.target) for e in events] == [
        ("expand", "evidence", ""), ("open_link", "evidence", "evidence:1"),
        ("open_link", "search", "search:0:0")]
    assert events[0].client_ms == 1234 and all(e.at >= before for e in events)
    exposure = Exposure.objects.get(task=task, via="page")
    assert all(e.exposure_id == exposure.pk for e in events)
    for body, field in (({"kind": "expand", "section": "reasoning"}, "section"),
                        ({"kind": "open_link", "section": "evidence",
                          "target": "evidence:9"}, "target"),
                        ({"kind": "open_link", "section": "search",
                          "target": "search:3:0"}, "target"),
                        ({"kind": "wiggle", "section": "evidence"}, "kind")):
        response = post_event(client, study, task, **body)
        assert response.status_code == 400 and response.json()["field"] == field
    assert Interaction.objects.filter(task=task).count() == 3


def test_debate_interactions_name_the_trace(client):
    study = make_assisted_study(n_sentences=2, arms={"D": DEBATE})
    user = rater_in_arm(study, "D")
    client.force_login(user)
    page = client.post(reverse("rate-next", args=[study.pk]),
                       HTTP_HX_REQUEST="true").content.decode()
    assert page.count('class="ai-trace debate"') == 2
    task = RatingTask.objects.get(holder=user)
    assert post_event(client, study, task, kind="expand", section="reasoning",
                      trace=1).status_code == 204
    assert post_event(client, study, task, kind="open_link", section="evidence",
                      target="evidence:1", trace=0).status_code == 204
    assert post_event(client, study, task, kind="expand", section="reasoning",
                      trace=2).status_code == 400
    assert list(Interaction.objects.filter(task=task).values_list("target", flat=True)) == [
        "@1", "evidence:1@0"]


def test_a_baseline_rater_has_no_panel_to_interact_with(client):
    study = make_assisted_study(n_sentences=2)
    user = add_rater(study)
    task = rating_lease_next(study=study, user=user)
    client.force_login(user)
    client.get(reverse("rate", args=[study.pk]))
    response = post_event(client, study, task, kind="expand", section="evidence")
    assert response.status_code == 400 and not Interaction.objects.exists()


def test_heartbeat_and_skip_through_the_page(client):
    study = make_assisted_study(n_sentences=2, ratings_per_item=1)
    user = add_rater(study)
    client.force_login(user)
    client.post(reverse("rate-next", args=[study.pk]), HTTP_HX_REQUEST="true")
    task = RatingTask.objects.get(holder=user)
    beat = client.post(reverse("rate-heartbeat", args=[study.pk, task.public_id]))
    assert beat.status_code == 200 and 'id="lease"' in beat.content.decode()
    page = client.post(reverse("rate-skip", args=[study.pk, task.public_id]),
                       HTTP_HX_REQUEST="true").content.decode()
    assert "Skipped" in page or "data-query-id" in page
    task.refresh_from_db()
    assert task.status == "pending"
    other = client.post(reverse("rate-heartbeat", args=[study.pk, task.public_id]))
    assert other.status_code == 409


def test_a_blind_arm_rating_on_the_page_records_that_nothing_was_shown(client):
    # issue 17: ratings of the baseline arm stored no exposure, so the dashboard warned
    # that they "do not record what their rater was shown"
    study, user, task = leased_on_the_page(client, "Baseline")
    client.post(reverse("rate-answer", args=[study.pk, task.public_id]),
                {"label": "accurate", "confidence": "2"}, HTTP_HX_REQUEST="true")
    rating = Rating.objects.get(rater=user)
    exposure = rating.exposure
    assert exposure is not None and exposure.via == "page"
    assert (exposure.components, exposure.trace_ids, exposure.arm.name) == ([], [], "Baseline")


def test_researchers_and_managers_read_the_raters_comments_paged_raters_never(client,
                                                                              monkeypatch):
    """Issue 17: the raters' comments on their ratings, newest first, a page at a time, for
    the study's researchers and managers; a rater (or an outsider) gets 403 and the rating
    page shows no other rater's comment."""
    from annotations.assisted import views
    from annotations.assisted.services.rating import RatingInput, rating_submit
    from annotations.core.services.studies import membership_add
    from tests.factories import UserFactory

    monkeypatch.setattr(views, "COMMENTS_PER_PAGE", 2)
    study = make_assisted_study(n_sentences=4, arms={"E": ["search", "evidence"]})
    raters = [rater_in_arm(study, "E"), rater_in_arm(study, "Baseline")]
    written = []
    for i in range(3):
        rater = raters[i % 2]
        task = rating_lease_next(study=study, user=rater)
        comment = f"<b>note {i}</b> from {rater.username}" if i != 1 else ""
        rating_submit(user=rater, public_id=task.public_id,
                      data=RatingInput("accurate", 2, 1 if i % 2 == 0 else None, comment))
        if comment:
            written.append(comment)
    url = reverse("assisted-comments", args=[study.pk])
    for role in ("manager", "researcher"):
        reader = UserFactory()
        membership_add(study=study, user=reader, role=role)
        client.force_login(reader)
        dashboard = client.get(reverse("dashboard", args=[study.pk])).content.decode()
        assert f'href="{url}"' in dashboard
        first = client.get(url).content.decode()
        # newest first, escaped, the empty comment left out
        assert html.escape(written[1]) in first and html.escape(written[0]) in first
        assert first.index(html.escape(written[1])) < first.index(html.escape(written[0]))
        assert first.count('data-testid="comment"') == 2 and "<b>note" not in first
        assert "Page 1 of 1" not in first  # 2 comments fit one page of 2
    monkeypatch.setattr(views, "COMMENTS_PER_PAGE", 1)
    second = client.get(url, {"page": 2}).content.decode()
    assert second.count('data-testid="comment"') == 1 and html.escape(written[0]) in second
    assert "Page 2 of 2" in second
    for user in (raters[0], UserFactory()):
        client.force_login(user)
        assert client.get(url).status_code == 403
    client.force_login(raters[1])
    assert "note 0" not in client.get(reverse("rate", args=[study.pk])).content.decode()
