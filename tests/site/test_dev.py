"""dev.py serve: the demo accounts are printed as one block once the site answers, after
the server's start-up logs; the server's exit code is dev.py's."""

from __future__ import annotations

import socket
import sys

import dev

SERVER = """
import socket, sys, time
print("Starting development server (fake)", flush=True)
time.sleep(0.5)
server = socket.socket()
server.bind(("127.0.0.1", {port}))
server.listen()
server.accept()[0].close()
sys.exit(3)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_block_comes_after_the_start_up_logs_once_the_server_answers(capfd):
    port = _free_port()
    code = dev.serve_and_announce([sys.executable, "-c", SERVER.format(port=port)],
                                  "127.0.0.1", port, "DEMO ACCOUNTS BLOCK")
    out = capfd.readouterr().out
    assert code == 3
    assert out.count("DEMO ACCOUNTS BLOCK") == 1
    assert out.index("Starting development server") < out.index("DEMO ACCOUNTS BLOCK")


def test_a_server_that_never_answers_prints_no_block_and_passes_its_exit_code_on(capfd):
    port = _free_port()
    code = dev.serve_and_announce([sys.executable, "-c", "import sys; sys.exit(2)"],
                                  "127.0.0.1", port, "DEMO ACCOUNTS BLOCK")
    assert code == 2
    assert "DEMO ACCOUNTS BLOCK" not in capfd.readouterr().out


def test_sigterm_reaches_the_server_and_its_exit_code_is_devs():
    import os
    import signal
    import subprocess

    port = _free_port()
    # the handler before the socket listens: the kernel accepts dev.py's probe as soon as
    # it does, and the signal may come before the next line runs
    server = ("import signal, sys\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(7))"
              + SERVER.replace("server.accept()[0].close()\nsys.exit(3)",
                               "while True:\n    server.accept()[0].close()")).format(port=port)
    runner = ("import sys, dev; sys.exit(dev.serve_and_announce([sys.executable, '-c', "
              f"{server!r}], '127.0.0.1', {port}, 'DEMO ACCOUNTS BLOCK'))")
    root = os.path.dirname(dev.__file__)
    proc = subprocess.Popen([sys.executable, "-c", runner], cwd=root, text=True,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in proc.stdout:  # the block comes once the server answers
        if "DEMO ACCOUNTS BLOCK" in line:
            break
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 7
