"""Every URL of the site — the pages, the API and the admin, read from the URL configuration
— passes request bodies through the one guard (``annotations.core.inputs.RequestBodyGuard``):
too deep JSON, NUL characters, texts over FIELD_MAX, bodies over the size limit and files
sent where none are taken are answered 400/413/415 with the reason, never a 500, and
nothing is stored. Every view that takes uploads (marked ``accepts_upload``) is posted bad
files (NUL, depth, length, size) and must refuse them naming file, line and field.

A new endpoint is covered without anyone listing it; a new upload view fails here until it
has a recipe below. The tests of the detector show that it does report an unguarded view."""

from __future__ import annotations

import html
import re

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, path, resolve, reverse

from annotations.core.inputs import FIELD_MAX, NUL_MESSAGE, takes_uploads

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000
LONG = "x" * (FIELD_MAX + 1)
# (name, body, content type, the words the refusal must carry)
BAD_BODIES = [
    ("deep-json", DEEP, "application/json", "JSON nested deeper than 64 levels"),
    ("nul-json", '{"note": "a\\u0000b"}', "application/json", f"note: {NUL_MESSAGE}"),
    ("long-json", '{"note": "' + LONG + '"}', "application/json",
     f"note: {FIELD_MAX + 1} characters; at most {FIELD_MAX} fit"),
    ("nul-form", "note=a%00b", "application/x-www-form-urlencoded", f"note: {NUL_MESSAGE}"),
    ("long-form", "note=" + LONG, "application/x-www-form-urlencoded",
     f"note: {FIELD_MAX + 1} characters; at most {FIELD_MAX} fit"),
    ("too-large", '{"note": "' + "y" * 3000 + '"}', "application/json",
     "The request body is larger than 2000 bytes"),
    ("other-type", "[[[[]]]]", "text/plain", "is not taken here"),
]
SAMPLES = {"int": "1", "str": "x", "slug": "x", "path": "1", "uuid":
           "00000000-0000-0000-0000-000000000000"}


def url_patterns(resolver: URLResolver | None = None, prefix: str = "", names: str = ""
                 ) -> list[tuple[str, str, URLPattern]]:
    """(route, name, pattern) of every URL pattern, includes (the admin's) walked."""
    resolver = resolver or get_resolver()
    found = []
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            space = f"{names}{entry.namespace}:" if entry.namespace else names
            found += url_patterns(entry, route, space)
        else:
            found.append((route, f"{names}{entry.name}" if entry.name else route, entry))
    return found


def sample_path(route: str) -> str:
    """A concrete path for a route (``<int:study_id>`` → 1; regex groups → their first
    alternative or 1)."""
    route = re.sub(r"\(\?P<\w+>([^)]*)\)",
                   lambda m: m.group(1).split("|")[0] if re.fullmatch(r"[\w|]+", m.group(1))
                   else "1", route)
    route = re.sub(r"<(?:(\w+):)?\w+>", lambda m: SAMPLES[m.group(1) or "str"], route)
    return "/" + route.replace("^", "").replace("$", "").replace("\\Z", "").replace("\\", "")


def endpoints(urlconf=None) -> list[tuple[str, object]]:
    """(path, view) of every URL pattern; the path resolves to that very view."""
    found = []
    for route, name, pattern in url_patterns(get_resolver(urlconf)):
        sample = sample_path(route)
        match = resolve(sample, urlconf)
        assert match.func == pattern.callback, f"cannot build a path for {name} ({route})"
        found.append((sample, pattern.callback))
    return found


def row_counts() -> dict[str, int]:
    return {m._meta.label: m.objects.count() for m in apps.get_models()
            if m._meta.label != "sessions.Session"}


def shown_text(response) -> str:
    """What the answer says: a JSON body's detail, or the page's text."""
    if response.get("Content-Type", "").startswith("application/json"):
        return str(response.json().get("detail", ""))
    return html.unescape(response.content.decode(errors="replace"))


def unguarded(client: Client, paths: list[str]) -> list[str]:
    """'path (body): status' for every bad body some path did not refuse with its reason."""
    misses = []
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000):
        for url in paths:
            for name, body, content_type, words in BAD_BODIES:
                if name.startswith("long") or name == "deep-json":
                    # the size limit would answer first
                    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2_621_440):
                        response = client.post(url, body, content_type=content_type)
                else:
                    response = client.post(url, body, content_type=content_type)
                text = shown_text(response)
                if response.status_code not in (400, 413, 415) or words not in text:
                    misses.append(f"{url} ({name}): {response.status_code}")
    return misses


