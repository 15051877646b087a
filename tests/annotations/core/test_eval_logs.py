"""Evaluation logs into every study type (annotations/core/services/eval_logs/ and each
type's ``services/eval_logs.py``), on real logs: Inspect's written here by Inspect itself
(its mock model), lm-evaluation-harness's and Every Eval Ever's written by those frameworks
(tests/fixtures/eval_logs/README.md says how)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from annotations.core.errors import ImportFailed
from annotations.core.models import ImportJob, Item, Study
from annotations.core.services.eval_logs import eval_log_import, eval_log_submit
from annotations.core.services.eval_logs.formats import log_format
from annotations.core.services.studies import study_create
from assistants.models import AISystem, Prediction

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "eval_logs"
LM_MC = next(FIXTURES.glob("samples_toy_mc_*.jsonl"))
LM_GEN = next(FIXTURES.glob("samples_toy_gen_*.jsonl"))
EEE_MC = FIXTURES / "eee_tiny_mc_samples.jsonl"
EEE_FREE = FIXTURES / "eee_tiny_freetext_samples.jsonl"

QUESTIONS = [("q1", "Which is a prime?", ["4", "7", "9"], "B"),
             ("q2", "The capital of France?", ["Paris", "Rome", "Oslo"], "A"),
             ("q3", "2 + 2 = ?", ["3", "4", "5"], "B")]


def inspect_log(folder: Path, outputs: list[str], *, task: str = "tiny_mc",
                model: str = "mockllm/model", questions=QUESTIONS, epochs: int = 1,
                log_format: str = "eval") -> Path:
    """Run a tiny multiple-choice task through Inspect with its mock model answering
    ``outputs`` (one per sample and epoch, in order); the path of the log Inspect wrote."""
    from inspect_ai import Epochs, Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    def said(text: str) -> ModelOutput:
        out = ModelOutput.from_content(model=model, content=text)
        # with usage given, the mock model does not count tokens (tiktoken would download)
        out.usage = ModelUsage(input_tokens=10, output_tokens=3, total_tokens=13)
        return out

    samples = [Sample(id=i, input=text, choices=options, target=target)
               for i, text, options, target in questions]
    task_ = Task(name=task, dataset=samples, solver=multiple_choice(), scorer=choice(),
                 epochs=Epochs(epochs) if epochs > 1 else None)
    logs = inspect_eval(task_, model=get_model(model, custom_outputs=[said(o) for o in outputs]),
                        log_dir=str(folder), display="none", log_format=log_format)
    assert logs[0].status == "success", logs[0].error
    return Path(logs[0].location)


def _study(k: int = 3) -> Study:
    return study_create(name=f"eval-log-{k}", classes=[chr(ord("A") + i) for i in range(k)])


def _import(study: Study, path: Path, **options):
    data = path.read_bytes()
    return eval_log_import(study=study, source=io.BytesIO(data), name=path.name,
                           fmt=log_format(path.name, data), options=options)


def _stored(study: Study) -> tuple:
    return (list(Item.objects.filter(study=study).order_by("external_id").values_list(
                "external_id", "text", "options", "gold_option")),
            sorted(Prediction.objects.filter(system__study=study).values_list(
                "system__name", "item__external_id", "option", "raw")))


# --- Inspect ---------------------------------------------------------------------------------
def test_an_inspect_log_becomes_items_and_one_systems_predictions(tmp_path):
    from inspect_ai.log import read_eval_log

    path = inspect_log(tmp_path, ["ANSWER: B", "I think Rome.\nANSWER: B", "no idea"])
    study = _study()
    result = _import(study, path)
    items, predictions = _stored(study)
    assert items == [("q1", "Which is a prime?", ["4", "7", "9"], 1),
                     ("q2", "The capital of France?", ["Paris", "Rome", "Oslo"], 0),
                     ("q3", "2 + 2 = ?", ["3", "4", "5"], 1)]
    system = "mockllm/model · tiny_mc"
    # an option named is stored by its index (the predictions' rule), an output naming
    # none as written (scored as wrong)
    assert predictions == [(system, "q1", 1, "1"), (system, "q2", 1, "1"),
                           (system, "q3", None, "no idea")]
    assert (result.created, result.unchanged, result.answers, result.unparsed) == (3, 0, 3, 1)
    # the options chosen are the ones Inspect's own scorer scored: right exactly where it
    # said "C"
    log = read_eval_log(str(path))
    scored = {s.id: s.scores["choice"].value == "C" for s in log.samples}
    gold = {ext: g for ext, _, _, g in items}
    assert {ext: option == gold[ext] for _, ext, option, _ in predictions} == scored


def test_reimporting_a_log_changes_nothing_and_a_second_models_log_adds_a_system(tmp_path):
    first = inspect_log(tmp_path / "a", ["ANSWER: B", "ANSWER: A", "ANSWER: C"])
    study = _study()
    _import(study, first)
    before = _stored(study)
    again = _import(study, first)
    assert _stored(study) == before
    assert (again.created, again.unchanged, again.answers, again.updated) == (0, 3, 3, 3)
    other = inspect_log(tmp_path / "b", ["ANSWER: A", "ANSWER: A", "ANSWER: B"],
                        model="mockllm/other")
    _import(study, other)
    assert Item.objects.filter(study=study).count() == 3
    assert sorted(AISystem.objects.filter(study=study).values_list("name", flat=True)) == [
        "mockllm/model · tiny_mc", "mockllm/other · tiny_mc"]
    assert _stored(study)[1][3:] == [("mockllm/other · tiny_mc", "q1", 0, "0"),
                                     ("mockllm/other · tiny_mc", "q2", 0, "0"),
                                     ("mockllm/other · tiny_mc", "q3", 1, "1")]


def test_epochs_are_systems_of_their_own_and_a_json_log_reads_the_same(tmp_path):
    path = inspect_log(tmp_path, ["ANSWER: B"] * 6, epochs=2, log_format="json")
    assert path.suffix == ".json"
    study = _study()
    _import(study, path)
    assert sorted(AISystem.objects.filter(study=study).values_list("name", flat=True)) == [
        "mockllm/model · tiny_mc · epoch 1", "mockllm/model · tiny_mc · epoch 2"]
    assert Prediction.objects.filter(system__study=study).count() == 6


def test_an_item_stored_with_another_question_is_refused_and_nothing_is_written(tmp_path):
    study = _study()
    _import(study, inspect_log(tmp_path / "a", ["ANSWER: B"] * 3))
    before = _stored(study)
    changed = [(QUESTIONS[0][0], "Which is not a prime?", *QUESTIONS[0][2:]), *QUESTIONS[1:]]
    path = inspect_log(tmp_path / "b", ["ANSWER: A"] * 3, questions=changed,
                       model="mockllm/other")
    with pytest.raises(ImportFailed) as failed:
        _import(study, path)
    assert failed.value.errors == [
        f"{path.name}: sample q1, epoch 1: the study's item 'q1' has another text; a log "
        f"over the same items must ask the same questions"]
    assert _stored(study) == before


def test_a_truncated_or_foreign_file_is_refused_naming_it(tmp_path):
    path = inspect_log(tmp_path, ["ANSWER: B"] * 3)
    data = path.read_bytes()
    study = _study()
    with pytest.raises(ImportFailed, match=r"run\.eval: not a readable Inspect log: a "
                                           r"damaged or truncated zip"):
        eval_log_import(study=study, source=io.BytesIO(data[: len(data) // 2]),
                        name="run.eval", fmt="inspect", options={})
    with pytest.raises(ImportFailed, match=r"picture\.png: not an evaluation log the "
                                           r"platform reads"):
        log_format("picture.png", b"\x89PNG\r\n\x1a\n" + bytes(100))
    assert _stored(study) == ([], [])


def test_a_zip_that_would_inflate_past_the_limit_is_refused_before_inspect_reads_it(
        tmp_path, settings):
    settings.OVERSIGHT_EVAL_LOG_MAX_INFLATED = 1_000_000
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("samples/big.json", b"0" * 5_000_000)  # 5 MB of zeros, ~5 kB zipped
    with pytest.raises(ImportFailed, match=r"bomb\.eval: the log would inflate to "
                                           r"5,000,000 bytes; at most 1,000,000"):
        eval_log_import(study=_study(), source=io.BytesIO(buffer.getvalue()),
                        name="bomb.eval", fmt="inspect", options={})


def test_a_log_declaring_more_samples_than_allowed_is_refused_from_its_header(
        tmp_path, settings):
    settings.OVERSIGHT_EVAL_LOG_MAX_SAMPLES = 2
    path = inspect_log(tmp_path, ["ANSWER: B"] * 3)
    with pytest.raises(ImportFailed, match=r"3 samples × epochs; at most 2 per import"):
        _import(_study(), path)


def test_samples_with_a_nul_or_an_over_long_text_are_named_and_nothing_is_stored(tmp_path):
    questions = [("q1", "Has a \x00 inside", ["4", "7", "9"], "B"),
                 ("q2", "x" * 60_000, ["Paris", "Rome", "Oslo"], "A"), QUESTIONS[2]]
    path = inspect_log(tmp_path, ["ANSWER: B"] * 3, questions=questions)
    study = _study()
    with pytest.raises(ImportFailed) as failed:
        _import(study, path)
    errors = failed.value.errors
    assert any(e.startswith(f"{path.name}: sample q1, epoch 1: text: contains a NUL")
               for e in errors), errors
    assert any(e.startswith(f"{path.name}: sample q2, epoch 1: text: 60000 characters")
               for e in errors), errors
    assert _stored(study) == ([], [])


# --- lm-evaluation-harness ---------------------------------------------------------------------
def test_an_lm_eval_samples_file_gives_the_highest_likelihood_option(tmp_path):
    study = _study(4)
    result = _import(study, LM_MC, model="EleutherAI/pythia-14m")
    items, predictions = _stored(study)
    lines = [json.loads(line) for line in LM_MC.read_text().splitlines()]
    assert [ext for ext, *_ in items] == [str(r["doc_id"]) for r in lines]
    assert [options for _, _, options, _ in items] == [r["doc"]["choices"] for r in lines]
    assert [gold for *_, gold in items] == [r["doc"]["label"] for r in lines]
    system = "EleutherAI/pythia-14m · toy_mc"
    assert {name for name, *_ in predictions} == {system}
    # lm-eval's own acc metric: 1 exactly where the prediction is the gold option
    gold = {ext: g for ext, _, _, g in items}
    by_doc = {str(r["doc_id"]): r["acc"] for r in lines}
    assert {ext: float(option == gold[ext]) for _, ext, option, _ in predictions} == by_doc
    assert (result.created, result.answers, result.unparsed) == (4, 4, 0)


def test_an_lm_eval_file_without_the_models_name_or_with_free_text_is_refused():
    study = _study(4)
    with pytest.raises(ImportFailed) as failed:
        _import(study, LM_MC)
    assert failed.value.errors == [
        f"{LM_MC.name}: model: an lm-evaluation-harness samples file does not name the model; "
        f"give it (the model_name of the run's results_….json)"]
    with pytest.raises(ImportFailed) as failed:
        _import(study, LM_GEN, model="m")
    assert failed.value.errors[0] == (
        f"{LM_GEN.name}:1 (doc_id 0): choices: a free-text sample (no options); only "
        f"multiple-choice samples can be imported, its answer is never guessed into an option")
    assert len(failed.value.errors) == 3  # every sample of the file named
    assert _stored(study) == ([], [])


def test_an_lm_eval_line_nested_too_deep_is_named_by_its_line():
    lines = LM_MC.read_bytes().splitlines()
    deep = b'{"doc_id": 9, "doc": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    data = b"\n".join([lines[0], deep, *lines[1:]])
    with pytest.raises(ImportFailed) as failed:
        eval_log_import(study=_study(4), source=io.BytesIO(data), name=LM_MC.name,
                        fmt="lm-eval", options={"model": "m"})
    assert failed.value.errors == [f"{LM_MC.name}:2: JSON nested deeper than 64 levels"]


def test_a_million_samples_are_refused_without_reading_them_all(settings):
    settings.OVERSIGHT_EVAL_LOG_MAX_SAMPLES = 200_000
    line = ('{"doc_id": %d, "arguments": [["Q?", " yes"], ["Q?", " no"]], "target": 0, '
            '"filtered_resps": [["-1.0", "False"], ["-2.0", "False"]]}')
    data = "\n".join(line % n for n in range(1_000_000)).encode()  # 100 MB, the upload cap
    with pytest.raises(ImportFailed) as failed:
        eval_log_import(study=_study(2), source=io.BytesIO(data), name="big.jsonl",
                        fmt="lm-eval", options={"model": "m", "task": "toy"})
    assert failed.value.errors == [
        "big.jsonl:200001: more than 200,000 samples; at most 200,000 per import "
        "(OVERSIGHT_EVAL_LOG_MAX_SAMPLES)"]


# --- Every Eval Ever ---------------------------------------------------------------------------
def test_every_eval_ever_instances_become_critique_questions_and_ai_responses():
    from annotations.critique.models import CritiqueOutput, CritiqueQuestion
    from annotations.critique.services.studies import critique_study_create

    study = critique_study_create(name="eee-critique", mode="ai_below", top_level=2)
    result = _import(study, EEE_MC)
    lines = [json.loads(line) for line in EEE_MC.read_text().splitlines()]
    questions = list(CritiqueQuestion.objects.filter(study=study).order_by("external_id")
                     .values_list("external_id", "options", "gold", "domain"))
    assert questions == [(r["sample_id"], r["input"]["choices"],
                          ord(r["input"]["reference"][0]) - ord("A"), "tiny_mc") for r in lines]
    outputs = {o.question.external_id: o for o in CritiqueOutput.objects.filter(
        study=study).select_related("question")}
    # the framework's own verdict: is_correct exactly where the response's final is gold
    gold = {ext: g for ext, _, g, _ in questions}
    assert {ext: o.final == gold[ext] for ext, o in outputs.items()} == {
        r["sample_id"]: r["evaluation"]["is_correct"] for r in lines}
    assert {o.ai_model for o in outputs.values()} == {"mock-org/tiny-mock · tiny_mc"}
    assert {o.level for o in outputs.values()} == {0}
    again = _import(study, EEE_MC)
    assert (result.created, again.created, again.unchanged, again.answers) == (3, 0, 3, 0)
    assert CritiqueOutput.objects.filter(study=study).count() == 3


def test_every_eval_ever_free_text_is_refused_by_file_and_line():
    study = _study()
    with pytest.raises(ImportFailed) as failed:
        _import(study, EEE_FREE)
    assert failed.value.errors == [
        f"{EEE_FREE.name}:1: choices: a free-text sample (no options); only multiple-choice "
        f"samples can be imported, its answer is never guessed into an option"]


def test_an_ambiguous_numeric_reference_is_refused_not_guessed():
    record = json.loads(EEE_MC.read_text().splitlines()[1])  # choices "4", "5", "22"
    record["input"]["choices"] = ["1", "0", "2"]
    record["input"]["reference"] = ["0"]  # option 1's text, and the index of option 0
    with pytest.raises(ImportFailed, match=r"input\.reference: '0' is both the text of "
                                           r"option 1 and the index of option 0"):
        eval_log_import(study=_study(), source=io.BytesIO(json.dumps(record).encode()),
                        name="one.jsonl", fmt="eee", options={})


# --- assisted ----------------------------------------------------------------------------------
def test_an_inspect_log_becomes_sentences_whose_hidden_gold_is_the_scorers_verdict(tmp_path):
    from inspect_ai.log import read_eval_log

    from annotations.assisted.models import Sentence
    from annotations.assisted.services.design import assisted_study_create

    path = inspect_log(tmp_path, ["ANSWER: B", "ANSWER: B", "Four?"])
    study = assisted_study_create(name="eval-log-assisted", seed=3)
    result = _import(study, path)
    sentences = {s.external_id: s for s in Sentence.objects.filter(study=study)}
    system = "mockllm/model · tiny_mc"
    assert sorted(sentences) == [f"{system}/q1", f"{system}/q2", f"{system}/q3"]
    assert sentences[f"{system}/q1"].target == "The answer is B) 7."
    assert sentences[f"{system}/q3"].target == "Four?"  # named no option: its last line
    assert sentences[f"{system}/q1"].prompt == "Which is a prime?\n\nA) 4\nB) 7\nC) 9"
    assert {s.stratum for s in sentences.values()} == {system}
    scored = {s.id: s.scores["choice"].value == "C" for s in read_eval_log(str(path)).samples}
    assert {ext.split("/")[-1]: s.gold == "accurate" for ext, s in sentences.items()} == scored
    again = _import(study, path)
    assert (result.created, again.created, again.unchanged) == (3, 0, 3)


# --- the job, the API and the command --------------------------------------------------------
def test_the_import_job_tells_the_format_and_keeps_the_names_given():
    study = _study(4)
    job, created = eval_log_submit(study=study, data=LM_MC.read_bytes(), name=LM_MC.name,
                                   model="EleutherAI/pythia-14m")
    job.refresh_from_db()
    assert created and job.kind == ImportJob.Kind.EVAL_LOG and job.fmt == "lm-eval"
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert job.options == {"model": "EleutherAI/pythia-14m"}
    assert job.summary["created"] == 4
    assert "4 samples of EleutherAI/pythia-14m · toy_mc" in job.summary["text"]


def test_the_api_imports_a_log_as_a_job_and_the_labeller_never_sees_the_target(tmp_path):
    from django.test import Client

    from annotations.core.models import StudyMembership, User
    from annotations.core.services.studies import membership_add, study_open

    study = _study()
    researcher = User.objects.create_user("eval-log-researcher", password="pw")
    membership_add(study=study, user=researcher, role=StudyMembership.Role.RESEARCHER)
    client = Client()
    client.force_login(researcher)
    path = inspect_log(tmp_path, ["ANSWER: B", "ANSWER: B", "ANSWER: A"])
    with path.open("rb") as fh:
        response = client.post(f"/api/studies/{study.pk}/import-jobs/",
                               {"kind": "eval_log", "file": fh})
    assert response.status_code == 202, response.content
    job = ImportJob.objects.get(pk=response.json()["id"])
    assert (job.status, job.fmt) == (ImportJob.Status.SUCCEEDED, "inspect"), job.errors
    people = [User.objects.create_user(f"eval-log-specialist-{k}", password="pw")
              for k in range(3)]
    for k, person in enumerate(people):
        membership_add(study=study, user=person, role=StudyMembership.Role.SPECIALIST,
                       class_index=k)
    study_open(study=study)
    for person in people:  # the classes the routing drew: each leases what it has
        client.force_login(person)
        response = client.post(f"/api/studies/{study.pk}/queries/next/")
        if response.status_code == 200:
            break
    assert response.status_code == 200, response.content
    shown = json.dumps(response.json())
    assert "gold" not in shown and "target" not in shown and "mockllm" not in shown


def test_the_command_imports_a_log_and_names_every_problem_of_a_bad_one(tmp_path):
    from django.core.management import CommandError, call_command

    study = _study(4)
    out = io.StringIO()
    call_command("import_eval_log", str(study.pk), str(LM_MC), "--model", "pythia",
                 "--quiet", stdout=out)
    assert out.getvalue().startswith("Evaluation log: lm-evaluation-harness log: 4 samples "
                                     "of pythia · toy_mc; 4 items added")
    with pytest.raises(CommandError, match=r"Nothing imported\.\n.*samples_toy_gen_.*:1 "
                                           r"\(doc_id 0\): choices: a free-text sample"):
        call_command("import_eval_log", str(study.pk), str(LM_GEN), "--model", "pythia",
                     "--quiet")


def test_the_admin_imports_a_log_into_a_critique_study_and_lists_the_job(tmp_path):
    from django.test import Client

    from annotations.core.models import StudyMembership, User
    from annotations.core.services.studies import membership_add
    from annotations.critique.models import CritiqueQuestion
    from annotations.critique.services.studies import critique_study_create

    study = critique_study_create(name="eval-log-admin", mode="ai_below", top_level=2)
    researcher = User.objects.create_user("eval-log-admin", password="pw", is_staff=True)
    membership_add(study=study, user=researcher, role=StudyMembership.Role.RESEARCHER)
    client = Client()
    client.force_login(researcher)
    url = f"/admin/annotations/study/{study.pk}/import-eval-log/"
    page = client.get(url)
    assert page.status_code == 200 and b"Every Eval Ever" in page.content
    with EEE_MC.open("rb") as fh:
        response = client.post(url, {"file": fh, "log_format": "", "model": "", "task": ""})
    assert response.status_code == 302, response.content
    job = ImportJob.objects.get(study=study)
    assert response["Location"].endswith(f"/import-jobs/{job.pk}/")
    assert (job.status, job.fmt) == (ImportJob.Status.SUCCEEDED, "eee"), job.errors
    assert CritiqueQuestion.objects.filter(study=study).count() == 3
    page = client.get(response["Location"])
    assert b"Import of an evaluation log" in page.content
    with LM_GEN.open("rb") as fh:  # a free-text log: every sample named, nothing stored
        client.post(url, {"file": fh, "model": "m"})
    failed = ImportJob.objects.filter(study=study).order_by("-pk").first()
    assert failed.status == ImportJob.Status.FAILED and len(failed.errors) == 3
    assert b"3 problems; nothing imported" in client.get(url).content
    studies = client.get("/admin/annotations/study/").content.decode()
    assert f"/admin/annotations/study/{study.pk}/import-eval-log/" in studies
