"""An AI system as an audit's evaluator, through the OpenAI-compatible provider against a
real local stand-in server: picking and generating strategies, researchers' templates,
unparseable output a failed round (never guessed), a provider that times out or answers
garbage retried and then a failed run (never a success), and the egress rules."""

from __future__ import annotations

import json
import re

import pytest

from annotations.audit.services.runs import audit_run, audit_start
from annotations.core.errors import ImportFailed
from annotations.models import Audit, AuditOutcome
from assistants.audit_evaluator import DEFAULT_PICK, parse_commitment
from assistants.systems import system_create
from tests.annotations.audit.helpers import (
    DATA,
    datapoints_file,
    encoding,
    make_audit_study,
    make_rubric,
)
from tests.assistants.standin import garbage, reply, slow

pytestmark = pytest.mark.django_db

DATAPOINT = re.compile(r"Datapoint:\n(\S+)")
CANDIDATE = re.compile(r"^(\d+)\. (\S+)$", re.MULTILINE)


@pytest.fixture(autouse=True)
def _audits_in_process(settings):
    """Audits run in process even with a broker (CI's second pass): no worker runs here."""
    settings.CELERY_TASK_ALWAYS_EAGER = True


def user_prompt(body: dict) -> str:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def honest_picker(body: dict):
    """Picks the first listed candidate with x's encoding (computed here, by hand)."""
    prompt = user_prompt(body)
    x = DATAPOINT.search(prompt).group(1)
    for number, candidate in CANDIDATE.findall(prompt):
        if encoding(candidate) == encoding(x):
            return reply(json.dumps({"label": 1, "similar": int(number)}))
    return reply(json.dumps({"label": 1, "similar": 1}))


def honest_writer(body: dict):
    """x followed by "0": neither creates "11" nor changes the first character."""
    x = DATAPOINT.search(user_prompt(body)).group(1)
    return reply("```json\n" + json.dumps({"label": 0, "similar": x + "0"}) + "\n```")


def setup(server=None, **ai):
    study, researcher = make_audit_study()
    system = system_create(study=study, name="judge")
    fields = {"ai_base_url": server.base_url if server else "", "ai_model": "stand-in-7b",
              **ai}
    return study, system, fields


def start(study, system, fields, rounds=3):
    rubric = study.rubrics.first() or make_rubric(study)
    return audit_start(study=study, rubric=rubric, datapoints=datapoints_file(),
                       datapoints_name="d.jsonl", rounds=rounds, phi=0.5, seed=3,
                       ai_system_id=system.pk, evaluator="ai", ai=fields, enqueue=False)


def run(audit) -> Audit:
    audit_run(audit_id=audit.pk)
    audit.refresh_from_db()
    return audit


def test_picking_an_honest_answer_succeeds_everywhere_and_never_offers_x(standin):
    server = standin(responder=honest_picker)
    study, system, fields = setup(server, ai_strategy="pick")
    audit = run(start(study, system, fields))
    assert (audit.status, audit.successes, audit.total) == ("succeeded", len(DATA), len(DATA))
    assert audit.ai_system_id == system.pk and audit.evaluator == "ai"
    assert len(server.requests) == 3 * len(DATA)  # one call per round
    for request in server.requests:
        prompt = user_prompt(request.body)
        x = DATAPOINT.search(prompt).group(1)
        listed = [c for _, c in CANDIDATE.findall(prompt)]
        assert x not in listed and len(listed) == len(DATA) - 1
        assert "has_11: contains '11'" in prompt  # the rubric, by its checks
        assert request.body["model"] == "stand-in-7b"
    first = AuditOutcome.objects.filter(audit=audit).first()
    assert all(encoding(r["similar"]) == encoding(DATA[0]) for r in first.rounds)


