"""Researcher screens of assisted studies: create, settings and arms (through the services:
component rules, versions), the preview of exactly what an arm's raters see, imports with
every error listed, routing changes, open, the sampling progress bar, scoping."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import Arm, AssistedStudy, RoutingChange, Sentence, Study
from tests.annotations.assisted.helpers import make_assisted_study, sentence_records
from tests.factories import UserFactory, role_user

pytestmark = pytest.mark.django_db

MARK = re.compile(r"[A-Z]+MKs\d+X\d")


def researcher(study) -> Client:
    client = Client()
    client.force_login(role_user(study, "researcher"))
    return client


def change_url(study) -> str:
    return reverse("admin:annotations_assistedstudy_change", args=[study.pk])


def posted(response, **overrides) -> dict:
    """The change form as the browser would post it back unchanged, plus ``overrides``."""
    data = {"_save": "Save"}

    def add(prefix: str, form) -> None:
        for name, field in form.fields.items():
            key = f"{prefix}{name}"
            value = form[name].value()
            if field.disabled:
                continue
            if getattr(field.widget, "input_type", "") == "checkbox":
                if value:
                    data[key] = "on"
                continue
            data[key] = "" if value is None else value

    add("", response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        for name, value in formset.management_form.initial.items():
            data[f"{formset.prefix}-{name}"] = value
        for form in formset.forms:
            add(f"{form.prefix}-", form)
    data.update(overrides)
    return data


def test_a_staff_user_creates_an_assisted_study_with_a_baseline():
    client = Client()
    client.force_login(UserFactory(is_staff=True))
    response = client.post(reverse("admin:annotations_assistedstudy_add"),
                           {"name": "Fact checks", "description": "d", "lease_minutes": 30})
    study = AssistedStudy.objects.get(name="Fact checks")
    assert response.status_code == 302 and response["Location"] == change_url(study)
    assert study.kind == "assisted" and study.assisted.ratings_per_item == 3
    assert [a.name for a in Arm.objects.filter(study=study)] == ["Baseline"]
    page = client.get(change_url(study)).content.decode()
    assert 'data-testid="assisted-panel"' in page
    # the partitioned study page sends assisted studies here
    generic = client.get(reverse("admin:annotations_study_change", args=[study.pk]))
    assert generic.status_code == 302 and generic["Location"] == change_url(study)


def test_arms_are_saved_through_the_service_with_rules_and_versions():
    study = make_assisted_study(n_sentences=2, arms={"E": ["search"]}, open_=False)
    client = researcher(study)
    page = client.get(change_url(study))
    arm = Arm.objects.get(study=study, name="E")
    index = next(i for i, f in enumerate(
        next(f for f in page.context["inline_admin_formsets"]
             if f.formset.model is Arm).formset.forms) if f.instance.pk == arm.pk)
    data = posted(page, **{f"arms-{index}-show_evidence": "on"})
    assert client.post(change_url(study), data).status_code == 302
    arm.refresh_from_db()
    assert (arm.components, arm.version) == (["search", "evidence"], 2)
    # issue 17: evidence without search ticks search rather than refusing the page
    data = posted(client.get(change_url(study)), **{f"arms-{index}-show_search": ""})
    data.pop(f"arms-{index}-show_search")
    assert client.post(change_url(study), data).status_code == 302
    arm.refresh_from_db()
    assert (arm.components, arm.version) == (["search", "evidence"], 2)


def test_settings_are_checked_with_the_field_named():
    study = make_assisted_study(n_sentences=2, open_=False)
    client = researcher(study)
    data = posted(client.get(change_url(study)), **{"assisted-0-routing": "threshold",
                                                   "assisted-0-threshold": ""})
    response = client.post(change_url(study), data)
    assert response.status_code == 200
    assert "routing by threshold needs T" in response.content.decode()


def test_a_prompt_template_with_an_unknown_placeholder_is_refused():
    study = make_assisted_study(n_sentences=1, open_=False)
    client = researcher(study)
    data = posted(client.get(change_url(study)),
                  **{"assisted-0-prompt_user": "Rate {{sentence}} using {{colour}}."})
    html = client.post(change_url(study), data).content.decode()
    assert "colour" in html and "errorlist" in html
    study.assisted.refresh_from_db()
    assert study.assisted.prompt_user == ""


def test_the_api_key_is_never_shown_and_kept_when_left_empty():
    study = make_assisted_study(n_sentences=1, open_=False, ai_api_key="sk-very-secret")
    client = researcher(study)
    page = client.get(change_url(study))
    assert "sk-very-secret" not in page.content.decode()
    assert client.post(change_url(study), posted(page, **{"assisted-0-ai_api_key": ""})) \
        .status_code == 302
    study.assisted.refresh_from_db()
    assert study.assisted.ai_api_key == "sk-very-secret"


@pytest.mark.parametrize("components", [[], ["search"], ["search", "evidence", "reasoning"],
                                        ["reasoning", "judgments", "confidence"],
                                        ["search", "evidence", "judgments", "debate"]])
def test_preview_shows_exactly_what_the_arms_raters_see(components):
    study = make_assisted_study(n_sentences=2, arms={"X": components} if components else {},
                                open_=False)
    arm = Arm.objects.get(study=study, name="X" if components else "Baseline")
    page = researcher(study).get(reverse("admin:annotations_assistedstudy_preview",
                                         args=[study.pk, arm.pk]) + "?sentence=s1")
    html = page.content.decode()
    assert page.status_code == 200 and 'data-testid="preview"' in html
    fields = {"search": "QUERYMK", "evidence": "EVTITLEMK", "reasoning": "CLAIMTEXTMK"}
    tags = ["s1X0", "s1X2"] if "debate" in components else ["s1X0"]
    for component, marker in fields.items():
        for tag in tags:
            assert (f"{marker}{tag}" in html) == (component in components)
    assert set(MARK.findall(html)) <= {f"{f}{t}" for f in
                                               ("QUERYMK", "RESULTTITLEMK", "SNIPPETMK",
                                                "QUOTEMK", "EVTITLEMK", "CLAIMTEXTMK",
                                                "REASONMK", "OVERALLMK") for t in tags}
    assert ("Predicted overall verdict" in html) == ("judgments" in components)
    assert ("Model confidence" in html) == ("confidence" in components)
    assert ("How helpful was" in html) == bool(components)
    assert "Target sentence 1." in html


def test_sentence_import_lists_every_error_and_imports_nothing():
    study = make_assisted_study(n_sentences=1, traces=False, open_=False)
    client = researcher(study)
    rows = sentence_records(4)[1:]
    rows[0].pop("response")
    rows[2]["gold"] = "maybe"
    upload = io.BytesIO("\n".join(json.dumps(r) for r in rows).encode())
    upload.name = "bad.jsonl"
    url = reverse("admin:annotations_assistedstudy_import_sentences", args=[study.pk])
    html = client.post(url, {"file": upload}).content.decode()
    assert "Nothing was imported" in html
    assert "bad.jsonl:1: response: missing" in html and "bad.jsonl:3: gold:" in html
    assert Sentence.objects.filter(study=study).count() == 1


def test_routing_page_changes_t_and_records_it():
    study = make_assisted_study(n_sentences=3, routing="threshold", threshold=0.9)
    assert set(Sentence.objects.filter(study=study).values_list("route", flat=True)) == {
        "human"}  # confidence 2/3 ≤ 0.9
    client = researcher(study)
    url = reverse("admin:annotations_assistedstudy_routing", args=[study.pk])
    response = client.post(url, {"routing": "threshold", "threshold": "0.5",
                                 "band_edges": "[]", "band_targets": "[]"})
    assert response.status_code == 302
    assert set(Sentence.objects.filter(study=study).values_list("route", flat=True)) == {"ai"}
    change = RoutingChange.objects.get(study=study)
    assert change.to_ai == 3 and change.actor == role_user(study, "researcher")


def test_open_through_the_status_page_and_the_progress_partial():
    study = make_assisted_study(n_sentences=2, open_=False)
    client = researcher(study)
    url = reverse("admin:annotations_assistedstudy_status", args=[study.pk, "open"])
    assert "Open the study" in client.get(url).content.decode()
    client.post(url)
    study.refresh_from_db()
    assert study.status == Study.Status.OPEN
    progress = client.get(reverse("admin:annotations_assistedstudy_progress",
                                  args=[study.pk]))
    assert progress.status_code == 200


def test_bonus_table_appears_when_the_bonus_is_on():
    study = make_assisted_study(n_sentences=1, open_=False)
    client = researcher(study)
    assert 'data-testid="bonuses"' not in client.get(change_url(study)).content.decode()
    study.assisted.bonus_enabled = True
    study.assisted.save()
    assert 'data-testid="bonuses"' in client.get(change_url(study)).content.decode()


def test_another_researchers_study_is_out_of_reach():
    mine = make_assisted_study(n_sentences=1, open_=False)
    other = make_assisted_study(n_sentences=1, open_=False)
    client = researcher(mine)
    assert client.get(change_url(other)).status_code in (302, 403, 404)
    arm = Arm.objects.filter(study=other).first()
    preview = client.get(reverse("admin:annotations_assistedstudy_preview",
                                 args=[other.pk, arm.pk]))
    assert preview.status_code == 403
    listing = client.get(reverse("admin:annotations_assistedstudy_changelist"))
    assert other.name not in listing.content.decode()


@pytest.mark.parametrize("view", ["import_sentences", "import_traces"])
def test_an_upload_refused_by_the_form_says_why(view):
    # issue 17: a wrong extension or no file re-rendered a blank form
    study = make_assisted_study(n_sentences=1, traces=False, open_=False)
    client = researcher(study)
    url = reverse(f"admin:annotations_assistedstudy_{view}", args=[study.pk])
    upload = io.BytesIO(b"id,prompt\n")
    upload.name = "sentences.txt"
    html = client.post(url, {"file": upload}).content.decode()
    assert "Nothing was imported" in html
    assert "“sentences.txt” is neither a .csv nor a .jsonl file" in html
    html = client.post(url, {}).content.decode()
    assert "Nothing was imported" in html and "file: choose a file to import" in html
    assert 'name="update"' not in html  # these imports never rewrite existing ids


def test_the_study_page_and_the_open_page_say_what_is_still_missing():
    """The same "Still missing" list as the partitioned study page: sentences, their AI
    ratings for an arm that shows AI output, raters, a manager; gone once all are there."""
    from annotations.core.services.studies import membership_add
    from annotations.models import StudyMembership
    from tests.annotations.assisted.helpers import jsonl, trace_records

    study = make_assisted_study(n_sentences=0, arms={"Evidence": ["search", "evidence"]},
                                open_=False)
    client = researcher(study)
    missing = ('<p class="todo" data-testid="still-missing">Still missing: sentences (Import '
               "sentences); raters (Members); a manager to read the dashboard.</p>")
    assert missing in client.get(change_url(study)).content.decode()
    assert missing in client.get(reverse("admin:annotations_assistedstudy_status",
                                         args=[study.pk, "open"])).content.decode()

    from annotations.assisted.services.imports import sentences_import, traces_import
    from tests.annotations.assisted.helpers import sentence_records

    sentences_import(study=study, source=jsonl(sentence_records(3)), name="s.jsonl")
    membership_add(study=study, user=UserFactory(), role=StudyMembership.Role.ANNOTATOR)
    page = client.get(change_url(study)).content.decode()
    assert ('Still missing: an AI rating for 3 sentences (Import AI traces, or Sample traces '
            "from the endpoint); a manager to read the dashboard.") in page
    traces_import(study=study, source=jsonl(trace_records(["s0", "s1", "s2"])), name="t.jsonl")
    membership_add(study=study, user=UserFactory(), role=StudyMembership.Role.MANAGER)
    assert 'data-testid="still-missing"' not in client.get(change_url(study)).content.decode()
