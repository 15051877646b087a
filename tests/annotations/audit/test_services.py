"""Audit services: the registered checks (no code, regular expressions on the linear-time
RE2), rubric files, starting an audit (bad files change nothing and name file, line
and field), the run end to end through the in-process Celery task, cancel, failure."""

from __future__ import annotations

import re
import time

import pytest
from scipy.stats import binomtest

from annotations.audit.models import Audit, AuditFile, AuditOutcome, Criterion, Rubric
from annotations.audit.services.checks import (
    build_criterion,
    criterion_problems,
    regex_problem,
)
from annotations.audit.services.rubrics import rubric_import
from annotations.audit.services.runs import audit_cancel, audit_run, audit_start
from annotations.core.errors import ImportFailed
from annotations.core.models import Item
from tests.annotations.audit.helpers import (
    DATA,
    commitments_file,
    datapoints_file,
    expected_successes,
    liar,
    make_audit_study,
    make_rubric,
)

pytestmark = pytest.mark.django_db


def honest(x, k):
    return x


# --- checks ---------------------------------------------------------------------------------
def test_each_registered_check_reads_the_datapoint_or_its_field():
    assert build_criterion(name="c", kind="contains", text="ab")("xaby") == 1
    assert build_criterion(name="c", kind="contains", text="ab")("xy") == 0
    assert build_criterion(name="c", kind="regex", text=r"^\d{3}$")("123") == 1
    assert build_criterion(name="c", kind="regex", text=r"^\d{3}$")("1234") == 0
    assert build_criterion(name="c", kind="count_above", text="1", number=2)("1101") == 1
    assert build_criterion(name="c", kind="count_above", text="1", number=3)("1101") == 0
    assert build_criterion(name="c", kind="length_above", number=3)("abcd") == 1
    assert build_criterion(name="c", kind="length_above", number=4)("abcd") == 0
    eq = build_criterion(name="c", kind="field_equals", field="verdict", value="yes")
    assert eq({"verdict": "yes"}) == 1
    assert eq({"verdict": "no"}) == 0 and eq({}) == 0 and eq("yes") == 0
    assert build_criterion(name="c", kind="field_equals", field="n", value=1)({"n": True}) == 0
    on_field = build_criterion(name="c", kind="contains", text="ok", field="answer")
    assert on_field({"answer": "it is ok"}) == 1
    assert on_field({"other": "ok"}) == 0 and on_field("ok") == 0


@pytest.mark.parametrize(("pattern", "construct"), [
    (r"(\w)\1", "a back-reference"), (r"(?P<w>x)(?P=w)", "a back-reference"),
    (r"(?=a)a", "look-ahead"), (r"(?<!x)y", "negative look-ahead or look-behind"),
    (r"(?>ab)c", "an atomic group"), (r"a++b", "a possessive repeat"),
    (r"a{1001}", "RE2: invalid repetition size"), ("(", "not a regular expression"),
    ("x" * 201, "at most 200 characters")])
def test_a_pattern_the_linear_matcher_cannot_run_is_refused_naming_criterion_and_construct(
        pattern, construct):
    assert construct in regex_problem(pattern)
    [(field, message)] = criterion_problems(name="has_ref", kind="regex", text=pattern)
    assert field == "text" and construct in message
    if "characters" not in construct and "not a regular" not in construct:
        assert message.startswith("criterion has_ref: uses ") or "RE2:" in message


def test_a_rubric_file_with_a_look_ahead_is_refused_naming_line_criterion_and_construct():
    study, _ = make_audit_study()
    data = (b'{"name": "ok", "check": "regex", "text": "a*a*b"}\n'
            b'{"name": "ahead", "check": "regex", "text": "x(?=y)"}\n')
    with pytest.raises(ImportFailed) as caught:
        rubric_import(study=study, name="r", aggregator="majority", data=data,
                      source="r.jsonl")
    assert caught.value.errors == [
        "r.jsonl:2: text: criterion ahead: uses a look-ahead or look-behind ((?=…), (?<=…)), "
        "which the linear-time matcher (RE2) does not support: rewrite the pattern without it"]
    assert not Rubric.objects.filter(study=study).exists()


