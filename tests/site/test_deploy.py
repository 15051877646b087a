"""Production settings: `check --deploy` is clean with the documented .env, the proxy header
is trusted only behind a proxy, and the demo seed refuses to run."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def env_example() -> dict[str, str]:
    values = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = value
    return values


def clean_env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_", "OVERSIGHT_", "REDIS_"))}
    return {**keep, **extra}


def production_env(**extra: str) -> dict[str, str]:
    return clean_env(**{**env_example(), "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
                        **extra})


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_check_deploy_is_clean_with_the_documented_env():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "System check identified no issues (1 silenced)."


def test_check_deploy_flags_a_plain_http_trial():
    result = manage("check", "--deploy", "--fail-level", "WARNING",
                    env=production_env(DJANGO_HTTPS="false", DJANGO_BEHIND_PROXY="false"))

    assert result.returncode != 0
    for code in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert code in result.stderr


def test_production_refuses_the_example_secret():
    result = manage("check", env=clean_env(**env_example()))

    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY is the example value" in result.stderr


def production_settings(**extra: str) -> dict:
    code = ("import json, django; django.setup(); from django.conf import settings as s; "
            "print(json.dumps({'proxy': s.SECURE_PROXY_SSL_HEADER, "
            "'num_proxies': s.REST_FRAMEWORK['NUM_PROXIES'], 'hsts': s.SECURE_HSTS_SECONDS, "
            "'redirect': s.SECURE_SSL_REDIRECT, 'secure_cookies': s.SESSION_COOKIE_SECURE}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=production_env(**extra),
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


@pytest.mark.parametrize(("behind", "proxy", "num_proxies"), [
    ("true", ["HTTP_X_FORWARDED_PROTO", "https"], 1),
    ("false", None, 0),
])
def test_the_proxy_ssl_header_is_trusted_only_behind_a_proxy(behind, proxy, num_proxies):
    found = production_settings(DJANGO_BEHIND_PROXY=behind)

    assert found["proxy"] == proxy
    assert found["num_proxies"] == num_proxies


def test_https_settings_are_configurable():
    assert production_settings() == {
        "proxy": ["HTTP_X_FORWARDED_PROTO", "https"], "num_proxies": 1, "hsts": 31536000,
        "redirect": True, "secure_cookies": True}
    assert production_settings(DJANGO_HTTPS="false", DJANGO_BEHIND_PROXY="false") == {
        "proxy": None, "num_proxies": 0, "hsts": 0, "redirect": False, "secure_cookies": False}
    assert production_settings(DJANGO_HSTS_SECONDS="3600")["hsts"] == 3600


def test_seed_demo_refuses_to_run_under_production_settings(tmp_path):
    database = tmp_path / "db.sqlite3"

    result = manage("seed_demo", "--items", "10", "--answers", "0",
                    env=production_env(DATABASE_URL=f"sqlite:///{database}"))

    assert result.returncode == 1
    assert ("seed_demo creates accounts with known passwords (admin/admin …) and refuses to "
            "run under production settings (oversight_site.settings.production).") in result.stderr
    assert not database.exists()  # refused before touching any database


def test_docker_compose_matches_the_documented_env():
    import yaml

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    web = compose["services"]["web"]
    module = env_example()["DJANGO_SETTINGS_MODULE"]

    assert module == "oversight_site.settings.production"
    expected = "${DJANGO_SETTINGS_MODULE:-" + module + "}"
    assert web["environment"]["DJANGO_SETTINGS_MODULE"] == expected
    assert "--timeout $${GUNICORN_TIMEOUT:-120}" in web["command"]
    # reachable only through haproxy, itself only through the TLS proxy
    assert "ports" not in web
    assert compose["services"]["haproxy"]["ports"] == ["127.0.0.1:8000:8000"]
    assert f"DJANGO_SETTINGS_MODULE={module}" in (ROOT / "Dockerfile").read_text()
