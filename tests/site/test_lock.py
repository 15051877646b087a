"""Reproducible installs: requirements/*.lock pin every package with hashes, the tests run
on exactly the dev lock's versions, production's are the same, and dev.py and the Docker
image install from them."""

from __future__ import annotations

import re
from importlib import metadata

from packaging.markers import Marker
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

ENTRY = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def _pins(name: str) -> dict[str, tuple[str, int]]:
    """{package: (version, hashes)} of the entries of a lock that apply to this Python."""
    pins: dict[str, tuple[str, int]] = {}
    current = None
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        match = ENTRY.match(line)
        if match:
            package, version, marker = match.groups()
            current = None
            if marker is None or Marker(marker).evaluate():
                current = canonicalize_name(package.split("[")[0])
                pins[current] = (version, 0)
        elif current and line.strip().startswith("--hash=sha256:"):
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
    return pins


def test_every_package_is_pinned_with_its_hashes():
    dev = _pins("dev.lock")
    assert {"django", "numpy", "scipy", "celery", "kombu", "scikit-learn", "pytest"} <= set(dev)
    assert all(hashes >= 1 for _, hashes in dev.values()), [p for p, (_, h) in dev.items()
                                                              if not h]


def test_the_suite_runs_on_the_locked_versions():
    wrong = {package: (version, metadata.version(package))
             for package, (version, _) in _pins("dev.lock").items()
             if metadata.version(package) != version}
    assert wrong == {}, "installed versions differ from requirements/dev.lock: dev.py setup"


def test_production_takes_the_same_versions_as_the_tests():
    dev, production = _pins("dev.lock"), _pins("production.lock")
    assert "pytest" not in production and "django" in production
    assert {p: v for p, (v, _) in production.items()} == {p: dev[p][0] for p in production}


def test_dev_py_and_the_image_install_from_the_locks_with_hashes():
    dev_py = (ROOT / "dev.py").read_text()
    assert '"--require-hashes", "--no-deps",\n            "-r", DEV_LOCK' in dev_py
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes --no-deps -r requirements/production.lock" in dockerfile
    assert "pip install --no-cache-dir ." not in dockerfile  # no unpinned resolution