# patterns Python's re takes polynomial (or exponential) time on: accepted now, and linear
HOSTILE = [r"a*a*b", r".*.*.*x", r"(a{1,20}){1,20}b", r"(a+)+$b", r"(a|ab)*c", r"(\w+\s?)+!",
           r"^(a|a?)+b"]


@pytest.mark.parametrize("pattern", HOSTILE)
def test_a_backtracking_pattern_runs_in_linear_time_with_the_right_answers(pattern):
    assert regex_problem(pattern) == ""
    check = build_criterion(name="c", kind="regex", text=pattern)
    for text in ("aab", "ax", "abc", "ab ab!", "a", ""):  # short: Python's re agrees
        assert check(text) == (re.search(pattern, text) is not None), (pattern, text)
    took = {}
    for n in (2_000, 20_000):
        started = time.perf_counter()
        assert check("a" * n) == 0  # no b, x, c or ! to end a match
        took[n] = time.perf_counter() - started
    assert took[20_000] < 1.0, took  # re: 9.8 s at 2 000 characters for a*a*b
    assert took[20_000] < 50 * took[2_000] + 0.05, took  # about 10×: linear, loosely
    assert check("a" * 200_000 + "bcx!") == (re.search(pattern, "aabcx!") is not None)


def test_a_backtracking_pattern_in_a_thread_does_not_stall_the_process():
    import threading

    check = build_criterion(name="c", kind="regex", text=r".*.*.*x")
    results = []
    workers = [threading.Thread(target=lambda: results.append(check("a" * 50_000)))
               for _ in range(2)]  # the embedded mode: no timer off the main thread
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=10)
    assert results == [0, 0] and time.perf_counter() - started < 2


def test_re2_reads_digits_and_the_end_as_documented():
    digits = build_criterion(name="c", kind="regex", text=r"^\d+$")
    assert digits("123") == 1 and digits("\u0663") == 0  # ASCII digits only
    assert digits("123\n") == 0  # $ is the end of the text


def test_missing_parameters_are_named():
    assert dict(criterion_problems(name="", kind="count_above", text="")) == {
        "name": "a name is required", "text": "the text to look for is required",
        "number": "expected a whole number ≥ 0, got None"}
    assert {f for f, _ in criterion_problems(name="c", kind="field_equals")} == {"field", "value"}
    assert [f for f, _ in criterion_problems(name="c", kind="eval")] == ["check"]


# --- rubric files ---------------------------------------------------------------------------
def test_a_rubric_file_is_imported_in_order():
    study, _ = make_audit_study()
    data = (b'{"name": "a", "check": "contains", "text": "11"}\n\n'
            b'{"name": "b", "check": "length_above", "number": 3}\n')
    rubric = rubric_import(study=study, name="r", aggregator="majority", data=data,
                           source="r.jsonl")
    assert list(rubric.criteria.values_list("name", "kind", "position")) == [
        ("a", "contains", 0), ("b", "length_above", 1)]


def test_a_rubric_file_with_errors_changes_nothing_and_names_file_line_and_field():
    study, _ = make_audit_study()
    data = (b'{"name": "a", "check": "contains", "text": "11"}\n'
            b'{"name": "b", "check": "regex", "text": "(a)\\\\1"}\n'
            b'{"name": "a", "check": "contains", "text": "x"}\n'
            b'{"name": "c", "check": "exec", "code": "import os"}\n'
            b'not json\n'
            b'{"name": "d", "check": "count_above", "text": "1", "number": -1}\n')
    with pytest.raises(ImportFailed) as caught:
        rubric_import(study=study, name="r", aggregator="majority", data=data, source="r.jsonl")
    errors = caught.value.errors
    assert any(e.startswith("r.jsonl:2: text: criterion b: uses a back-reference")
               for e in errors)
    assert "r.jsonl:3: name: 'a' repeats line 1" in errors
    assert any(e.startswith("r.jsonl:4: code: unknown field") for e in errors)
    assert any(e.startswith("r.jsonl:4: check: unknown check 'exec'") for e in errors)
    assert any(e.startswith("r.jsonl:5: invalid JSON") for e in errors)
    assert any(e.startswith("r.jsonl:6: number:") for e in errors)
    assert len(errors) == 6
    lines = [int(e.split(":")[1]) for e in errors]
    assert lines == sorted(lines)  # issue 27: in line order (invalid JSON came first)
    assert not Rubric.objects.filter(study=study).exists()
    assert not Criterion.objects.exists()


