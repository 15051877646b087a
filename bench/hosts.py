"""The platform as several hosts on one machine: network namespaces on a private bridge.

    with Cluster(database="hosts_soak") as cluster:   # as root
        cluster.url                    # http://127.0.0.1:8790 (HAProxy)
        cluster.kill("web1"); cluster.restart("web1")

Shape (docs/scaling.md, "Several web and worker hosts"): a bridge ``ovh-br`` carrying
10.77.0.0/24 with 10.77.0.1 in the root namespace, and one network namespace per host, each
joined to the bridge by a veth pair — ``web1`` 10.77.0.11 and ``web2`` .12 (gunicorn, the
project's wsgi, on :8000), ``worker1`` .21 and ``worker2`` .22 (``celery -A oversight_site
worker -Q default,estimates,audits``). Nothing is routed: the subnet is a private L2
segment, and no traffic leaves the machine. In the root namespace, bound to 10.77.0.1:

* PgBouncer (:6432, transaction pooling) in front of this machine's PostgreSQL
  (127.0.0.1:5432); the hosts connect with ``DATABASE_PGBOUNCER=true``;
* a Redis of its own (:6390, no persistence), the broker and the cache: a separate
  ``redis-server`` rather than a forward to the machine's 127.0.0.1:6379, so the bench
  neither shares databases with other users of that Redis nor depends on how it is bound,
  and it lives and dies with the cluster;
* Celery beat (the sweepers: lease reclaim, recompute catch-up), as docker-compose.yml's
  single ``beat`` service;
* HAProxy on 127.0.0.1:``PORT``, balancing HTTP over the two web hosts with health checks on
  /healthz.

Generated configs, logs and pid files live in ``STATE`` (a directory of this prefix under
/tmp); nothing under /etc is edited. ``cleanup()`` is idempotent and also clears what a
crashed run left: every namespace and link named with the prefix (after SIGKILL to the
processes inside each namespace) and the root-namespace daemons whose pid files are in
``STATE`` (each only if its command line still names ``STATE``, or for Redis, which
rewrites its title, its address).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIX = os.environ.get("BENCH_HOSTS_PREFIX", "ovh")
SUBNET = "10.77.0"
GATEWAY = f"{SUBNET}.1"
BRIDGE = f"{PREFIX}-br"
STATE = Path(f"/tmp/{PREFIX}-hosts")
PORT = int(os.environ.get("BENCH_HOSTS_PORT", "8790"))  # HAProxy, on 127.0.0.1
PGBOUNCER_PORT = 6432
REDIS_PORT = 6390
WEB_PORT = 8000
PACKAGES = {"haproxy": "/usr/sbin/haproxy", "pgbouncer": "/usr/sbin/pgbouncer",
            "redis-server": "/usr/bin/redis-server"}


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def unavailable() -> str | None:
    """Why the hosts cannot be built here (not root, no ``ip netns``), or None."""
    if os.geteuid() != 0:
        return "not running as root (network namespaces need CAP_SYS_ADMIN)"
    if shutil.which("ip") is None:
        return "no ip command (Debian package iproute2)"
    if run("ip", "netns", "list", check=False).returncode != 0:
        return "ip netns is not available"
    return None


def packages_ensure() -> None:
    """Install HAProxy, PgBouncer and Redis with apt-get when missing (root)."""
    missing = [name for name, path in PACKAGES.items() if not Path(path).exists()]
    if not missing:
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if subprocess.run(["apt-get", "install", "-y", "-qq", *missing], env=env,
                      capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], env=env, check=True,
                       capture_output=True)


# ------------------------------------------------------------------ namespaces


def netns_pids(ns: str) -> list[int]:
    out = run("ip", "netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split()]


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _gone(pids: list[int], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.05)


def cleanup(prefix: str = PREFIX) -> list[str]:
    """Remove everything a cluster of ``prefix`` made, running or left by a crash: kill the
    processes of each ``<prefix>-*`` namespace, delete the namespaces and the links named
    ``<prefix>-*``, kill the root-namespace daemons whose pid files are in the state
    directory. Idempotent. Returns what it removed."""
    removed = []
    state = Path(f"/tmp/{prefix}-hosts")
    for pidfile in sorted(state.glob("*.pid")) if state.exists() else []:
        try:
            pid = int(pidfile.read_text().split()[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (ValueError, IndexError, OSError):
            pidfile.unlink(missing_ok=True)
            continue
        if str(state) in cmdline or f"{GATEWAY}:{REDIS_PORT}" in cmdline:  # ours
            _kill([pid])
            _gone([pid])
            removed.append(f"{pidfile.stem} (pid {pid})")
        pidfile.unlink(missing_ok=True)
    for line in run("ip", "netns", "list", check=False).stdout.splitlines():
        ns = line.split()[0] if line.split() else ""
        if ns.startswith(f"{prefix}-"):
            pids = netns_pids(ns)
            _kill(pids)
            _gone(pids)
            run("ip", "netns", "del", ns, check=False)
            removed.append(f"netns {ns}")
    for line in run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(f"{prefix}-"):
            run("ip", "link", "del", name, check=False)
            removed.append(f"link {name}")
    return removed


def bridge_add() -> None:
    run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")


def netns_add(name: str, ip: str) -> str:
    """Namespace ``<prefix>-<name>`` with ``eth0`` at ``ip``/24, its veth peer
    ``<prefix>-<name>`` on the bridge. Returns the namespace's name."""
    ns = f"{PREFIX}-{name}"
    run("ip", "netns", "add", ns)
    run("ip", "link", "add", ns, "type", "veth", "peer", "name", "eth0", "netns", ns)
    run("ip", "link", "set", ns, "master", BRIDGE)
    run("ip", "link", "set", ns, "up")
    run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
    run("ip", "-n", ns, "link", "set", "eth0", "up")
    run("ip", "-n", ns, "link", "set", "lo", "up")
    return ns


