"""The evaluation API (issue 20): figures equal the engine's, every rejection names only
request entries and stores nothing, the budget, the Ladder, the holdout and final report."""

from __future__ import annotations

import pytest
from django.test import Client

from annotations.evaluation.models import EvaluationCall, EvaluationSettings, EvaluationToken
from annotations.evaluation.services.evaluate import holdout_mask
from annotations.evaluation.services.tokens import token_create, token_revoke
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.simulation import study_simulate
from assistants.models import Prediction
from estimators.evaluation.ladder import ladder_release
from tests.factories import built_once, make_study

pytestmark = pytest.mark.django_db


def _simulated():
    s = make_study(k=4, n_items=240, systems={"cand": 0.7})
    study_simulate(study=s)
    EvaluationSettings.objects.update_or_create(study=s, defaults={"holdout_share": 0.0})
    return s


@pytest.fixture(scope="module")
def study(django_db_setup, django_db_blocker):
    with built_once(django_db_blocker, _simulated) as s:
        yield s


def predictions_of(study, system="cand") -> list[dict]:
    rows = Prediction.objects.filter(system__study=study, system__name=system).select_related(
        "item")
    return [{"item": p.item.external_id, "index": p.option} if p.option is not None
            else {"item": p.item.external_id, "prediction": None} for p in rows]


def post(study_id, raw, body, final=False):
    client = Client(HTTP_AUTHORIZATION=f"Evaluation {raw}")
    url = f"/api/studies/{study_id}/evaluations/" + ("final/" if final else "")
    return client.post(url, body, content_type="application/json")


def test_figures_equal_the_engines_on_the_same_labels(study):
    _, raw = token_create(study=study, name="loop", ladder=False, min_batch=1)
    response = post(study.pk, raw, {"candidate": "c1", "predictions": predictions_of(study)})
    assert response.status_code == 201, response.content
    body = response.json()
    system = study_recompute(study_id=study.pk).payload["systems"][0]
    est, counts = system["estimates"], system["counts"]
    assert body["estimates"]["n_o"] == counts["n_ord"]
    assert body["estimates"]["n_c"] == counts["n_comp"]
    assert body["estimates"]["q_hat"] == pytest.approx(counts["s_comp"] / counts["n_comp"])
    assert body["estimates"]["comp"]["raw"] == pytest.approx(est["comp"]["accuracy"])
    assert body["estimates"]["comp"]["clipped"] == pytest.approx(est["comp"]["accuracy_clipped"])
    for method in ("ivw", "ml"):
        for name in ("accuracy", "ci_low", "ci_high"):
            assert body["estimates"][method][name] == pytest.approx(est[method][name])
    assert body["estimates"]["ivw"]["bound"] == pytest.approx(est["ivw"]["bound"])
    assert body["estimates"]["comp"]["bound"] == pytest.approx(est["comp"]["bound"])
    assert body["score"] == pytest.approx(est["ml"]["accuracy"])
    assert body["items_used"] == 240 and body["items_not_evaluated"] == 0
    assert body["budget"] == {"daily": 20, "used": 1, "left": 19}
    call = EvaluationCall.objects.get(token__study=study)
    assert call.accepted and call.released == body and call.n_used == 240


def test_unanswered_items_are_counted_not_named():
    s = make_study(k=4, n_items=150, systems={"cand": 0.7})
    study_simulate(study=s, answers=120)
    EvaluationSettings.objects.update_or_create(study=s, defaults={"holdout_share": 0.0})
    _, raw = token_create(study=s, name="loop", ladder=False, min_batch=1)
    body = post(s.pk, raw, {"candidate": "c", "predictions": predictions_of(s)}).json()
    assert body["items_used"] == 120 and body["items_not_evaluated"] == 30
    assert "i0" not in str(body)


BAD = [
    ("unknown", lambda p: p[:-1] + [{"item": "nope", "index": 0}], 400, [("nope", "item")]),
    ("duplicate", lambda p: p + [dict(p[0])], 400, [(None, "item")]),
    ("out of range", lambda p: p[:-1] + [{"item": p[-1]["item"], "index": 9}], 400,
     [(None, "index")]),
    ("wrong type", lambda p: p[:-1] + [{"item": p[-1]["item"], "index": "x"}], 400,
     [(None, "index")]),
    ("both", lambda p: p[:-1] + [{"item": p[-1]["item"], "index": 1, "prediction": "a"}], 400,
     [(None, "prediction")]),
    ("empty", lambda p: [], 400, []),
]


@pytest.mark.parametrize(("name", "change", "code", "offending"), BAD, ids=[b[0] for b in BAD])
def test_a_rejection_names_offending_entries_only_and_releases_nothing(study, name, change,
                                                                       code, offending):
    token, raw = token_create(study=study, name="loop", min_batch=1)
    predictions = change(predictions_of(study))
    response = post(study.pk, raw, {"candidate": "c", "predictions": predictions})
    assert response.status_code == code, response.content
    body = response.json()
    assert set(body) <= {"code", "detail", "errors", "more_errors"}
    for (item, field), error in zip(offending, body.get("errors", []), strict=True):
        assert error["field"] == field
        assert error["entry"] == len(predictions) - 1
        if item is not None:
            assert error["item"] == item
    token.refresh_from_db()
    assert token.ladder_best is None
    call = EvaluationCall.objects.get(token=token)
    assert not call.accepted and call.released == {} and call.score is None
    assert call.reason.startswith(body["code"])