@pytest.fixture
def superuser_client():
    from tests.factories import UserFactory

    user = UserFactory(is_staff=True, is_superuser=True)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def test_every_url_refuses_bad_bodies_with_the_reason_and_stores_nothing(superuser_client):
    from tests.factories import make_study

    make_study(k=2, n_items=2)  # study 1 and its rows exist: views would find them
    found = endpoints()
    before = row_counts()

    misses = unguarded(superuser_client, [p for p, _ in found])

    assert len(found) > 100  # the admin's included
    assert misses == []
    assert row_counts() == before


def test_files_reach_only_views_marked_as_taking_uploads(superuser_client):
    before = row_counts()
    refused = []
    for url, view in endpoints():
        if takes_uploads(view):
            continue
        response = superuser_client.post(url, {"file": SimpleUploadedFile("a.jsonl", b"{}")})
        text = response.content.decode(errors="replace")
        if response.status_code != 400 or "This address takes no file uploads." not in text:
            refused.append(f"{url}: {response.status_code}")
    assert refused == []
    assert row_counts() == before


# --- the upload views: their bad files ------------------------------------------------------

def _partitioned():
    from tests.factories import make_study

    return make_study(k=2, n_items=2, open_=False)


def _assisted():
    from tests.annotations.assisted.helpers import make_assisted_study

    return make_assisted_study(n_sentences=0, open_=False)


def _critique():
    from tests.annotations.critique.helpers import make_critique_study

    return make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai_below",
                               open_=False)[0]


# URL name → (study builder, form fields besides the file, kinds of file posted)
UPLOADS = {
    "admin:annotations_study_import_items": (_partitioned, {}),
    "admin:annotations_study_import_predictions": (_partitioned, {}),
    "admin:annotations_assistedstudy_import_sentences": (_assisted, {}),
    "admin:annotations_assistedstudy_import_traces": (_assisted, {}),
    "admin:annotations_critiquesettings_import_questions": (_critique, {}),
    "admin:annotations_critiquesettings_import_outputs": (_critique, {}),
    "api-import-jobs": (_partitioned, {"kind": "items"}),
    # evaluation logs, into every study type (the JSONL formats read lines like any file)
    "admin:annotations_study_import_eval_log": (_assisted, {"log_format": "eee"}),
    "api-import-jobs eval_log": (_critique, {"kind": "eval_log", "log_format": "lm-eval",
                                             "model": "m"}),
    "audits": (_partitioned, {"action": "rubric", "name": "r", "aggregator": "majority"}),
}
BAD_FILES = [
    ("nul", b'{"note": "a\x00b"}\n', f"bad.jsonl:1: note: {NUL_MESSAGE}"),
    ("nul-escaped", b'{"note": "a\\u0000b"}\n', f"bad.jsonl:1: note: {NUL_MESSAGE}"),
    ("deep", ('{"note": ' + "[" * 5000 + "]" * 5000 + "}\n").encode(),
     "bad.jsonl:1: JSON nested deeper than 64 levels"),
    ("long", ('{"note": "' + LONG + '"}\n').encode(),
     f"bad.jsonl:1: note: {FIELD_MAX + 1} characters; at most {FIELD_MAX} fit"),
    ("too-large", b'{"note": "' + b"z" * 300_000 + b'"}\n',
     "bad.jsonl: 300,013 bytes; at most 200,000 per file (OVERSIGHT_IMPORT_MAX_BYTES): "
     "split the file"),
]


def upload_url_names(urlconf=None) -> set[str]:
    return {name for _, name, pattern in url_patterns(get_resolver(urlconf))
            if takes_uploads(pattern.callback)}


def test_every_upload_view_has_a_recipe_here():
    assert upload_url_names() <= {name.split(" ")[0] for name in UPLOADS}


def _shown(response, message: str, study) -> bool:
    from annotations.models import CritiqueRun, ImportJob

    text = shown_text(response)
    stored = [e for job in ImportJob.objects.filter(study=study) for e in job.errors]
    stored += [e for run in CritiqueRun.objects.filter(study=study) for e in run.errors]
    return message in text or message in stored


@pytest.mark.parametrize(("kind", "content", "message"), BAD_FILES,
                         ids=[b[0] for b in BAD_FILES])
