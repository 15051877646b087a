"""Fixtures of the core's tests: ``answered`` — a study of each type with answers (the
review, exclusion and Workers tests run once per type)."""

from __future__ import annotations

import pytest

from tests.annotations.core.review_helpers import (
    assisted_answered,
    critique_answered,
    partitioned_answered,
)


@pytest.fixture(params=[partitioned_answered, assisted_answered, critique_answered],
                ids=["partitioned", "assisted", "critique"])
def answered(request):
    """(study, its answers' model, the answer ids) of a study of each type."""
    return request.param()