# ------------------------------------------------------------------ configs


def haproxy_cfg(webs: list[tuple[str, str]], *, port: int = PORT, maxconn: int = 8) -> str:
    """HTTP on 127.0.0.1:``port`` balanced over ``webs`` ((name, ip) pairs) by least
    connections, at most ``maxconn`` requests at once on each host (its gunicorn workers ×
    threads): the others wait in HAProxy's queue, not in gunicorn's backlog, so a health
    check never waits behind a host's whole backlog — an overloaded host is slow, not dead
    (without the limit, the one web host left after a kill failed its checks under the
    load of both, and HAProxy had no host at all).

    Health: GET /healthz every 2 s (about 1 s: it pings the Celery workers for 1 s), 5 s
    to answer; three failures take a host out, two successes put it back. /healthz answers
    503 when something every host shares is down (database, broker, all workers): that is
    no reason to take one web host out, so any HTTP answer counts as alive.

    A refused connection is retried on the other host (``retry-on conn-failure``,
    ``redispatch``; the request is buffered whole first, which a retry needs) and marks
    the host down at once (``observe layer4``, ``on-error mark-down``): without that,
    least connections sent most requests to the dead host — it had none — until its
    checks failed, each answered 503. Server connections close after each response
    (``http-server-close``): no idle server connection closing under a client's keep-alive
    closes that client's connection (with keep-alive to the servers, clients saw such
    closes at random times). So only requests in flight on a host that dies fail — HAProxy
    closes their clients' connections without an answer (and without a log line).

    One log line per request on stdout: the connection's accept time (epoch s.ms),
    handshake and idle time (ms; the request came after both), server, status, total time
    (ms), method, path, termination state."""
    servers = "\n".join(f"    server {name} {ip}:{WEB_PORT} check" for name, ip in webs)
    return f"""global
    maxconn 4000
    log stdout format raw local0
    stats socket {STATE}/haproxy.sock mode 600 level admin

defaults
    mode http
    log global
    log-format "%Ts.%ms %Th %Ti %s %ST %Ta %HM %HU %tsc"
    option forwardfor
    option http-server-close
    option http-buffer-request
    retry-on conn-failure
    timeout connect 2s
    timeout queue 60s
    timeout client 120s
    timeout server 120s
    timeout http-keep-alive 60s
    retries 3
    option redispatch 1

frontend web
    bind 127.0.0.1:{port}
    default_backend webs

backend webs
    balance leastconn
    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1
    http-check expect rstatus ^(200|503)$
    timeout check 5s
    default-server inter 2s fall 3 rise 2 maxconn {maxconn} \
        observe layer4 error-limit 1 on-error mark-down
{servers}
"""


def pgbouncer_ini(*, pool_size: int = 10) -> str:
    """Transaction pooling on 10.77.0.1:6432 for every database of 127.0.0.1:5432 (trust,
    as that PostgreSQL is here), ``pool_size`` server connections per database and user."""
    return f"""[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = {GATEWAY}
listen_port = {PGBOUNCER_PORT}
unix_socket_dir =
auth_type = trust
auth_file = {STATE}/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = {pool_size}
reserve_pool_size = 4
server_reset_query =
ignore_startup_parameters = extra_float_digits
admin_users = postgres
"""


