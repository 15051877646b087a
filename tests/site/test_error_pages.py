"""Error pages in the site's layout with the reason and a way home; JSON under /api/; never
Django's debug pages (URL lists, tracebacks)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.test import Client, override_settings

from tests.conftest import ROOT
from tests.factories import UserFactory, role_user, specialist

pytestmark = pytest.mark.django_db

LEAKS = ["Using the URLconf", "api/schema/", "admin/", "Traceback", "hunter2"]


def assert_in_layout(response, title: str) -> str:
    html = response.content.decode()
    assert response["Content-Type"].startswith("text/html")
    assert f"<h1>{title}</h1>" in html
    assert '<a class="brand" href="/">Oversight</a>' in html  # base.html's header
    assert '<a class="button" href="/">Back to your studies</a>' in html
    return html


@pytest.mark.parametrize("path", ["/no-such-page/", "/studies/999999/dashboard/",
                                  "/studies/abc/label/"])
def test_404_is_a_page_in_the_layout_without_a_url_list(path):
    client = Client()
    client.force_login(UserFactory())

    response = client.get(path)

    assert response.status_code == 404
    html = assert_in_layout(response, "Page not found")
    assert f"There is no page at <code>{path}</code>" in html
    assert not [leak for leak in LEAKS if leak in html]


def test_404_of_an_admin_path_leaks_no_url_list(study):
    client = Client()
    client.force_login(role_user(study, "researcher"))

    response = client.get("/admin/annotations/nothing-here/")

    assert response.status_code == 404
    html = assert_in_layout(response, "Page not found")
    assert "Using the URLconf" not in html


@pytest.mark.parametrize("path", ["/api/", "/api/nothing/", "/api/studies/abc/"])
def test_404_under_api_answers_json(path):
    client = Client()
    client.force_login(UserFactory())

    response = client.get(path)

    assert response.status_code == 404
    assert response.json() == {
        "code": "not_found",
        "detail": f"No API endpoint or object at {path}; the endpoints are listed at /api/docs/."}


def test_api_object_not_found_answers_json_with_a_code():
    client = Client()
    client.force_login(UserFactory())

    response = client.get("/api/studies/999999/")

    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "detail": "No Study matches the given query."}


def test_403_says_why_in_the_layout(study):
    client = Client()
    client.force_login(role_user(study, "manager"))

    response = client.get(f"/studies/{study.pk}/label/")

    assert response.status_code == 403
    html = assert_in_layout(response, "Not allowed")
    assert "You are not a specialist in this study." in html


def test_csrf_failure_is_a_page_in_the_layout():
    response = Client(enforce_csrf_checks=True).post(
        "/accounts/login/", {"username": "a", "password": "b"})

    assert response.status_code == 403
    html = assert_in_layout(response, "This form has expired")
    assert "Go back, reload the page and try again." in html


@pytest.mark.urls("tests.site.error_urls")
def test_500_is_a_page_in_the_layout_without_details(study):
    client = Client(raise_request_exception=False)
    client.force_login(specialist(study, 0))

    response = client.get("/boom/")

    assert response.status_code == 500
    html = assert_in_layout(response, "Something went wrong")
    assert "the error has been logged" in html
    assert not [leak for leak in LEAKS if leak in html]


@pytest.mark.urls("tests.site.error_urls")
def test_500_under_api_answers_json():
    response = Client(raise_request_exception=False).get("/api/boom/")

    assert response.status_code == 500
    assert response.json() == {
        "code": "server_error",
        "detail": "Something went wrong on the server; the error has been logged. Try again in "
                  "a moment, and tell the operators if it persists."}


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=100)
def test_too_large_form_post_is_a_page_in_the_layout():
    response = Client().post("/accounts/login/", {"username": "u" * 500, "password": "p"})

    assert response.status_code == 413
    html = assert_in_layout(response, "Too much data")
    assert "larger than 100 bytes" in html


def settings_debug(module: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_"))}
    code = "from django.conf import settings; print(settings.DEBUG)"
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + code], cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": module, **env}, capture_output=True, text=True,
        check=True)
    return result.stdout.strip()


@pytest.mark.parametrize(("module", "env", "debug"), [
    ("oversight_site.settings.base", {}, "False"),
    ("oversight_site.settings.test", {}, "False"),
    ("oversight_site.settings.production",
     {"DJANGO_SECRET_KEY": "x" * 60, "DJANGO_ALLOWED_HOSTS": "example.org"}, "False"),
    ("oversight_site.settings.production",
     {"DJANGO_SECRET_KEY": "x" * 60, "DJANGO_ALLOWED_HOSTS": "example.org",
      "DJANGO_DEBUG": "true"}, "False"),
    ("oversight_site.settings.local", {}, "True"),  # the one place it is on, by name
    ("oversight_site.settings.local", {"DJANGO_DEBUG": "false"}, "False"),
], ids=["base", "test", "production", "production-ignores-debug", "local", "local-off"])
def test_debug_is_off_except_in_local_development(module, env, debug):
    assert settings_debug(module, **env) == debug


def test_wsgi_defaults_to_production_settings():
    """gunicorn started without DJANGO_SETTINGS_MODULE must not serve debug pages."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    result = subprocess.run([sys.executable, "-c", "import oversight_site.wsgi"], cwd=ROOT,
                            env=clean, capture_output=True, text=True)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set in production" in result.stderr
