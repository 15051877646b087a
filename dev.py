#!/usr/bin/env python3
"""One-command set-up for a fresh machine with Python 3.11.

    python3.11 dev.py serve   # venv + install + migrate + demo study + site with its worker
    python3.11 dev.py test    # venv + install + the test suite

Only the standard library is used here: it runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
STAMP = VENV / ".installed"


def run(*cmd: str | Path, **kw) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True, **kw)


def ensure_env() -> None:
    """Create .venv and install the project with its dev extras when pyproject changes."""
    if sys.version_info < (3, 11):
        sys.exit("Python 3.11 or newer is needed.")
    if not PY.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text() != digest:
        run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
        run(PY, "-m", "pip", "install", "--quiet", "-e", ".[dev]")
        STAMP.write_text(digest)


def serve(port: str = "8000") -> None:
    run(PY, "manage.py", "migrate", "--no-input", "-v", "0")
    run(PY, "manage.py", "seed_demo")
    print(f"\nOpen http://127.0.0.1:{port}/ (Celery tasks run in-process on these defaults; "
          "set CELERY_BROKER_URL for real workers).\n", flush=True)
    run(PY, "manage.py", "runserver", f"127.0.0.1:{port}")


def test(args: list[str]) -> None:
    env = dict(os.environ)
    result = subprocess.run([str(PY), "-m", "pytest", *args], cwd=ROOT, env=env)
    sys.exit(result.returncode)


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "serve"
    ensure_env()
    if command == "serve":
        serve(*sys.argv[2:3])
    elif command == "test":
        test(sys.argv[2:])
    elif command == "setup":
        pass
    else:
        sys.exit(f"unknown command '{command}': use serve, test or setup")


if __name__ == "__main__":
    main()
