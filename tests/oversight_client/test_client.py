"""The client against the live test server (pytest-django ``live_server``): typed results
equal to the API's, rejections as EvaluationError with the offending entries, the three
loop adapters; and its retries on 429/5xx against a small local server that answers them."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from annotations.evaluation.models import EvaluationCall, EvaluationSettings
from annotations.evaluation.services.tokens import token_create
from annotations.partitioned.services.simulation import study_simulate
from assistants.models import Prediction
from oversight_client import Evaluation, EvaluationError, Evaluator
from oversight_client.adapters import AdasFitness, AFlowEvaluator, ProgramEvaluator
from tests.factories import make_study

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(live_server):
    study = make_study(k=4, n_items=150, systems={"cand": 0.7})
    study_simulate(study=study)
    EvaluationSettings.objects.update_or_create(study=study, defaults={"holdout_share": 0.0})
    preds = {p.item.external_id: p.option for p in Prediction.objects.filter(
        system__study=study).select_related("item")}
    return study, preds, live_server.url


def test_evaluate_returns_typed_figures_from_the_live_server(world):
    study, preds, url = world
    _, raw = token_create(study=study, name="client", ladder=False, min_batch=1)
    result = Evaluator(url, study.pk, raw).evaluate(preds, candidate="cand")
    assert isinstance(result, Evaluation)
    call = EvaluationCall.objects.get(accepted=True)
    assert result.raw == call.released
    assert result.score == call.score == result.estimates.ml.accuracy
    assert result.estimates.comp.raw == call.released["estimates"]["comp"]["raw"]
    assert result.interval == (result.estimates.ml.ci_low, result.estimates.ml.ci_high)
    assert result.items_used == 150 and result.budget.left == 19


def test_rejections_raise_with_the_offending_entries(world):
    study, preds, url = world
    _, raw = token_create(study=study, name="client", min_batch=1)
    ev = Evaluator(url, study.pk, raw, retries=0)
    with pytest.raises(EvaluationError) as info:
        ev.evaluate({**preds, "nope": 0}, candidate="cand")
    assert info.value.status == 400
    assert [e["item"] for e in info.value.errors] == ["nope"]
    with pytest.raises(EvaluationError) as info:
        Evaluator(url, study.pk, "ev_wrong").evaluate(preds, candidate="cand")
    assert info.value.status == 401


def test_adapters_for_adas_aflow_and_dspy(world):
    study, preds, url = world
    _, raw = token_create(study=study, name="loops", ladder=False, min_batch=1)
    ev = Evaluator(url, study.pk, raw)
    fitness = AdasFitness(ev)(preds, "adas-agent")
    assert fitness.low <= fitness.score <= fitness.high
    assert str(fitness).startswith("95% Bootstrap Confidence Interval: (")
    assert f"Median: {100 * fitness.score:.1f}%" in str(fitness)
    score, avg_cost, total = AFlowEvaluator(ev).evaluate(
        "aflow-graph", [(preds, [0.01] * len(preds)), (preds, [0.03] * len(preds))])
    assert score == pytest.approx(fitness.score)
    assert avg_cost == pytest.approx(0.02 * len(preds)) and total == pytest.approx(
        0.04 * len(preds))
    devset = [(item, {"question": item}) for item in preds]

    def program(question):
        return type("Prediction", (), {"answer": preds[question]})()

    percent = ProgramEvaluator(ev, devset)(program, name="dspy-program")
    assert percent == pytest.approx(100 * fitness.score)
    assert set(EvaluationCall.objects.values_list("candidate", flat=True)) == {
        "adas-agent", "aflow-graph", "dspy-program"}


class Flaky(BaseHTTPRequestHandler):
    """503, then 429, then a 201 whose body is a Ladder-mode evaluation."""

    answers = [503, 429, 201]
    seen: list[int] = []

    def do_POST(self):  # noqa: N802 - the http.server name
        self.rfile.read(int(self.headers["Content-Length"]))
        status = self.answers[len(self.seen)]
        self.seen.append(status)
        body = ({"candidate": "c", "kind": "search", "score": 0.62, "items_submitted": 100,
                 "items_used": 100, "items_not_evaluated": 0, "estimates": None,
                 "ladder": {"margin": 0.02, "improved": True},
                 "budget": {"daily": 20, "used": 1, "left": 19}}
                if status == 201 else {"code": "throttled", "detail": "later"})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args):
        pass


def test_retries_with_backoff_on_5xx_and_429():
    server = HTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    waits: list[float] = []
    try:
        ev = Evaluator(f"http://127.0.0.1:{server.server_port}", 1, "ev_x", backoff=0.5,
                       sleep=waits.append)
        result = ev.evaluate({"a": 0}, candidate="c")
    finally:
        server.shutdown()
    assert Flaky.seen == [503, 429, 201] and waits == [0.5, 1.0]
    assert result.estimates is None and result.improved and result.interval == pytest.approx(
        (0.61, 0.63))


def test_the_client_imports_without_django():
    code = "import sys, oversight_client; assert 'django' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=".")
