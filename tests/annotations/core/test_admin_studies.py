"""The one Studies list of the admin (``StudyAdmin``'s list with ``core.views.study_actions``
and the study types' ``study_page_register``): every study a researcher may see, of every
type, each row with its type and its type's own pages."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from annotations.core.services.studies import membership_add
from annotations.models import Study
from tests.annotations.assisted.helpers import make_assisted_study
from tests.annotations.critique.helpers import make_critique_study
from tests.factories import UserFactory, make_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def three():
    """A researcher of one study of each type, and another researcher's study."""
    partitioned = make_study(k=3, n_items=2, open_=False, name="Part one")
    assisted = make_assisted_study(n_sentences=1, open_=False)
    critique, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], open_=False,
                                      name="Crit one")
    hidden = make_study(k=3, n_items=1, open_=False, name="Someone else's")
    researcher = UserFactory(username="rho")
    for study in (partitioned, assisted, critique):
        membership_add(study=study, user=researcher, role="researcher")
    client = Client()
    client.force_login(researcher)
    return client, {"partitioned": partitioned, "assisted": assisted,
                    "critique": critique}, hidden


def _row(html: str, study: Study) -> str:
    rows = [r for r in re.findall(r"<tr.*?</tr>", html, re.S) if f"/{study.pk}/" in r
            and study.name in r]
    assert len(rows) == 1, study.name
    return rows[0]


def _links(row: str) -> dict[str, str]:
    return {label: url.replace("&amp;", "&")
            for url, label in re.findall(r'<a href="([^"]+)">([^<]+)</a>', row)}


def test_one_list_shows_every_type_with_its_own_actions(three):
    # issue 17: one list of studies that knows each study's type; before, the Studies list
    # gave a critique or assisted study the partitioned links (Import items …)
    client, studies, hidden = three
    html = client.get(reverse("admin:annotations_study_changelist")).content.decode()
    assert hidden.name not in html
    imports = {"partitioned": [("Import items", "study_import_items"),
                               ("Import AI predictions", "study_import_predictions")],
               "assisted": [("Import sentences", "assistedstudy_import_sentences"),
                            ("Import AI traces", "assistedstudy_import_traces")],
               "critique": [("Import questions", "critiquesettings_import_questions"),
                            ("Import AI outputs", "critiquesettings_import_outputs")]}
    change = {"partitioned": "study", "assisted": "assistedstudy",
              "critique": "critiquesettings"}
    for kind, study in studies.items():
        row = _row(html, study)
        assert study.get_kind_display() in row
        links = _links(row)
        expected = {
            "Configure": reverse(f"admin:annotations_{change[kind]}_change", args=[study.pk]),
            "Members": reverse("admin:annotations_study_members", args=[study.pk]),
            **{label: reverse(f"admin:annotations_{name}", args=[study.pk])
               for label, name in imports[kind]},
            "Dashboard": f"/studies/{study.pk}/dashboard/"}
        for label, url in expected.items():
            assert links.get(label) == url, (kind, label, links)
        assert links["Raw export: CSV"].startswith(f"/studies/{study.pk}/export/?what=")
        assert client.get(links["Raw export: CSV"]).status_code == 200
        assert client.get(links["Configure"]).status_code == 200
        for label, _ in imports[kind]:
            assert client.get(links[label]).status_code == 200
        # every other type's imports are absent from this row
        others = {label for k, pairs in imports.items() if k != kind for label, _ in pairs}
        assert not others & set(links), (kind, others & set(links))


def test_the_list_offers_to_add_a_study_of_every_type(three):
    client, _, _ = three
    html = client.get(reverse("admin:annotations_study_changelist")).content.decode()
    for label, name in (("Add partitioned study", "study"),
                        ("Add assisted study", "assistedstudy"),
                        ("Add critique study", "critiquesettings")):
        assert f'<a href="{reverse(f"admin:annotations_{name}_add")}" class="addlink">{label}' \
            in html


def test_the_type_lists_are_the_one_list_filtered_to_the_type(three):
    client, studies, _ = three
    for name, kind in (("assistedstudy", "assisted"), ("critiquesettings", "critique")):
        response = client.get(reverse(f"admin:annotations_{name}_changelist"))
        assert response.status_code == 302
        assert response["Location"] == (reverse("admin:annotations_study_changelist")
                                         + f"?kind__exact={kind}")
        html = client.get(response["Location"]).content.decode()
        assert studies[kind].name in html
        assert "By type" in html
        assert studies["partitioned"].name not in html


def test_a_study_opened_from_the_studies_list_goes_to_its_types_page(three):
    client, studies, _ = three
    for kind, name in (("assisted", "assistedstudy"), ("critique", "critiquesettings")):
        study = studies[kind]
        response = client.get(reverse("admin:annotations_study_change", args=[study.pk]))
        assert response["Location"] == reverse(f"admin:annotations_{name}_change",
                                               args=[study.pk])


def test_the_home_page_links_each_study_to_its_types_page(three):
    client, studies, _ = three
    html = client.get(reverse("home")).content.decode()
    for kind, name in (("partitioned", "study"), ("assisted", "assistedstudy"),
                       ("critique", "critiquesettings")):
        study = studies[kind]
        configure = reverse(f"admin:annotations_{name}_change", args=[study.pk])
        assert f'href="{configure}">Configure</a>' in html, kind
        assert f'href="{reverse("dashboard", args=[study.pk])}">Dashboard</a>' in html, kind
    assert "/critique/manage/" not in html
