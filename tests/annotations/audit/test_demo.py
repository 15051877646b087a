"""The demo's audits: one AI rater passes its audit, one fails; both show κ; created once."""

from __future__ import annotations

import pytest

from annotations.audit.models import Audit
from annotations.audit.services.demo import audit_demo_seed
from tests.annotations.audit.helpers import make_audit_study

pytestmark = pytest.mark.django_db


def test_the_demo_has_an_audited_rater_and_one_that_fails():
    study, _ = make_audit_study("demo")
    honest, liar = audit_demo_seed(study)
    assert honest.status == liar.status == Audit.Status.SUCCEEDED
    assert honest.successes == honest.total == 498
    assert liar.successes < 0.2 * liar.total
    assert honest.summary["kappa"]["kappa"] > 0.6 > liar.summary["kappa"]["kappa"]
    assert audit_demo_seed(study) == [] and Audit.objects.filter(study=study).count() == 2
