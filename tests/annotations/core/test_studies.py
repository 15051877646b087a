"""The researcher's study screens and services: status only through open/close, a new study
from the add form with its classes, member accounts, option shuffle rule, import/export
buttons and wording."""

from __future__ import annotations

import io

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from annotations.core.errors import ImportFailed, InvalidStudy, NotPermitted
from annotations.core.services.studies import (
    NewMember,
    member_password_reset,
    members_add,
    study_close,
    study_create,
    study_open,
)
from annotations.models import Item, Query, Study, StudyClass, StudyMembership, User
from annotations.partitioned.services.imports import items_import
from tests.factories import UserFactory, jsonl, make_study, role_user

pytestmark = pytest.mark.django_db


def change_url(study: Study) -> str:
    return reverse("admin:annotations_study_change", args=[study.pk])


def change_form_data(study: Study, **overrides) -> dict:
    """The change form as the browser posts it (inline management forms included)."""
    data = {
        "name": study.name, "description": study.description,
        "queries_per_item": study.queries_per_item, "lease_minutes": study.lease_minutes,
        "gold_rate": study.gold_rate, "target_ci_width": study.target_ci_width,
        "interval_method": study.interval_method, "_save": "Save",
    }
    if study.shuffle_options:
        data["shuffle_options"] = "on"
    classes = list(study.classes.order_by("index"))
    for prefix, rows in (("classes", classes), ("memberships", []), ("ai_systems", [])):
        data.update({f"{prefix}-TOTAL_FORMS": len(rows), f"{prefix}-INITIAL_FORMS": len(rows),
                     f"{prefix}-MIN_NUM_FORMS": 0, f"{prefix}-MAX_NUM_FORMS": 1000})
    for i, c in enumerate(classes):
        data.update({f"classes-{i}-id": c.pk, f"classes-{i}-study": study.pk,
                     f"classes-{i}-index": c.index, f"classes-{i}-name": c.name,
                     f"classes-{i}-description": c.description})
    data.update(overrides)
    return data


@pytest.fixture
def draft():
    return make_study(k=3, n_items=5, open_=False, seed=81, name="Draft study")


@pytest.fixture
def researcher_client(client, draft):
    client.force_login(role_user(draft, "researcher"))
    return client


