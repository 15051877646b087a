"""AI outputs from an OpenAI-compatible endpoint (a real local stand-in server): prompts from
the study's templates without authors, replies parsed or stored as unparseable, runs with
progress, failures retried then reported with nothing of the failed batch stored."""

from __future__ import annotations

import pytest

from annotations.critique.services import ai_runs
from annotations.critique.services.ai_runs import RunRefused, critique_ai_run_start
from annotations.critique.services.studies import critique_settings_update
from annotations.models import CritiqueOutput, CritiqueRun, CritiqueTask
from tests.annotations.critique.helpers import make_critique_study
from tests.assistants.standin import reply, status

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _runs_inline(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the run's task runs on commit, in the test


def _answering(body: dict):
    """Critique prompts get "Better: 1 / Answer: B"; responses "Answer: C", except
    question 1's responses, which never give an answer line (unparseable)."""
    prompt = body["messages"][-1]["content"]
    if "[The start of output 1]" in prompt:
        return reply("Output 1 reads the question right.\nBetter: 1\nAnswer: B")
    if "Question 1:" in prompt:
        return reply("I would rather not say.")
    return reply("Step by step, C follows.\nAnswer: C")


def _study(server, *, mode="ai", top=1, counts=(2, 2), n_questions=2):
    study, users = make_critique_study(n_questions=n_questions, top_level=top,
                                       counts=list(counts), mode=mode)
    critique_settings_update(study=study, ai_base_url=server.base_url, ai_model="stand-in-7b",
                             ai_api_key="sk-study-own")
    return study


def _run(study, capture):
    with capture(execute=True):
        run = critique_ai_run_start(study=study)
    run.refresh_from_db()
    return run


def test_a_run_writes_every_ai_output_parsed_or_unparseable(standin,
                                                            django_capture_on_commit_callbacks):
    server = standin(responder=_answering)
    study = _study(server)
    run = _run(study, django_capture_on_commit_callbacks)
    assert (run.status, run.done, run.total, run.stored) == ("succeeded", 2, 2, 8)
    # every call carried the study's own key
    assert {{k.lower(): v for k, v in r.headers.items()}["authorization"]
            for r in server.requests} == {"Bearer sk-study-own"}
    outputs = CritiqueOutput.objects.filter(study=study)
    assert outputs.count() == 8 and not outputs.exclude(author_kind="ai").exists()
    q0 = outputs.filter(question__external_id="q0")
    assert set(q0.filter(level=0).values_list("final", flat=True)) == {2}
    q1_responses = outputs.filter(question__external_id="q1", level=0)
    assert set(q1_responses.values_list("final", flat=True)) == {None}  # never guessed
    assert q1_responses.first().raw_text == "I would rather not say."
    assert run.unparseable == 2
    for critique in outputs.filter(level=1):
        assert (critique.choice, critique.final) == ("first", 1)
        assert critique.ai_model == "stand-in-7b"
        assert {critique.first.slot, critique.second.slot} == {0, 1}
    prompts = [r.body["messages"][-1]["content"] for r in server.requests]
    critique_prompts = [p for p in prompts if "[The start of output 1]" in p]
    assert len(critique_prompts) == 4
    assert "Step by step, C follows." in critique_prompts[0]  # the inputs' reasoning
    assert all("stand-in-7b" not in p and "simulated" not in p.lower() for p in prompts)


def test_the_study_templates_are_what_is_sent(standin, django_capture_on_commit_callbacks):
    server = standin(responder=_answering)
    study = _study(server, n_questions=1)
    critique_settings_update(study=study, response_system="You are careful.",
                             response_template="Q: {{question}}\n{{options}}\nEnd with Answer: X")
    _run(study, django_capture_on_commit_callbacks)
    first = server.requests[0].body["messages"]
    assert first[0] == {"role": "system", "content": "You are careful."}
    assert first[1]["content"].startswith("Q: Question 0: which is right?\nA. option 0.0")


def test_a_failing_endpoint_stores_nothing_and_reports_why(standin, settings,
                                                           django_capture_on_commit_callbacks):
    settings.OVERSIGHT_AI_MAX_RETRIES = 1
    server = standin([status(400, b'{"error": {"message": "model not found"}}')])
    study = _study(server)
    run = _run(study, django_capture_on_commit_callbacks)
    assert run.status == "failed" and run.stored == 0
    # the status and the error class, never the endpoint's body (issue 15)
    assert "HTTP 400 (BadRequestError)" in run.errors[0] and server.base_url in run.errors[0]
    assert "model not found" not in run.errors[0]
    assert not CritiqueOutput.objects.filter(study=study).exists()


def test_errors_are_retried_before_the_run_gives_up(standin, settings,
                                                    django_capture_on_commit_callbacks):
    settings.OVERSIGHT_AI_MAX_RETRIES = 1
    server = standin([status(500), reply("Fine.\nAnswer: A")])
    study = _study(server, top=1, counts=(2, 1), n_questions=1)
    run = _run(study, django_capture_on_commit_callbacks)
    assert run.status == "succeeded"  # the 500 was retried
    assert len(server.requests) == 4  # 500, then 2 responses and 1 critique


def test_a_failure_keeps_earlier_batches_and_nothing_of_its_own(
        standin, settings, monkeypatch, django_capture_on_commit_callbacks):
    settings.OVERSIGHT_AI_MAX_RETRIES = 0
    monkeypatch.setattr(ai_runs, "BATCH_QUESTIONS", 1)
    # question 0 needs 4 answers (2 responses, 2 critiques); the 6th request fails
    server = standin([reply("a\nAnswer: A")] * 5 + [status(400)])
    study = _study(server)
    run = _run(study, django_capture_on_commit_callbacks)
    assert (run.status, run.done, run.stored) == ("failed", 1, 4)
    stored = CritiqueOutput.objects.filter(study=study)
    assert set(stored.values_list("question__external_id", flat=True)) == {"q0"}


def test_mixed_mode_runs_write_only_the_ai_levels_then_tasks_follow(
        standin, django_capture_on_commit_callbacks):
    server = standin(responder=_answering)
    study = _study(server, mode="ai_below", top=2, counts=(2, 2, 3), n_questions=1)
    run = _run(study, django_capture_on_commit_callbacks)
    assert run.status == "succeeded"
    levels = sorted(CritiqueOutput.objects.filter(study=study).values_list("level", flat=True))
    assert levels == [0, 0, 1, 1]
    assert list(CritiqueTask.objects.filter(study=study).values_list("level", flat=True)) == \
        [2, 2, 2]


def test_runs_are_refused_without_ai_levels_endpoint_or_while_one_runs(standin, settings):
    settings.OVERSIGHT_AI_BASE_URL = ""
    settings.OVERSIGHT_AI_MODEL = ""
    humans, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    with pytest.raises(RunRefused, match="no AI level"):
        critique_ai_run_start(study=humans)
    ai, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai")
    with pytest.raises(RunRefused, match="No AI endpoint"):
        critique_ai_run_start(study=ai)
    critique_settings_update(study=ai, ai_base_url="http://127.0.0.1:9/v1", ai_model="m")
    critique_ai_run_start(study=ai)  # queued (its task starts after commit)
    with pytest.raises(RunRefused, match="under way"):
        critique_ai_run_start(study=ai)
    assert CritiqueRun.objects.filter(study=ai).count() == 1
