"""Admin scoping: a researcher of study 1 cannot read or write study 2 through any admin path
(add, change, raw-id lookup, autocomplete, list filter), and the services and the database
refuse rows that pair one study's AI system with another study's item."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.test import Client

from annotations.core.errors import DomainError
from annotations.core.services.studies import membership_add
from annotations.models import EstimateSnapshot, Item, Query, StudyMembership, User
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.labels import label_submit, query_masks
from annotations.partitioned.services.predictions import prediction_set, query_masks_refresh
from annotations.partitioned.services.routing import query_lease_next
from annotations.partitioned.services.running import items_delete
from assistants.models import AISystem, Prediction
from tests.factories import UserFactory, make_study, role_user, specialist

pytestmark = pytest.mark.django_db

SECRET = "secret-study-two"


@pytest.fixture
def two():
    """Study 1 (ours) and study 2 (someone else's), both open, with AI systems and labels."""
    mine = make_study(k=3, n_items=4, seed=11, name="my-study-one", systems={"mine-ai": 0.7})
    other = make_study(k=3, n_items=4, seed=12, name=SECRET, systems={"secret-ai-two": 0.7})
    for study in (mine, other):
        k = Query.objects.filter(study=study).order_by("pk").first().k
        user = specialist(study, k)
        q = query_lease_next(study=study, user=user)
        label_submit(query_id=q.pk, user=user, answer="no")
        study_recompute(study_id=study.pk)
    return mine, other


def _researcher(study) -> Client:
    client = Client()
    client.force_login(role_user(study, "researcher"))
    return client


def _secrets(other) -> list[str]:
    """Strings of study 2 that must never reach study 1's researcher."""
    return [SECRET, "secret-ai-two", f"{other.pk}-spec", f"{other.pk}-manager",
            f"{other.pk}-researcher"]


@pytest.mark.parametrize("url", [
    "/admin/annotations/item/",
    "/admin/annotations/item/add/",
    "/admin/annotations/query/",
    "/admin/annotations/estimatesnapshot/",
    "/admin/annotations/user/",
    "/admin/assistants/aisystem/",
    "/admin/assistants/prediction/",
    "/admin/assistants/prediction/add/",
    # raw-id lookup popups (Query.item / holder / answered_by, Prediction.item)
    "/admin/annotations/item/?_to_field=id&_popup=1",
    "/admin/annotations/user/?_to_field=id&_popup=1",
    # the list filters' choices follow the rows shown, also under a filter for study 2
    "/admin/annotations/item/?study__id__exact={other}",
    "/admin/assistants/prediction/?system__study__id__exact={other}",
])
def test_no_page_of_the_admin_names_another_study_or_its_people(two, url):
    mine, other = two
    response = _researcher(mine).get(url.format(other=other.pk), follow=True)
    assert response.status_code == 200
    html = response.content.decode()
    assert [s for s in _secrets(other) if s in html] == []


def test_item_add_form_offers_only_own_studies_and_refuses_a_foreign_one(two):
    mine, other = two
    client = _researcher(mine)
    form = client.get("/admin/annotations/item/add/").context["adminform"].form
    assert list(form.fields["study"].queryset) == [mine]
    before = Item.objects.filter(study=other).count()
    response = client.post("/admin/annotations/item/add/", {
        "study": other.pk, "external_id": "planted", "text": "t", "options": "[]",
        "metadata": "{}", "stratum": ""})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert Item.objects.filter(study=other).count() == before


def test_an_item_cannot_move_to_another_study(two):
    mine, other = two
    item = Item.objects.filter(study=mine).first()
    client = _researcher(mine)
    form = client.get(f"/admin/annotations/item/{item.pk}/change/").context["adminform"].form
    assert "study" not in form.fields  # read-only once created
    client.post(f"/admin/annotations/item/{item.pk}/change/", {
        "study": other.pk, "external_id": item.external_id, "text": item.text,
        "options": "[]", "metadata": "{}", "stratum": item.stratum})
    item.refresh_from_db()
    assert item.study_id == mine.pk


def test_an_ai_system_cannot_move_to_another_study(two):
    mine, other = two
    system = AISystem.objects.get(study=mine)
    client = _researcher(mine)
    response = client.get(f"/admin/assistants/aisystem/{system.pk}/change/")
    assert "study" not in response.context["adminform"].form.fields
    client.post(f"/admin/assistants/aisystem/{system.pk}/change/",
                {"study": other.pk, "name": system.name, "description": ""})
    system.refresh_from_db()
    assert system.study_id == mine.pk


def test_prediction_admin_refuses_a_foreign_item_and_offers_own_systems(two):
    mine, other = two
    client = _researcher(mine)
    form = client.get("/admin/assistants/prediction/add/").context["adminform"].form
    assert list(form.fields["system"].queryset) == list(AISystem.objects.filter(study=mine))
    system = AISystem.objects.get(study=mine)
    foreign = Item.objects.filter(study=other).first()
    before = Prediction.objects.count()
    response = client.post("/admin/assistants/prediction/add/",
                           {"system": system.pk, "item": foreign.pk, "option": 0})
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert Prediction.objects.count() == before


def test_prediction_admin_pairs_within_a_study_and_refreshes_masks(two):
    mine, _ = two
    client = _researcher(mine)
    answered = Query.objects.get(study=mine, status="answered")
    system = AISystem.objects.get(study=mine)
    Prediction.objects.filter(item=answered.item).delete()
    original = answered.item.option_order[answered.k]  # the option shown as the asked class
    response = client.post("/admin/assistants/prediction/add/",
                           {"system": system.pk, "item": answered.item.pk, "option": original})
    assert response.status_code == 302
    prediction = Prediction.objects.get(system=system, item=answered.item)
    assert (prediction.option, prediction.position) == (original, answered.k)
    answered.refresh_from_db()
    assert (answered.match_mask, answered.present_mask) == (1, 1)


def test_membership_class_choices_are_the_study_own(two):
    mine, _ = two
    response = _researcher(mine).get(f"/admin/annotations/study/{mine.pk}/change/")
    formset = next(f for f in response.context["inline_admin_formsets"]
                   if f.opts.model is StudyMembership)
    field = formset.formset.empty_form.fields["study_class"]
    assert {c.study_id for c in field.queryset} == {mine.pk}


def _autocomplete(client, term: str, model: str = "studymembership", field: str = "user"):
    return client.get("/admin/autocomplete/", {"app_label": "annotations", "model_name": model,
                                               "field_name": field, "term": term})


def test_user_autocomplete_lists_only_members_of_own_studies(two):
    mine, other = two
    client = _researcher(mine)
    found = {r["text"] for r in _autocomplete(client, "").json()["results"]}
    members = set(User.objects.filter(memberships__study=mine).values_list("username", flat=True))
    assert found == members
    partial = _autocomplete(client, str(other.pk)).json()["results"]
    assert [r["text"] for r in partial if r["text"].startswith(f"{other.pk}-")] == []


def test_an_account_outside_my_studies_is_not_found_even_by_its_exact_name(two):
    """Researchers see no user list beyond their studies' members: not even an exact name
    or e-mail address reveals another account (new people come in on the Members page)."""
    mine, _ = two
    UserFactory(username="newcomer", email="newcomer@example.org")
    client = _researcher(mine)
    for term in ("newcom", "newcomer", "NEWCOMER@example.org"):
        assert _autocomplete(client, term).json()["results"] == []


def test_user_change_pages_of_other_studies_people_are_hidden(two):
    mine, other = two
    client = _researcher(mine)
    stranger = role_user(other, "manager")
    response = client.get(f"/admin/annotations/user/{stranger.pk}/change/", follow=True)
    assert stranger.username not in response.content.decode()
    colleague = role_user(mine, "manager")
    assert client.get(f"/admin/annotations/user/{colleague.pk}/change/").status_code == 200


def test_query_and_snapshot_admins_show_only_own_rows(two):
    mine, _ = two
    client = _researcher(mine)
    queries = client.get("/admin/annotations/query/").context["cl"].queryset
    assert {q.study_id for q in queries} == {mine.pk}
    snaps = client.get("/admin/annotations/estimatesnapshot/").context["cl"].queryset
    assert {s.study_id for s in snaps} == {mine.pk}
    assert EstimateSnapshot.objects.exclude(study=mine).exists()


# --- services and the database --------------------------------------------------------------

def test_the_database_refuses_a_cross_study_prediction(two):
    mine, other = two
    system = AISystem.objects.get(study=mine)
    foreign = Item.objects.filter(study=other).first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Prediction.objects.create(system=system, item=foreign, option=0, position=0)
    own = Prediction.objects.filter(system=system).first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Prediction.objects.filter(pk=own.pk).update(item=foreign)
    assert not Prediction.objects.filter(system=system, item__study=other).exists()


def test_the_database_refuses_moving_items_and_systems(two):
    mine, other = two
    item = Item.objects.filter(study=mine).first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Item.objects.filter(pk=item.pk).update(study=other)
    system = AISystem.objects.get(study=mine)
    with pytest.raises(IntegrityError), transaction.atomic():
        AISystem.objects.filter(pk=system.pk).update(study=other)
    item.refresh_from_db()
    system.refresh_from_db()
    assert (item.study_id, system.study_id) == (mine.pk, mine.pk)


def test_model_clean_and_service_refuse_cross_study_pairs(two):
    mine, other = two
    system = AISystem.objects.get(study=mine)
    foreign = Item.objects.filter(study=other).first()
    with pytest.raises(ValidationError, match="another study"):
        Prediction(system=system, item=foreign, option=0).full_clean()
    with pytest.raises(DomainError, match="another study"):
        prediction_set(system=system, item=foreign, option=0)
    item = Item.objects.filter(study=mine).first()
    item.study = other
    with pytest.raises(ValidationError, match="another study"):
        item.full_clean()
    system.study = other
    with pytest.raises(ValidationError, match="another study"):
        system.full_clean()


def _drop_guard():
    """Remove the cross-study trigger inside the test's transaction (rolled back after),
    to check that the masks ignore a foreign row even if one got in."""
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("DROP TRIGGER prediction_same_study_insert ON assistants_prediction")
        else:
            cur.execute("DROP TRIGGER prediction_same_study_insert")


def test_masks_count_only_the_query_study_systems_and_combine_bits_by_or(two):
    mine, other = two
    answered = Query.objects.get(study=other, status="answered")
    own = AISystem.objects.get(study=other)
    Prediction.objects.filter(item=answered.item).delete()
    shown = answered.item.option_order[answered.k]
    prediction_set(system=own, item=answered.item, option=shown)
    foreign = AISystem.objects.get(study=mine)
    assert (own.ordinal, foreign.ordinal) == (0, 0)  # the same bit: SUM would carry into bit 1
    _drop_guard()
    Prediction.objects.create(system=foreign, item=answered.item, option=shown,
                              position=answered.k)
    answered.refresh_from_db()
    assert query_masks(answered) == (1, 1)
    query_masks_refresh(study=other)
    answered.refresh_from_db()
    assert (answered.match_mask, answered.present_mask) == (1, 1)


def test_the_member_inline_accepts_only_members_of_my_studies(two):
    mine, _ = two
    newcomer = UserFactory(username="newcomer2")
    client = _researcher(mine)
    response = client.get(f"/admin/annotations/study/{mine.pk}/change/")
    formset = next(f for f in response.context["inline_admin_formsets"]
                   if f.opts.model is StudyMembership)
    field = formset.formset.empty_form.fields["user"]
    assert not field.queryset.filter(pk=newcomer.pk).exists()  # a crafted id is refused
    membership_add(study=mine, user=newcomer, role=StudyMembership.Role.MANAGER)
    assert newcomer.username in {r["text"] for r in _autocomplete(client, "").json()["results"]}


def test_bulk_inserts_are_guarded_too(two):
    from annotations.core.services.bulk import rows_insert

    mine, other = two
    system = AISystem.objects.get(study=mine)
    foreign = Item.objects.filter(study=other).first()
    before = Prediction.objects.count()
    with pytest.raises(IntegrityError), transaction.atomic():
        rows_insert(Prediction, [{"system_id": system.pk, "item_id": foreign.pk,
                                  "option": 0, "position": 0, "raw": "0"}])
    assert Prediction.objects.count() == before


def test_an_item_with_answers_cannot_be_deleted_and_one_without_can(two):
    """Deleting an item deleted its answered queries with it: labels the estimates had
    counted were lost without a word."""
    mine, _ = two
    answered = Item.objects.get(study=mine, queries__status=Query.Status.ANSWERED)
    unanswered = Item.objects.filter(study=mine).exclude(pk=answered.pk).first()
    client = _researcher(mine)
    page = client.get(f"/admin/annotations/item/{answered.pk}/change/")
    assert b"deletelink" not in page.content  # no Delete button on its page
    refused = client.post(f"/admin/annotations/item/{answered.pk}/delete/", {"post": "yes"})
    assert refused.status_code == 403
    listed = client.post("/admin/annotations/item/", {
        "action": "delete_selected", "post": "yes",
        "_selected_action": [answered.pk, unanswered.pk]})
    assert listed.status_code == 403
    assert Item.objects.filter(pk=answered.pk).exists()
    assert Query.objects.filter(item=answered, status=Query.Status.ANSWERED).count() == 1
    assert Item.objects.filter(pk=unanswered.pk).exists()  # all or nothing
    with pytest.raises(DomainError, match="have answered queries"):
        items_delete(items=Item.objects.filter(study=mine))
    assert Item.objects.filter(study=mine).count() == 4
    ok = client.post(f"/admin/annotations/item/{unanswered.pk}/delete/", {"post": "yes"})
    assert ok.status_code == 302 and not Item.objects.filter(pk=unanswered.pk).exists()


def test_a_study_with_answers_cannot_be_deleted_and_a_draft_can(two):
    """Deleting a study swept up its items and labels (the admin only stopped it after an
    8 s confirmation page, naming 'item' permissions); a study with answers now has no
    Delete button and its delete page is refused; a study with none can still go."""
    from annotations.core.services.studies import study_create
    from annotations.models import Study

    mine, _ = two
    client = _researcher(mine)
    page = client.get(f"/admin/annotations/study/{mine.pk}/change/")
    assert page.status_code == 200 and b"deletelink" not in page.content
    refused = client.post(f"/admin/annotations/study/{mine.pk}/delete/", {"post": "yes"},
                          follow=True)
    assert refused.redirect_chain[-1][0] == f"/admin/annotations/study/{mine.pk}/change/"
    assert "has answers, which are the study&#x27;s record, so it cannot be deleted. Close " \
        "it instead." in refused.content.decode()
    assert Query.objects.filter(study=mine, status=Query.Status.ANSWERED).count() == 1

    draft = study_create(name="draft to drop", classes=["a", "b", "c"])
    membership_add(study=draft, user=role_user(mine, "researcher"),
                   role=StudyMembership.Role.RESEARCHER)
    page = client.get(f"/admin/annotations/study/{draft.pk}/change/")
    assert b"deletelink" in page.content
    ok = client.post(f"/admin/annotations/study/{draft.pk}/delete/", {"post": "yes"})
    assert ok.status_code == 302 and not Study.objects.filter(pk=draft.pk).exists()
