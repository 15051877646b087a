"""The critique dashboard's note where its intervals cannot keep their promise (too few
annotators at a level: docs/coverage.md, "Critique: …"), through the Django client."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotations.critique import dashboard
from annotations.critique.models import CritiqueOutput
from estimators.critique import MIN_RELIABLE_ANNOTATORS
from tests.annotations.critique.helpers import answer_next, make_critique_study

pytestmark = pytest.mark.django_db


def _answer_everything(study, users):
    while True:
        done = [answer_next(study, user, final=i % 2)[0] for i, user in enumerate(users)]
        if not any(done):
            return


def _dashboard(client, study) -> str:
    from annotations.core.services.studies import membership_add
    from annotations.critique.services.analysis import critique_recompute
    from tests.factories import UserFactory

    critique_recompute(study_id=study.pk)
    manager = UserFactory()
    membership_add(study=study, user=manager, role="manager")
    client.force_login(manager)
    return client.get(reverse("critique-dashboard", args=[study.pk])).content.decode()


def _note(html: str) -> str | None:
    marker = 'data-testid="intervals-unreliable">'
    if marker not in html:
        return None
    return html.split(marker, 1)[1].split("</p>", 1)[0]


def test_the_page_says_the_intervals_are_unreliable_with_few_annotators(client):
    study, users = make_critique_study(n_questions=3, top_level=1, counts=[2, 1],
                                       n_annotators=3)
    _answer_everything(study, users)
    per_level = {lv: CritiqueOutput.objects.filter(study=study, level=lv)
                 .values("author").distinct().count() for lv in (0, 1)}
    assert all(0 < n < MIN_RELIABLE_ANNOTATORS for n in per_level.values())
    note = _note(_dashboard(client, study))
    assert note is not None
    assert f"responses by {per_level[0]} annotators" in note
    critiques = f"{per_level[1]} annotator{'s' if per_level[1] != 1 else ''}"
    assert f"critiques by {critiques}" in note
    assert f"fewer than {MIN_RELIABLE_ANNOTATORS} annotators at a level" in note
    assert "less than 93 % of the time" in note


def test_no_note_where_every_level_has_enough_annotators(client, monkeypatch):
    study, users = make_critique_study(n_questions=3, top_level=1, counts=[2, 1],
                                       n_annotators=3)
    _answer_everything(study, users)
    fewest = min(CritiqueOutput.objects.filter(study=study, level=lv)
                 .values("author").distinct().count() for lv in (0, 1))
    monkeypatch.setattr(dashboard, "MIN_RELIABLE_ANNOTATORS", fewest)
    html = _dashboard(client, study)
    assert 'data-testid="level-table"' in html
    assert _note(html) is None


def test_levels_without_annotators_never_raise_the_note():
    # The AI's levels have no annotators: the AI is one fixed system, not a sample.
    rows = [{"level": 0, "n_annotators": 0}, {"level": 1, "n_annotators": 0},
            {"level": 2, "n_annotators": MIN_RELIABLE_ANNOTATORS}]
    assert dashboard.intervals_unreliable(rows) is None
    rows[2]["n_annotators"] = MIN_RELIABLE_ANNOTATORS - 1
    note = dashboard.intervals_unreliable(rows)
    assert [lv["level"] for lv in note["levels"]] == [2]
    assert note["fewest"] == MIN_RELIABLE_ANNOTATORS - 1
