"""The guides served at /help/<page>/ (annotations/core/guides.py): one for every role, linked
from the pages that role uses; every link between guides (and to a heading of one) lands
on a served page; the assisted trace import page links the trace schema."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotations.core.guides import GUIDES, guide_html
from annotations.core.models import StudyMembership
from tests.annotations.assisted.helpers import add_rater, make_assisted_study
from tests.annotations.critique.helpers import make_critique_study
from tests.factories import UserFactory, make_study, role_user, specialist

pytestmark = pytest.mark.django_db

ROLES = ["specialist", "rater", "annotator", "manager", "researcher", "operator"]


def _ids(html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html))


@pytest.mark.parametrize("role", ROLES)
def test_every_role_has_its_guide(client, role):
    client.force_login(UserFactory())
    page = client.get(f"/help/{role}/")
    assert page.status_code == 200
    assert page.content.decode().count("<h1") == 1


def test_every_link_of_a_guide_lands_on_a_served_guide_and_heading():
    targets = {page: _ids(guide_html(page)[1]) for page in GUIDES}
    for page in GUIDES:
        html = guide_html(page)[1]
        for href in re.findall(r'href="([^"]+)"', html):
            if href.startswith(("http://", "https://", "mailto:")):
                continue
            if href.startswith("#"):  # a heading of the same guide
                assert href[1:] in targets[page], f"{page}: {href} names no heading"
                continue
            match = re.fullmatch(r"/help/(?P<page>[\w-]+)/(?:#(?P<anchor>[\w-]+))?", href)
            assert match, f"{page}: {href} is no served guide"
            assert match["page"] in GUIDES, f"{page}: {href}"
            assert match["anchor"] is None or match["anchor"] in targets[match["page"]], \
                f"{page}: {href} names no heading"
        for src in re.findall(r'src="([^"]+)"', html):
            assert src.startswith("/help/img/"), f"{page}: {src}"


def _guide_links(html: str) -> set[str]:
    return set(re.findall(r'href="(/help/[\w-]+/)[^"]*"', html))


def test_each_labelling_page_links_its_roles_guide(client):
    partitioned = make_study(k=3, n_items=3)
    client.force_login(specialist(partitioned, 0))
    assert "/help/specialist/" in _guide_links(
        client.get(reverse("label", args=[partitioned.pk])).content.decode())
    assisted = make_assisted_study(n_sentences=2)
    client.force_login(add_rater(assisted))
    assert "/help/rater/" in _guide_links(
        client.get(reverse("rate", args=[assisted.pk])).content.decode())
    critique, annotators = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    client.force_login(annotators[0])
    assert "/help/annotator/" in _guide_links(
        client.get(reverse("critique-work", args=[critique.pk])).content.decode())


def test_each_dashboard_links_the_managers_guide_to_it(client):
    expected = {"partitioned": "/help/manager/", "assisted": "/help/manager-assisted/",
                "critique": "/help/critique-studies/"}
    studies = [make_study(k=3, n_items=3), make_assisted_study(n_sentences=2),
               make_critique_study(n_questions=1, top_level=1, counts=[2, 1])[0]]
    for study in studies:
        manager = UserFactory()
        StudyMembership.objects.create(study=study, user=manager,
                                       role=StudyMembership.Role.MANAGER)
        client.force_login(manager)
        page = client.get(reverse("dashboard", args=[study.pk]), follow=True)
        guide = re.search(r'href="([^"]+)"[^>]*data-testid="manager-guide"',
                          page.content.decode())
        assert guide and guide[1].startswith(expected[study.kind]), study.kind
        assert client.get(guide[1].split("#")[0]).status_code == 200


def test_the_admin_links_the_researchers_guide(client):
    study = make_study(k=3, n_items=3)
    client.force_login(role_user(study, "researcher"))
    page = client.get(reverse("admin:index")).content.decode()
    assert 'href="/help/researcher/"' in page


def test_the_trace_import_page_links_the_served_trace_schema(client):
    study = make_assisted_study(n_sentences=1)
    client.force_login(role_user(study, "researcher"))
    page = client.get(reverse("admin:annotations_assistedstudy_import_traces",
                              args=[study.pk])).content.decode()
    link = re.search(r'href="([^"]+)"[^>]*data-testid="trace-schema"', page)
    assert link, "the trace import page links no schema"
    path, anchor = link[1].split("#")
    guide = client.get(path)
    assert guide.status_code == 200
    assert anchor in _ids(guide.content.decode())
    assert "evidence_ids" in guide.content.decode()


def test_the_critique_outputs_import_page_links_the_served_output_schema(client):
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai_below",
                                   open_=False)
    researcher = UserFactory(is_staff=True)
    StudyMembership.objects.create(study=study, user=researcher,
                                   role=StudyMembership.Role.RESEARCHER)
    client.force_login(researcher)
    page = client.get(reverse("admin:annotations_critiquesettings_import_outputs",
                              args=[study.pk])).content.decode()
    link = re.search(r'href="([^"]+)"[^>]*data-testid="outputs-schema"', page)
    assert link, "the AI outputs import links no schema"
    path, anchor = link[1].split("#")
    assert anchor in _ids(client.get(path).content.decode())


def test_the_raters_guide_states_the_default_lease_of_an_assisted_study(admin_client):
    """docs/rater.md says how long a sentence is reserved "unless the researchers chose
    another time": the default of a study created in the admin and by the service."""
    from pathlib import Path

    from django.conf import settings

    from annotations.assisted.services.design import assisted_study_create

    text = (Path(settings.BASE_DIR) / "docs" / "rater.md").read_text(encoding="utf-8")
    stated = re.findall(r"\((\d+) minutes unless the researchers chose", text)
    assert len(stated) == 1
    form = admin_client.get(reverse("admin:annotations_assistedstudy_add")).context["adminform"]
    offered = form.form["lease_minutes"].value()
    created = assisted_study_create(name="Lease default").lease_minutes
    assert int(stated[0]) == int(offered) == created


def test_the_help_index_lists_every_role_guide_then_the_others_by_their_plain_titles(client):
    from annotations.core.guides import ROLE_GUIDES

    client.force_login(UserFactory())
    page = client.get(reverse("help-index"))
    assert page.status_code == 200
    html = page.content.decode()
    roles = re.findall(r'<h2><a href="/help/([\w-]+)/" lang="en">', html)
    assert roles == list(ROLE_GUIDES)
    others = re.findall(r'<li><a href="/help/([\w-]+)/" lang="en">([^<]+)</a>', html)
    files = [GUIDES[p] for p in [*roles, *(p for p, _ in others)]]
    assert sorted(files) == sorted(set(GUIDES.values()))  # every guide once
    assert ("estimators", "The estimator engine (estimators/)") in others
    client.logout()
    assert client.get(reverse("help-index")).status_code == 302  # as every guide