# --- starting -------------------------------------------------------------------------------
def test_bad_commitments_change_nothing_and_name_file_line_and_field():
    study, researcher = make_audit_study()
    rubric = make_rubric(study)
    bad = (b'{"item": "d0", "round": 1, "label": 1, "similar": "0110"}\n'
           b'{"item": "nope", "round": 1, "label": 2, "similar": "0110"}\n'
           b'{"item": "d1", "round": 4, "label": 1, "similar": null}\n')
    with pytest.raises(ImportFailed) as caught:
        audit_start(study=study, rubric=rubric, commitments=bad, commitments_name="c.jsonl",
                    datapoints=datapoints_file(), datapoints_name="d.jsonl", rounds=3, by=researcher)
    errors = caught.value.errors
    assert errors == ["c.jsonl:2: item: 'nope' is not an item of the audited data set",
                      "c.jsonl:2: label: expected the integer 0 or 1, got 2",
                      "c.jsonl:3: round: 4 exceeds the audit's 3 rounds",
                      "c.jsonl:3: similar: expected a datapoint, got null"]
    assert not Audit.objects.exists() and not AuditFile.objects.exists()


def test_a_bad_datapoints_file_changes_nothing_and_names_file_line_and_field():
    study, researcher = make_audit_study()
    rubric = make_rubric(study)
    bad = b'{"item": "d0", "datapoint": "01"}\n{"item": "d0", "datapoint": "1"}\n{"item": "x"}\n'
    with pytest.raises(ImportFailed) as caught:
        audit_start(study=study, rubric=rubric, commitments=commitments_file(honest),
                    commitments_name="c.jsonl", datapoints=bad, datapoints_name="d.jsonl",
                    by=researcher)
    assert caught.value.errors == ["d.jsonl:2: item: 'd0' repeats line 1",
                                   "d.jsonl:3: datapoint: missing (any JSON value but null)"]
    assert not Audit.objects.exists()


@pytest.mark.parametrize(("content", "message"), [
    (b'{"item": "d0", "round": 1, "label": 1, "similar": "a\\u0000b"}\n',
     "c.jsonl:1: similar: contains a NUL character"),
    (b'{"item": "d0", "round": 1, "label": 1, "similar": ' + b"[" * 100 + b"]" * 100 + b"}\n",
     "c.jsonl:1: JSON nested deeper than 64 levels"),
    (b"\xff\xfe", "c.jsonl:1: not UTF-8 text"),
])
def test_commitments_that_cannot_be_stored_are_refused_as_every_import_does(content, message):
    study, _ = make_audit_study()
    with pytest.raises(ImportFailed) as caught:
        audit_start(study=study, rubric=make_rubric(study), commitments=content,
                    commitments_name="c.jsonl", datapoints=datapoints_file())
    assert caught.value.errors[0].startswith(message), caught.value.errors
    assert not Audit.objects.exists()


def test_a_file_over_the_size_limit_is_refused(settings):
    settings.OVERSIGHT_IMPORT_MAX_BYTES = 100
    study, _ = make_audit_study()
    with pytest.raises(ImportFailed, match="d.jsonl: .* bytes; at most 100"):
        audit_start(study=study, rubric=make_rubric(study), commitments=b"",
                    commitments_name="c.jsonl", datapoints=datapoints_file(),
                    datapoints_name="d.jsonl")


def test_bad_parameters_and_a_foreign_rubric_are_refused():
    study, researcher = make_audit_study()
    other, _ = make_audit_study("other")
    with pytest.raises(ImportFailed) as caught:
        audit_start(study=study, rubric=make_rubric(study), commitments=b"", commitments_name="c",
                    datapoints=datapoints_file(), rounds=0, phi=1.5, seed="x")
    assert [e.split(":")[0] for e in caught.value.errors] == ["rounds", "phi", "seed"]
    from annotations.audit.services.runs import AuditRefused

    with pytest.raises(AuditRefused):
        audit_start(study=study, rubric=make_rubric(other), commitments=commitments_file(honest),
                    commitments_name="c.jsonl", datapoints=datapoints_file())
    assert not Audit.objects.exists()


