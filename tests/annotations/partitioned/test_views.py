"""The labelling views behave the same with htmx and as plain form posts (no JavaScript)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import Query
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.factories import make_study, specialist

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def labelling():
    study = make_study(k=3, n_items=12, seed=7)
    user = specialist(study, 0)
    client = Client()
    client.force_login(user)
    return study, user, client


def test_plain_answer_post_stores_the_answer_and_resumes_on_the_next_query(labelling):
    study, user, client = labelling
    first = query_lease_next(study=study, user=user)
    response = client.post(reverse("label-answer", args=[study.pk, first.public_id]), {"answer": "no"})
    assert response.status_code == 302
    assert response["Location"] == reverse("label", args=[study.pk])
    first.refresh_from_db()
    assert (first.status, first.answer) == ("answered", "no")
    held = Query.objects.get(holder=user, status="leased")
    assert held.pk != first.pk
    page = client.get(response["Location"]).content.decode()
    assert f'data-query-id="{held.public_id}"' in page


def test_htmx_answer_returns_the_next_query_fragment(labelling):
    study, user, client = labelling
    first = query_lease_next(study=study, user=user)
    response = client.post(reverse("label-answer", args=[study.pk, first.public_id]), {"answer": "yes"},
                           **HTMX)
    assert response.status_code == 200
    held = Query.objects.get(holder=user, status="leased")
    body = response.content.decode()
    assert f'data-query-id="{held.public_id}"' in body and "<html" not in body


def test_plain_post_on_an_answered_query_flashes_the_reason(labelling):
    study, user, client = labelling
    first = query_lease_next(study=study, user=user)
    url = reverse("label-answer", args=[study.pk, first.public_id])
    client.post(url, {"answer": "no"})
    response = client.post(url, {"answer": "yes"}, follow=True)
    first.refresh_from_db()
    assert first.answer == "no"
    assert "already answered" in response.content.decode().lower()


def test_empty_pool_says_so(labelling):
    study, user, client = labelling
    Query.objects.filter(study=study).delete()
    response = client.post(reverse("label-next", args=[study.pk]), follow=True)
    assert "No queries left for your class" in response.content.decode()


# --- issue 8 ---------------------------------------------------------------------------------
def _clock_back(query, seconds: float = 1.0) -> None:
    import datetime as dt

    from django.utils import timezone

    Query.objects.filter(pk=query.pk).update(
        rendered_at=timezone.now() - dt.timedelta(seconds=seconds))


def test_htmx_answer_confirms_with_the_answer_label_only_and_offers_undo(labelling):
    study, user, client = labelling
    first = query_lease_next(study=study, user=user)
    body = client.post(reverse("label-answer", args=[study.pk, first.public_id]),
                       {"answer": "no"}, **HTMX).content.decode()
    assert '<p class="recorded" role="status" data-testid="recorded">Recorded: No</p>' in body
    assert reverse("label-undo", args=[study.pk]) in body
    assert 'data-testid="answered-count">1<' in body


def test_an_answer_too_soon_shows_the_same_query_again_with_the_reason(labelling):
    study, user, client = labelling
    client.get(reverse("label", args=[study.pk]))
    body = client.post(reverse("label-next", args=[study.pk]), **HTMX).content.decode()
    held = Query.objects.get(holder=user, status="leased")
    assert held.rendered_at is not None and f'data-query-id="{held.public_id}"' in body
    again = client.post(reverse("label-answer", args=[study.pk, held.public_id]),
                        {"answer": "yes"}, **HTMX).content.decode()
    assert "Answered too soon" in again and f'data-query-id="{held.public_id}"' in again
    held.refresh_from_db()
    assert (held.status, held.answer) == ("leased", "")


def test_an_expired_lease_says_what_happened_and_offers_the_next_query(labelling):
    import datetime as dt

    from django.utils import timezone

    study, user, client = labelling
    q = query_lease_next(study=study, user=user)
    Query.objects.filter(pk=q.pk).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
    body = client.post(reverse("label-answer", args=[study.pk, q.public_id]), {"answer": "yes"},
                       **HTMX).content.decode()
    assert "Your time on this query ran out" in body and "Press Enter" in body
    assert 'data-key="Enter"' in body and reverse("label-next", args=[study.pk]) in body
    assert " left" not in body


def test_skip_and_undo_through_the_page(labelling):
    study, user, client = labelling
    first = query_lease_next(study=study, user=user)
    body = client.post(reverse("label-skip", args=[study.pk, first.public_id]),
                       **HTMX).content.decode()
    assert "Skipped: the query went back to the pool" in body
    second = Query.objects.get(holder=user, status="leased")
    assert second.pk != first.pk
    first.refresh_from_db()
    assert (first.status, first.holder_id) == ("pending", None)
    _clock_back(second)  # the skip response rendered it: the minimum answer time applies
    client.post(reverse("label-answer", args=[study.pk, second.public_id]), {"answer": "yes"},
                **HTMX)
    body = client.post(reverse("label-undo", args=[study.pk]), **HTMX).content.decode()
    assert "Undone: your last answer was removed" in body
    assert f'data-query-id="{second.public_id}"' in body
    second.refresh_from_db()
    assert (second.status, second.answer, second.holder_id) == ("leased", "", user.pk)
    refused = client.post(reverse("label-undo", args=[study.pk]), **HTMX).content.decode()
    assert "There is no answer of yours to undo." in refused


def test_home_offers_label_only_for_open_studies():
    from annotations.core.services.studies import study_close

    draft = make_study(k=3, n_items=3, open_=False, seed=31)
    closed = make_study(k=3, n_items=3, seed=32)
    open_ = make_study(k=3, n_items=3, seed=33)
    study_close(study=closed)
    client = Client()
    user = specialist(draft, 0)
    for study in (closed, open_):
        from annotations.core.services.studies import membership_add
        from annotations.models import StudyMembership

        StudyMembership.objects.filter(user=specialist(study, 0)).delete()
        membership_add(study=study, user=user, role="specialist", class_index=0)
    client.force_login(user)
    page = client.get(reverse("home")).content.decode()
    assert reverse("label", args=[open_.pk]) in page
    assert reverse("label", args=[draft.pk]) not in page
    assert reverse("label", args=[closed.pk]) not in page
    assert "starts when the study opens" in page and "the study is closed" in page


def test_guidelines_are_rendered_as_sanitised_markdown(labelling):
    study, user, client = labelling
    study.guidelines = ("## Read carefully\n\n**Bold** rule <script>alert('x')</script>\n\n"
                        "[doc](javascript:alert(1)) <img src=x onerror=alert(2)>")
    study.save(update_fields=["guidelines"])
    cls = study.classes.get(index=0)
    cls.guidelines = "- only *C0*\n- <iframe src=//evil></iframe>"
    cls.save(update_fields=["guidelines"])
    page = client.get(reverse("label", args=[study.pk])).content.decode()
    assert "<h4>Read carefully</h4>" in page and "<strong>Bold</strong>" in page
    assert "<li>only <em>C0</em></li>" in page
    for bad in ("<script>alert", "javascript:", "onerror", "<iframe"):
        assert bad not in page
    assert '<details class="guidelines card"' in page and 'id="shortcuts"' in page


def test_a_quality_check_looks_exactly_like_a_routed_query_in_html_and_api():
    """Two identical studies (same seed, same items); in one the specialist's next query is
    routed, in the other it is a quality check. After blanking what differs by nature (item
    and option texts, the random id, study id and name, times) the pages and API bodies are
    identical: no id order, no counter, no field tells them apart."""
    import re

    from annotations.models import Study

    def lease(gold_rate: float, api: bool):
        study = make_study(k=3, n_items=12, checks=4, seed=41, name=f"s{gold_rate}{api}")
        Study.objects.filter(pk=study.pk).update(gold_rate=gold_rate)
        study.refresh_from_db()
        user = specialist(study, 0)
        client = Client()
        client.force_login(user)
        if api:
            data = client.post(reverse("api-query-next", args=[study.pk])).json()
            query = Query.objects.get(public_id=data["id"])
            return study, user, query, data
        client.post(reverse("label-next", args=[study.pk]), **HTMX)
        query = Query.objects.get(holder=user, status="leased")
        return study, user, query, client.get(reverse("label", args=[study.pk])).content.decode()

    def blank(study, user, query, text: str) -> str:
        item = query.item
        for option in item.options:
            text = text.replace(option, "OPTION")
        for value in (item.text, query.public_id, user.username, study.name):
            text = text.replace(value, "X")
        text = re.sub(rf"/studies/{study.pk}/", "/studies/N/", text)
        text = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "CSRF", text)
        text = re.sub(r'"X-CSRFToken": "[^"]+"', "CSRF", text)
        return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:\d\d)", "TIME", text)

    routed = lease(0.0, api=False)
    check = lease(1.0, api=False)
    assert not routed[2].is_quality_check and check[2].is_quality_check
    assert str(check[2].pk) not in re.findall(r'data-query-id="([^"]+)"', check[3])
    assert blank(*routed) == blank(*check)
    routed = lease(0.0, api=True)
    check = lease(1.0, api=True)
    assert not routed[2].is_quality_check and check[2].is_quality_check
    r, c = dict(routed[3]), dict(check[3])
    assert set(r) == set(c)
    for key in ("id", "study_id", "item_text", "options", "lease_expires_at"):
        r.pop(key), c.pop(key)
    assert r == c
    assert [o["class"] for o in routed[3]["options"]] == [o["class"] for o in check[3]["options"]]
    assert len(check[3]["id"]) == len(routed[3]["id"]) == 16


def test_counters_move_the_same_for_a_quality_check_and_a_routed_query():
    from annotations.models import Study
    from annotations.partitioned.selectors import specialist_progress
    from annotations.partitioned.services.routing import query_skip

    seen = {}
    for gold_rate in (0.0, 1.0):
        study = make_study(k=3, n_items=12, checks=4, seed=42, name=f"c{gold_rate}")
        Study.objects.filter(pk=study.pk).update(gold_rate=gold_rate)
        study.refresh_from_db()
        user = specialist(study, 0)
        steps = [specialist_progress(user=user, study=study)]
        q = query_lease_next(study=study, user=user)
        assert q.is_quality_check == (gold_rate == 1.0)
        steps.append(specialist_progress(user=user, study=study))
        query_skip(query_id=q.pk, user=user)
        steps.append(specialist_progress(user=user, study=study))
        q = query_lease_next(study=study, user=user)
        steps.append(specialist_progress(user=user, study=study))
        from annotations.partitioned.services.labels import label_submit

        label_submit(query_id=q.pk, user=user, answer="no")
        steps.append(specialist_progress(user=user, study=study))
        # what the page shows ("waiting" only picks the message when nothing is shown)
        seen[gold_rate] = [{k: v for k, v in step.items() if k != "waiting"}
                           for step in steps]
    assert seen[0.0] == seen[1.0]
    assert [s["remaining"] for s in seen[0.0]][:2] == [seen[0.0][0]["remaining"],
                                                      seen[0.0][0]["remaining"] - 1]


# --- session 6: one membership read per request, bounded statements --------------------------
MEMBERSHIP_TABLE = '"annotations_studymembership"'


def _membership_reads(captured) -> int:
    """Statements that read the membership table itself: its columns or a top-level
    EXISTS on it (a subquery inside another statement, such as the answer's lock
    re-checking the class, is not a read of its own)."""
    import re

    own = re.compile(rf'^SELECT ({MEMBERSHIP_TABLE}\.|\S+ AS "a" FROM {MEMBERSHIP_TABLE})')
    return sum(1 for q in captured if own.match(q["sql"]))


@pytest.fixture
def checked_labelling(settings):
    """A study with AI systems and quality checks (every branch of the answer path)."""
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_study(k=3, n_items=40, seed=7, systems={"m": 0.7, "n": 0.6}, checks=4,
                       gold_rate=0.2, queries_per_item=2)
    user = specialist(study, 0)
    client = Client()
    client.force_login(user)
    client.post(reverse("label-next", args=[study.pk]), **HTMX)
    return study, user, client


def test_the_labelling_page_reads_the_membership_once_in_bounded_statements(
        checked_labelling, django_assert_max_num_queries):
    study, user, client = checked_labelling
    # session, user, membership (with study and class), current lease, the user's counts,
    # the class's counts, item, classes; the query was already marked rendered
    with django_assert_max_num_queries(8) as captured:
        page = client.get(reverse("label", args=[study.pk]))
    assert page.status_code == 200 and "data-query-id" in page.content.decode()
    assert _membership_reads(captured.captured_queries) == 1


def test_the_answer_post_reads_the_membership_once_in_bounded_statements(
        checked_labelling, django_assert_max_num_queries):
    study, user, client = checked_labelling
    for _ in range(4):  # routed queries and checks, 'no' routes follow-ups
        held = Query.objects.get(holder=user, status="leased")
        # + the answer: lock (with membership check and masks), item (checks and
        # follow-ups), update, audit, follow-up and its audit; the next lease: current
        # lease, draw counter, quality check or pool lease, audit; rendered and its audit;
        # savepoints of the two transactions; the undo offer (the last answer and whether
        # it was undone, one statement)
        with django_assert_max_num_queries(25) as captured:
            response = client.post(reverse("label-answer", args=[study.pk, held.public_id]),
                                   {"answer": "no"}, **HTMX)
        assert response.status_code == 200
        held.refresh_from_db()
        assert held.status == "answered"
        assert _membership_reads(captured.captured_queries) == 1


def test_remaining_never_reads_0_on_the_no_query_page_while_queries_are_to_come(settings):
    """The figure undercounts the pool by the checks handed out, so it read 0 while routed
    queries were still to come. With no query on screen it is now at least 1 while one
    is pending for the specialist; with a query on screen it is the symmetric count."""
    from annotations.models import Study
    from annotations.partitioned.selectors import specialist_progress

    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_study(k=3, n_items=6, checks=12, seed=71)
    Study.objects.filter(pk=study.pk).update(gold_rate=1.0)  # (the form allows up to 0.5)
    study.refresh_from_db()
    user = specialist(study, 0)
    routed_left = Query.objects.filter(study=study, k=0, is_quality_check=False).count()
    assert routed_left >= 1
    for _ in range(routed_left + 1):  # gold rate 1: every lease is a check while any is
        q = query_lease_next(study=study, user=user)
        assert q.is_quality_check
        label_submit(query_id=q.pk, user=user, answer="no")
    assert specialist_progress(user=user, study=study, holding=True)["remaining"] == 0
    assert specialist_progress(user=user, study=study)["remaining"] == 1
    client = Client()
    client.force_login(user)
    page = client.get(reverse("label", args=[study.pk])).content.decode()
    assert 'data-testid="remaining-count">1<' in page


def test_a_follow_up_held_for_the_undo_window_says_more_will_come(settings):
    """With several queries per item, a 'no' routes a follow-up that is held for the
    answer's undo window. Its class's specialist was told "No queries left for your class"
    while the figure counted it; they are now told more will come."""
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    study = make_study(k=3, n_items=1, queries_per_item=2, seed=72)
    first = Query.objects.get(study=study)
    label_submit(query_id=query_lease_next(study=study, user=specialist(study, first.k)).pk,
                 user=specialist(study, first.k), answer="no")
    follow = Query.objects.get(study=study, sequence=1)
    assert follow.status == Query.Status.PENDING
    client = Client()
    client.force_login(specialist(study, follow.k))
    page = client.post(reverse("label-next", args=[study.pk]), **HTMX).content.decode()
    assert "will be free shortly" in page and "No queries left" not in page
    assert 'data-testid="remaining-count">1<' in page
    other = ({0, 1, 2} - {first.k, follow.k}).pop()
    client.force_login(specialist(study, other))
    page = client.post(reverse("label-next", args=[study.pk]), **HTMX).content.decode()
    assert "No queries left for your class" in page