def test_over_the_maximum_size_and_below_the_minimum_batch(study):
    _, raw = token_create(study=study, name="small", max_batch=50)
    assert post(study.pk, raw, {"candidate": "c", "predictions": predictions_of(study)}
                ).status_code == 413
    _, raw = token_create(study=study, name="min", min_batch=100)
    response = post(study.pk, raw, {"candidate": "c", "predictions": predictions_of(study)[:99]})
    assert response.status_code == 400 and response.json()["code"] == "below_min_batch"
    assert not EvaluationCall.objects.filter(accepted=True).exists()


def test_budget_spent_wrong_study_revoked_and_unknown_token(study):
    token, raw = token_create(study=study, name="b", daily_budget=2, min_batch=1)
    body = {"candidate": "c", "predictions": predictions_of(study)}
    assert [post(study.pk, raw, body).status_code for _ in range(3)] == [201, 201, 429]
    assert post(study.pk, raw, body).json()["code"] == "budget_spent"
    other = make_study(k=4, n_items=5)
    response = post(other.pk, raw, body)
    assert response.status_code == 403 and response.json()["code"] == "wrong_study"
    token_revoke(token=token)
    assert post(study.pk, raw, body).json()["code"] == "revoked"
    assert post(study.pk, "ev_unknown", body).status_code == 401
    assert Client().post(f"/api/studies/{study.pk}/evaluations/", body,
                         content_type="application/json").status_code in (401, 403)
    assert EvaluationCall.objects.filter(token=token, accepted=True).count() == 2
    assert EvaluationCall.objects.filter(token=token, accepted=False).count() == 4


def test_the_ladder_releases_its_rule_and_nothing_else(study):
    token, raw = token_create(study=study, name="ladder", min_batch=1, daily_budget=50)
    predictions = predictions_of(study)
    best = None
    for cut in (240, 200, 160, 120, 239, 240):
        sub = predictions[:cut] + [{"item": p["item"], "prediction": None}
                                   for p in predictions[cut:]]
        body = post(study.pk, raw, {"candidate": f"c{cut}", "predictions": sub}).json()
        assert body["estimates"] is None
        step = ladder_release(best, EvaluationCall.objects.filter(token=token).first().score,
                              token.ladder_margin)
        best = step.best
        assert body["score"] == step.score and body["ladder"]["improved"] == step.improved
        assert round(body["score"] / token.ladder_margin, 6) % 1 == 0  # a multiple
    token.refresh_from_db()
    assert token.ladder_best == best


def test_holdout_is_never_scored_except_by_one_final_report(study):
    EvaluationSettings.objects.filter(study=study).update(holdout_share=0.25)
    _, raw = token_create(study=study, name="h", ladder=False, min_batch=1)
    predictions = predictions_of(study)
    body = post(study.pk, raw, {"candidate": "best", "predictions": predictions}).json()
    import numpy as np

    from annotations.core.models import Item
    pks = np.array(list(Item.objects.filter(study=study, is_quality_check=False)
                        .values_list("pk", flat=True)))
    held = int(holdout_mask(pks, study.seed, 0.25).sum())
    assert 0 < held < 240
    assert body["items_used"] == 240 - held and body["items_not_evaluated"] == held
    final = post(study.pk, raw, {"candidate": "best", "predictions": predictions}, final=True)
    assert final.status_code == 201 and final.json()["items_used"] == held
    again = post(study.pk, raw, {"candidate": "best", "predictions": predictions}, final=True)
    assert again.status_code == 409
    other = post(study.pk, raw, {"candidate": "other", "predictions": predictions}, final=True)
    assert other.status_code == 429 and other.json()["code"] == "final_spent"


def test_a_final_report_needs_the_minimum_batch_of_held_out_items(study):
    """One held-out item alone would give its label away: finals keep the minimum batch."""
    EvaluationSettings.objects.filter(study=study).update(holdout_share=0.25)
    token, raw = token_create(study=study, name="h", min_batch=100)
    response = post(study.pk, raw, {"candidate": "best", "predictions": predictions_of(study)},
                    final=True)
    assert response.status_code == 400 and response.json()["code"] == "below_min_batch"
    assert not token.calls.filter(accepted=True).exists()


def test_the_split_is_deterministic_and_near_the_share():
    import numpy as np
    ids = np.arange(1, 20001)
    mask = holdout_mask(ids, 12345, 0.2)
    assert (mask == holdout_mask(ids[::-1], 12345, 0.2)[::-1]).all()
    assert abs(mask.mean() - 0.2) < 0.01
    assert not holdout_mask(ids, 12345, 0.0).any()


def test_tokens_are_stored_hashed(study):
    token, raw = token_create(study=study, name="x")
    assert raw not in {token.digest, token.prefix} and token.digest != raw
    assert EvaluationToken.objects.filter(digest=token.digest).count() == 1


def test_withdrawn_items_leave_the_figures_as_they_leave_the_dashboards(study):
    from django.utils import timezone

    from annotations.core.models import Item, ItemFlag
    from tests.factories import specialist

    withdrawn = list(Item.objects.filter(study=study).order_by("pk")[:30])
    for item in withdrawn:
        ItemFlag.objects.create(study=study, item_id=item.pk, user=specialist(study, 0),
                                reason=ItemFlag.Reason.values[0],
                                resolution=ItemFlag.Resolution.WITHDRAWN,
                                resolved_at=timezone.now())
    _, raw = token_create(study=study, name="loop", ladder=False, min_batch=1)
    body = post(study.pk, raw, {"candidate": "c", "predictions": predictions_of(study)}).json()
    est = study_recompute(study_id=study.pk).payload["systems"][0]["estimates"]
    assert body["items_used"] == 210 and body["items_not_evaluated"] == 30
    assert body["estimates"]["ml"]["accuracy"] == pytest.approx(est["ml"]["accuracy"])
    assert body["estimates"]["comp"]["raw"] == pytest.approx(est["comp"]["accuracy"])