@pytest.mark.parametrize("upload", list(UPLOADS))
def test_every_upload_view_refuses_bad_files_naming_file_line_and_field(
        superuser_client, django_capture_on_commit_callbacks, upload, kind, content, message):
    from rest_framework.authtoken.models import Token

    from annotations.critique.services.ai_runs import critique_import_run
    from annotations.models import CritiqueOutput, CritiqueQuestion, CritiqueRun, Item, Sentence
    from assistants.models import Prediction, TraceSample

    build, fields = UPLOADS[upload]
    study = build()
    name = upload.split(" ")[0]
    url = reverse(name, kwargs={"study_id": study.pk})
    client = superuser_client
    if name.startswith("api-"):
        user = superuser_client.session.get("_auth_user_id")
        client = Client(HTTP_AUTHORIZATION="Token " + Token.objects.create(user_id=user).key,
                        raise_request_exception=False)
        from annotations.models import StudyMembership
        StudyMembership.objects.create(study=study, user_id=user, role="researcher")
    counts = [m.objects.count() for m in (Item, Prediction, Sentence, TraceSample,
                                          CritiqueQuestion, CritiqueOutput)]

    with override_settings(OVERSIGHT_IMPORT_MAX_BYTES=200_000), \
            django_capture_on_commit_callbacks(execute=False):
        response = client.post(url, {**fields, "file": SimpleUploadedFile("bad.jsonl", content)},
                               follow=not name.startswith("api-"))
    for run in CritiqueRun.objects.filter(study=study, status="queued"):
        critique_import_run(run_id=run.pk)  # as the worker does

    assert response.status_code < 500
    assert _shown(response, message, study), response.content.decode()[:2000]
    assert [m.objects.count() for m in (Item, Prediction, Sentence, TraceSample,
                                        CritiqueQuestion, CritiqueOutput)] == counts


# --- the detector itself --------------------------------------------------------------------

def _careless_view(request):
    """A view that trusts its body: a plain json.loads, form fields stored as they come."""
    import json

    from annotations.models import User

    data = json.loads(request.body) if request.content_type == "application/json" else {}
    User.objects.create(username=f"careless-{User.objects.count()}",
                        first_name=str(data)[:10] or request.POST.get("note", "")[:10])
    return HttpResponse("stored", status=201)


def _careless_upload(request):
    return HttpResponse(request.FILES["file"].read()[:10], status=201)


urlpatterns = [path("careless/", _careless_view), path("careless-upload/", _careless_upload),
               path("", lambda request: HttpResponse("home"), name="home")]  # error pages


def test_the_detector_reports_a_view_without_the_guard(superuser_client):
    from django.conf import settings

    without = [m for m in settings.MIDDLEWARE if m != "annotations.core.inputs.RequestBodyGuard"]
    with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=without):
        found = [p for p, _ in endpoints(__name__)]
        misses = unguarded(superuser_client, found)

    assert found == ["/careless/", "/careless-upload/", "/"]
    assert {m.split(" ")[0] for m in misses} == set(found)


@override_settings(ROOT_URLCONF=__name__)
def test_with_the_guard_the_careless_views_are_refused_and_the_upload_too(superuser_client):
    from annotations.models import User

    misses = unguarded(superuser_client, [p for p, _ in endpoints(__name__)])
    upload = superuser_client.post("/careless-upload/",
                                   {"file": SimpleUploadedFile("a.jsonl", b"{}")})

    assert misses == []
    assert upload.status_code == 400
    assert "This address takes no file uploads." in shown_text(upload)
    assert not User.objects.filter(username__startswith="careless").exists()


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_every_json_form_field_of_the_site_refuses_what_cannot_be_stored(rf):
    """The body guard bounds a whole field's text, not its nesting inside a form: a JSON
    form field must parse with the guards itself (``StorableJSONFormField``), or deep JSON
    typed into it is a RecursionError 500 (the routing page and the assisted settings inline
    were, until an audit found them). Every form class of the project and every form the
    admin builds (its pages and inlines) is checked."""
    from django import forms
    from django.contrib import admin

    import annotations.assisted.admin  # noqa: F401 - the admin modules define the forms
    import annotations.critique.admin  # noqa: F401
    from annotations.core.inputs import StorableJSONFormField
    from annotations.models import User

    superuser = User(username="root", is_superuser=True, is_staff=True)
    request = rf.get("/admin/")
    request.user = superuser
    forms_seen: dict[str, type] = {}
    for form_class in _subclasses(forms.BaseForm):
        if form_class.__module__.split(".")[0] in ("annotations", "assistants",
                                                   "oversight_site"):
            forms_seen[f"{form_class.__module__}.{form_class.__qualname__}"] = form_class
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in ("annotations", "assistants"):
            continue
        forms_seen[f"admin {model.__name__}"] = model_admin.get_form(request)
        for inline in model_admin.get_inline_instances(request):
            forms_seen[f"admin {model.__name__} inline {type(inline).__name__}"] = (
                inline.get_formset(request).form)
    offenders = [f"{where}.{name}" for where, form_class in forms_seen.items()
                 for name, field in getattr(form_class, "base_fields", {}).items()
                 if isinstance(field, forms.JSONField)
                 and not isinstance(field, StorableJSONFormField)]
    assert len(forms_seen) > 20
    assert offenders == [], offenders
