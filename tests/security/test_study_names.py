"""A study's name is unique among its creator's studies only: the add forms never tell a
researcher that another researcher has a study of that name (an existence oracle), and a
lookup by name says so when two studies share it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError
from django.test import Client
from django.urls import reverse

from annotations.core.commands import get_study
from annotations.models import Study
from tests.annotations.assisted.test_admin import posted

pytestmark = pytest.mark.django_db

CRITIQUE_FORM = {"description": "", "guidelines": "", "top_level": "2", "counts": "",
                 "mode": "humans", "time_limit_minutes": "15", "response_system": "",
                 "response_template": "Q {{question}} {{options}}", "critique_system": "",
                 "critique_template": "{{question}} {{options}} {{first}} {{second}}",
                 "ai_base_url": "", "ai_model": "", "ai_api_key": ""}

# (admin add URL, the form besides its name) of the three study types
ADD_FORMS = {
    "partitioned": ("admin:annotations_study_add",
                    {"description": "", "classes": "A\nB\nC", "queries_per_item": "1",
                     "lease_minutes": "10", "gold_rate": "0", "target_ci_width": "0.05",
                     "interval_method": "auto"}),
    "assisted": ("admin:annotations_assistedstudy_add",
                 {"description": "", "lease_minutes": "20"}),
    "critique": ("admin:annotations_critiquesettings_add", CRITIQUE_FORM),
}


def staff(username: str) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_user(username, is_staff=True))
    return client


def add(client: Client, kind: str, name: str):
    url, form = ADD_FORMS[kind]
    return client.post(reverse(url), {**form, "name": name})


@pytest.mark.parametrize("kind", list(ADD_FORMS))
def test_another_researchers_study_name_tells_nothing(kind):
    # given: researcher A's study
    alice, bob = staff("alice"), staff("bob")
    assert add(alice, kind, "Secret merger review").status_code == 302
    # when: B names a study the same
    response = add(bob, kind, "Secret merger review")
    # then: B's study is made as any other (nothing says the name was in use)
    assert response.status_code == 302, response.content.decode()[:2000]
    studies = Study.objects.filter(name="Secret merger review").order_by("pk")
    assert [s.created_by.username for s in studies] == ["alice", "bob"]
    assert "exists" not in bob.get(response["Location"], follow=True).content.decode()


@pytest.mark.parametrize("kind", list(ADD_FORMS))
def test_a_researchers_own_duplicate_name_is_refused_clearly(kind):
    alice = staff("alice")
    assert add(alice, kind, "Pilot").status_code == 302
    response = add(alice, kind, "Pilot")
    assert response.status_code == 200
    assert "You already have a study named “Pilot”" in response.content.decode()
    assert Study.objects.filter(name="Pilot").count() == 1


def test_renaming_to_an_own_study_name_is_refused_and_to_anothers_is_not():
    alice, bob = staff("alice"), staff("bob")
    for client, name in ((alice, "Mine"), (alice, "Also mine"), (bob, "Theirs")):
        assert add(client, "assisted", name).status_code == 302
    study = Study.objects.get(name="Also mine")
    url = reverse("admin:annotations_assistedstudy_change", args=[study.pk])
    data = posted(alice.get(url))
    page = alice.post(url, {**data, "name": "Mine"}).content.decode()
    assert "You already have a study named “Mine”" in page
    assert alice.post(url, {**data, "name": "Theirs"}).status_code == 302
    study.refresh_from_db()
    assert study.name == "Theirs"


def test_a_name_two_studies_share_is_ambiguous_in_the_commands():
    alice, bob = staff("alice"), staff("bob")
    add(alice, "partitioned", "Shared")
    add(bob, "partitioned", "Shared")
    first, second = Study.objects.filter(name="Shared").order_by("pk")
    with pytest.raises(CommandError, match=rf"2 studies are named 'Shared' \(ids {first.pk} by "
                                           rf"alice, {second.pk} by bob\): give the id"):
        get_study("Shared")
    assert get_study(str(second.pk)) == second
    add(alice, "partitioned", "Only one")
    assert get_study("Only one").name == "Only one"


@pytest.mark.parametrize("kind", ["partitioned", "assisted"])
def test_only_the_creator_renames_a_study(kind):
    """A co-researcher refused a name would learn the creator's other studies' names."""
    from annotations.core.services.studies import membership_add
    from annotations.models import StudyMembership, User

    alice, bob = staff("alice"), staff("bob")
    for name in ("Alice's study", "Alice's secret"):
        assert add(alice, kind, name).status_code == 302
    study = Study.objects.get(name="Alice's study")
    membership_add(study=study, user=User.objects.get(username="bob"),
                   role=StudyMembership.Role.RESEARCHER)
    change = "annotations_study_change" if kind == "partitioned" else \
        "annotations_assistedstudy_change"
    url = reverse(f"admin:{change}", args=[study.pk])
    page = bob.get(url)
    assert 'name="name"' not in page.content.decode()  # shown, not editable
    data = posted(page)
    response = bob.post(url, {**data, "name": "Alice's secret"})
    assert response.status_code == 302 and "Alice's secret" not in response.content.decode()
    study.refresh_from_db()
    assert study.name == "Alice's study"
    # the creator still renames it
    page = alice.get(url)
    assert 'name="name"' in page.content.decode()
