"""The platform client (oversight_client.platform) against the live test server, for every
study type: create, import (files and evaluation logs, as jobs), add members, open, read
items page by page, stream the raw export, estimates, flags, audits; and its retries
against a small local server that answers 503 and 429 first."""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from annotations.core.exports import export_write
from annotations.core.models import ImportJob, Item, User
from oversight_client import ApiError, Platform
from tests.annotations.assisted.helpers import sentence_records, trace_records
from tests.annotations.critique.helpers import questions_records
from tests.factories import make_items

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval_logs"


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records))
    return path


@pytest.fixture
def platform(live_server):
    user = User.objects.create_user("client-researcher", password="pw", is_staff=True)
    return Platform(live_server.url, Token.objects.create(user=user).key, poll=0.05)


def _server_export(study_id: int, what: str | None = None) -> list[dict]:
    from annotations.core.exports import exports_of
    from annotations.core.models import Study

    study = Study.objects.get(pk=study_id)
    out = io.StringIO()
    export_write(study, what or exports_of(study.kind)[0][0], out, "jsonl")
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_partitioned_study_from_creation_to_its_streamed_export(platform, tmp_path):
    from annotations.partitioned.services.simulation import study_simulate

    study = platform.create_study("partitioned", "client partitioned",
                                  classes=["A", "B", "C", "D"], seed=3)
    assert (study.kind, study.status, study.roles) == ("partitioned", "draft", ["researcher"])
    items = make_items(40, 4, seed=3)
    job = platform.import_file(study.id, "items", _jsonl(tmp_path / "items.jsonl", items))
    assert (job.status, job.summary["created"]) == ("succeeded", 40)
    log = platform.import_eval_log(study.id, next(FIXTURES.glob("samples_toy_mc_*.jsonl")),
                                   model="pythia")
    assert log.status == "succeeded" and log.summary["created"] == 4
    members = platform.add_members(study.id, [("ana", "specialist", k) for k in range(1)]
                                   + [{"username": f"s{k}", "role": "specialist",
                                       "class_index": k} for k in range(1, 4)]
                                   + [("mia", "manager")])
    assert all(m.password for m in members) and members[-1].role == "manager"
    assert {m.username for m in platform.members(study.id)} >= {"ana", "s1", "mia"}
    assert platform.open_study(study.id).status == "open"
    listed = list(platform.items(study.id, page_size=7))  # six pages and a bit
    assert sorted(i["id"] for i in listed) == sorted(
        Item.objects.filter(study_id=study.id).values_list("external_id", flat=True))
    from annotations.core.models import Study

    study_simulate(study=Study.objects.get(pk=study.id))
    rows = list(platform.export(study.id))
    assert rows and rows == _server_export(study.id)
    target = tmp_path / "labels.csv"
    size = platform.export_to(study.id, target, fmt="csv")
    assert size == target.stat().st_size and target.read_text().startswith("query_id,")
    from annotations.core.services.recompute import study_recompute_any

    study_recompute_any(study_id=study.id)
    estimates = platform.estimates(study.id)
    assert estimates["n_answered"] == len(rows)
    assert [s["name"] for s in estimates["payload"]["systems"]] == ["pythia · toy_mc"]


def test_an_assisted_study_through_the_client(platform, tmp_path):
    study = platform.create_study("assisted", "client assisted", seed=5, ratings_per_item=2,
                                  arms=[{"name": "AI panel",
                                         "components": ["reasoning", "confidence"]}])
    records = sentence_records(4)
    sentences = platform.import_file(study.id, "sentences",
                                     _jsonl(tmp_path / "sentences.jsonl", records))
    traces = platform.import_file(study.id, "traces", _jsonl(
        tmp_path / "traces.jsonl", trace_records([r["id"] for r in records])))
    assert (sentences.summary["created"], traces.status) == (4, "succeeded")
    platform.add_members(study.id, [("rita", "annotator"), ("max", "manager")])
    assert platform.open_study(study.id).status == "open"
    from annotations.assisted.models import Arm

    assert list(Arm.objects.filter(study_id=study.id).order_by("position").values_list(
        "name", "show_reasoning", "show_confidence")) == [("Baseline", False, False),
                                                         ("AI panel", True, True)]
    assert list(platform.export(study.id)) == _server_export(study.id) == []
    assert platform.flags(study.id) == []


