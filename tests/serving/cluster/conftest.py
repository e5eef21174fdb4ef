"""Real parts for the cluster tests: a ``redis-server`` (on a Unix socket in a
temporary directory), three ``trio-mcp run -t http --redis …`` node processes
on ports chosen at run time, and an ``haproxy`` in front of them (``balance
roundrobin``, no stickiness), all on 127.0.0.1.

The processes start once per module (each module its own key prefix) and
every one is stopped at the end; a test that kills a node starts it again.
Installed by ``scripts/setup-interop`` (Debian's ``redis-server`` and
``haproxy``); without them the tests are skipped, and say so.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REDIS_SERVER = shutil.which("redis-server")
HAPROXY = shutil.which("haproxy")
APP = str(Path(__file__).with_name("cluster_app.py")) + ":app"
#: Seconds a process may take to start (the machine may be loaded).
START_TIMEOUT = 30.0
#: The lease of the test nodes (short, so failover tests stay short).
LEASE = 1.0

needs_real_parts = pytest.mark.skipif(
    REDIS_SERVER is None or HAPROXY is None,
    reason="redis-server and haproxy are not installed (scripts/setup-interop installs them)",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)  # a stopped process cannot handle SIGTERM
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _wait_until(check: Any, what: str, log: Path | None = None) -> None:
    """Poll another process's state (there is nothing to wait on) within START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while not check():
        if time.monotonic() > deadline:
            detail = log.read_text()[-2000:] if log is not None and log.exists() else ""
            raise TimeoutError(f"{what} not ready within {START_TIMEOUT} s\n{detail}")
        time.sleep(0.05)


class RedisServer:
    """A real redis-server on a Unix socket (no TCP port at all)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.socket = directory / "redis.sock"
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.socket.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port", "0",
                "--unixsocket", str(self.socket),
                "--unixsocketperm", "700",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_until(self.ping, "redis-server")

    def ping(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(1)
                sock.connect(str(self.socket))
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)


class Node:
    """One ``trio-mcp run -t http --redis …`` process (restartable on its port)."""

    def __init__(
        self,
        node_id: str,
        redis: RedisServer,
        prefix: str,
        directory: Path,
        policy: str,
        link: bool = False,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.id = node_id
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self.log = directory / f"{node_id}.log"
        self.args = [
            sys.executable, "-m", "trio_mcp.cli", "run", APP, "-t", "http",
            "--port", str(self.port),
            "--redis", redis.url,
            "--node-id", node_id,
            "--redis-prefix", prefix,
            "--lease-ttl", str(LEASE),
            "--owner-failure", policy,
            "--node-header",
            *(["--direct-link"] if link else []),
            *extra,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> None:
        """Start the process (see :meth:`wait_ready`)."""
        env = {**os.environ, "CLUSTER_TEST_NODE": self.id}
        env.pop("TRIO_MCP_REDIS_URL", None)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.args, env=env, stdout=log, stderr=log)

    def wait_ready(self) -> None:
        _wait_until(self.healthy, f"node {self.id}", self.log)

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def readiness(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.base}/readyz", timeout=2) as answer:
            return json.loads(answer.read())  # type: ignore[no-any-return]

    def healthy(self) -> bool:
        """Up, and holding its lease."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"node {self.id} exited\n{self.log.read_text()[-2000:]}")
        try:
            return bool(self.readiness()["cluster"]["healthy"])
        except (OSError, ValueError, KeyError):
            return False

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(5)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)


class Haproxy:
    """A real haproxy: round robin over the nodes, no stickiness."""

    def __init__(self, nodes: list[Node], directory: Path) -> None:
        assert HAPROXY is not None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.config = directory / "haproxy.cfg"
        self.config.write_text(haproxy_config(self.port, [(n.id, n.port) for n in nodes]))
        check = subprocess.run([HAPROXY, "-c", "-f", str(self.config)], capture_output=True)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused its config: {check.stderr.decode()}")
        self.proc = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait_until(self._listening, "haproxy")

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        _stop(self.proc)


def haproxy_config(port: int, servers: list[tuple[str, int]]) -> str:
    """The configuration the README shows: every request balanced on its own
    (``http-server-close``), round robin, no stick table, no cookie; a node
    that does not answer its health check (killed, stopped) is skipped."""
    lines = [
        "defaults",
        "  mode http",
        "  timeout connect 2s",
        "  timeout client 60s",
        "  timeout server 60s",
        "  timeout check 500ms",
        "  option http-server-close",
        "frontend mcp",
        f"  bind 127.0.0.1:{port}",
        "  default_backend nodes",
        "backend nodes",
        "  balance roundrobin",
        "  retry-on conn-failure",
        "  option redispatch",
        "  option httpchk",
        "  http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1",
        "  http-response set-header X-Served-By %[srv_name]",
    ]
    lines += [f"  server {name} 127.0.0.1:{p} check inter 300ms fall 2 rise 1" for name, p in servers]
    return "\n".join(lines) + "\n"


class Cluster:
    """A redis-server, nodes and (optionally) an haproxy, all running."""

    def __init__(
        self,
        directory: Path,
        prefix: str,
        count: int,
        policy: str,
        balanced: bool,
        link: bool = False,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.prefix = prefix
        self.redis = RedisServer(directory)
        self.nodes = [
            Node(f"n{i + 1}", self.redis, prefix, directory, policy, link, extra) for i in range(count)
        ]
        self.lb: Haproxy | None = None
        self._balanced = balanced
        self.dir = directory

    def start(self) -> None:
        self.redis.start()
        for node in self.nodes:  # side by side: each takes a while to import
            node.launch()
        for node in self.nodes:
            node.wait_ready()
        if self._balanced:
            self.lb = Haproxy(self.nodes, self.dir)

    def stop(self) -> None:
        if self.lb is not None:
            self.lb.stop()
        for node in self.nodes:
            node.stop()
        self.redis.stop()

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)

    def revive(self) -> None:
        """Start again every node that a test killed (same id, same port), let
        go on any it stopped, and wait until every one holds its lease."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.signal(signal.SIGCONT)
        dead = [node for node in self.nodes if node.proc is None or node.proc.poll() is not None]
        for node in dead:
            node.launch()
        for node in self.nodes:  # a stopped one takes its lease afresh
            node.wait_ready()


@contextlib.contextmanager
def running_cluster(
    directory: Path,
    prefix: str,
    count: int = 3,
    policy: str = "adopt",
    balanced: bool = True,
    link: bool = False,
    extra: tuple[str, ...] = (),
) -> Iterator[Cluster]:
    cluster = Cluster(directory, prefix, count, policy, balanced, link, extra)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three nodes (adopt policy) behind haproxy, for the whole module; a
    module may set ``NODES``, ``POLICY``, ``BALANCED`` (haproxy or not),
    ``LINK`` (forward over direct links between the nodes) and ``EXTRA``
    (more options of every node)."""
    if REDIS_SERVER is None or HAPROXY is None:
        pytest.skip("redis-server and haproxy are not installed (scripts/setup-interop installs them)")
    module = request.module
    prefix = f"t{module.__name__.rpartition('.')[2]}:"
    with running_cluster(
        tmp_path_factory.mktemp("cluster"),
        prefix,
        count=getattr(module, "NODES", 3),
        policy=getattr(module, "POLICY", "adopt"),
        balanced=getattr(module, "BALANCED", True),
        link=getattr(module, "LINK", False),
        extra=tuple(getattr(module, "EXTRA", ())),
    ) as running:
        yield running


@pytest.fixture
def revive(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster, with every node a test killed started again after it."""
    yield cluster
    cluster.revive()
