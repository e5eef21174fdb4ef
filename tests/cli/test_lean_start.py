"""A stdio server's start-up stays lean: a real server process, served by the
library and by ``trio-mcp run``, answers ``initialize`` and a ``tools/call``
and then reports every module it loaded; none of the network, HTTP, auth,
cluster, metrics, gateway, bench or client code is among them (a server's
start-up is mostly imports: each of these costs milliseconds to tens of them).
Timings are the benchmark's (``benchmarks/bench_stdio_neutral.py``), never
asserted here."""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

import pytest
import trio

from trio_mcp.cli import main

from ._procs import INIT

APP = str(Path(__file__).parent / "lean_app.py")
TIMEOUT = 30.0

#: Loaded by neither way of serving stdio: third-party packages of the other
#: transports, auth, cluster, metrics, tracing and configuration files,
#: trio-mcp's own network, auth, gateway, bench and client-side code, and
#: the parts of the server a server of one tool does not use (tasks,
#: resources, prompts, media, in-process pairs, statistics).
NEVER = (
    "hypercorn",
    "httpx",
    "httpcore",
    "h11",
    "h2",
    "jwt",
    "coredis",
    "redis",
    "prometheus_client",
    "opentelemetry",
    "cattrs",
    "yaml",
    "trio_websocket",
    "wsproto",
    "importlib.metadata",
    "mimetypes",
    "json",
    "difflib",
    "trio_mcp.serving",
    "trio_mcp.auth",
    "trio_mcp.gateway",
    "trio_mcp.bench",
    "trio_mcp.observability._metrics",
    "trio_mcp.transports.http",
    "trio_mcp.transports.sse",
    "trio_mcp.transports.websocket",
    "trio_mcp.transports._stdio_client",
    "trio_mcp.actors._client",
    "trio_mcp.cli._client",
    "trio_mcp.cli._connect",
    "trio_mcp.cli._bench",
    "trio_mcp.cli._workers",
    # built on first use: what a server of one tool never needs
    "trio_mcp.actors._tasks",
    "trio_mcp.actors._client_call",
    "trio_mcp.actors._peer_statistics",
    "trio_mcp.server._more_entries",
    "trio_mcp.server._media",
    "trio_mcp.server._uri_template",
    "trio_mcp.server._traversal",
    "trio_mcp.transports.memory",
    "trio_mcp.transports._server_info",
)

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hi"}},
}


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


async def _serve_and_report(command: list[str], out: Path) -> list[str]:
    """Start ``command``, answer-check ``initialize`` and one call, close its
    stdin; the names of the modules it had loaded when it ended."""
    env = dict(os.environ, LEAN_MODULES_OUT=str(out))
    with trio.fail_after(TIMEOUT):
        process = await trio.lowlevel.open_process(command, stdin=-1, stdout=-1, env=env)
        try:
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.send_all(_line(INIT))
            buffer = b""
            answers = []
            while len(answers) < 2:
                chunk = await process.stdout.receive_some()
                assert chunk, "the server ended before answering"
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    answers.append(json.loads(line))
                    if answers[-1].get("id") == 1:
                        await process.stdin.send_all(_line(INITIALIZED) + _line(CALL))
            assert answers[0]["result"]["serverInfo"]["name"] == "lean"
            assert answers[1]["result"]["content"] == [{"type": "text", "text": "hi"}]
            await process.stdin.aclose()
            assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    return out.read_text().split("\n")


def test_run_resumes_the_collector_when_it_fails_to_start(tmp_path: Path) -> None:
    assert gc.isenabled()
    assert main(["run", str(tmp_path / "missing.py")]) == 1
    assert gc.isenabled()


def _loaded(modules: list[str], name: str) -> list[str]:
    return [m for m in modules if m == name or m.startswith(name + ".")]


@pytest.mark.parametrize(
    "how",
    [
        pytest.param([sys.executable, APP], id="library"),
        pytest.param([sys.executable, "-m", "trio_mcp.cli", "run", APP], id="trio-mcp-run"),
    ],
)
async def test_a_stdio_server_serves_without_loading_other_layers(how: list[str], tmp_path: Path) -> None:
    modules = await _serve_and_report(how, tmp_path / "modules.txt")
    # trio-mcp run pauses the collector during start-up only
    assert modules[-1] == "gc enabled: True"
    # the report is this server's: what serving stdio needs is there
    for needed in ("trio", "msgspec", "trio_mcp.server._app", "trio_mcp.transports._stdio_stream"):
        assert needed in modules
    loaded = {name: _loaded(modules, name) for name in NEVER}
    assert {name: found for name, found in loaded.items() if found} == {}