# --- 1. status only through the services ---------------------------------------------------
def test_the_study_form_does_not_write_status(researcher_client, draft):
    data = change_form_data(draft, status="open", description="now described")
    response = researcher_client.post(change_url(draft), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    draft.refresh_from_db()
    assert draft.description == "now described"
    assert (draft.status, draft.opened_at) == (Study.Status.DRAFT, None)
    assert Query.objects.filter(study=draft).count() == 0


def test_the_study_form_shows_status_read_only_with_an_open_button(researcher_client, draft):
    html = researcher_client.get(change_url(draft)).content.decode()
    assert 'name="status"' not in html
    assert reverse("admin:annotations_study_open", args=[draft.pk]) in html


def test_the_open_button_asks_then_opens_through_the_service(researcher_client, draft):
    url = reverse("admin:annotations_study_open", args=[draft.pk])
    page = researcher_client.get(url)
    assert page.status_code == 200
    assert "cannot go back to draft" in page.content.decode()
    draft.refresh_from_db()
    assert draft.status == Study.Status.DRAFT  # asking changes nothing

    response = researcher_client.post(url, follow=True)
    draft.refresh_from_db()
    assert draft.status == Study.Status.OPEN
    assert Query.objects.filter(study=draft).count() == 5
    assert "opened, 5 items routed" in response.content.decode()
    assert LogEntry.objects.filter(object_id=str(draft.pk),
                                   change_message="Opened: 5 items routed.").count() == 1


def test_the_close_button_closes_once_and_a_second_close_is_refused(researcher_client, draft):
    study_open(study=draft)
    url = reverse("admin:annotations_study_close", args=[draft.pk])
    researcher_client.post(url)
    draft.refresh_from_db()
    closed_at = draft.closed_at
    assert draft.status == Study.Status.CLOSED and closed_at is not None

    response = researcher_client.post(url, follow=True)
    draft.refresh_from_db()
    assert "is already closed" in response.content.decode()
    assert draft.closed_at == closed_at


def test_a_closed_study_cannot_be_opened_again(draft):
    study_open(study=draft)
    study_close(study=draft)
    with pytest.raises(InvalidStudy, match="closed"):
        study_open(study=draft)
    draft.refresh_from_db()
    assert draft.status == Study.Status.CLOSED


def test_another_researcher_cannot_open_the_study(client, draft):
    other = make_study(k=3, n_items=0, open_=False, seed=82, name="Other study")
    client.force_login(role_user(other, "researcher"))
    response = client.post(reverse("admin:annotations_study_open", args=[draft.pk]))
    assert response.status_code == 403
    draft.refresh_from_db()
    assert draft.status == Study.Status.DRAFT


def test_the_list_action_still_opens_through_the_service(researcher_client, draft):
    researcher_client.post(reverse("admin:annotations_study_changelist"),
                           {"action": "open_studies", "_selected_action": [draft.pk]})
    draft.refresh_from_db()
    assert draft.status == Study.Status.OPEN
    assert Query.objects.filter(study=draft).count() == 5


# --- 2. a new study from the add form, then its members ----------------------------------
@pytest.fixture
def new_researcher(client):
    user = UserFactory(username="rita", is_staff=True)
    client.force_login(user)
    return user


def add_form_data(**overrides) -> dict:
    data = {"name": "Pets", "description": "", "classes": "Cat: any domestic cat\nDog\nBird",
            "queries_per_item": 1, "lease_minutes": 10, "gold_rate": 0.0,
            "target_ci_width": 0.05, "interval_method": Study.IntervalMethod.AUTO,
            "_save": "Save"}
    data.update(overrides)
    return data


def test_a_staff_account_without_studies_sees_studies_and_may_add_one(client, new_researcher):
    assert client.get(reverse("admin:annotations_study_changelist")).status_code == 200
    page = client.get(reverse("admin:annotations_study_add"))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="classes"' in html
    assert 'name="status"' not in html
    assert "memberships-TOTAL_FORMS" not in html  # members come after the classes exist


def test_the_add_form_creates_the_classes_and_continues_to_the_study_page(client,
                                                                          new_researcher):
    response = client.post(reverse("admin:annotations_study_add"), add_form_data())
    study = Study.objects.get(name="Pets")
    assert response.status_code == 302
    assert response["Location"] == change_url(study)
    assert [(c.index, c.name, c.description) for c in study.classes.all()] == [
        (0, "Cat", "any domestic cat"), (1, "Dog", ""), (2, "Bird", "")]
    assert study.status == Study.Status.DRAFT
    assert StudyMembership.objects.filter(
        study=study, user=new_researcher, role=StudyMembership.Role.RESEARCHER).count() == 1
    page = client.get(change_url(study)).content.decode()
    assert '<option value="' in page and ">0: Cat</option>" in page  # class menu filled


@pytest.mark.parametrize(("classes", "message"), [
    ("Cat", "Give at least 2 classes, one per line (you gave 1)."),
    ("Cat\ncat\nDog", "Class names must differ: &#x27;Cat&#x27; repeats."),
    (": no name\nDog", "A line has a description but no class name."),
])
def test_the_add_form_refuses_bad_classes(client, new_researcher, classes, message):
    response = client.post(reverse("admin:annotations_study_add"),
                           add_form_data(classes=classes))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert Study.objects.count() == 0 and StudyClass.objects.count() == 0


def members_post(study: Study, rows: list[dict]) -> dict:
    data = {"members-TOTAL_FORMS": len(rows), "members-INITIAL_FORMS": 0,
            "members-MIN_NUM_FORMS": 0, "members-MAX_NUM_FORMS": 50}
    for i, row in enumerate(rows):
        for key, value in row.items():
            data[f"members-{i}-{key}"] = value
    return data


def test_a_researcher_creates_member_accounts_shown_once(client, new_researcher):
    client.post(reverse("admin:annotations_study_add"), add_form_data())
    study = Study.objects.get(name="Pets")
    url = reverse("admin:annotations_study_members", args=[study.pk])
    response = client.post(url, members_post(study, [
        {"username": "sam", "role": "specialist", "study_class": "1"},
        {"username": "mia", "role": "manager", "study_class": ""},
        {"username": "", "role": "specialist", "study_class": ""},
    ]))
    assert response.status_code == 200
    html = response.content.decode()
    sam = StudyMembership.objects.get(study=study, user__username="sam")
    assert (sam.role, sam.study_class.index) == ("specialist", 1)
    assert StudyMembership.objects.get(study=study, user__username="mia").role == "manager"
    passwords = response.context["created"]
    assert [(m.user.username, len(p)) for m, p, _ in passwords] == [("sam", 14), ("mia", 14)]
    for membership, password, invitation in passwords:
        assert password in html and invitation in html
        assert "/accounts/invitation/" in invitation
        user = User.objects.get(username=membership.user.username)
        assert user.check_password(password) and user.password_must_change
        assert not membership.user.is_staff
    assert passwords[0][1] not in client.get(url).content.decode()  # shown once


def test_members_form_needs_a_class_for_specialists(client, new_researcher):
    client.post(reverse("admin:annotations_study_add"), add_form_data())
    study = Study.objects.get(name="Pets")
    response = client.post(reverse("admin:annotations_study_members", args=[study.pk]),
                           members_post(study, [{"username": "sam", "role": "specialist"}]))
    assert "A specialist needs a class." in response.content.decode()
    assert not User.objects.filter(username="sam").exists()


def test_an_account_outside_the_researchers_studies_is_neither_shown_nor_added(draft):
    outsider = make_study(k=3, n_items=0, open_=False, seed=83, name="Outside")
    taken = role_user(outsider, "manager")
    before = set(StudyMembership.objects.values_list("pk", flat=True))
    with pytest.raises(InvalidStudy, match="is taken; choose another one"):
        members_add(study=draft, by=role_user(draft, "researcher"),
                    members=[NewMember("fresh", "manager"), NewMember(taken.username, "manager")])
    assert set(StudyMembership.objects.values_list("pk", flat=True)) == before
    assert not User.objects.filter(username="fresh").exists()  # all or nothing


def test_a_member_of_another_of_my_studies_is_added_without_a_new_password(draft):
    researcher = role_user(draft, "researcher")
    mine = make_study(k=3, n_items=0, open_=False, seed=84, name="Mine too")
    StudyMembership.objects.create(study=mine, user=researcher, role="researcher")
    manager = role_user(mine, "manager")
    password_hash = manager.password
    [added] = members_add(study=draft, by=researcher, members=[NewMember(manager.username,
                                                                         "manager")])
    assert added.password is None
    manager.refresh_from_db()
    assert manager.password == password_hash


def test_a_manager_cannot_add_members(draft):
    with pytest.raises(NotPermitted):
        members_add(study=draft, by=role_user(draft, "manager"),
                    members=[NewMember("eve", "researcher")])
    assert not User.objects.filter(username="eve").exists()


def test_password_reset_only_for_accounts_used_only_in_my_studies(draft):
    researcher = role_user(draft, "researcher")
    manager = role_user(draft, "manager")
    password = member_password_reset(study=draft, user=manager, by=researcher)
    manager.refresh_from_db()
    assert manager.check_password(password)

    elsewhere = make_study(k=3, n_items=0, open_=False, seed=85, name="Elsewhere")
    StudyMembership.objects.create(study=elsewhere, user=manager, role="manager")
    manager_hash = manager.password
    with pytest.raises(NotPermitted, match="used outside your studies"):
        member_password_reset(study=draft, user=manager, by=researcher)
    manager.refresh_from_db()
    assert manager.password == manager_hash


def test_another_researcher_cannot_open_the_members_page(client, draft):
    other = make_study(k=3, n_items=0, open_=False, seed=86, name="Another")
    client.force_login(role_user(other, "researcher"))
    url = reverse("admin:annotations_study_members", args=[draft.pk])
    assert client.get(url).status_code == 403
    assert client.post(url, members_post(draft, [{"username": "x", "role": "manager"}])
                       ).status_code == 403
    assert not User.objects.filter(username="x").exists()


# --- 4. named classes are never shuffled; mixed options are refused ----------------------
@pytest.fixture
def pets():
    return study_create(name="pets", classes=["Cat", "Dog", "Bird"], shuffle_options=True,
                        seed=5)


def test_options_that_are_the_class_names_in_order_are_not_shuffled(pets):
    rows = [{"id": f"p{i}", "text": f"Photo {i}", "options": ["Cat", "Dog", "Bird"]}
            for i in range(30)]
    items_import(study=pets, source=jsonl(rows), name="pets.jsonl")
    assert {tuple(i.option_order) for i in Item.objects.filter(study=pets)} == {(0, 1, 2)}


def test_items_without_options_are_not_shuffled(pets):
    rows = [{"id": f"p{i}", "text": f"Photo {i}"} for i in range(30)]
    items_import(study=pets, source=jsonl(rows), name="pets.jsonl")
    assert {tuple(i.option_order) for i in Item.objects.filter(study=pets)} == {(0, 1, 2)}


@pytest.mark.parametrize("options", [["Dog", "Bird", "Cat"], ["cat", "Fish", "dog"],
                                     ["Fish", "Dog", "Cow"]])
def test_options_naming_classes_out_of_place_are_refused(pets, options):
    with pytest.raises(ImportFailed) as info:
        items_import(study=pets, source=jsonl([{"id": "p0", "text": "Photo",
                                                 "options": options}]), name="pets.jsonl")
    assert "pets.jsonl:1: options: option" in str(info.value)
    assert "is the name of class" in str(info.value)
    assert Item.objects.filter(study=pets).count() == 0


def test_own_options_are_still_shuffled(pets):
    rows = [{"id": f"p{i}", "text": f"Q {i}", "options": ["red", "green", "blue"]}
            for i in range(30)]
    items_import(study=pets, source=jsonl(rows), name="q.jsonl")
    orders = {tuple(i.option_order) for i in Item.objects.filter(study=pets)}
    assert len(orders) > 1 and all(sorted(o) == [0, 1, 2] for o in orders)


def test_the_shuffle_help_text_explains_the_rule():
    help_text = Study._meta.get_field("shuffle_options").help_text
    assert "never shuffled" in help_text


# --- 5. import/export from the study page; web wording; site name --------------------------
def test_the_study_page_has_import_and_export_buttons(researcher_client, draft):
    html = researcher_client.get(change_url(draft)).content.decode()
    for name, query in (("annotations_study_import_items", ""),
                        ("annotations_study_import_predictions", ""),
                        ("annotations_study_export", "?format=csv"),
                        ("annotations_study_export", "?format=jsonl"),
                        ("annotations_study_members", "")):
        assert f'href="{reverse(f"admin:{name}", args=[draft.pk])}{query}"' in html


def test_the_jsonl_export_button_downloads_jsonl(researcher_client, draft):
    response = researcher_client.get(
        reverse("admin:annotations_study_export", args=[draft.pk]) + "?format=jsonl")
    assert response["Content-Type"] == "application/jsonl"
    assert response["Content-Disposition"].endswith('labels.jsonl"')


def test_a_repeated_id_on_the_web_uses_web_words(researcher_client, draft):
    upload = io.BytesIO(b'{"id": "i0", "text": "again"}\n')
    upload.name = "again.jsonl"
    response = researcher_client.post(  # to the import job's page
        reverse("admin:annotations_study_import_items", args=[draft.pk]), {"file": upload},
        follow=True)
    html = response.content.decode()
    assert ("again.jsonl:1: id: &#x27;i0&#x27; is already in the study (import it with the "
            "update option to rewrite existing ids)") in html
    assert "Rewrite existing ids" in html
    assert "--" not in html.split('id="content"')[1].replace("<!--", "").replace("-->", "")


@pytest.mark.parametrize("view", ["import_items", "import_predictions"])
def test_an_upload_refused_by_the_form_says_why(researcher_client, draft, view):
    url = reverse(f"admin:annotations_study_{view}", args=[draft.pk])
    html = researcher_client.post(url, {}).content.decode()  # no file at all
    assert "Nothing was imported" in html and "file: choose a file to import" in html
    upload = io.BytesIO(b"id,text\n")
    upload.name = "items.xlsx"
    html = researcher_client.post(url, {"file": upload}).content.decode()
    assert "“items.xlsx” is neither a .csv nor a .jsonl file" in html


def test_the_admin_says_oversight(researcher_client):
    html = researcher_client.get(reverse("admin:index")).content.decode()
    assert "Django administration" not in html and "Django site admin" not in html
    assert '<a href="/admin/">Oversight</a>' in html


def test_a_new_member_replaces_the_one_time_password(client, draft):
    [added] = members_add(study=draft, by=role_user(draft, "researcher"),
                          members=[NewMember("nina", "specialist", class_index=2)])
    assert client.login(username="nina", password=added.password)
    # issue 17: a one-time password must be replaced before anything else
    for page in ("/", f"/studies/{draft.pk}/label/"):
        assert client.get(page)["Location"] == "/accounts/password/"
    assert client.get("/accounts/password/").status_code == 200
    response = client.post("/accounts/password/", {
        "old_password": added.password, "new_password1": "a-long-secret-7731",
        "new_password2": "a-long-secret-7731"})
    assert response.status_code == 302 and response["Location"] == "/accounts/password/done/"
    nina = User.objects.get(username="nina")
    assert nina.check_password("a-long-secret-7731")
    assert not nina.check_password(added.password) and not nina.password_must_change
    assert client.get("/").status_code == 200  # free to go on


@pytest.mark.parametrize("page", ["open", "close", "members", "import_items",
                                  "import_predictions", "export"])
@pytest.mark.parametrize("who", ["anonymous", "specialist", "manager", "other researcher"])
def test_study_pages_refuse_everyone_but_the_studys_researchers(client, draft, page, who):
    if who == "specialist":
        client.force_login(StudyMembership.objects.filter(study=draft,
                                                          role="specialist").first().user)
    elif who == "manager":
        client.force_login(role_user(draft, "manager"))
    elif who == "other researcher":
        other = make_study(k=3, n_items=0, open_=False, seed=87, name="Someone else's")
        client.force_login(role_user(other, "researcher"))
    url = reverse(f"admin:annotations_study_{page}", args=[draft.pk])
    for response in (client.get(url), client.post(url, {"reset": "1", **members_post(
            draft, [{"username": "intruder", "role": "manager"}])})):
        if who == "other researcher":
            assert response.status_code == 403
        else:  # not staff: the admin sends them to its login page
            assert response.status_code == 302
            assert response["Location"].startswith("/admin/login/")
    draft.refresh_from_db()
    assert draft.status == Study.Status.DRAFT
    assert not User.objects.filter(username="intruder").exists()


def test_a_malformed_reset_value_is_a_404_and_changes_nothing(researcher_client, draft):
    manager = role_user(draft, "manager")
    url = reverse("admin:annotations_study_members", args=[draft.pk])
    assert researcher_client.post(url, {"reset": "1; drop"}).status_code == 404
    manager.refresh_from_db()
    assert manager.check_password("pw")


def test_too_long_a_user_name_is_refused(draft):
    with pytest.raises(InvalidStudy, match="longer than 150"):
        members_add(study=draft, by=role_user(draft, "researcher"),
                    members=[NewMember("x" * 151, "manager")])
    assert not User.objects.filter(username__startswith="xxxx").exists()


def test_closing_twice_is_refused_by_the_service(draft):
    study_close(study=draft)
    closed_at = Study.objects.get(pk=draft.pk).closed_at
    with pytest.raises(InvalidStudy, match="already closed"):
        study_close(study=draft)
    assert Study.objects.get(pk=draft.pk).closed_at == closed_at


def test_study_insert_saves_a_draft_with_its_classes_and_refuses_repeats():
    from annotations.core.services.studies import study_insert

    study = study_insert(study=Study(name="s", status=Study.Status.OPEN),
                         classes=[("Cat", " small "), "Dog"])
    assert study.status == Study.Status.DRAFT  # a new study is always a draft
    assert list(study.classes.values_list("index", "name", "description")) == [
        (0, "Cat", "small"), (1, "Dog", "")]
    with pytest.raises(InvalidStudy, match="distinct"):
        study_insert(study=Study(name="t"), classes=["Cat", "cat "])
    assert not Study.objects.filter(name="t").exists()


def test_an_upload_without_a_csv_or_jsonl_name_is_explained_in_web_words(researcher_client,
                                                                         draft):
    upload = io.BytesIO(b'{"id": "new", "text": "t"}\n')
    upload.name = "items.txt"
    response = researcher_client.post(
        reverse("admin:annotations_study_import_items", args=[draft.pk]), {"file": upload})
    html = response.content.decode()
    assert "“items.txt” is neither a .csv nor a .jsonl file; rename it to say which it is." \
        in html
    assert "say csv or jsonl" not in html
    assert not Item.objects.filter(study=draft, external_id="new").exists()
