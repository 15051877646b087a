"""The suite in several processes (pytest-xdist): each process its own Redis databases
(oversight_site/settings/parallel.py), dev.py test's default options."""

from __future__ import annotations

import importlib.util
import os

import pytest

from oversight_site.settings.parallel import (
    ISOLATED,
    isolate_test_process,
    own_redis_database,
    worker_index,
)
from tests.conftest import ROOT, celery_env


def test_each_process_takes_the_database_below_the_last():
    assert worker_index({}) == 0 and worker_index({"PYTEST_XDIST_WORKER": "gw3"}) == 3
    assert own_redis_database("redis://127.0.0.1:6379/15", 2) == "redis://127.0.0.1:6379/13"
    assert own_redis_database("redis://h:1", 0) == "redis://h:1/0"
    with pytest.raises(ValueError, match="too few Redis databases below 1"):
        own_redis_database("redis://h:1/1", 2)


def test_isolation_moves_the_broker_and_cache_once_and_nothing_else():
    env = {"PYTEST_XDIST_WORKER": "gw1", "CELERY_BROKER_URL": "redis://h:6379/15",
           "REDIS_URL": "redis://h:6379/15", "DATABASE_URL": "postgres://h/x"}
    isolate_test_process(env)
    assert env["CELERY_BROKER_URL"] == env["REDIS_URL"] == "redis://h:6379/14"
    assert env["DATABASE_URL"] == "postgres://h/x"
    # a process started by that one (a worker, a health check) inherits the moved URLs and
    # the mark: it keeps them
    child = dict(env)
    isolate_test_process(child)
    assert child["CELERY_BROKER_URL"] == "redis://h:6379/14"
    first = {"PYTEST_XDIST_WORKER": "gw0", "CELERY_BROKER_URL": "redis://h:6379/15"}
    isolate_test_process(first)
    assert first["CELERY_BROKER_URL"] == "redis://h:6379/15"
    memory = {"PYTEST_XDIST_WORKER": "gw2", "CELERY_BROKER_URL": "memory://"}
    isolate_test_process(memory)
    assert memory["CELERY_BROKER_URL"] == "memory://"


def test_a_process_a_test_starts_takes_this_ones_urls_as_they_are():
    # the Celery worker the session starts gets this process's (own) broker URL
    env = celery_env()
    assert env.get("CELERY_BROKER_URL", "") == os.environ.get("CELERY_BROKER_URL", "")
    if worker_index():
        assert env[ISOLATED] == "1"


def _dev():
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dev_test_runs_in_parallel_unless_told_otherwise(monkeypatch):
    dev = _dev()
    monkeypatch.setenv("OVERSIGHT_TEST_PROCESSES", "3")
    assert dev.parallel_args(["tests/site"]) == ["-n", "3", "--dist", "loadfile", "tests/site"]
    for own in (["-n", "1"], ["-n2"], ["--numprocesses=4"], ["-p", "no:xdist"]):
        assert dev.parallel_args(own) == own
