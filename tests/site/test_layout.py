"""Two test modules of one name each run their own tests.

pytest's importlib mode (pyproject.toml) names a test module from its topmost package. Under
a plain folder, ``tests/annotations/partitioned/test_allocation.py`` and
``tests/estimators/partitioned/test_allocation.py`` were both ``partitioned.test_allocation``:
the second took the first's module, so its own tests never ran and the first's ran twice
under its name. Every folder of tests is a package now
(``tests/site/test_import_cycles.py`` holds that rule, with the project's own folders)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT


def test_two_test_modules_of_one_name_each_run_their_own_tests():
    pair = [f"tests/{side}/partitioned/test_allocation.py" for side in ("estimators", "annotations")]
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "--collect-only",
                          *pair], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    collected = [line.split("::") for line in out.splitlines() if "::" in line]
    assert {path for path, _ in collected} == set(pair)
    for path, name in collected:
        own = re.findall(r"^def (test_\w+)", (ROOT / path).read_text(), re.M)
        assert name.split("[")[0] in own, f"{path} collected {name}, a test of another module"
