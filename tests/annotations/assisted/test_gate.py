"""The trust gate (issue 19): an assisted study that requires an audit of its AI rater with a
minimum success rate refuses routing by the AI's confidence otherwise, naming why; the
dashboard shows the latest audit and κ with the study's own human ratings."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from annotations.assisted.services.design import (
    assisted_study_create,
    settings_check,
    settings_of,
)
from annotations.assisted.services.gate import ai_rater_audit, human_agreement, human_labels
from annotations.assisted.services.rating import RatingInput, rating_lease_next, rating_submit
from annotations.assisted.services.routing import routing_update
from annotations.audit.services.runs import audit_run, audit_start
from annotations.core.errors import InvalidStudy
from annotations.core.services.studies import study_open
from annotations.models import AssistedSettings, Audit, Sentence, Study
from assistants.models import AISystem
from assistants.systems import AI_RATER_NAME
from estimators.nodata.kappa import cohen_kappa
from tests.annotations.assisted.helpers import make_assisted_study, rater_in_arm
from tests.annotations.assisted.test_routing import routes, study_with
from tests.annotations.audit.helpers import (
    DATA,
    expected_successes,
    liar,
    make_rubric,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_min_time(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0


def identity(x: str, k: int) -> str:
    return x


def run_audit(study, system, similar_of, labels=None, items=None) -> Audit:
    """An audit of ``system`` over DATA (items ``items`` or d0…), committed by
    ``similar_of`` with ``labels`` (default 1), run to the end."""
    items = items or [f"d{i}" for i in range(len(DATA))]
    labels = labels or [1] * len(items)
    data = "".join(json.dumps({"item": it, "datapoint": x}) + "\n"
                   for it, x in zip(items, DATA, strict=False)).encode()
    commitments = "".join(
        json.dumps({"item": it, "round": k, "label": y, "similar": similar_of(x, k)}) + "\n"
        for it, x, y in zip(items, DATA, labels, strict=False) for k in (1, 2, 3)).encode()
    rubric = study.rubrics.first() or make_rubric(study)
    audit = audit_start(study=study, rubric=rubric, commitments=commitments,
                        commitments_name="c.jsonl", datapoints=data, datapoints_name="d.jsonl",
                        rounds=3, phi=0.5, seed=1, ai_system_id=system.pk, enqueue=False)
    audit_run(audit_id=audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.SUCCEEDED
    return audit


def ai_rater(study) -> AISystem:
    return AISystem.objects.get(study=study, name=AI_RATER_NAME)


def gated(minimum: float, routing="threshold", **kw):
    study = study_with(routing=routing, threshold=0.5, **kw)
    settings = settings_of(study)
    settings.gate_system, settings.gate_min_success = ai_rater(study), minimum
    settings.save()
    return study


LIAR_RATE = sum(expected_successes(liar)) / len(DATA)  # by hand (helpers.encoding)


def test_every_assisted_study_has_its_ai_rater_system():
    study = assisted_study_create(name="has a rater")
    assert list(study.ai_systems.values_list("name", flat=True)) == [AI_RATER_NAME]


def test_no_finished_audit_refuses_opening_with_routing_by_confidence():
    study = gated(0.8)
    with pytest.raises(InvalidStudy) as exc:
        study_open(study=study)
    assert "AI rater has no finished audit" in exc.value.message
    assert "80.0 %" in exc.value.message and exc.value.field == "routing"
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT and set(routes(study).values()) == {"waiting"}


def test_an_audit_below_the_minimum_refuses_naming_its_rate_and_the_minimum():
    assert 0 < LIAR_RATE < 0.9
    study = gated(0.9)
    audit = run_audit(study, ai_rater(study), liar)
    with pytest.raises(InvalidStudy) as exc:
        study_open(study=study)
    message = exc.value.message
    assert f"#{audit.pk}" in message and f"{100 * LIAR_RATE:.1f} %" in message
    assert "90.0 %" in message and "95 % interval" in message
    assert Study.objects.get(pk=study.pk).status == Study.Status.DRAFT


def test_an_audit_at_the_minimum_lets_the_study_route_by_confidence():
    study = gated(LIAR_RATE)
    run_audit(study, ai_rater(study), liar)
    study_open(study=study)
    assert set(routes(study).values()) == {"human", "ai"}


def test_routing_everyone_to_the_raters_is_never_gated():
    study = study_with(routing="all", threshold=None)
    settings = settings_of(study)
    settings.gate_system, settings.gate_min_success = ai_rater(study), 1.0
    settings.save()
    study_open(study=study)  # no audit at all
    assert set(routes(study).values()) == {"human"}


def test_routing_update_is_gated_by_the_latest_audit():
    study = study_with(routing="all", threshold=None)
    settings = settings_of(study)
    settings.gate_system, settings.gate_min_success = ai_rater(study), 0.9
    settings.save()
    study_open(study=study)
    with pytest.raises(InvalidStudy, match="no finished audit"):
        routing_update(study=study, routing="threshold", threshold=0.5)
    assert settings_of(study).routing == "all" and set(routes(study).values()) == {"human"}
    run_audit(study, ai_rater(study), identity)  # every datapoint succeeds
    routing_update(study=study, routing="threshold", threshold=0.5)
    assert "ai" in set(routes(study).values())
    routing_update(study=study, routing="all")
    run_audit(study, ai_rater(study), liar)  # the latest audit now fails the gate
    with pytest.raises(InvalidStudy, match=f"{100 * LIAR_RATE:.1f} %"):
        routing_update(study=study, routing="threshold", threshold=0.5)


def test_an_audit_of_another_system_does_not_open_the_gate():
    study = gated(0.5)
    other = AISystem.objects.create(study=study, name="other", ordinal=5)
    run_audit(study, other, identity)
    with pytest.raises(InvalidStudy, match="no finished audit"):
        study_open(study=study)


def test_the_gate_names_an_ai_system_of_this_study():
    study = study_with(routing="threshold", threshold=0.5)
    elsewhere = ai_rater(assisted_study_create(name="elsewhere"))
    settings = settings_of(study)
    settings.gate_system, settings.gate_min_success = elsewhere, 0.5
    with pytest.raises(InvalidStudy, match="gate_system: an AI system of this study"):
        settings_check(settings)
    settings.gate_system = None
    with pytest.raises(InvalidStudy, match="gate_system: choose"):
        settings_check(settings)


def rate_all(study, user, label_of: dict[str, str], helpfulness=None) -> None:
    while (task := rating_lease_next(study=study, user=user)) is not None:
        ext = Sentence.objects.get(pk=task.sentence_id).external_id
        rating_submit(user=user, public_id=task.public_id,
                      data=RatingInput(label_of[ext], 2, helpfulness))


def test_kappa_with_the_studys_own_baseline_ratings_of_the_same_items(client):
    study = make_assisted_study(n_sentences=6, arms={"E": ["search"]}, ratings_per_item=1)
    # people (baseline): accurate → 1; inaccurate, unsupported, disputed → 0;
    # "doesn't require attribution" is left out (s5)
    people = {"s0": "accurate", "s1": "accurate", "s2": "inaccurate", "s3": "unsupported",
              "s4": "disputed", "s5": "no_attribution"}
    rate_all(study, rater_in_arm(study, "Baseline"), people)
    # an assisted arm saw the AI: its ratings (all the opposite) are not counted
    rate_all(study, rater_in_arm(study, "E"), {k: "inaccurate" if v == "accurate"
                                               else "accurate" for k, v in people.items()},
             helpfulness=1)
    assert human_labels(study) == {"s0": 1, "s1": 1, "s2": 0, "s3": 0, "s4": 0}
    ai_labels = [1, 0, 0, 0, 1, 1]  # on s0 … s5
    audit = run_audit(study, ai_rater(study), identity, labels=ai_labels,
                      items=[f"s{i}" for i in range(6)])
    got = human_agreement(study=study, audit=audit)
    want = cohen_kappa(ai_labels[:5], [1, 1, 0, 0, 0]).as_dict()
    assert got == want and got["n"] == 5
    shown = ai_rater_audit(study)
    assert shown["audit"].pk == audit.pk and shown["kappa"]["n"] == 5
    assert shown["kappa"]["value"] == f"{want['kappa']:.3f}"
    # five sentences: κ's interval is marked unreliable (too few minority labels)
    assert want["n_minority"] == 2 and shown["kappa"]["unreliable"] is True
    # and the dashboard's audit panel says so beside κ
    client.force_login(study.memberships.get(role="researcher").user)
    page = client.get(reverse("assisted-dashboard", args=[study.pk])).content.decode()
    note = page.split('data-testid="kappa-unreliable">', 1)[1].split("</span>", 1)[0]
    assert "only 2 times (fewer than 15)" in note


def test_dashboard_and_ai_system_page_show_the_latest_audit(client):
    study = make_assisted_study(n_sentences=3, ratings_per_item=1)
    researcher = study.memberships.get(role="researcher").user
    settings = settings_of(study)
    settings.gate_system, settings.gate_min_success = ai_rater(study), 0.95
    settings.save()
    client.force_login(researcher)
    page = client.get(reverse("assisted-dashboard", args=[study.pk])).content.decode()
    assert 'data-testid="ai-audit"' in page and "No finished audit" in page
    audit = run_audit(study, ai_rater(study), liar)
    page = client.get(reverse("assisted-dashboard", args=[study.pk])).content.decode()
    assert reverse("audit-detail", args=[study.pk, audit.pk]) in page
    assert f"{100 * LIAR_RATE:.1f} %" in page and "not met" in page
    admin_page = client.get(reverse("admin:assistants_aisystem_change",
                                    args=[ai_rater(study).pk])).content.decode()
    assert reverse("audit-detail", args=[study.pk, audit.pk]) in admin_page
    assert f"{100 * LIAR_RATE:.1f} %" in admin_page


def test_the_gate_in_the_admin_and_the_routing_page_refusing_with_the_reason(client):
    from tests.annotations.assisted.test_admin import change_url, posted

    study = make_assisted_study(n_sentences=3)  # open, routing to everyone
    elsewhere = ai_rater(assisted_study_create(name="another study"))
    client.force_login(study.memberships.get(role="researcher").user)
    form = client.get(change_url(study)).content.decode()
    assert "Trust gate" in form
    choices = re.search(r'<select name="assisted-0-gate_system".*?</select>', form, re.S)[0]
    assert f'value="{ai_rater(study).pk}"' in choices
    assert f'value="{elsewhere.pk}"' not in choices  # only this study's AI systems
    data = posted(client.get(change_url(study)),
                  **{"assisted-0-gate_system": str(ai_rater(study).pk),
                     "assisted-0-gate_min_success": "0.9"})
    assert client.post(change_url(study), data).status_code == 302
    fresh = AssistedSettings.objects.get(study=study)
    assert (fresh.gate_min_success, fresh.gate_system_id) == (0.9, ai_rater(study).pk)
    url = reverse("admin:annotations_assistedstudy_routing", args=[study.pk])
    response = client.post(url, {"routing": "threshold", "threshold": "0.5",
                                 "band_edges": "[]", "band_targets": "[]"})
    assert response.status_code == 200
    assert "AI rater has no finished audit" in response.content.decode()
    assert AssistedSettings.objects.get(study=study).routing == "all"
    assert set(Sentence.objects.filter(study=study).values_list("route", flat=True)) == {
        "human"}


def test_a_manager_reads_the_audit_on_the_dashboard_without_a_link_to_it(client):
    from annotations.core.services.studies import membership_add
    from tests.factories import UserFactory

    study = make_assisted_study(n_sentences=3, ratings_per_item=1)
    audit = run_audit(study, ai_rater(study), liar)
    manager = UserFactory(username=f"{study.pk}-manager")
    membership_add(study=study, user=manager, role="manager")
    client.force_login(manager)
    page = client.get(reverse("assisted-dashboard", args=[study.pk])).content.decode()
    assert f"{100 * LIAR_RATE:.1f} %" in page
    assert reverse("audit-detail", args=[study.pk, audit.pk]) not in page  # a 404 for them
