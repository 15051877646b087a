"""The second language (German, ``locale/de``): every string marked for translation in the
code and the worker pages' scripts has its German, none fuzzy; the compiled catalogs are
the committed texts'; and a participant's pages and the specialist's, rater's (tutorial,
quiz, a sentence with the AI panel) and annotator's pages, rendered in German, hold no
English text of their own — every text node that is the same in both languages is study
data (names, the study's own texts) or a code (ids, keys)."""

from __future__ import annotations

import gettext
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotations.models import RecruitmentLink
from tests.factories import make_study, specialist

ROOT = Path(__file__).resolve().parents[2]
CATALOGS = ROOT / "locale" / "de" / "LC_MESSAGES"
DOMAINS = ("django", "djangojs")  # the pages' strings, and their scripts' (/jsi18n/)


def _entries(text: str) -> dict[str, list[str]]:
    """msgid → its msgstr(s) of a .po text (the header left out); fuzzy ones marked by a
    leading "#fuzzy" item."""
    out: dict[str, list[str]] = {}
    for block in text.split("\n\n"):
        fuzzy = any(line.startswith("#,") and "fuzzy" in line for line in block.splitlines())
        fields: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            m = re.match(r'^(msgid|msgid_plural|msgstr(?:\[\d+\])?) (".*")$', line)
            if m:
                key = m.group(1)
                fields[key] = eval(m.group(2))  # noqa: S307 - a .po string literal
            elif line.startswith('"') and key:
                fields[key] += eval(line)  # noqa: S307
        if fields.get("msgid"):
            values = [v for k, v in sorted(fields.items()) if k.startswith("msgstr")]
            out[fields["msgid"]] = (["#fuzzy"] if fuzzy else []) + values
    return out


def _po(domain: str) -> dict[str, list[str]]:
    return _entries((CATALOGS / f"{domain}.po").read_text(encoding="utf-8"))


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_german_string_is_translated_and_none_is_fuzzy(domain):
    entries = _po(domain)
    assert entries
    bad = [m for m, values in entries.items() if "#fuzzy" in values or not all(values)]
    assert bad == [], bad


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_compiled_catalog_is_the_committed_text(domain):
    catalog = gettext.GNUTranslations((CATALOGS / f"{domain}.mo").open("rb"))
    for msgid, values in _po(domain).items():
        assert catalog.gettext(msgid) == values[0], msgid


def test_every_marked_string_of_the_code_is_in_the_catalog(tmp_path, settings, monkeypatch):
    """``makemessages`` over the code (linked into a scratch folder, so that it writes a
    catalog of its own there) finds no string the committed catalog lacks: a new string
    must come with its German."""
    if shutil.which("xgettext") is None:
        import os

        if os.environ.get("CI") == "true":
            pytest.fail("xgettext (GNU gettext) is not installed: .ci/run installs it")
        pytest.skip("GNU gettext not installed (apt-get install gettext)")
    for name in ("annotations", "assistants", "oversight_site", "templates"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / "locale").mkdir()
    settings.LOCALE_PATHS = [tmp_path / "locale"]
    monkeypatch.chdir(tmp_path)
    missing = []
    for domain in DOMAINS:
        call_command("makemessages", locale=["de"], domain=domain, symlinks=True,
                     verbosity=0)
        found = set(_entries((tmp_path / "locale" / "de" / "LC_MESSAGES" / f"{domain}.po")
                             .read_text(encoding="utf-8")))
        missing += [f"{domain}: {m}" for m in sorted(found - set(_po(domain)))]
    assert missing == [], missing


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.nodes: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        text = " ".join(data.split())
        if not self._skip and re.search(r"[A-Za-z]{3}", text):
            self.nodes.append(text)


def _texts(response) -> list[str]:
    parser = _Text()
    parser.feed(response.content.decode())
    return parser.nodes


