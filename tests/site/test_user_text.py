"""What users read says nothing of the project's insides and counts in good English: no
issue number, no METHODS.md section and no path of a doc file in the templates, the guides
served under /help/, the admin's names, the models' help texts or the API docs; no
doubled plural ("Evaluation settingss"); no "1 options" (templates count with
``pluralize``, messages with ``core.words.counted``)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings

from annotations.core.guides import GUIDES, guide_html

pytestmark = pytest.mark.django_db

ROOT = Path(settings.BASE_DIR)
INTERNAL = re.compile(r"\bissues? \d+|METHODS\.md", re.IGNORECASE)
# a consonant then "ss" ends no English word ("settingss", "optionss", "itemss"); "class",
# "access", "process" have a vowel before it
DOUBLED = re.compile(r"\b[A-Za-z]+[bcdfghjklmnpqrtvwxz]ss\b")
# a number word left plural after a literal or counted 1 ("1 options"; "0/1 labels" and a
# formula's "2(t − j) + 1 outputs" are fine)
ONE_PLURAL = re.compile(r"(?<![-+−×/] )(?<![/\d.,])\b1 (?:options|items|sentences|answers|queries|"
                        r"questions|datapoints|criteria|labels|raters|ratings|rounds|minutes|"
                        r"classes|tasks|members|systems|arms|levels|outputs|errors|rows)\b")
# developers' pages: measurement logs that name the change they measured
DEVELOPER_GUIDES = {"performance", "performance-history"}


def _problems(where: str, text: str, *, doc_paths: bool = False) -> list[str]:
    found = [m.group() for pattern in (INTERNAL, DOUBLED, ONE_PLURAL)
             for m in pattern.finditer(text)]
    if doc_paths:
        found += re.findall(r"\bdocs/[\w-]+\.md\b", text)
    return [f"{where}: {f!r}" for f in found]


def _templates() -> list[Path]:
    roots = [ROOT / "templates", *(ROOT / "annotations").glob("*/templates")]
    return sorted(p for root in roots for p in root.rglob("*.html"))


def test_templates_say_nothing_internal_and_count_in_good_english():
    problems = []
    for path in _templates():
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"\{#.*?#\}|\{% comment %\}.*?\{% endcomment %\}", "", text, flags=re.S)
        problems += _problems(str(path.relative_to(ROOT)), text, doc_paths=True)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("page", sorted(set(GUIDES) - DEVELOPER_GUIDES))
def test_the_guides_under_help_say_nothing_internal(page):
    text = html.unescape(re.sub(r"<[^>]+>", " ", guide_html(page)[1]))
    assert _problems(f"/help/{page}/", text) == []


def test_the_admin_names_every_list_in_good_english(admin_client):
    index = admin_client.get("/admin/").content.decode()
    assert "Evaluation settings<" in index
    assert _problems("/admin/", html.unescape(re.sub(r"<[^>]+>", " ", index))) == []
    names = []
    for model in apps.get_models():
        names += [str(model._meta.verbose_name), str(model._meta.verbose_name_plural)]
        for field in model._meta.get_fields():
            names += [str(getattr(field, "verbose_name", "")),
                      str(getattr(field, "help_text", ""))]
    assert _problems("model names and help texts", "\n".join(names)) == []


def test_the_api_docs_say_nothing_internal():
    """No issue, METHODS.md or repository path: a guide is named by its served address."""
    from drf_spectacular.generators import SchemaGenerator

    schema = json.dumps(SchemaGenerator().get_schema(request=None, public=True))
    assert _problems("/api/schema/", schema, doc_paths=True) == []


def test_a_one_option_question_is_refused_in_the_singular():
    from annotations.critique.services.questions import _options

    with pytest.raises(ValueError, match=r"^1 option; a question needs 2 to \d+$"):
        _options('["only"]')
