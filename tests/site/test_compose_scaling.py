"""docker-compose.yml's shape for several web and worker replicas (docs/scaling.md): haproxy
in front of a scalable web service, pgbouncer in transaction pooling in front of db, and the
PgBouncer settings. Docker does not run here: this checks the file's structure and every
reference in it (services, mounted files, the configs' targets), not a running stack."""

from __future__ import annotations

import configparser
import json
import re
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from tests.conftest import ROOT

yaml = pytest.importorskip("yaml")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_every_service_of_the_shape_is_there(compose):
    assert set(compose["services"]) == {"migrate", "web", "haproxy", "pgbouncer", "worker",
                                        "beat", "db", "redis"}


# ids: a test keyword "worker" would mark it as needing a Celery worker (tests/conftest.py)
@pytest.mark.parametrize("name", ["web", "worker"], ids=["web", "celery"])
def test_web_and_worker_scale(compose, name):
    service = compose["services"][name]
    # --scale N: no fixed name, no host port two replicas would both claim
    assert "container_name" not in service
    assert "ports" not in service


@pytest.mark.parametrize("name", ["web", "worker", "beat"], ids=["web", "celery", "beat"])
def test_the_site_reaches_postgresql_through_pgbouncer(compose, name):
    env = compose["services"][name]["environment"]
    url = urlsplit(env["DATABASE_URL"])
    assert (url.hostname, url.port) == ("pgbouncer", 6432)
    assert env["DATABASE_PGBOUNCER"] == "true"
    depends = compose["services"][name]["depends_on"]
    assert "pgbouncer" in depends
    assert depends["migrate"] == {"condition": "service_completed_successfully"}


def test_migrations_run_once_straight_to_postgresql(compose):
    migrate = compose["services"]["migrate"]
    assert "DATABASE_URL" not in migrate.get("environment", {})  # .env's: db:5432
    assert migrate["command"] == "python manage.py migrate --no-input"
    assert migrate["restart"] == "no"
    assert "migrate" not in compose["services"]["web"]["command"]


def test_every_reference_names_a_service_or_a_file(compose):
    services = compose["services"]
    for name, service in services.items():
        depends = service.get("depends_on", [])
        for other in depends:
            assert other in services, f"{name} depends on unknown {other}"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).is_file(), f"{name} mounts missing {source}"
            else:
                assert source in compose["volumes"], f"{name} mounts unknown {source}"
        build = service.get("build")
        if isinstance(build, str) and build != ".":
            assert (ROOT / build / "Dockerfile").is_file()


def test_haproxy_balances_every_web_replica_with_health_checks(compose):
    haproxy = compose["services"]["haproxy"]
    [mount] = haproxy["volumes"]
    source, target = mount.split(":")[:2]
    assert target == "/usr/local/etc/haproxy/haproxy.cfg"
    cfg = (ROOT / source).read_text()
    assert re.search(r"^\s*bind :8000$", cfg, re.M)
    assert re.search(r"^\s*server-template web \d+ web:8000 check$", cfg, re.M)
    assert "uri /healthz" in cfg
    assert "resolvers docker" in cfg and "127.0.0.11:53" in cfg  # Docker's DNS


def test_pgbouncer_pools_transactions_for_the_site_user(compose):
    pgbouncer = compose["services"]["pgbouncer"]
    files = {target: ROOT / source for source, target, *_ in
             (v.split(":") for v in pgbouncer["volumes"])}
    ini = configparser.ConfigParser()
    ini.read_string(files["/etc/pgbouncer/pgbouncer.ini"].read_text())
    assert ini["pgbouncer"]["pool_mode"] == "transaction"
    assert ini["pgbouncer"]["listen_port"] == "6432"
    assert ini["pgbouncer"]["auth_file"] == "/etc/pgbouncer/userlist.txt"
    db = compose["services"]["db"]["environment"]
    site = urlsplit(compose["services"]["web"]["environment"]["DATABASE_URL"])
    target = dict(kv.split("=") for kv in ini["databases"][site.path[1:]].split())
    assert (target["host"], target["port"], target["dbname"]) == ("db", "5432",
                                                                  db["POSTGRES_DB"])
    users = files["/etc/pgbouncer/userlist.txt"].read_text().split()
    assert users == [f'"{db["POSTGRES_USER"]}"', f'"{db["POSTGRES_PASSWORD"]}"']
    assert (site.username, site.password) == (db["POSTGRES_USER"], db["POSTGRES_PASSWORD"])


@pytest.mark.parametrize(("flag", "cursors", "prepare"), [
    ("true", True, None), ("false", False, "absent")])
def test_pgbouncer_settings(flag, cursors, prepare):
    code = ("import json, django; django.setup(); from django.conf import settings as s; "
            "d = s.DATABASES['default']; print(json.dumps({'cursors': "
            "d.get('DISABLE_SERVER_SIDE_CURSORS', False), 'prepare': "
            "d.get('OPTIONS', {}).get('prepare_threshold', 'absent')}))")
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "oversight_site.settings.local",
           "DATABASE_URL": "postgres://u@127.0.0.1:6432/x", "DATABASE_PGBOUNCER": flag}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout
    assert json.loads(out) == {"cursors": cursors, "prepare": prepare}


def test_haproxy_accepts_its_config(compose):
    """``haproxy -c`` where HAProxy is installed (CI installs Debian's for the soak)."""
    import shutil

    haproxy = shutil.which("haproxy", path="/usr/sbin:/usr/bin:/usr/local/sbin")
    if haproxy is None:
        pytest.skip("HAProxy is not installed")
    source = compose["services"]["haproxy"]["volumes"][0].split(":")[0]
    result = subprocess.run([haproxy, "-c", "-f", str(ROOT / source)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
