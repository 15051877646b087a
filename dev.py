#!/usr/bin/env python3
"""One-command set-up for a fresh machine with Python 3.11.

    python3.11 dev.py serve [PORT]  # venv + install + migrate + demo studies + site (port 8000)
    python3.11 dev.py test [ARGS]   # venv + install + the test suite (pytest ARGS)
    python3.11 dev.py setup         # venv + install only
    python3.11 dev.py lock          # re-resolve requirements/*.lock to the newest versions

Installs come from requirements/dev.lock: exact versions with hashes, the set CI tested.

Only the standard library is used here: it runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
STAMP = VENV / ".installed"
LOCKS = ROOT / "requirements"
DEV_LOCK = LOCKS / "dev.lock"
PRODUCTION_LOCK = LOCKS / "production.lock"
UV = "uv==0.13.9"  # resolves the locks (dev.py lock); not needed to install from them


def run(*cmd: str | Path, **kw) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True, **kw)


def ensure_env() -> None:
    """Create .venv and install the locked versions (requirements/dev.lock, hashes checked),
    then the project itself (editable, no dependencies), whenever the lock or pyproject
    changes."""
    if sys.version_info < (3, 11):
        sys.exit("Python 3.11 or newer is needed.")
    if not PY.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()
                            + DEV_LOCK.read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text() != digest:
        run(PY, "-m", "pip", "install", "--quiet", "--require-hashes", "--no-deps",
            "-r", DEV_LOCK)
        run(PY, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
            "-e", ".")
        STAMP.write_text(digest)


def lock(args: list[str]) -> None:
    """Re-resolve both locks from pyproject.toml's ranges to the newest versions (``uv pip
    compile --upgrade``; ``--upgrade-package NAME`` instead moves one package), production's
    within dev's so that both name the same versions. Then ``dev.py test`` installs and
    tests the new set."""
    run(PY, "-m", "pip", "install", "--quiet", UV)
    uv = VENV / "bin" / "uv"
    common = ["--generate-hashes", "--universal", "--python-version", "3.11", "--quiet",
              "--custom-compile-command", "python3.11 dev.py lock"]
    upgrade = args or ["--upgrade"]
    run(uv, "pip", "compile", "pyproject.toml", "--extra", "dev", "--extra", "inspect",
        *common, *upgrade, "-o", DEV_LOCK)
    run(uv, "pip", "compile", "pyproject.toml", *common, "-c", DEV_LOCK, "-o",
        PRODUCTION_LOCK)


HOST = "127.0.0.1"


def port_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def serve_and_announce(cmd: list[str | Path], host: str, port: int, block: str, *,
                       timeout: float = 120.0) -> int:
    """Run the server ``cmd`` as a child; once ``host:port`` answers (after the server's
    start-up logs), print ``block``; return the child's exit code. SIGTERM is passed on to
    the child; Ctrl-C reaches it directly (same process group) and we wait for it to end."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # its logs come before the block
    child = subprocess.Popen([str(c) for c in cmd], cwd=ROOT, env=env)
    previous = signal.signal(signal.SIGTERM, lambda signum, _: child.send_signal(signum))
    try:
        deadline = time.monotonic() + timeout
        while child.poll() is None and time.monotonic() < deadline:
            if port_answers(host, port):
                print("\n" + block, flush=True)
                break
            time.sleep(0.2)
        return child.wait()
    except KeyboardInterrupt:
        return child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve(port: str = "8000") -> None:
    if port_answers(HOST, int(port)):
        sys.exit(f"Port {port} is in use already: stop what runs there, or give another "
                 f"port (python3.11 dev.py serve 8001).")
    base = f"http://{HOST}:{port}"
    run(PY, "manage.py", "migrate", "--no-input", "-v", "0")
    with tempfile.TemporaryDirectory() as tmp:
        accounts = Path(tmp) / "accounts.txt"
        run(PY, "manage.py", "seed_demo", "--base-url", base, "--accounts-file", accounts)
        block = accounts.read_text(encoding="utf-8")
    block += (f"\nOpen {base}/ (Celery tasks run in-process on these defaults; set "
              "CELERY_BROKER_URL for real workers). Quit with CONTROL-C.\n")
    sys.exit(serve_and_announce([PY, "manage.py", "runserver", f"{HOST}:{port}"], HOST,
                                int(port), block))


def test_processes() -> str:
    """How many processes run the suite: OVERSIGHT_TEST_PROCESSES, else one per core and one
    more (a core is often idle while a process waits on a browser, a server or a sleep)."""
    return os.environ.get("OVERSIGHT_TEST_PROCESSES") or str((os.cpu_count() or 1) + 1)


def parallel_args(args: list[str]) -> list[str]:
    """pytest-xdist's options in front of ``args``, unless they choose for themselves (``-n``,
    ``--numprocesses``, ``-p no:xdist``). loadfile: a module's tests run in one process, so
    a module's fixture (a simulated study of thousands of answers) is built once, not once
    per process (the heaviest module is a quarter of a process's share)."""
    chosen = any(a.startswith(("-n", "--numprocesses", "--dist")) or a in ("no:xdist",
                                                                          "-pno:xdist")
                 for a in args)
    return args if chosen else ["-n", test_processes(), "--dist", "loadfile", *args]


# The floating-point environment the suite runs in on x86-64, whatever the CPU: OpenBLAS's
# Haswell kernels and numpy's dispatch up to AVX2. Their AVX-512 variants round differently
# in the last bits, so exact references (tests/annotations/partitioned/data/) written on one
# machine would not hold on another. numpy reads these when it is imported.
PINNED_FLOATS = {"OPENBLAS_CORETYPE": "Haswell",
                 "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}


def test(args: list[str]) -> None:
    env = dict(os.environ)
    if platform.machine() in ("x86_64", "AMD64"):
        env.update({k: env.get(k, v) for k, v in PINNED_FLOATS.items()})
    result = subprocess.run([str(PY), "-m", "pytest", *parallel_args(args)], cwd=ROOT, env=env)
    sys.exit(result.returncode)


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "serve"
    if command == "lock":  # resolving needs only a venv, not the locked set it rewrites
        if not PY.exists():
            venv.EnvBuilder(with_pip=True).create(VENV)
        lock(sys.argv[2:])
        return
    ensure_env()
    if command == "serve":
        serve(*sys.argv[2:3])
    elif command == "test":
        test(sys.argv[2:])
    elif command == "setup":
        pass
    else:
        sys.exit(f"unknown command '{command}': use serve, test, setup or lock")


if __name__ == "__main__":
    main()
