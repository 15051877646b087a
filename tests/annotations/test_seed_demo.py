"""seed_demo: every study type's demo with its accounts — two raters (one in the blind arm,
one in an assisted arm) and an annotator per critique level — listed as one block."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection

from annotations.assisted.services.raters import rater_assignment
from annotations.core.models import Study, StudyMembership, User
from annotations.critique.services.assignment import (
    critique_task_next,
    level_order,
    levels_state,
)
from annotations.management.commands.seed_demo import DemoAccount, accounts_block

pytestmark = pytest.mark.django_db


def test_the_block_lists_every_account_by_study_with_its_page():
    first, second = Study(pk=4, name="Study four"), Study(pk=9, name="Study nine")
    block = accounts_block([
        DemoAccount(first, "rater-blind", "rater-blind", "rater, blind arm", "/studies/4/rate/"),
        DemoAccount(second, "manager", "manager", "manager", "/studies/9/dashboard/"),
        DemoAccount(first, "manager", "manager", "manager", "/studies/4/dashboard/"),
    ], "http://127.0.0.1:8001/")
    lines = block.splitlines()
    assert lines[0] == "Demo accounts (user / password) — log in at http://127.0.0.1:8001/"
    assert lines[1:] == [
        "", "#4 Study four",
        "  rater-blind / rater-blind  rater, blind arm  http://127.0.0.1:8001/studies/4/rate/",
        "  manager / manager          manager           http://127.0.0.1:8001/studies/4/dashboard/",
        "", "#9 Study nine",
        "  manager / manager          manager           http://127.0.0.1:8001/studies/9/dashboard/",
    ]


def test_seed_demo_seeds_a_rater_per_kind_of_arm_and_an_annotator_per_level(tmp_path):
    # when
    accounts = tmp_path / "accounts.txt"
    out = io.StringIO()
    call_command("seed_demo", "--items", "30", "--answers", "0", "--accounts-file",
                 str(accounts), "--base-url", "http://127.0.0.1:8123", stdout=out,
                 stderr=io.StringIO())
    # then: the block went to the file, not between the seeding logs
    block = accounts.read_text()
    assert "Demo accounts" not in out.getvalue()
    studies = {s.kind: [] for s in Study.objects.all()}
    for study in Study.objects.order_by("pk"):
        studies[study.kind].append(study)
        assert f"#{study.pk} {study.name}" in block
    # an assisted study: one rater in the blind arm, one in an assisted arm, quiz to pass
    assisted = studies[Study.Kind.ASSISTED][0]
    for name, shows_ai in (("rater-blind", False), ("rater-assisted", True)):
        user = User.objects.get(username=name)
        assert user.check_password(name)
        assert StudyMembership.objects.filter(study=assisted, user=user,
                                              role=StudyMembership.Role.ANNOTATOR).exists()
        assignment = rater_assignment(study=assisted, user=user)
        assert bool(assignment.components) is shows_ai and assignment.quiz_passed_at is None
        assert (f"{name} / {name}" in block
                and f"http://127.0.0.1:8123/studies/{assisted.pk}/rate/" in block)
    # each critique study: an annotator per level its annotators write, offered that level
    critique = studies[Study.Kind.CRITIQUE]
    assert len(critique) == 2
    for study in critique:
        levels = study.critique_settings.human_levels
        members = set(StudyMembership.objects.filter(
            study=study, role=StudyMembership.Role.ANNOTATOR, user__username__startswith=
            "annotator-").values_list("user__username", flat=True))
        assert members == {f"annotator-l{lv}" for lv in levels}
        for level in levels:
            user = User.objects.get(username=f"annotator-l{level}")
            assert user.check_password(user.username)
            # the rule prefers the account's own level (it answered every level above)
            done, _ = levels_state(study, user, levels)
            assert level_order(study.critique_settings, done)[0] == level
            if connection.vendor == "sqlite":  # the embedded default: offered it, too
                assert critique_task_next(study=study, user=user).level == level
    line = next(x for x in block.splitlines() if "annotator-l0 / annotator-l0" in x)
    assert line.split()[3:] == ["annotator,", "level", "0", "(responses)",
                                f"http://127.0.0.1:8123/studies/{critique[0].pk}/critique/"]
    assert "annotator, level 2 (critiques of critiques)" in block