@pytest.mark.django_db
def test_a_participants_pages_in_german_hold_no_english_of_their_own(client):
    study = make_study(k=2, n_items=4, name="Studie Alpha")
    link = RecruitmentLink.objects.create(
        study=study, platform="prolific", name="pilot", completion_code="C0DE", max_tasks=1,
        time_limit_minutes=20, quiz=[{"question": "Zwei plus zwei?", "options": ["4", "5"],
                                      "answer": 0}])
    data = {study.name, "Zwei plus zwei?", "Oversight", "Prolific", "English", "Deutsch",
            "PROLIFIC_PID", "STUDY_ID", "SESSION_ID", "Enter", "Esc", "Ctrl",
            *study.items.values_list("text", flat=True),
            *(o for options in study.items.values_list("options", flat=True) for o in options),
            *(f"Is the answer {c}?" for c in ("C0", "C1"))}
    entry = reverse("join", args=[link.token])
    pages = {}

    def read(name, url, method="get", **kw):
        for lang in ("en", "de"):
            response = getattr(client, method)(url, HTTP_ACCEPT_LANGUAGE=lang, **kw)
            pages.setdefault(name, {})[lang] = _texts(response)

    read("refused", entry + "?PROLIFIC_PID=x!")
    client.get(entry + "?" + urlencode({"PROLIFIC_PID": "a" * 24, "STUDY_ID": "b" * 24,
                                        "SESSION_ID": "c" * 24}))
    step = reverse("join-step", args=[link.token])
    read("consent", step)
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    read("screening", step)
    client.post(reverse("join-quiz", args=[link.token]), {"q0": "1"})
    read("screened out", step)
    # a specialist's labelling page, a query on screen (another participant of the link)
    client.logout()
    client.get(entry + "?" + urlencode({"PROLIFIC_PID": "d" * 24, "STUDY_ID": "b" * 24,
                                        "SESSION_ID": "e" * 24}))
    client.post(reverse("join-consent", args=[link.token]), {"agree": "yes"})
    RecruitmentLink.objects.filter(pk=link.pk).update(quiz=[])
    client.post(reverse("join-quiz", args=[link.token]), {"q0": "0"})
    client.post(reverse("label-next", args=[study.pk]), HTTP_HX_REQUEST="true")
    read("labelling", reverse("label", args=[study.pk]))
    english = []
    for name, by_lang in pages.items():
        assert by_lang["en"] != by_lang["de"], name  # the page did change language
        same = set(by_lang["en"]) & set(by_lang["de"])
        english += [f"{name}: {t!r}" for t in same
                    if t not in data and not re.fullmatch(r"[\w.·:()!-]*\d[\w.·:()!-]*", t)]
    assert english == [], english


def _strings(value) -> set[str]:
    """Every text inside a JSON value (a trace's claims, evidence, searches…), each also
    split into its lines and whitespace-normalised as a page shows it."""
    out: set[str] = set()
    if isinstance(value, str):
        for text in (value, *value.splitlines()):
            out.add(" ".join(text.split()))
    elif isinstance(value, dict):
        for v in value.values():
            out |= _strings(v)
    elif isinstance(value, list):
        for v in value:
            out |= _strings(v)
    return out


def _english_of_its_own(pages: dict, data: set[str]) -> list[str]:
    english = []
    for name, by_lang in pages.items():
        assert by_lang["en"] != by_lang["de"], name
        same = set(by_lang["en"]) & set(by_lang["de"])
        english += [f"{name}: {t!r}" for t in same
                    if t not in data and not any(t in d for d in data if len(d) > len(t))
                    and not re.fullmatch(r"[\w.·:()!-]*\d[\w.·:()!-]*", t)]
    return english


@pytest.mark.django_db
def test_the_raters_and_annotators_pages_in_german_hold_no_english_of_their_own(
        client, settings):
    from annotations.assisted.services.rating import rating_lease_next
    from annotations.models import CritiqueOutput, CritiqueQuestion, Sentence
    from assistants.models import TraceSample
    from tests.annotations.assisted.helpers import add_rater, make_assisted_study
    from tests.annotations.critique.helpers import answer_next, make_critique_study

    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    pages: dict = {}

    def read(name, url):
        for lang in ("en", "de"):
            response = client.get(url, HTTP_ACCEPT_LANGUAGE=lang)
            assert response.status_code == 200, (name, response.status_code)
            pages.setdefault(name, {})[lang] = _texts(response)

    study = make_assisted_study(n_sentences=3, arms={
        "Everything": ["search", "evidence", "reasoning", "judgments", "confidence"]})
    newcomer = add_rater(study, ready=False)
    client.force_login(newcomer)
    read("the rater's tutorial and quiz", reverse("rate", args=[study.pk]))
    rater = add_rater(study)
    client.force_login(rater)
    assert rating_lease_next(study=study, user=rater) is not None
    read("the rating page", reverse("rate", args=[study.pk]))
    data = {study.name, "Oversight", "API", "English", "Deutsch", "Enter", "Esc", "Ctrl"}
    for row in Sentence.objects.filter(study=study).values("prompt", "response", "target"):
        data |= _strings(list(row.values()))
    for trace in TraceSample.objects.filter(sentence__study=study).values_list("trace",
                                                                               flat=True):
        data |= _strings(trace)
    data |= set(study.arms.values_list("name", flat=True))

    critique, users = make_critique_study(n_questions=2, top_level=1, n_annotators=3)
    answer_next(critique, users[0], final=1, reasoning="B follows from the second clause.")
    answer_next(critique, users[1], final=2, reasoning="C is what the question implies.")
    client.force_login(users[2])
    client.post(reverse("critique-next", args=[critique.pk]), HTTP_HX_REQUEST="true")
    read("the critique task page", reverse("critique-work", args=[critique.pk]))
    data.add(critique.name)
    for text, options in CritiqueQuestion.objects.filter(study=critique).values_list(
            "text", "options"):
        data |= _strings([text, *options, *(f"{chr(65 + i)}. {o}"
                                             for i, o in enumerate(options))])
    data |= _strings(list(CritiqueOutput.objects.filter(study=critique)
                          .values_list("reasoning", flat=True)))
    data |= {f"{level} {letter}" for level in ("Response", "Critique") for letter in "AB"}
    data |= {"Response", "Responses", "Critique", "Critiques"}  # the outputs' names
    english = _english_of_its_own(pages, data)
    assert english == [], english