# --- running --------------------------------------------------------------------------------
def _start(study, rubric, similar_of, *, phi=0.5, seed=3, rounds=3, capture=None, **kw):
    return audit_start(study=study, rubric=rubric,
                       commitments=commitments_file(similar_of, rounds=rounds),
                       commitments_name="c.jsonl", datapoints=datapoints_file(),
                       datapoints_name="d.jsonl", rounds=rounds, phi=phi, seed=seed, **kw)


def test_the_task_runs_end_to_end_and_stores_every_outcome(django_capture_on_commit_callbacks):
    study, researcher = make_audit_study()
    rubric = make_rubric(study)
    with django_capture_on_commit_callbacks(execute=True):
        audit = _start(study, rubric, liar, phi=1.0, by=researcher)
    audit.refresh_from_db()
    expected = expected_successes(liar)
    assert audit.status == Audit.Status.SUCCEEDED
    assert (audit.done, audit.total, audit.successes) == (len(DATA), len(DATA), sum(expected))
    outcomes = list(AuditOutcome.objects.filter(audit=audit).order_by("position"))
    assert [o.success for o in outcomes] == expected
    assert [o.item for o in outcomes] == [f"d{i}" for i in range(len(DATA))]
    for o in outcomes:
        if o.success:
            assert len(o.rounds) == 3 and not o.flipped and o.final_label == 1
        else:  # the liar's x′ fails at once; φ = 1 flips every failed label
            assert len(o.rounds) == 1 and o.rounds[0]["passed"] is False
            assert o.challenge in (1, 2) and o.criterion in ("has_11", "starts_0")
            assert o.flipped and o.final_label == 0
    assert audit.flips == len(DATA) - sum(expected)
    s = audit.summary
    exact = binomtest(sum(expected), len(DATA)).proportion_ci(0.95, method="exact")
    assert s["interval"] == pytest.approx([exact.low, exact.high])
    assert sum(s["failures_by_challenge"].values()) == len(DATA) - sum(expected)
    assert sum(s["failures_by_criterion"].values()) == len(DATA) - sum(expected)
    assert s["error_factor"] == pytest.approx(1 - 1.0 + 1.0 * 0.25 ** 3)


def test_an_honest_evaluator_succeeds_everywhere_and_phi_zero_flips_nothing(
        django_capture_on_commit_callbacks):
    study, _ = make_audit_study()
    with django_capture_on_commit_callbacks(execute=True):
        audit = _start(study, make_rubric(study), honest, phi=0.0)
    audit.refresh_from_db()
    assert audit.successes == len(DATA) and audit.flips == 0
    assert audit.summary["failures_by_challenge"] == {}


def test_the_same_seed_gives_the_same_outcomes(django_capture_on_commit_callbacks):
    study, _ = make_audit_study()
    rubric = make_rubric(study)

    def sometimes(x, k):  # honest in some rounds only: which challenge is drawn matters not
        return x if k != 2 else "1111"

    with django_capture_on_commit_callbacks(execute=True):
        a = _start(study, rubric, sometimes, phi=0.5, seed=11)
        b = _start(study, rubric, sometimes, phi=0.5, seed=11)
    rows = [list(AuditOutcome.objects.filter(audit=x).order_by("position").values_list(
        "success", "final_label", "challenge", "rounds")) for x in (a, b)]
    assert rows[0] == rows[1]


def test_the_study_items_are_a_data_set(django_capture_on_commit_callbacks):
    study, _ = make_audit_study()
    items = list(Item.objects.filter(study=study).order_by("pk").values_list("external_id",
                                                                              "text"))
    import json

    commitments = "".join(json.dumps({"item": i, "round": k, "label": 0, "similar": text}) + "\n"
                          for i, text in items for k in (1, 2))
    with django_capture_on_commit_callbacks(execute=True):
        audit = audit_start(study=study, rubric=make_rubric(study),
                            commitments=commitments.encode(), commitments_name="c.jsonl",
                            rounds=2)
    audit.refresh_from_db()
    assert audit.dataset == Audit.Dataset.ITEMS and audit.total == len(items)
    assert audit.successes == len(items)


