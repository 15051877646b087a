"""Number words (annotations/core/words.py) and the places that count with them."""

from __future__ import annotations

import pytest

from annotations.core.words import counted, plural


@pytest.mark.parametrize(("n", "noun", "words"), [
    (1, "minute", "1 minute"), (2, "minute", "2 minutes"), (0, "query", "0 queries"),
    (1, "query", "1 query"), (3, "class", "3 classes"), (2, "day", "2 days"),
    (2, "critique of critiques", "2 critiques of critiques"), (1, "study", "1 study"),
    (2, "study", "2 studies"), (1.0, "second", "1.0 second"),
])
def test_counted_says_one_in_the_singular_and_every_other_number_in_the_plural(n, noun, words):
    assert counted(n, noun) == words


def test_thousands_are_separated_on_request():
    assert counted(1200, "answer", thousands=True) == "1,200 answers"
    assert plural("level-3 critique", 2) == "level-3 critiques"


def test_the_throttle_waits_in_words():
    from oversight_site.throttling import _in_words

    assert _in_words(1) == "1 second"
    assert _in_words(61) == "61 seconds"
    assert _in_words(120) == "2 minutes"


@pytest.mark.django_db
def test_the_study_forms_help_texts_name_the_types_own_workers(client):
    from django.urls import reverse

    from tests.annotations.assisted.helpers import make_assisted_study
    from tests.factories import make_study, role_user

    # the assisted form said the guidelines were "Shown to every specialist on the
    # labelling page": assisted studies have raters and a rating page
    for study, url, worker in (
            (make_assisted_study(n_sentences=1, open_=False),
             "admin:annotations_assistedstudy_change", "rater"),
            (make_study(k=3, n_items=2, open_=False), "admin:annotations_study_change",
             "specialist")):
        client.force_login(role_user(study, "researcher"))
        page = client.get(reverse(url, args=[study.pk])).content.decode()
        assert f"Shown to every {worker} on the" in page
        assert f"How long a {worker} may hold a" in page
        other = "specialist" if worker == "rater" else "rater"
        assert f"Shown to every {other}" not in page