# ------------------------------------------------------------------ hosts


@dataclass
class Host:
    """One host: a namespace and the process group of its one service."""

    name: str
    ip: str
    argv: list[str]
    env: dict[str, str]
    niceness: int = 0
    proc: subprocess.Popen | None = None
    starts: int = 0

    @property
    def ns(self) -> str:
        return f"{PREFIX}-{self.name}"

    def start(self) -> None:
        self.starts += 1
        log = open(STATE / f"{self.name}.log", "ab")  # noqa: SIM115 - the child keeps it
        nice = ["nice", "-n", str(self.niceness)] if self.niceness else []
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, *nice, *self.argv],
                                     cwd=ROOT, env=self.env, stdout=log, stderr=log,
                                     start_new_session=True)
        log.close()

    def kill(self) -> int:
        """SIGKILL the host's process group and whatever else runs in its namespace (as a
        power cut would). Returns how many processes were killed."""
        pids = set(netns_pids(self.ns))
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        _kill(sorted(pids))
        if self.proc is not None:
            self.proc.wait(timeout=10)
        _gone(sorted(pids))
        return len(pids)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()


def haproxy_status() -> dict[str, str]:
    """Each web host's status as HAProxy's health checks see it (UP, DOWN, …), from its
    stats socket; {} while HAProxy does not answer."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(2)
            sock.connect(str(STATE / "haproxy.sock"))
            sock.sendall(b"show stat\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
    except OSError:
        return {}
    lines = data.decode().splitlines()
    if not lines or not lines[0].startswith("# "):
        return {}
    header = lines[0][2:].split(",")
    rows = [dict(zip(header, line.split(","), strict=False)) for line in lines[1:] if line]
    return {r["svname"]: r["status"].split()[0] for r in rows
            if r.get("pxname") == "webs" and r["svname"] not in ("BACKEND", "FRONTEND")}


def _up(host: str, port: int, path: str = "/healthz", timeout: float = 90) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection(host, port, timeout=5)
            conn.request("GET", path)
            if conn.getresponse().status in (200, 503):
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def _port_open(host: str, port: int, timeout: float = 20) -> bool:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


@dataclass
class Cluster:
    """Two web hosts, two worker hosts and the root-namespace services, on ``database``
    (an existing, migrated PostgreSQL database of 127.0.0.1:5432). ``web_workers`` ×
    ``threads``: each web host's gunicorn; ``concurrency``: each worker host's Celery
    processes; ``env``: extra environment for every host. A context manager: builds on
    entry (after ``cleanup()`` of leftovers), tears down on exit."""

    database: str
    webs: int = 2
    workers: int = 2
    web_workers: int = 2
    threads: int = 4
    concurrency: int = 2
    pool_size: int = 10
    env: dict[str, str] = field(default_factory=dict)
    hosts: dict[str, Host] = field(default_factory=dict)
    daemons: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{PORT}"

    @property
    def database_url(self) -> str:
        return f"postgres://postgres@{GATEWAY}:{PGBOUNCER_PORT}/{self.database}"

    @property
    def broker(self) -> str:
        return f"redis://{GATEWAY}:{REDIS_PORT}/0"

    def host_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("CELERY_BROKER_URL", "REDIS_URL", "DATABASE_URL")}
        env.update(DATABASE_URL=self.database_url, DATABASE_PGBOUNCER="true",
                   CELERY_BROKER_URL=self.broker,
                   DJANGO_SETTINGS_MODULE="oversight_site.settings.local", DJANGO_DEBUG="0",
                   LOG_LEVEL="WARNING", PYTHONPATH=str(ROOT),
                   # HAProxy's clients ask for 127.0.0.1; its checks and wait_up for the
                   # host's own address
                   DJANGO_ALLOWED_HOSTS=",".join(["127.0.0.1", "localhost",
                                                  *(f"{SUBNET}.{10 + i}" for i in range(1, 10))]))
        env.update(self.env)
        return env

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _daemon(self, name: str, argv: list[str], env: dict | None = None) -> None:
        log = open(STATE / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=log, env=env,
                                start_new_session=True)
        log.close()
        # what cleanup() reads after a crash (it checks the command line names STATE)
        (STATE / f"{name}.pid").write_text(f"{proc.pid}\n")
        self.daemons.append(proc)

    def start(self) -> None:
        reason = unavailable()
        if reason:
            raise SystemExit(f"cannot build the hosts: {reason}")
        packages_ensure()
        cleanup()
        shutil.rmtree(STATE, ignore_errors=True)  # the previous run's logs and configs
        STATE.mkdir(mode=0o777)
        os.chmod(STATE, 0o777)  # PgBouncer runs as postgres and writes its log and pid here
        bridge_add()
        names = [(f"web{i}", f"{SUBNET}.{10 + i}") for i in range(1, self.webs + 1)]
        names += [(f"worker{i}", f"{SUBNET}.{20 + i}") for i in range(1, self.workers + 1)]
        for name, ip in names:
            netns_add(name, ip)
        # Redis (broker + cache), PgBouncer, HAProxy: root namespace, on the subnet's address
        self._daemon("redis", ["redis-server", "--bind", GATEWAY, "--port", str(REDIS_PORT),
                               "--save", "", "--appendonly", "no", "--protected-mode", "no",
                               "--dir", str(STATE)])
        (STATE / "userlist.txt").write_text('"postgres" ""\n')
        (STATE / "pgbouncer.ini").write_text(pgbouncer_ini(pool_size=self.pool_size))
        self._daemon("pgbouncer-run", ["pgbouncer", "-u", "postgres", f"{STATE}/pgbouncer.ini"])
        webs = [(n, ip) for n, ip in names if n.startswith("web")]
        (STATE / "haproxy.cfg").write_text(haproxy_cfg(webs,
                                                       maxconn=self.web_workers * self.threads))
        self._daemon("haproxy", ["haproxy", "-db", "-f", f"{STATE}/haproxy.cfg"])
        if not (_port_open(GATEWAY, REDIS_PORT) and _port_open(GATEWAY, PGBOUNCER_PORT)):
            raise SystemExit(f"Redis or PgBouncer did not come up (logs in {STATE})")
        env = self.host_env()
        # As docker-compose.yml starts the worker: background work yields the CPU.
        for name, ip in names:
            if name.startswith("web"):
                argv = [sys.executable, "-m", "gunicorn", "oversight_site.wsgi",
                        "-b", f"0.0.0.0:{WEB_PORT}", "-k", "gthread",
                        "-w", str(self.web_workers), "--threads", str(self.threads),
                        "--timeout", "120", "--log-level", "warning"]
                host = Host(name, ip, argv, env)
            else:
                argv = [sys.executable, "-m", "celery", "-A", "oversight_site", "worker",
                        "-Q", "default,estimates,audits", "-c", str(self.concurrency),
                        "-n", f"{name}@%h", "--loglevel", "WARNING"]
                host = Host(name, ip, argv, env, niceness=10)
            self.hosts[name] = host
            host.start()
        self._daemon("beat", [sys.executable, "-m", "celery", "-A", "oversight_site", "beat",
                              "--loglevel", "WARNING", "--schedule", f"{STATE}/beat-schedule"],
                     env=env)
        for name, _ in webs:
            if not self.wait_up(name):
                raise SystemExit(f"{name} did not come up (log: {STATE}/{name}.log)")
        if not self.wait_balanced([n for n, _ in webs]):
            raise SystemExit(f"HAProxy did not come up (log: {STATE}/haproxy.log)")

    def wait_up(self, name: str, timeout: float = 90) -> bool:
        """Wait until a web host answers /healthz itself (not through HAProxy)."""
        return _up(self.hosts[name].ip, WEB_PORT, timeout=timeout)

    def wait_balanced(self, names: list[str], timeout: float = 60) -> bool:
        """Wait until HAProxy's health checks count every web host of ``names`` as UP."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = haproxy_status()
            if all(status.get(n) == "UP" for n in names):
                return True
            time.sleep(0.2)
        return False

    def kill(self, name: str) -> int:
        return self.hosts[name].kill()

    def restart(self, name: str) -> None:
        self.hosts[name].start()

    def stop(self) -> None:
        for host in self.hosts.values():
            host.stop()
        for proc in self.daemons:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.daemons:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        cleanup()

    def memory(self) -> dict[str, float]:
        """Resident memory (MiB) of each host's processes and of the root-namespace
        services, from /proc (RSS: shared pages counted in each process)."""
        out: dict[str, float] = {}
        for name, host in self.hosts.items():
            out[name] = sum(_rss(p) for p in netns_pids(host.ns))
        for proc in self.daemons:
            name = Path(proc.args[0]).name if proc.args[0] != sys.executable else "beat"
            out[name] = _rss(proc.pid) + sum(_rss(c) for c in _children(proc.pid))
        return out


def _rss(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


if __name__ == "__main__":  # python bench/hosts.py cleanup
    if sys.argv[1:] == ["cleanup"]:
        print("\n".join(cleanup()) or "nothing to clean")
