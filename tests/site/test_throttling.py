"""Failed log-ins slow down, then lock (per username and per address); invalid API tokens
likewise; the API has per-user rates; a dead cache lets everything through."""

from __future__ import annotations

import itertools
import time
import uuid

import pytest
from django.conf import settings
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

@pytest.fixture(autouse=True)
def own_cache_keys(settings):
    """The configured cache (Redis in the second CI pass) under a prefix of this test's own:
    user ids and usernames repeat across tests and runs, their counts must not."""
    settings.CACHES = {"default": {**settings.CACHES["default"],
                                   "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}}


_addresses = (f"10.{i // 250}.{i % 250}.1" for i in itertools.count(1))


def throttles(**changes) -> dict:
    merged = {scope: dict(values) for scope, values in settings.OVERSIGHT_THROTTLES.items()}
    for scope, values in changes.items():
        merged[scope].update(values)
    return merged


def new_client() -> Client:
    return Client(REMOTE_ADDR=next(_addresses))


def log_in(client: Client, username: str, password: str, url: str = "/accounts/login/"):
    return client.post(url, {"username": username, "password": password})


def errors(response) -> list[str]:
    return [str(e) for e in response.context["form"].non_field_errors()]


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


MISMATCH = ("Please enter a correct username and password. Note that both fields may be "
            "case-sensitive.")


def test_failed_logins_slow_down_then_the_right_password_must_wait():
    user = UserFactory()
    client = new_client()

    # given three free failures
    for _ in range(3):
        response = log_in(client, user.username, "wrong")
        assert response.status_code == 200
        assert errors(response) == [MISMATCH]
    # when the fourth fails too
    response = log_in(client, user.username, "wrong")
    assert errors(response) == [MISMATCH, "Too many failed log-ins: wait 2 seconds before the "
                                          "next try."]
    # then even the right password is refused at once, without being checked
    response = log_in(client, user.username, "pw")
    assert response.status_code == 429
    assert errors(response)[0].startswith("Too many failed log-ins for this account. Try again in")
    assert not logged_in(client)
    # and accepted once the wait is over
    time.sleep(2.1)
    response = log_in(client, user.username, "pw")
    assert response.status_code == 302 and logged_in(client)


@override_settings(OVERSIGHT_THROTTLES=throttles(login_user={"free_failures": 5,
                                                             "lock_after": 5}))
def test_repeated_failures_lock_the_username_for_a_while():
    user = UserFactory()
    for _ in range(5):
        # from different addresses: the username's count is what locks
        log_in(new_client(), user.username, "wrong")

    client = new_client()
    response = log_in(client, user.username, "pw")

    assert response.status_code == 429
    assert errors(response) == ["Too many failed log-ins for this account. Try again in 15 "
                                "minutes."]
    assert not logged_in(client)
    # another account from the same address is not affected
    other = UserFactory()
    assert log_in(client, other.username, "pw").status_code == 302


@override_settings(OVERSIGHT_THROTTLES=throttles(login_ip={"free_failures": 4,
                                                           "lock_after": 4}))
def test_failures_across_usernames_lock_the_address():
    client = new_client()
    for i in range(4):
        log_in(client, f"guess-{i}", "wrong")
    user = UserFactory()

    response = log_in(client, user.username, "pw")

    assert response.status_code == 429
    assert errors(response) == ["Too many failed log-ins for your network address. Try again "
                                "in 15 minutes."]
    assert log_in(new_client(), user.username, "pw").status_code == 302


def test_a_successful_login_clears_the_username_count():
    user = UserFactory()
    client = new_client()
    for _ in range(3):
        log_in(client, user.username, "wrong")
    assert log_in(client, user.username, "pw").status_code == 302

    response = log_in(new_client(), user.username, "wrong")

    assert errors(response) == [MISMATCH]  # counting starts again: no wait


@override_settings(OVERSIGHT_THROTTLES=throttles(login_user={"free_failures": 3,
                                                             "lock_after": 3}))
def test_the_admin_login_is_throttled_too():
    user = UserFactory(is_staff=True)
    client = new_client()
    for _ in range(3):
        log_in(client, user.username, "wrong", url="/admin/login/")

    response = log_in(client, user.username, "pw", url="/admin/login/")

    assert "Too many failed log-ins for this account. Try again in 15 minutes." in (
        response.content.decode())
    assert not logged_in(client)


@override_settings(OVERSIGHT_THROTTLES=throttles(token_ip={"free_failures": 3,
                                                           "lock_after": 3}))
def test_invalid_api_tokens_are_throttled_per_address():
    token = Token.objects.create(user=UserFactory())
    address = next(_addresses)
    bad = Client(REMOTE_ADDR=address, HTTP_AUTHORIZATION="Token " + "0" * 40)
    # 403: DRF's answer to bad credentials when session auth comes first
    assert [bad.get("/api/studies/").status_code for _ in range(3)] == [403, 403, 403]

    response = bad.get("/api/studies/")
    good_same_address = Client(REMOTE_ADDR=address, HTTP_AUTHORIZATION=f"Token {token.key}")

    assert response.status_code == 429
    assert response["Retry-After"] == "900"
    assert response.json() == {
        "code": "throttled",
        "detail": "Too many invalid API tokens from your address. Try again in 15 minutes."}
    assert good_same_address.get("/api/studies/").status_code == 429
    assert Client(REMOTE_ADDR=next(_addresses), HTTP_AUTHORIZATION=f"Token {token.key}").get(
        "/api/studies/").status_code == 200


def test_api_requests_are_rate_limited_per_user():
    token = Token.objects.create(user=UserFactory())
    client = Client(REMOTE_ADDR=next(_addresses), HTTP_AUTHORIZATION=f"Token {token.key}")
    rates = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"user": "3/minute",
                                                                    "anon": "3/minute"}}
    with override_settings(REST_FRAMEWORK=rates):
        statuses = [client.get("/api/studies/").status_code for _ in range(4)]
        response = client.get("/api/studies/")

    assert statuses == [200, 200, 200, 429]
    assert response.json()["code"] == "throttled"
    assert int(response["Retry-After"]) > 0


