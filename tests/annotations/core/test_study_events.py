"""The study's own audit trail: opening and closing are recorded by the services, in the
same transaction, with who and when; the study page lists them read only."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.urls import reverse

from annotations.core.errors import InvalidStudy
from annotations.core.services.studies import study_close, study_event_record, study_open
from annotations.models import Study, StudyEvent, study_event_kind_register
from tests.factories import make_study, role_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft():
    return make_study(k=3, n_items=4, open_=False, seed=91, name="Audited study")


def events(study: Study) -> list[tuple[str, int | None, dict]]:
    return [(e.kind, e.actor_id, e.detail)
            for e in StudyEvent.objects.filter(study=study).order_by("at", "pk")]


def test_open_and_close_are_recorded_with_actor_and_counts(draft):
    researcher = role_user(draft, "researcher")
    study_open(study=draft, by=researcher)
    study_close(study=draft, by=researcher)
    assert events(draft) == [
        ("opened", researcher.pk, {"routed": 4, "from": "draft"}),
        ("closed", researcher.pk, {"from": "open"}),
    ]


def test_routing_new_items_of_an_open_study_is_recorded_apart_from_opening(draft):
    study_open(study=draft)
    assert study_open(study=draft) == 0  # nothing new: nothing recorded
    assert [kind for kind, _, _ in events(draft)] == ["opened"]


def test_a_refused_close_writes_no_event(draft):
    study_open(study=draft)
    study_close(study=draft)
    with pytest.raises(InvalidStudy):
        study_close(study=draft)
    assert [kind for kind, _, _ in events(draft)] == ["opened", "closed"]


def test_the_event_is_written_in_the_same_transaction_as_the_change(draft):
    @transaction.atomic
    def open_then_fail() -> None:
        study_open(study=draft)
        raise RuntimeError("the caller's transaction fails after the open")

    with pytest.raises(RuntimeError):
        open_then_fail()
    draft.refresh_from_db()
    assert draft.status == Study.Status.DRAFT
    assert events(draft) == []


def test_other_study_types_register_their_own_kinds(draft):
    with pytest.raises(InvalidStudy, match="register"):
        study_event_record(study=draft, kind="weights_changed")
    study_event_kind_register("weights_changed", "Weights changed")
    event = study_event_record(study=draft, kind="weights_changed", detail={"old": 1})
    assert event.kind_label == "Weights changed"
    study_event_record(study=draft, kind="threshold_changed", detail={"to": 0.7})  # built in
    assert [kind for kind, _, _ in events(draft)] == ["weights_changed", "threshold_changed"]


def test_the_buttons_record_the_researcher_and_the_page_lists_the_history(client, draft):
    researcher = role_user(draft, "researcher")
    client.force_login(researcher)
    client.post(reverse("admin:annotations_study_open", args=[draft.pk]))
    client.post(reverse("admin:annotations_study_close", args=[draft.pk]))
    assert events(draft) == [
        ("opened", researcher.pk, {"routed": 4, "from": "draft"}),
        ("closed", researcher.pk, {"from": "open"}),
    ]
    html = client.get(reverse("admin:annotations_study_change", args=[draft.pk])).content.decode()
    section = html[html.index('id="study-events-title"'):]
    assert "Opened" in section and "Closed" in section and researcher.username in section
    assert "routed: 4" in section
    # read only: no form field for the events anywhere on the page
    assert 'name="events-' not in html


def test_the_list_action_records_the_researcher(client, draft):
    researcher = role_user(draft, "researcher")
    client.force_login(researcher)
    client.post(reverse("admin:annotations_study_changelist"),
                {"action": "open_studies", "_selected_action": [draft.pk]})
    assert events(draft) == [("opened", researcher.pk, {"routed": 4, "from": "draft"})]


def test_every_study_type_opens_and_closes_through_one_audited_path():
    """Partitioned, assisted and critique studies share study_opening / study_close: the
    same refusal of a closed study, the same 'opened' / 'closed' rows, and no
    'items_routed' row for a re-opening that made nothing (the assisted and critique
    copies wrote one with a count of 0)."""
    from annotations.critique.services.studies import critique_study_close, critique_study_open
    from tests.annotations.assisted.helpers import make_assisted_study
    from tests.annotations.critique.helpers import make_critique_study

    critique, _ = make_critique_study(n_questions=3, open_=False)
    made = critique_study_open(study=critique)
    assert made > 0 and critique.status == Study.Status.OPEN
    assert critique_study_open(study=critique) == 0
    assisted = make_assisted_study(n_sentences=4, open_=False)
    routed = study_open(study=assisted)  # dispatches to assisted_study_open
    assert routed == 4 and study_open(study=assisted) == 0
    critique_study_close(study=critique)
    study_close(study=assisted)
    assert events(critique) == [("opened", None, {"tasks": made, "from": "draft"}),
                                ("closed", None, {"from": "open"})]
    assert events(assisted) == [("opened", None, {"routed": 4, "from": "draft"}),
                                ("closed", None, {"from": "open"})]
    for study, opener in ((critique, critique_study_open), (assisted, study_open)):
        with pytest.raises(InvalidStudy, match="a closed study stays closed"):
            opener(study=study)
    with pytest.raises(InvalidStudy, match="already closed"):
        critique_study_close(study=critique)
