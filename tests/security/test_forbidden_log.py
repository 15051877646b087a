"""A 403 is logged as one line — method, path, user id, reason — never with a traceback:
PermissionDenied in a page, the API's refusals and CSRF failures alike."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from tests.factories import UserFactory, make_study, specialist

pytestmark = pytest.mark.django_db


def forbidden_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "status_code", None) == 403]


def assert_one_line(caplog, expected: str) -> None:
    [record] = forbidden_records(caplog)
    assert record.getMessage() == expected
    assert record.exc_info is None and record.exc_text is None
    assert "Traceback" not in caplog.text and "\n" not in record.getMessage()


def test_a_refused_page_is_one_line(caplog):
    # given: a specialist of one study opens another study's labelling page
    study, other = make_study(k=3, n_items=3, seed=81), make_study(k=3, n_items=3, seed=82)
    user = specialist(study, 0)
    client = Client()
    client.force_login(user)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get(f"/studies/{other.pk}/label/")
    assert response.status_code == 403
    reason = response.context["reason"]
    assert_one_line(caplog, f'Forbidden: GET "/studies/{other.pk}/label/" user={user.pk} '
                            f'reason="{reason}"')


def test_a_refused_api_call_is_one_line(caplog):
    study = make_study(k=3, n_items=3, seed=83)
    user = specialist(study, 0)  # specialists do not read the estimates
    client = Client()
    client.force_login(user)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get(f"/api/studies/{study.pk}/estimates/")
    assert response.status_code == 403
    detail = response.json()["detail"]
    assert_one_line(caplog, f'Forbidden: GET "/api/studies/{study.pk}/estimates/" '
                            f'user={user.pk} reason="{detail}"')


def test_a_csrf_failure_is_one_line(caplog):
    user = UserFactory(username="csrf-victim")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    with caplog.at_level(logging.WARNING, logger="django.security.csrf"):
        response = client.post("/accounts/logout/")
    assert response.status_code == 403
    assert_one_line(caplog, f'Forbidden: POST "/accounts/logout/" user={user.pk} '
                            f'reason="CSRF cookie not set."')


def test_an_anonymous_refusal_names_no_user(caplog):
    with caplog.at_level(logging.WARNING, logger="django.security.csrf"):
        response = Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "x"})
    assert response.status_code == 403
    assert_one_line(caplog, 'Forbidden: POST "/accounts/login/" user=anonymous '
                            'reason="CSRF cookie not set."')


def test_a_newline_in_the_path_cannot_forge_a_second_log_line(caplog):
    study = make_study(k=3, n_items=3, seed=83)
    user = specialist(make_study(k=3, n_items=3, seed=84), 0)
    client = Client()
    client.force_login(user)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.post(f"/studies/{study.pk}/label/x%0AERROR%20forged%20entry/skip/")
    assert response.status_code == 403
    [record] = forbidden_records(caplog)
    assert "\n" not in record.getMessage() and '"/studies/' in record.getMessage()
