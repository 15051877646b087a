"""Specialists as the verifier (issue 19, beyond the paper): each criterion check a yes/no
question through the task engine, asked in waves (a round only after the previous one
passed), the audit resumed by the last answer, and the same outcomes as the programmatic
verifier when people answer as the checks do. Workers see the datapoint and the question
only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotations.audit.services.runs import audit_cancel, audit_run, audit_start
from annotations.audit.services.verify import question_answer, question_next
from annotations.core.errors import ImportFailed
from annotations.models import Audit, AuditOutcome, VerifierQuestion
from tests.annotations.audit.helpers import (
    DATA,
    commitments_file,
    datapoints_file,
    encoding,
    expected_successes,
    liar,
    make_audit_study,
    make_rubric,
)
from tests.factories import specialist

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_min_time(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0


def longer(x: str, k: int) -> str:
    """x′ = x and k zeros: the same criteria (no "11" added, the first character kept)."""
    return x + "0" * k


def truthful(question: VerifierQuestion) -> bool:
    """What the criterion gives, by hand (helpers.encoding: has_11, starts_0)."""
    has_11, starts_0 = encoding(question.datapoint)
    return has_11 if question.criterion == "has_11" else starts_0


def start(study, similar_of, verifier="human", rounds=2):
    rubric = study.rubrics.first() or make_rubric(study)
    audit = audit_start(study=study, rubric=rubric,
                        commitments=commitments_file(similar_of, rounds=rounds),
                        commitments_name="c.jsonl", datapoints=datapoints_file(),
                        datapoints_name="d.jsonl", rounds=rounds, phi=0.5, seed=7,
                        verifier=verifier, enqueue=False)
    audit_run(audit_id=audit.pk)
    audit.refresh_from_db()
    return audit


def answer_all(study, worker, capture, answer=truthful) -> int:
    """Answer wave after wave (the last answer of a wave queues the next pass, run in
    process when the block ends) until no question is left."""
    n = -1
    total = 0
    while n:
        n = 0
        with capture(execute=True):
            while (question := question_next(study=study, user=worker)) is not None:
                question_answer(user=worker, public_id=question.public_id,
                                answer=answer(question))
                n += 1
        total += n
    return total


def test_questions_come_in_waves_and_the_last_answer_resumes_the_audit(
        django_capture_on_commit_callbacks):
    study, _ = make_audit_study()
    worker = specialist(study, 0)
    audit = start(study, longer)
    assert audit.status == Audit.Status.WAITING and not audit.outcomes.exists()
    # round 1: both criteria for each x and its x′ = x0 (2 × 2 × 10)
    assert VerifierQuestion.objects.filter(audit=audit).count() == 2 * 2 * len(DATA)
    with django_capture_on_commit_callbacks(execute=True):
        first = question_next(study=study, user=worker)
        question_answer(user=worker, public_id=first.public_id, answer=truthful(first))
    assert Audit.objects.get(pk=audit.pk).status == Audit.Status.WAITING  # others open
    answer_all(study, worker, django_capture_on_commit_callbacks)
    audit.refresh_from_db()
    # round 2 asked only about the new x′ = x00, then the audit ended
    assert VerifierQuestion.objects.filter(audit=audit).count() == 3 * 2 * len(DATA)
    assert (audit.status, audit.successes) == (Audit.Status.SUCCEEDED, len(DATA))


def test_people_answering_as_the_checks_give_the_programmatic_outcomes(
        django_capture_on_commit_callbacks):
    study, _ = make_audit_study()
    worker = specialist(study, 0)
    human = start(study, liar)
    answer_all(study, worker, django_capture_on_commit_callbacks)
    human.refresh_from_db()
    machine = start(study, liar, verifier="programmatic")
    assert human.status == machine.status == Audit.Status.SUCCEEDED

    def rows(audit):
        return list(AuditOutcome.objects.filter(audit=audit).order_by("position").values_list(
            "success", "challenge", "criterion", "label", "final_label"))

    assert rows(human) == rows(machine)
    assert [r[0] for r in rows(human)] == expected_successes(liar, rounds=2)
    failed = AuditOutcome.objects.filter(audit=human, success=False).first()
    assert failed.reason.startswith(f"specialists: {failed.criterion} is ")


def test_a_worker_sees_the_datapoint_and_the_question_only(client):
    study, researcher = make_audit_study()
    worker = specialist(study, 0)
    start(study, liar)
    client.force_login(worker)
    html = client.get(reverse("audit-verify", args=[study.pk])).content.decode()
    assert 'data-testid="question"' in html and "Does this datapoint satisfy" in html
    card = html.split('data-testid="question"')[1].split("</section>")[0].lower()
    for hidden in ("c.jsonl", "label", "round", "similar", "challenge", "evaluator", "x′"):
        assert hidden not in card
    client.force_login(researcher)  # not a worker of the study
    assert client.get(reverse("audit-verify", args=[study.pk])).status_code == 404


def test_answers_on_the_page_and_a_cancelled_audit_asks_nothing_more(client):
    study, researcher = make_audit_study()
    worker = specialist(study, 0)
    audit = start(study, liar)
    client.force_login(worker)
    question = question_next(study=study, user=worker)
    response = client.post(reverse("audit-verify", args=[study.pk]),
                           {"task": question.public_id, "answer": "yes"})
    assert response.status_code == 302
    question.refresh_from_db()
    assert (question.status, question.answer, question.answered_by_id) == (
        "answered", True, worker.pk)
    assert client.post(reverse("audit-verify", args=[study.pk]),
                       {"task": "x", "answer": "maybe"}).status_code == 400
    audit_cancel(audit=audit)
    assert Audit.objects.get(pk=audit.pk).status == Audit.Status.CANCELLED
    assert question_next(study=study, user=specialist(study, 1)) is None


def test_people_verify_imported_commitments_only():
    study, _ = make_audit_study()
    with pytest.raises(ImportFailed, match="imported commitments only"):
        audit_start(study=study, rubric=make_rubric(study), datapoints=datapoints_file(),
                    evaluator="ai", ai={}, verifier="human")


def test_the_researcher_sees_the_wave_waiting_and_where_workers_answer(client):
    study, researcher = make_audit_study()
    audit = start(study, liar)
    client.force_login(researcher)
    html = client.get(reverse("audit-detail", args=[study.pk, audit.pk])).content.decode()
    asked = VerifierQuestion.objects.filter(audit=audit).count()
    assert f"Waiting for the specialists: 0 of {asked} questions answered" in html
    assert reverse("audit-verify", args=[study.pk]) in html
    assert 'hx-trigger="every 10s"' in html  # a wave may take days: a slower poll