def test_generating_strategy_with_a_researchers_template(standin):
    server = standin(responder=honest_writer)
    template = "Mine. Datapoint:\n{{datapoint}}\nRound {{round}}; reply in JSON."
    study, system, fields = setup(server, ai_strategy="generate", prompt_user=template,
                                  prompt_system="Be brief.")
    audit = run(start(study, system, fields))
    assert (audit.status, audit.successes) == ("succeeded", len(DATA))
    first = server.requests[0].body["messages"]
    assert first[0] == {"role": "system", "content": "Be brief."}
    assert first[1]["content"] == f"Mine. Datapoint:\n{DATA[0]}\nRound 1; reply in JSON."
    labels = set(AuditOutcome.objects.filter(audit=audit).values_list("label", flat=True))
    assert labels == {0}


@pytest.mark.parametrize("text", ["The label is 1, similar to 0110.",
                                  '{"label": "1", "similar": "0110"}',
                                  '{"label": true, "similar": "0110"}',
                                  '{"label": 1, "similar": "0110"} I hope this helps',
                                  '{"label": 1, "similar": "0110", "why": "looks alike"}'])
def test_unparseable_output_fails_its_round_and_is_never_guessed(standin, text):
    server = standin([reply(text)])
    study, system, fields = setup(server, ai_strategy="generate")
    audit = run(start(study, system, fields))
    assert (audit.status, audit.successes) == ("succeeded", 0)  # a run of failed rounds
    assert len(server.requests) == len(DATA)  # each datapoint stops at its first round
    for o in AuditOutcome.objects.filter(audit=audit):
        assert o.challenge is None and o.label is None and "unparseable output" in o.reason
        assert len(o.rounds) == 1 and not o.rounds[0]["passed"]


def test_offering_x_itself_is_no_similar_datapoint(standin):
    def echo_x(body):
        x = DATAPOINT.search(user_prompt(body)).group(1)
        return reply(json.dumps({"label": 1, "similar": x}))

    study, system, fields = setup(standin(responder=echo_x), ai_strategy="generate")
    audit = run(start(study, system, fields))
    assert audit.successes == 0
    assert "x′ is the datapoint itself" in AuditOutcome.objects.filter(audit=audit)[0].reason


def test_garbage_is_retried_then_the_run_continues(standin, settings):
    settings.OVERSIGHT_AI_MAX_RETRIES = 1
    calls = []

    def flaky(body):
        calls.append(1)
        return garbage() if len(calls) == 1 else honest_picker(body)

    server = standin(responder=flaky)
    study, system, fields = setup(server)
    audit = run(start(study, system, fields))
    assert (audit.status, audit.successes) == ("succeeded", len(DATA))
    assert len(server.requests) == 3 * len(DATA) + 1  # the garbage answer, asked again


@pytest.mark.parametrize("step", [garbage(), slow(3)], ids=["garbage", "timeout"])
def test_a_provider_that_keeps_failing_is_a_failed_run_never_a_success(standin, settings,
                                                                        step):
    settings.OVERSIGHT_AI_MAX_RETRIES = 1
    settings.OVERSIGHT_AI_TIMEOUT = 0.5
    server = standin([step])
    study, system, fields = setup(server)
    audit = run(start(study, system, fields))
    assert audit.status == "failed" and audit.successes is None
    assert "evaluator: the AI provider" in audit.errors[0] and "2 attempts" in audit.errors[0]
    assert len(server.requests) == 2  # the first round's call, retried once, then given up
    assert not AuditOutcome.objects.filter(audit=audit).exists()


def test_a_disallowed_endpoint_is_refused_at_start_and_at_run_time(standin, settings):
    study, system, fields = setup(None, ai_base_url="https://api.elsewhere.test/v1")
    with pytest.raises(ImportFailed) as exc:
        start(study, system, fields)
    assert "ai_base_url" in exc.value.errors[0] and "api.elsewhere.test" in exc.value.errors[0]
    assert not Audit.objects.filter(study=study).exists()
    server = standin(responder=honest_picker)
    fields["ai_base_url"] = server.base_url
    audit = start(study, system, fields)
    settings.OVERSIGHT_AI_ALLOWED_HOSTS = []  # the operator withdraws the host
    audit = run(audit)
    assert audit.status == "failed" and "evaluator:" in audit.errors[0]
    assert server.requests == []


