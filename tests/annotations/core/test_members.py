"""Members of every study type (issue 17): each type's Members page offers exactly the roles
it uses, many people can be added at once from a pasted list, and each new account gets a
one-time password that must be replaced at the first sign-in or an invitation link."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotations.core.errors import InvalidStudy
from annotations.core.services.studies import (
    NewMember,
    members_add,
    membership_add,
    study_roles,
)
from annotations.models import StudyMembership, User
from tests.annotations.assisted.helpers import make_assisted_study
from tests.annotations.critique.helpers import make_critique_study
from tests.factories import UserFactory, make_study, role_user

pytestmark = pytest.mark.django_db


def _studies():
    return {"partitioned": make_study(k=3, n_items=2, open_=False, seed=3),
            "assisted": make_assisted_study(n_sentences=1, open_=False),
            "critique": make_critique_study(n_questions=1, open_=False)[0]}


def _researcher(study):
    member = StudyMembership.objects.filter(study=study, role="researcher").first()
    if member is not None:
        return member.user
    user = UserFactory(is_staff=True)
    membership_add(study=study, user=user, role=StudyMembership.Role.RESEARCHER)
    return user


def test_each_types_members_page_offers_the_roles_it_uses(client):
    words = {"partitioned": ["Specialist", "Manager", "Reviewer", "Researcher"],
             "assisted": ["Rater", "Manager", "Reviewer", "Researcher"],
             "critique": ["Annotator", "Manager", "Reviewer", "Researcher"]}
    for kind, study in _studies().items():
        roles = [label.split(" (")[0] for _, label in study_roles(study.kind)]
        assert roles == words[kind]
        client.force_login(_researcher(study))
        html = client.get(reverse("admin:annotations_study_members",
                                  args=[study.pk])).content.decode()
        for word in words[kind]:
            assert f">{word} (" in html, (kind, word)
        assert (">Specialist (" in html) == (kind == "partitioned")
        assert ("Class (specialists)" in html) == (kind == "partitioned")


def test_a_role_the_type_does_not_use_is_refused():
    studies = _studies()
    with pytest.raises(InvalidStudy, match="has no role 'specialist'"):
        members_add(study=studies["assisted"], by=_researcher(studies["assisted"]),
                    members=[NewMember("sam", "specialist", class_index=0)])
    with pytest.raises(InvalidStudy, match="has no role 'annotator'"):
        members_add(study=studies["partitioned"], by=_researcher(studies["partitioned"]),
                    members=[NewMember("sam", "annotator")])


def test_a_pasted_list_adds_raters_with_one_time_passwords_and_invitations(client):
    study = make_assisted_study(n_sentences=1, open_=False)
    client.force_login(_researcher(study))
    url = reverse("admin:annotations_study_members", args=[study.pk])
    response = client.post(url, {"bulk-people": "ada@example.org\n\n  grace \nlin@example.org",
                                 "bulk-role": "annotator"})
    created = response.context["created"]
    assert [m.user.username for m, _, _ in created] == ["ada@example.org", "grace",
                                                        "lin@example.org"]
    ada = User.objects.get(username="ada@example.org")
    assert ada.email == "ada@example.org" and ada.password_must_change
    assert all(m.role == "annotator" for m, _, _ in created)
    html = response.content.decode()
    assert "Rater" in html and all(invitation in html for _, _, invitation in created)
    bad = client.post(url, {"bulk-people": "ok\nnot an address@", "bulk-role": "annotator"})
    assert "is not an e-mail address" in bad.content.decode()
    assert not User.objects.filter(username="ok").exists()  # nothing half-done


def test_an_invitation_link_sets_the_password_once(client):
    study = make_study(k=3, n_items=2, open_=False, seed=4)
    [added] = members_add(study=study, by=role_user(study, "researcher"),
                          members=[NewMember("nina", "manager")])
    form = client.get(added.invitation, follow=True)
    assert b"Choose your password" in form.content
    done = client.post(form.redirect_chain[-1][0], {"new_password1": "a-long-secret-7731",
                                                    "new_password2": "a-long-secret-7731"})
    assert done.status_code == 302
    nina = User.objects.get(username="nina")
    assert nina.check_password("a-long-secret-7731") and not nina.password_must_change
    assert client.get("/").status_code == 200  # signed in, nothing more to change
    client.logout()
    again = client.get(added.invitation, follow=True)
    assert b"no longer works" in again.content


def test_the_shared_dashboard_link_shows_a_critique_studys_own_dashboard(client):
    # issue 17: /studies/<id>/dashboard/ of a critique study showed the partitioned one
    study, _ = make_critique_study(n_questions=1)
    client.force_login(_researcher(study))
    response = client.get(reverse("dashboard", args=[study.pk]))
    assert "critique/dashboard.html" in [t.name for t in response.templates]
    assert "n ord / n comp" not in response.content.decode()


def test_the_members_page_removes_someone_in_every_type_and_their_held_task_goes_back(client):
    """A dead end before: the page sent researchers to a Members table that only the
    partitioned study page has. Now *Remove* is on the Members page of every type; the
    answers stay and a task the person holds returns to the pool at once."""
    from annotations.assisted.services.rating import rating_lease_next
    from annotations.core.task_models import TaskStatus
    from annotations.models import RatingTask
    from tests.annotations.assisted.helpers import add_rater

    for kind, study in _studies().items():
        researcher = _researcher(study)
        [added] = members_add(study=study, by=researcher,
                              members=[NewMember(f"gone-{kind}", "manager")])
        client.force_login(researcher)
        url = reverse("admin:annotations_study_members", args=[study.pk])
        page = client.get(url).content.decode()
        assert f'data-testid="remove-gone-{kind}-manager"' in page, kind
        assert "Members table on the" not in page
        done = client.post(url, {"remove": added.membership.pk}, follow=True)
        assert done.status_code == 200
        assert not StudyMembership.objects.filter(pk=added.membership.pk).exists(), kind
        assert User.objects.filter(username=f"gone-{kind}").exists()  # the account stays

    study = make_assisted_study(n_sentences=2)
    rater = add_rater(study)
    task = rating_lease_next(study=study, user=rater)
    assert task.status == TaskStatus.LEASED
    membership = StudyMembership.objects.get(study=study, user=rater, role="annotator")
    client.force_login(_researcher(study))
    client.post(reverse("admin:annotations_study_members", args=[study.pk]),
                {"remove": membership.pk})
    task = RatingTask.objects.get(pk=task.pk)
    assert task.status == TaskStatus.PENDING and task.holder is None


def test_the_last_researcher_stays():
    from annotations.core.errors import NotPermitted
    from annotations.core.services.studies import membership_remove

    study = make_study(k=3, n_items=2, open_=False, seed=8)
    researcher = role_user(study, "researcher")
    only = StudyMembership.objects.get(study=study, role="researcher")
    with pytest.raises(InvalidStudy, match="at least one researcher"):
        membership_remove(study=study, membership_id=only.pk, by=researcher)
    outsider = UserFactory(is_staff=True)
    with pytest.raises(NotPermitted):
        membership_remove(study=study, membership_id=only.pk, by=outsider)
    assert StudyMembership.objects.filter(pk=only.pk).exists()