DEAD_CACHE = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": "redis://127.0.0.1:1/0"}}


def test_a_dead_cache_lets_logins_and_the_api_through():
    user = UserFactory()
    token = Token.objects.create(user=user)
    with override_settings(CACHES=DEAD_CACHE):
        from django.core.cache import cache

        with pytest.raises(Exception, match="Connection refused|Error"):
            cache.get("probe")  # the cache really is down
        client = new_client()
        assert errors(log_in(client, user.username, "wrong")) == [MISMATCH]
        assert log_in(client, user.username, "pw").status_code == 302
        api = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
        assert api.get("/api/studies/").status_code == 200
        assert Client(HTTP_AUTHORIZATION="Token " + "1" * 40).get(
            "/api/studies/").status_code == 403


@override_settings(OVERSIGHT_THROTTLES=throttles(login_ip={"free_failures": 3,
                                                           "lock_after": 3}))
def test_without_a_proxy_a_forged_forwarded_for_does_not_change_the_address():
    address = next(_addresses)
    for i in range(3):
        log_in(Client(REMOTE_ADDR=address, HTTP_X_FORWARDED_FOR=f"192.0.2.{i}"), f"g{i}", "x")
    user = UserFactory()

    response = log_in(Client(REMOTE_ADDR=address, HTTP_X_FORWARDED_FOR="192.0.2.99"),
                      user.username, "pw")

    assert response.status_code == 429


@override_settings(OVERSIGHT_THROTTLES=throttles(login_ip={"free_failures": 3,
                                                           "lock_after": 3}))
def test_behind_a_proxy_the_forwarded_address_is_counted():
    proxy = next(_addresses)
    user = UserFactory()
    behind = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    with override_settings(REST_FRAMEWORK=behind):
        for i in range(3):
            log_in(Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="198.51.100.7"), f"h{i}", "x")
        same = log_in(Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="198.51.100.7"),
                      user.username, "pw")
        other = log_in(Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="198.51.100.8"),
                       user.username, "pw")

    assert same.status_code == 429
    assert other.status_code == 302