@pytest.mark.django_db
def test_the_account_home_help_and_error_pages_in_german_hold_no_english_of_their_own(
        client):
    """What every worker meets besides the work: signing in, the invitation (valid, used,
    for another account), the password change, the home page of each type's workers, the
    help index (its guides are written in English, and say so), and the error pages."""
    from annotations.core.services.studies import invitation_path
    from tests.annotations.assisted.helpers import make_assisted_study
    from tests.annotations.critique.helpers import make_critique_study
    from tests.factories import UserFactory

    pages: dict = {}

    def read(name, url, status=200, method="get", **kw):
        for lang in ("en", "de"):
            response = getattr(client, method)(url, HTTP_ACCEPT_LANGUAGE=lang, **kw)
            assert response.status_code == status, (name, lang, response.status_code)
            pages.setdefault(name, {})[lang] = _texts(response)

    partitioned = make_study(k=2, n_items=2, name="Studie Alpha")
    assisted = make_assisted_study(n_sentences=1)
    critique, _ = make_critique_study(n_questions=1, n_annotators=1)
    worker = specialist(partitioned, 0)
    assisted.memberships.create(user=worker, role="annotator")
    critique.memberships.create(user=worker, role="annotator")
    invited = UserFactory(username="eingeladen")
    read("login", reverse("login"))
    read("login refused", reverse("login"), method="post",
         data={"username": "niemand", "password": "falsch"})
    read("invitation", invitation_path(invited), follow=True)
    read("used invitation", reverse("invitation", args=["MQ", "x-y"]))
    read("403 signed out", reverse("label", args=[partitioned.pk]), status=302)
    client.force_login(worker)
    read("home", reverse("home"))
    read("help", reverse("help-index"))
    read("password change", reverse("password_change"))
    read("password changed", reverse("password_change_done"))
    read("invitation for another account", invitation_path(invited), follow=True)
    read("404", "/keine-seite/", status=404)
    read("403", reverse("dashboard", args=[partitioned.pk]), status=403)
    data = {partitioned.name, assisted.name, critique.name, worker.username, "eingeladen",
            "Oversight", "API", "English", "Deutsch", "niemand", "/keine-seite/",
            *(c.name for c in partitioned.classes.all()),
            *(d for d in (partitioned.description, assisted.description,
                          critique.description) if d)}
    from annotations.core.guides import guide_index

    roles, others = guide_index()
    data |= {title for _, title, _ in roles} | {title for _, title in others}
    del pages["403 signed out"]  # a redirect to the sign-in page: nothing of its own
    english = _english_of_its_own(pages, data)
    assert english == [], english
    assert "Diese Anleitung ist auf Englisch geschrieben." in client.get(
        reverse("help-page", args=["specialist"]), HTTP_ACCEPT_LANGUAGE="de").content.decode()


@pytest.mark.django_db
def test_the_scripts_catalog_follows_the_page_and_is_cached_per_language(client):
    page = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert f'src="{reverse("javascript-catalog")}?l=de"' in page
    catalog = client.get(reverse("javascript-catalog") + "?l=de", HTTP_ACCEPT_LANGUAGE="de")
    assert "Zeit abgelaufen" in catalog.content.decode()
    assert "max-age=3600" in catalog["Cache-Control"]
    english = client.get(reverse("javascript-catalog") + "?l=en", HTTP_ACCEPT_LANGUAGE="en")
    assert "Zeit abgelaufen" not in english.content.decode()
