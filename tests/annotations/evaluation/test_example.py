"""The search example runs end to end through the service under both routing designs and
leaves no study behind."""

import pytest

from annotations.core.models import Study
from annotations.evaluation.models import EvaluationToken
from annotations.evaluation.services.example import markdown, run_seed, svg
from annotations.partitioned.models import Query

pytestmark = pytest.mark.django_db


def test_one_small_seed_of_the_search_under_both_designs():
    minimum = EvaluationToken._meta.get_field("min_batch").default  # the example's tokens'
    before = Study.objects.count()
    results = run_seed(0, n_candidates=3, budgets=(200, 600))
    assert Study.objects.count() == before and not Query.objects.exists()
    assert [(r.design, r.answers) for r in results] == [
        ("uniform", 200), ("uniform", 600), ("targeted", 200), ("targeted", 600)]
    for r in results:
        assert r.candidates == 4 and r.moves >= 1  # the default, then three candidates
        assert 0.2 < r.test_default <= r.test_gold <= 1.0  # 5 classes: chance is 0.2
        assert r.test_service in {r.test_default, r.test_gold} or 0.2 < r.test_service < 1
        # the holdout is a hash of the item's database id: about 40 or 120 of the N items,
        # depending on the ids the database gave; the final report needs the minimum batch
        assert abs(r.held_out - 0.2 * r.answers) < 6 * (0.16 * r.answers) ** 0.5
        assert (r.final_report is None) == (r.held_out < minimum)
    assert results[0].test_default == results[3].test_default
    text = markdown(results)
    assert "| uniform | 200 |" in text and "| targeted | 600 |" in text
    assert svg(results).startswith("<svg")
