"""Issue 27: an evaluation refusal says nothing item-specific that a valid call would not,
and what a refusal below the minimum batch tells is never free (it spends the budget);
every call of a token, refused ones included (throttled, unreadable), is in the call log."""

from __future__ import annotations

import re

import numpy as np
import pytest
from django.core.cache import cache

from annotations.core.models import Item
from annotations.evaluation.api import EvaluationTokenThrottle
from annotations.evaluation.models import EvaluationCall, EvaluationSettings
from annotations.evaluation.services.evaluate import holdout_mask
from annotations.evaluation.services.tokens import token_create
from annotations.partitioned.models import Query
from annotations.partitioned.services.simulation import study_simulate
from tests.annotations.evaluation.test_evaluate import post, predictions_of
from tests.factories import built_once, make_study

pytestmark = pytest.mark.django_db


def _simulated():
    s = make_study(k=4, n_items=150, systems={"cand": 0.7})
    study_simulate(study=s, answers=120)  # 30 items have no answered query
    EvaluationSettings.objects.update_or_create(study=s, defaults={"holdout_share": 0.3})
    return s


@pytest.fixture(scope="module")
def study(django_db_setup, django_db_blocker):
    with built_once(django_db_blocker, _simulated) as s:
        yield s


def _kinds(study) -> dict[str, str]:
    """One item's id of each kind: labelled outside the holdout, labelled held out, and
    unlabelled."""
    answered = set(Query.objects.filter(study=study).exclude(answer="")
                   .exclude(answer__isnull=True).values_list("item_id", flat=True))
    items = list(Item.objects.filter(study=study, is_quality_check=False)
                 .values_list("pk", "external_id"))
    held = holdout_mask(np.array([pk for pk, _ in items]), study.seed, 0.3)
    kinds: dict[str, str] = {}
    for (pk, external), h in zip(items, held, strict=True):
        kind = "unlabelled" if pk not in answered else ("held" if h else "scored")
        kinds.setdefault(kind, external)
    assert set(kinds) == {"unlabelled", "held", "scored"}
    return kinds


def test_a_refusal_below_the_minimum_is_the_same_for_every_item(study):
    _, raw = token_create(study=study, name="probe", min_batch=100, daily_budget=50)
    answers = {}
    for kind, item in _kinds(study).items():
        for final in (False, True):
            response = post(study.pk, raw, {"candidate": f"c-{kind}-{final}",
                                            "predictions": [{"item": item, "index": 0}]},
                            final=final)
            assert response.status_code == 400
            body = response.json()
            assert body["code"] == "below_min_batch" and "errors" not in body
            answers.setdefault(final, set()).add(body["detail"])
    # the same words whether the item is labelled, held out or neither: no count, no id
    assert all(len(details) == 1 for details in answers.values())
    assert all(re.findall(r"\d+", d) == ["100"] for details in answers.values()
               for d in details), answers  # the only figure is the token's minimum
    assert all("Only" not in d
               for details in answers.values() for d in details)


def test_refusals_below_the_minimum_spend_the_budget(study):
    token, raw = token_create(study=study, name="probe", min_batch=100, daily_budget=3)
    item = _kinds(study)["scored"]
    one = {"candidate": "c", "predictions": [{"item": item, "index": 0}]}
    codes = [post(study.pk, raw, one).json()["code"] for _ in range(4)]
    assert codes == ["below_min_batch"] * 3 + ["budget_spent"]
    # a final report too needs budget left (refused below the minimum, it spends one)
    assert post(study.pk, raw, one, final=True).json()["code"] == "budget_spent"
    assert token.calls.count() == 5 and not token.calls.filter(accepted=True).exists()


def test_a_final_report_below_the_minimum_spends_one_evaluation(study):
    token, raw = token_create(study=study, name="f", min_batch=20, daily_budget=5,
                              ladder=False)
    one = {"candidate": "c", "predictions": [{"item": _kinds(study)["held"], "index": 0}]}
    assert post(study.pk, raw, one, final=True).json()["code"] == "below_min_batch"
    accepted = post(study.pk, raw, {"candidate": "s", "predictions": predictions_of(study)})
    assert accepted.status_code == 201
    assert accepted.json()["budget"] == {"daily": 5, "used": 2, "left": 3}
    assert token.calls.filter(accepted=False).count() == 1


def test_throttled_and_unreadable_calls_are_logged(study, monkeypatch):
    cache.clear()
    monkeypatch.setattr(EvaluationTokenThrottle, "rate", "2/minute")
    token, raw = token_create(study=study, name="t", min_batch=1)
    body = {"candidate": "c", "predictions": predictions_of(study)}
    statuses = [post(study.pk, raw, body).status_code for _ in range(3)]
    assert statuses == [201, 201, 429]
    throttled = token.calls.get(accepted=False)
    assert throttled.reason.startswith("throttled")
    cache.clear()
    assert EvaluationCall.objects.filter(token=token).count() == 3