def test_cancel_a_queued_audit_ends_it_and_a_running_one_stops_at_its_next_report():
    study, _ = make_audit_study()
    rubric = make_rubric(study)
    queued = _start(study, rubric, honest)  # on-commit not run: still queued
    audit_cancel(audit=queued)
    queued.refresh_from_db()
    assert queued.status == Audit.Status.CANCELLED
    audit_run(audit_id=queued.pk)  # the queued task arriving later does nothing
    assert not AuditOutcome.objects.filter(audit=queued).exists()

    running = _start(study, rubric, honest)
    Audit.objects.filter(pk=running.pk).update(status=Audit.Status.RUNNING)
    audit_cancel(audit=running)
    running.refresh_from_db()
    assert running.status == Audit.Status.RUNNING and running.cancel_requested
    audit_run(audit_id=running.pk)
    running.refresh_from_db()
    assert running.status == Audit.Status.CANCELLED
    assert not AuditOutcome.objects.filter(audit=running).exists()
    from annotations.audit.services.runs import AuditRefused

    with pytest.raises(AuditRefused):
        audit_cancel(audit=running)


def test_a_cancel_during_the_run_is_seen_at_a_progress_report(monkeypatch):
    """The progress callback looks for the request: cancelled mid-run, nothing stored."""
    from annotations.audit.services import runs

    study, _ = make_audit_study()
    audit = _start(study, make_rubric(study), honest)
    monkeypatch.setattr(runs, "PROGRESS_SECONDS", 0.0)
    calls = []
    real = runs._progress

    def progress(audit_id):
        report = real(audit_id)

        def wrapped(done, total):
            calls.append(done)
            if done == 3:
                Audit.objects.filter(pk=audit_id).update(cancel_requested=True)
            report(done, total)
        return wrapped

    monkeypatch.setattr(runs, "_progress", progress)
    audit_run(audit_id=audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.CANCELLED and audit.done == 3 and calls == [1, 2, 3]
    assert not AuditOutcome.objects.filter(audit=audit).exists()


def test_a_run_whose_file_is_gone_fails_and_is_never_a_success():
    study, _ = make_audit_study()
    audit = _start(study, make_rubric(study), honest)
    AuditFile.objects.filter(audit=audit).delete()
    with pytest.raises(AuditFile.DoesNotExist):
        audit_run(audit_id=audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.FAILED and audit.successes is None
    assert "DoesNotExist" in audit.errors[0]


def test_peoples_labels_give_cohens_kappa_beside_the_success_rate(
        django_capture_on_commit_callbacks):
    import json

    from sklearn.metrics import cohen_kappa_score

    study, _ = make_audit_study()
    people = [int(x.count("1") >= 2) for x in DATA]
    people[0] = None  # a datapoint nobody labelled
    evaluator = [int("11" in x) for x in DATA]
    datapoints = "".join(json.dumps({"item": f"d{i}", "datapoint": x,
                                     **({} if people[i] is None else {"reference": people[i]})})
                         + "\n" for i, x in enumerate(DATA)).encode()
    commitments = "".join(json.dumps({"item": f"d{i}", "round": k, "label": evaluator[i],
                                      "similar": x}) + "\n"
                          for i, x in enumerate(DATA) for k in (1, 2, 3)).encode()
    with django_capture_on_commit_callbacks(execute=True):
        audit = audit_start(study=study, rubric=make_rubric(study), commitments=commitments,
                            commitments_name="c.jsonl", datapoints=datapoints,
                            datapoints_name="d.jsonl", phi=0.0)
    audit.refresh_from_db()
    kappa = audit.summary["kappa"]
    assert kappa["n"] == len(DATA) - 1
    assert kappa["kappa"] == pytest.approx(cohen_kappa_score(evaluator[1:], people[1:]))
    assert kappa["lower"] < kappa["kappa"] < kappa["upper"]
    assert list(AuditOutcome.objects.filter(audit=audit).order_by("position")
                .values_list("reference", flat=True)) == people


def test_a_reference_that_is_not_a_label_is_named():
    study, _ = make_audit_study()
    with pytest.raises(ImportFailed) as caught:
        audit_start(study=study, rubric=make_rubric(study), commitments=b"",
                    commitments_name="c.jsonl",
                    datapoints=b'{"item": "a", "datapoint": "1", "reference": "yes"}\n',
                    datapoints_name="d.jsonl")
    assert caught.value.errors[0].startswith("d.jsonl:1: reference: the integer 0 or 1")
