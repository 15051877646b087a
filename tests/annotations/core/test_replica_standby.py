"""A real read replica, on PostgreSQL (CI's second pass): the test makes a hot standby of
this machine's server — ``pg_basebackup`` into a temporary directory, started on its own
port, streaming from the primary — points the ``replica`` alias at it, and shows that a
manager's dashboard reads from it: with the standby's replay paused, the dashboard still
shows the figures from before the latest answer while the primary holds it, /healthz reports
the standby's lag, and once replay resumes the dashboard catches up."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connections
from django.test import Client
from django.urls import reverse

from annotations.core.db_router import REPLICA, replica_down_forget
from annotations.models import EstimateSnapshot, User
from annotations.partitioned.services.estimates import study_recompute
from annotations.partitioned.services.labels import label_submit
from annotations.partitioned.services.routing import query_lease_next
from tests.factories import make_study, role_user, specialist

PORT = 5439
AT_LEAST_PRIMARY = ("max_connections", "max_worker_processes", "max_wal_senders",
                    "max_prepared_transactions", "max_locks_per_transaction")
BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), Path("/nonexistent"))

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", REPLICA]),
    pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"),
                       reason="PostgreSQL: a streaming standby (CI's second pass)"),
]


def _as_postgres(*cmd: str, **kw) -> subprocess.CompletedProcess:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *cmd], check=True, capture_output=True, text=True, **kw)


@pytest.fixture
def standby(settings):
    """A hot standby of the test database's server on PORT, the ``replica`` alias pointed at
    it for the test (then stopped and removed)."""
    primary = settings.DATABASES["default"]
    base = Path(tempfile.mkdtemp(prefix="oversight-standby-"))
    data = base / "data"
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    try:
        _as_postgres(str(BIN / "pg_basebackup"), "-h", primary["HOST"] or "127.0.0.1",
                     "-p", str(primary["PORT"] or 5432), "-U", primary["USER"] or "postgres",
                     "-D", str(data), "-R", "-X", "stream", "-c", "fast", timeout=300)
    except subprocess.CalledProcessError as exc:  # .ci/run allows replication from 127.0.0.1
        shutil.rmtree(base, ignore_errors=True)
        raise AssertionError(
            f"pg_basebackup failed: {exc.stderr.strip()} — the server must allow replication "
            "from the loopback: `host replication all 127.0.0.1/32 trust` in pg_hba.conf, "
            "then reload (.ci/run adds it)") from exc
    # Debian keeps a cluster's configuration outside its data directory: the standby's own,
    # with the limits a hot standby must not set below its primary's
    with connections["default"].cursor() as cur:
        cur.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                    [list(AT_LEAST_PRIMARY)])
        limits = "".join(f"{name} = {value}\n" for name, value in cur.fetchall())
    (data / "postgresql.conf").write_text(
        f"port = {PORT}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{base}'\n"
        "hot_standby = on\nshared_buffers = 32MB\nmax_standby_streaming_delay = -1\n"
        + limits)
    (data / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
    (data / "pg_ident.conf").write_text("")
    if os.geteuid() == 0:
        for path in ("postgresql.conf", "pg_hba.conf", "pg_ident.conf"):
            shutil.chown(data / path, "postgres", "postgres")
    _as_postgres(str(BIN / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w",
                 "-t", "60", "start", timeout=90)
    replica = connections[REPLICA]
    saved = dict(replica.settings_dict)
    replica.close()
    replica.settings_dict.update(HOST="127.0.0.1", PORT=str(PORT))
    settings.OVERSIGHT_REPLICA_READS = True
    replica_down_forget()
    try:
        yield psycopg.connect(host="127.0.0.1", port=PORT, user="postgres",
                              dbname=primary["NAME"], autocommit=True)
    finally:
        replica.close()
        replica.settings_dict.clear()
        replica.settings_dict.update(saved)
        subprocess.run(["runuser", "-u", "postgres", "--", str(BIN / "pg_ctl"), "-D",
                        str(data), "-m", "immediate", "stop"] if os.geteuid() == 0 else
                       [str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def _caught_up(standby, timeout: float = 30.0) -> None:
    with connections["default"].cursor() as cur:
        cur.execute("SELECT pg_current_wal_lsn()")
        target = cur.fetchone()[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                               [target]).fetchone()[0]
        if done:
            return
        time.sleep(0.05)
    raise AssertionError(f"the standby did not replay to {target} within {timeout} s")


def _answered_on_the_dashboard(client: Client, study) -> int:
    html = client.get(reverse("dashboard", args=[study.pk])).content.decode()
    return int(re.search(r'data-testid="n-answered">([\d,]+)<', html)[1].replace(",", ""))


def _answer(study, k: int) -> None:
    user = specialist(study, k)
    label_submit(query_id=query_lease_next(study=study, user=user).pk, user=user,
                 answer="yes" if k == 0 else "no")
    study_recompute(study_id=study.pk)


def test_a_managers_dashboard_reads_a_streaming_standby_and_shows_its_lag(standby, settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    settings.CELERY_TASK_ALWAYS_EAGER = True  # /healthz: no worker to ask in this test
    study = make_study(k=3, n_items=12, systems={"m": 0.8}, seed=412)
    _answer(study, 0)
    _caught_up(standby)
    manager = Client()
    manager.force_login(role_user(study, "manager"))
    assert _answered_on_the_dashboard(manager, study) == 1
    # replay paused: the primary moves on, the replica (and so the dashboard) does not
    standby.execute("SELECT pg_wal_replay_pause()")
    _answer(study, 1)
    assert EstimateSnapshot.objects.filter(study=study).latest("computed_at") \
        .payload["n_answered"] == 2
    assert _answered_on_the_dashboard(manager, study) == 1
    time.sleep(0.2)
    staff = Client()
    staff.force_login(User.objects.create_user("operator", is_staff=True))
    replica = staff.get("/healthz").json()["replica"]
    assert replica["ok"] is True and replica["lag_seconds"] >= 0.2
    # replay resumed: the dashboard catches up
    standby.execute("SELECT pg_wal_replay_resume()")
    _caught_up(standby)
    assert _answered_on_the_dashboard(manager, study) == 2
