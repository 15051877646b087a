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


def test_the_approximate_intervals_say_so_where_annotators_wrote(client):
    study, users = make_critique_study(n_questions=2, top_level=1, counts=[2, 1],
                                       n_annotators=3)
    _answer_everything(study, users)
    html = _dashboard(client, study)
    floor = dashboard.APPROXIMATE_FLOOR
    means = html.split('data-testid="approximate-means">', 1)[1].split("</p>", 1)[0]
    assert f"between {floor['means']} % and 95 %" in means
    pairs = html.split('data-testid="approximate-pairs">', 1)[1].split("</p>", 1)[0]
    assert f"down to {floor['input_pairs']} %" in pairs


def test_an_ai_only_study_has_no_annotator_notes(client):
    # The AI is one fixed system: its intervals are clustered by question alone and none
    # of the annotator notes applies.
    from annotations.critique.services.simulation import study_from_simulation
    from annotations.critique.services.studies import critique_study_create
    from estimators.critique.simulation import CritiqueDesign, simulate_critique

    sim = simulate_critique(CritiqueDesign(n_questions=6, counts=(3, 1), accuracy=(0.6, 0.7),
                                           mode="ai", confidence=(3, 3), minutes=(5, 5)),
                            seed=2)
    study = critique_study_create(name="ai only", top_level=1, counts=[3, 1], mode="ai",
                                  seed=4)
    study_from_simulation(study=study, sim=sim, ai_levels=[0, 1])
    html = _dashboard(client, study)
    assert 'data-testid="level-table"' in html
    for testid in ("intervals-unreliable", "approximate-means", "approximate-pairs"):
        assert f'data-testid="{testid}"' not in html
