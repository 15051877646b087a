"""Audit fixtures: a study with a researcher, a two-criterion rubric, datapoints and
commitments files, and the expected outcome computed here by hand (not by the code under
test): with no non-linear criterion both challenges compare C(x′) with C(x), so a datapoint
succeeds exactly when every committed x′ has x's encoding."""

from __future__ import annotations

import json

from annotations.audit.models import Criterion, Rubric
from annotations.core.models import StudyMembership
from annotations.core.services.studies import membership_add
from tests.factories import UserFactory, make_study

DATA = ["0110", "1111", "0000", "1010", "0011", "1100", "0101", "1001", "0111", "1000"]


def encoding(x: str) -> tuple[bool, bool]:
    """The rubric of ``make_rubric`` by hand: contains "11"; starts with 0 (regex ^0)."""
    return ("11" in x, x[:1] == "0")


def make_audit_study(name: str = "audited"):
    study = make_study(k=2, n_items=6, open_=False, name=f"{name}-{UserFactory._meta.model.objects.count()}")
    researcher = study.memberships.get(role=StudyMembership.Role.RESEARCHER).user
    return study, researcher


def other_researcher(study):
    user = UserFactory(username=f"{study.pk}-other-researcher", is_staff=True)
    membership_add(study=study, user=user, role=StudyMembership.Role.RESEARCHER)
    return user


def make_rubric(study, name: str = "two checks") -> Rubric:
    rubric = Rubric.objects.create(study=study, name=name, aggregator="any")
    Criterion.objects.create(rubric=rubric, position=0, name="has_11", kind="contains",
                             text="11")
    Criterion.objects.create(rubric=rubric, position=1, name="starts_0", kind="regex",
                             text="^0")
    return rubric


def datapoints_file(data=DATA) -> bytes:
    return "".join(json.dumps({"item": f"d{i}", "datapoint": x}) + "\n"
                   for i, x in enumerate(data)).encode()


def commitments_file(similar_of, rounds: int = 3, data=DATA) -> bytes:
    """Every (item, round) committed: x′ = ``similar_of(x, round)``, label 1."""
    lines = [json.dumps({"item": f"d{i}", "round": k, "label": 1, "similar": similar_of(x, k)})
             for i, x in enumerate(data) for k in range(1, rounds + 1)]
    return ("\n".join(lines) + "\n").encode()


def liar(x: str, k: int) -> str:
    """Commits the same x′ "1111" every round: it passes exactly where C(x) = C("1111")."""
    return "1111"


def expected_successes(similar_of, rounds: int = 3, data=DATA) -> list[bool]:
    return [all(encoding(similar_of(x, k)) == encoding(x) for k in range(1, rounds + 1))
            for x in data]
