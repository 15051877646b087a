"""The suite's own layout: every folder that holds test modules is a package.

pytest's importlib mode (pyproject.toml) names a test module from its topmost package. Under
a plain folder, ``tests/annotations/partitioned/test_allocation.py`` and
``tests/estimators/partitioned/test_allocation.py`` were both ``partitioned.test_allocation``:
the second took the first's module, so its own tests never ran and the first's ran twice
under its name."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT

TESTS = ROOT / "tests"


def test_every_folder_holding_test_modules_is_a_package():
    holding = {p.parent for p in TESTS.rglob("*.py")
               if p.name.startswith("test_") or p.name == "conftest.py"}
    folders = holding | {up for f in holding for up in f.parents if TESTS in up.parents}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders
                     if not (f / "__init__.py").exists())
    assert not missing, f"no __init__.py in {missing}"


def test_two_test_modules_of_one_name_each_run_their_own_tests():
    pair = [f"tests/{side}/partitioned/test_allocation.py" for side in ("estimators", "annotations")]
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "--collect-only",
                          *pair], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    collected = [line.split("::") for line in out.splitlines() if "::" in line]
    assert {path for path, _ in collected} == set(pair)
    for path, name in collected:
        own = re.findall(r"^def (test_\w+)", (ROOT / path).read_text(), re.M)
        assert name.split("[")[0] in own, f"{path} collected {name}, a test of another module"
