"""The digits example runs end to end through the service and leaves no study behind."""

import pytest

from annotations.core.models import Study
from annotations.evaluation.services.example import markdown, run_seed, svg

pytestmark = pytest.mark.django_db


def test_one_seed_of_the_digits_search():
    before = Study.objects.count()
    result = run_seed(0, n_candidates=3)
    assert Study.objects.count() == before
    assert result.candidates == 3
    for value in (result.test_service, result.test_gold, result.test_default):
        assert 0.5 < value <= 1.0  # every candidate family beats chance (0.1) by far here
    assert result.final_report is not None and 0 <= result.final_report <= 1
    assert "| 0 |" in markdown([result]) and svg([result]).startswith("<svg")
