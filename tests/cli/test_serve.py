"""``trio-mcp run``/``gateway`` ``-t http`` as deployed: the HTTP options of
the real command line, against the real server process (127.0.0.1, port 0,
except the wildcard bind, made in a network namespace of its own)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from trio_mcp.cli._serve import _WILDCARD
from trio_mcp.transports.http._security import WILDCARD_BINDS

from ._procs import EXAMPLE, HEADERS, INIT, ROOT, stop_group

CLI = [sys.executable, "-m", "trio_mcp.cli"]
DRIVER = str(Path(__file__).with_name("wildcard_driver.py"))
TIMEOUT = 30
PAGE = "https://app.example.com"


@contextmanager
def cli_server(*args: str, cwd: Path = ROOT) -> Iterator[tuple[str, list[str]]]:
    """The CLI serving over HTTP: its URL and its three start-up lines; the
    process group is stopped afterwards (SIGKILL if SIGTERM is not enough)."""
    server = subprocess.Popen(
        [*CLI, *args, "-t", "http", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        assert server.stderr is not None
        lines = []
        while len(lines) < 3:
            line = server.stderr.readline()
            assert line, f"the server ended: {lines}"
            if lines or line.startswith("serving"):
                lines.append(line.strip())
        yield lines[0].rsplit(" ", 1)[-1], lines
    finally:
        stop_group(server)


def test_the_cli_and_the_security_module_agree_on_wildcard_binds() -> None:
    assert set(_WILDCARD) == set(WILDCARD_BINDS)


@pytest.mark.skipif(
    shutil.which("unshare") is None or shutil.which("ip") is None, reason="needs unshare and ip"
)
def test_host_0_0_0_0_answers_ip_addresses_and_this_machine_but_not_other_names() -> None:
    """Bound to every interface of a namespace that has only its loopback."""
    hosts = ["10.1.2.3:8000", "[fe80::1]:8000", "localhost:1", socket.gethostname(), "evil.example"]
    out = subprocess.run(
        ["unshare", "-rn", sys.executable, DRIVER],
        input=" ".join(hosts),
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
        check=False,
    )
    if out.returncode != 0 and "unshare" in out.stderr and "Operation not permitted" in out.stderr:
        pytest.skip("user namespaces are not permitted here")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["statuses"] == {
        "10.1.2.3:8000": 200,
        "[fe80::1]:8000": 200,
        "localhost:1": 200,
        socket.gethostname(): 200,
        "evil.example": 421,
    }
    first, second = report["lines"]
    assert "at http://0.0.0.0:" in first
    assert "any IP address" in second and socket.gethostname().lower() in second
    assert "--allowed-host NAME" in second


def test_run_http_with_the_deployment_options() -> None:
    args = ["run", EXAMPLE, "--allowed-host", "mcp.example.com", "--allowed-origin", PAGE, "--json-response"]
    with cli_server(*args) as (url, lines), httpx.Client(timeout=TIMEOUT) as client:
        assert "mcp.example.com" in lines[1] and PAGE in lines[1]
        assert lines[2] == "health: GET /healthz, readiness: GET /readyz, metrics: GET /metrics"
        named = client.post(url, json=INIT, headers={**HEADERS, "host": "mcp.example.com"})
        assert named.status_code == 200
        assert named.headers["content-type"] == "application/json"  # --json-response
        assert client.post(url, json=INIT, headers={**HEADERS, "host": "evil.example"}).status_code == 421
        preflight = client.options(url, headers={"origin": PAGE, "access-control-request-method": "POST"})
        assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == PAGE
        refused = client.options(
            url, headers={"origin": "https://evil.example", "access-control-request-method": "POST"}
        )
        assert refused.status_code == 403
        assert client.get(url.replace("/mcp", "/healthz")).json() == {"status": "ok"}


def test_run_http_stateless() -> None:
    with (
        cli_server("run", EXAMPLE, "--stateless", "--path", "/api/mcp") as (url, _),
        httpx.Client(timeout=TIMEOUT) as client,
    ):
        assert url.endswith("/api/mcp")
        init = client.post(url, json=INIT, headers=HEADERS)
        assert init.status_code == 200 and "mcp-session-id" not in init.headers
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "hi"}},
        }
        answer = client.post(url, json=call, headers={**HEADERS, "mcp-protocol-version": "2025-11-25"})
        assert answer.status_code == 200
        assert "hi" in answer.text
        assert client.get(url, headers={"accept": "text/event-stream"}).status_code == 405


def test_gateway_http_reports_each_backing_server_in_readyz(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"everything": {"command": sys.executable, "args": [EXAMPLE]}}})
    )
    with (
        cli_server("gateway", str(config), cwd=tmp_path) as (url, _),
        httpx.Client(timeout=TIMEOUT) as client,
    ):
        ready = client.get(url.replace("/mcp", "/readyz"))
        assert ready.status_code == 200, ready.text
        report = ready.json()
        assert report["ready"] is True
        assert report["servers"]["everything"]["connected"] is True


# ------------------------------------------------------- several processes


def test_redis_comes_from_the_option_or_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from trio_mcp.cli._main import _parser
    from trio_mcp.cli._serve import REDIS_ENV, ServeOptions

    monkeypatch.delenv(REDIS_ENV, raising=False)
    alone = ServeOptions.from_args(_parser().parse_args(["run", "app.py", "-t", "http"]))
    assert alone.redis_url is None and alone.cluster() is None
    argv = ["gateway", "fleet.json", "-t", "http", "--redis", "redis://127.0.0.1:7/0", "--node-id", "g1"]
    given = ServeOptions.from_args(
        _parser().parse_args([*argv, "--owner-failure", "drop", "--lease-ttl", "2"])
    )
    cluster = given.cluster()
    assert cluster.settings.url == "redis://127.0.0.1:7/0" and cluster.settings.node_id == "g1"
    assert cluster.settings.owner_failure == "drop" and cluster.settings.lease_ttl == 2.0
    monkeypatch.setenv(REDIS_ENV, "unix:///run/redis.sock")
    from_env = ServeOptions.from_args(_parser().parse_args(["run", "app.py", "-t", "http"]))
    assert from_env.redis_url == "unix:///run/redis.sock"
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "--help"])
    assert REDIS_ENV in capsys.readouterr().out  # documented in --help


async def test_redis_needs_the_http_transport() -> None:
    from trio_mcp.cli._serve import ServeOptions, serve
    from trio_mcp.cli._targets import TargetError
    from trio_mcp.server import MCPServer

    with pytest.raises(TargetError, match="needs -t http"):
        await serve(MCPServer("x"), ServeOptions(transport="ws", redis_url="redis://127.0.0.1:7/0"))
    with pytest.raises(TargetError, match="bad cluster option"):
        ServeOptions(transport="http", redis_url="redis://x", lease_ttl=0.0).cluster()
