import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_healthz_reports_each_part():
    response = Client().get("/healthz")
    body = response.json()
    assert set(body) == {"ok", "database", "broker", "workers"}
    assert body["database"]["ok"] is True
    if body["broker"].get("mode", "").startswith("in-process"):
        assert response.status_code == 200 and body["ok"] is True


def test_estimators_import_without_django():
    import subprocess
    import sys

    code = ("import sys, estimators.partitioned, estimators.planning; "
            "assert 'django' not in sys.modules, 'estimators imported django'")
    subprocess.run([sys.executable, "-c", code], check=True)