def test_the_sites_key_goes_only_to_the_sites_endpoint(standin, settings):
    server = standin(responder=honest_picker)
    settings.OVERSIGHT_AI_API_KEY = "sk-site-secret"
    settings.OVERSIGHT_AI_BASE_URL = "http://127.0.0.2:9/v1"  # another endpoint
    study, system, fields = setup(server)
    run(start(study, system, fields, rounds=1))
    sent = {{k.lower(): v for k, v in r.headers.items()}.get("authorization")
            for r in server.requests}
    assert "Bearer sk-site-secret" not in sent
    settings.OVERSIGHT_AI_BASE_URL = server.base_url  # the site's endpoint: its key goes
    fields["ai_base_url"] = ""
    before = len(server.requests)
    run(start(study, system, fields, rounds=1))
    sent = {{k.lower(): v for k, v in r.headers.items()}.get("authorization")
            for r in server.requests[before:]}
    assert sent == {"Bearer sk-site-secret"}


def test_bad_templates_and_a_missing_ai_system_change_nothing():
    study, system, fields = setup(None, prompt_user="Label {{datapont}} please.")
    with pytest.raises(ImportFailed) as exc:
        start(study, system, fields)
    assert any("{{datapont}}" in e for e in exc.value.errors)
    assert any("{{candidates}}" in e for e in exc.value.errors)  # pick needs the list
    with pytest.raises(ImportFailed, match="ai_system"):
        audit_start(study=study, rubric=make_rubric(study, "other"),
                    datapoints=datapoints_file(), evaluator="ai", ai={})
    assert not Audit.objects.filter(study=study).exists()


def test_parse_rules():
    assert parse_commitment('{"label": 1, "similar": 3}', strategy="pick",
                            n_candidates=3) == (1, 3)
    assert "from 1 to 3" in parse_commitment('{"label": 1, "similar": 4}', strategy="pick",
                                             n_candidates=3)
    assert parse_commitment('```json\n{"label": 0, "similar": {"a": 1}}\n```',
                            strategy="generate") == (0, {"a": 1})
    assert parse_commitment('{"label": 0, "similar": null}',
                            strategy="generate") == "similar: missing"
    assert "{{candidates}}" in DEFAULT_PICK


def test_a_researcher_starts_an_ai_audit_on_the_page(client, standin, settings,
                                                     django_capture_on_commit_callbacks):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the run in process, even with a broker
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    server = standin(responder=honest_picker)
    study, researcher = make_audit_study()
    system = system_create(study=study, name="judge")
    rubric = make_rubric(study)
    client.force_login(researcher)
    page = client.get(reverse("audits", args=[study.pk])).content.decode()
    assert 'name="evaluator" value="ai"' in page and ">judge</option>" in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("audits", args=[study.pk]), {
            "action": "start", "rubric": rubric.pk, "dataset": "upload", "rounds": 2,
            "phi": 0.5, "seed": 4, "evaluator": "ai", "ai_system": system.pk,
            "ai_base_url": server.base_url, "ai_model": "stand-in-7b", "ai_strategy": "pick",
            "prompt_system": "", "prompt_user": "",
            "datapoints": SimpleUploadedFile("d.jsonl", datapoints_file())})
    audit = Audit.objects.get(study=study)
    assert response.status_code == 302 and audit.status == "succeeded"
    assert (audit.successes, audit.ai_system_id) == (len(DATA), system.pk)
    html = client.get(reverse("audit-detail", args=[study.pk, audit.pk])).content.decode()
    assert "judge" in html and f"{len(DATA)} of {len(DATA)} datapoints" in html
