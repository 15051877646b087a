"""What an arm does not include is never sent: for every combination of components, the raw
HTML of the rating page (full page and htmx fragment) and the API's JSON hold exactly the
marked trace fields of that arm's components, and a blind arm receives no AI output.

Each text field of each trace sample carries a marker naming the field and the sample
(``QUERYMKs0X2`` = a search query of sample 2 of sentence s0). Sample 0 is the displayed
trace (the mode, "inaccurate", best by evidence and lowest index), samples 0 and 2 the
debate (inaccurate and accurate sides); sample 1 is never shown to anyone.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from annotations.assisted.services.exposure import task_panel
from annotations.models import Arm, Exposure, RaterAssignment, RatingTask
from assistants.panels import COMPONENTS, components_check, panel_html
from tests.annotations.assisted.helpers import add_rater, make_assisted_study

pytestmark = pytest.mark.django_db

MARK = re.compile(r"[A-Z]+MKs\d+X\d")
FIELDS = {"search": ("QUERYMK", "RESULTTITLEMK", "SNIPPETMK", "QUOTEMK"),
          "evidence": ("EVTITLEMK", "QUOTEMK"),
          "reasoning": ("CLAIMTEXTMK", "REASONMK", "OVERALLMK")}


def valid_combinations() -> list[tuple[str, ...]]:
    out = []
    for n in range(len(COMPONENTS) + 1):
        for combo in itertools.combinations(COMPONENTS, n):
            try:
                components_check(combo)
            except ValueError:
                continue
            out.append(combo)
    return out


COMBINATIONS = valid_combinations()


def test_the_combinations_are_all_the_valid_arms():
    # 3 search/evidence states × reasoning × judgments × confidence = 24 without debate;
    # with debate: no confidence, and at least one trace component: 3 × 2 × 2 − 1 = 11
    assert len(COMBINATIONS) == 35 and () in COMBINATIONS


def expected_markers(components: tuple[str, ...], sentence: str) -> set[str]:
    if not components:
        return set()
    tags = [f"{sentence}X0", f"{sentence}X2"] if "debate" in components else [f"{sentence}X0"]
    return {f"{field}{tag}" for tag in tags for c in components for field in FIELDS.get(c, ())}


@pytest.fixture(scope="module")
def every_arm(django_db_setup, django_db_blocker):
    """One study with an arm per valid combination and one rater in each (a full block of
    the balanced draw puts one rater in every arm), each holding a task."""
    with django_db_blocker.unblock():
        arms = {f"A{i}": list(c) for i, c in enumerate(COMBINATIONS) if c}
        study = make_assisted_study(n_sentences=2, arms=arms, ratings_per_item=1,
                                    band_cutoffs=[0.5, 0.9])
        raters = [add_rater(study) for _ in range(len(COMBINATIONS))]
        yield study, raters
        study.delete()


def fetch(client: Client, study, user) -> tuple[str, str, dict]:
    client.force_login(user)
    fragment = client.post(reverse("rate-next", args=[study.pk]), HTTP_HX_REQUEST="true")
    page = client.get(reverse("rate", args=[study.pk]))
    api = client.post(reverse("api-rating-next", args=[study.pk]))
    assert fragment.status_code == page.status_code == api.status_code == 200
    return page.content.decode(), fragment.content.decode(), api.json()


@pytest.mark.django_db
def test_every_arm_receives_exactly_its_components(every_arm):
    study, raters = every_arm
    seen = set()
    for user in raters:
        assignment = RaterAssignment.objects.get(study=study, user=user)
        components = tuple(assignment.components)
        seen.add(components)
        page, fragment, api = fetch(Client(), study, user)
        task = RatingTask.objects.get(study=study, holder=user)
        sentence = task.sentence.external_id
        wanted = expected_markers(components, sentence)
        api_text = json.dumps(api)
        for where, text in (("page", page), ("fragment", fragment), ("api", api_text)):
            assert set(MARK.findall(text)) == wanted, (components, where)
            url = f"https://example.org/{sentence.lower()}x0"
            assert (url in text) == bool({"search", "evidence"} & set(components)), where
            assert "gold" not in text.lower() or where != "api", where
        judged = "judgments" in components
        assert ("Predicted overall verdict" in page) == judged
        assert ("Predicted verdict for claim" in page) == (judged and "reasoning" in components)
        assert ("Model confidence" in page) == ("confidence" in components)
        assert ("67%" in page) == ("confidence" in components)  # 2 of 3 samples agree
        assert ('class="debate-verdict"' in page) == (judged and "debate" in components)
        assert ("Experimental AI-generated fact-check" in page) == bool(components)
        assert ('data-testid="ai-panel"' in page) == bool(components)
        if not components:
            assert "panel" not in api
            assert not Exposure.objects.filter(task=task).exclude(trace_ids=[]).exists()
            continue
        panel = api["panel"]
        assert panel["components"] == list(components)
        traces = panel["traces"]
        assert len(traces) == (2 if "debate" in components else 1)
        keys = set().union(*(t.keys() for t in traces))
        assert ("searches" in keys) == ("search" in components)
        assert ("evidence" in keys) == ("evidence" in components)
        assert ("claims" in keys) == ("reasoning" in components)
        assert ("verdict" in keys) == judged
        assert ("side" in keys) == (judged and "debate" in components)
        assert ("confidence" in panel) == ("confidence" in components)
        claims = [c for t in traces for c in t.get("claims", [])]
        assert all(("verdict" in c) == judged for c in claims)
        assert all(("evidence_ids" in c) == ("evidence" in components) for c in claims)
    assert seen == set(COMBINATIONS)


@pytest.mark.django_db
def test_the_page_holds_exactly_the_hashed_panel(every_arm):
    study, raters = every_arm
    for user in raters[:8]:
        client = Client()
        client.force_login(user)
        client.post(reverse("rate-next", args=[study.pk]), HTTP_HX_REQUEST="true")
        page = client.get(reverse("rate", args=[study.pk])).content.decode()
        task = RatingTask.objects.get(study=study, holder=user)
        html = panel_html(task_panel(task=task, user=user))
        exposure = Exposure.objects.filter(task=task, rater=user, via="page").latest("pk")
        assert html in page
        assert exposure.panel_sha256 == hashlib.sha256(html.encode()).hexdigest()
        assert exposure.components == RaterAssignment.objects.get(user=user).components
        shown = set(MARK.findall(html))
        assert {int(m[-1]) for m in shown} <= {0, 2}
        arm = Arm.objects.get(pk=exposure.arm_id)
        assert exposure.arm_version == arm.version


def test_no_gold_or_ai_rating_in_a_baseline_page_or_api(client, settings):
    study = make_assisted_study(n_sentences=1, ratings_per_item=1)
    user = add_rater(study)  # only the baseline arm exists
    client.force_login(user)
    api = client.post(reverse("api-rating-next", args=[study.pk])).json()
    assert set(api) == {"id", "lease_expires_at", "issued_at", "sentence"}
    assert set(api["sentence"]) == {"prompt", "response", "target"}
    page = client.get(reverse("rate", args=[study.pk])).content.decode()
    for hidden in ("ai-panel", "example.org", "confidence (", "Predicted"):
        assert hidden not in page
    assert not MARK.findall(page)  # (a bare "MK" can occur in a random CSRF token)
    assert not re.search(r"<input[^>]* checked", page)  # the answer is never pre-filled