def test_a_critique_study_through_the_client_with_its_flags(platform, tmp_path):
    from annotations.core.models import ItemFlag, Study
    from annotations.critique.models import CritiqueQuestion

    study = platform.create_study("critique", "client critique", mode="ai_below", top_level=2,
                                  seed=7)
    job = platform.import_file(study.id, "questions",
                               _jsonl(tmp_path / "q.jsonl", questions_records(3)))
    assert job.summary["created"] == 3
    outputs = [{"id": f"r{i}{j}", "question": f"q{i}", "level": 0,
                "text": f"Because.\nAnswer: {'AB'[j]}"} for i in range(3) for j in range(2)]
    job = platform.import_file(study.id, "ai_outputs", _jsonl(tmp_path / "o.jsonl", outputs))
    assert job.status == "succeeded"
    with pytest.raises(ApiError) as failed:  # every problem of a bad file, nothing stored
        platform.import_file(study.id, "questions", _jsonl(tmp_path / "bad.jsonl", [
            {"id": "q0", "text": "again", "options": ["a", "b"]}, {"id": "z"}]))
    assert failed.value.code == "import_failed"
    assert failed.value.errors[0].startswith("bad.jsonl:1: id:")
    assert len(failed.value.errors) >= 2 and CritiqueQuestion.objects.filter(
        study_id=study.id).count() == 3
    user = User.objects.create_user("flagger", password="pw")
    question = CritiqueQuestion.objects.filter(study_id=study.id).first()
    ItemFlag.objects.create(study=Study.objects.get(pk=study.id), item_id=question.pk,
                            user=user, reason="ambiguous", note="two fit")
    flags = platform.flags(study.id)
    assert [(f["item"], f["reason"], f["note"], f["flagged_by"]) for f in flags] == [
        (question.external_id, "ambiguous", "two fit", "flagger")]
    assert platform.audits(study.id) == []
    assert platform.study(study.id).kind == "critique"


def test_refusals_name_the_field_and_the_role(platform, live_server):
    with pytest.raises(ApiError) as refused:
        platform.create_study("partitioned", "one class", classes=["only"])
    assert refused.value.status == 400 and "2 classes" in refused.value.detail
    with pytest.raises(ApiError) as refused:
        platform.create_study("critique", "bad setting", colour="blue")
    assert "not colour" in refused.value.detail
    study = platform.create_study("partitioned", "mine", classes=["A", "B"])
    stranger = User.objects.create_user("stranger", password="pw", is_staff=True)
    other = Platform(live_server.url, Token.objects.create(user=stranger).key)
    with pytest.raises(ApiError) as refused:
        other.open_study(study.id)
    assert refused.value.status == 403
    assert ImportJob.objects.count() == 0


class Flaky(BaseHTTPRequestHandler):
    """A study list after a 503 and a 429 (Retry-After: 2); an upload after a 502."""

    seen: list[tuple[str, int]] = []
    answers = {"GET": [503, 429, 200], "POST": [502, 202]}
    bodies: list[bytes] = []

    def _answer(self, method: str, body: object) -> None:
        status = self.answers[method][sum(1 for m, _ in self.seen if m == method)]
        self.seen.append((method, status))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if status == 429:
            self.send_header("Retry-After", "2")
        self.end_headers()
        self.wfile.write(json.dumps(body if status < 300 else {"code": "busy",
                                                                "detail": "later"}).encode())

    def do_GET(self):  # noqa: N802 - the http.server name
        self._answer("GET", [{"id": 1, "name": "s", "kind": "critique", "status": "open",
                              "roles": ["researcher"]}])

    def do_POST(self):  # noqa: N802
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self._answer("POST", {"id": 9, "kind": "questions", "name": "q.jsonl",
                              "status": "queued", "url": "/api/import-jobs/9/"})

    def log_message(self, *args):
        pass


def test_every_call_is_retried_with_backoff_and_an_upload_is_sent_whole_again(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    waits: list[float] = []
    try:
        client = Platform(f"http://127.0.0.1:{server.server_port}", "t", backoff=0.5,
                          sleep=waits.append)
        studies = client.studies()
        job = client.import_file(1, "questions", _jsonl(tmp_path / "q.jsonl", [{"id": "q"}]),
                                 wait=False)
    finally:
        server.shutdown()
    assert [s.kind for s in studies] == ["critique"] and job.id == 9
    assert Flaky.seen == [("GET", 503), ("GET", 429), ("GET", 200), ("POST", 502),
                          ("POST", 202)]
    assert waits == [0.5, 2.0, 0.5]  # the Retry-After of the 429 beat the 1.0 s backoff
    first, second = Flaky.bodies
    assert first == second and b'filename="q.jsonl"' in first and b'{"id": "q"}' in first
