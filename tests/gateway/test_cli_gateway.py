"""``trio-mcp gateway`` as an operator runs it, through its real entry point:
``--check``, bad files (one line naming file, line, server and field; nothing
started), a SIGHUP reload, ``gateway status URL``, and the graceful stop on
SIGTERM (every stdio server sees the end of its stdin, the gateway exits 0,
no process is left) — and ``trio-mcp run`` stopping on SIGTERM too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.gateway.test_dialects import PROBE
from tests.gateway.test_fleet import Changes, probe
from tests.gateway.test_gateway import CLI, _serving_line, children, processes, wait_gone

from trio_mcp.actors._client import open_session
from trio_mcp.transports.http import StreamableHttpTransport

__all__ = ["processes"]

PY = sys.executable
TIMEOUT = 30.0


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], check=False, capture_output=True, text=True, timeout=60, cwd=cwd)


def marker_server(mark: Path) -> dict[str, Any]:
    """A server whose start leaves a file behind: proof that it was started."""
    return {"command": PY, "args": ["-c", f"open({str(mark)!r}, 'w').write('started')"]}


# ------------------------------------------------------------- checking


def test_check_prints_the_fleet_and_starts_nothing(tmp_path: Path) -> None:
    mark = tmp_path / "started"
    path = tmp_path / "config.toml"
    path.write_text(
        f"""[mcp_servers.files]
command = "{PY}"
args = ["{PROBE}"]
enabled_tools = ["read_*"]
unknown_thing = 1

[mcp_servers.marker]
command = "{PY}"
args = ["-c", "open({str(mark)!r}, 'w').write('started')"]

[mcp_servers.web]
url = "http://127.0.0.1:9/mcp"
disabled_tools = ["delete_note"]

[mcp_servers.off]
command = "x"
enabled = false
"""
    )
    out = run_cli("gateway", "--check", str(path), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"files: stdio {PY} {PROBE}; tools: read_*"
    assert lines[1].startswith("marker: stdio ")
    assert lines[2] == "web: remote http http://127.0.0.1:9/mcp; tools: * except delete_note"
    assert lines[3] == "off: disabled"
    assert (
        out.stderr
        == f"trio-mcp: warning: {path}:5: mcp_servers.files: unknown key 'unknown_thing' (ignored)\n"
    )
    assert not mark.exists()


BAD_FILES: list[tuple[str, str, str]] = [
    # (file name, content with MARK and PY placeholders, the one line expected after "trio-mcp: FILE:")
    (
        "config.toml",
        '[mcp_servers.ok]\ncommand = "PY"\nargs = ["-c", "MARK"]\n\n[mcp_servers.bad]\ncommand = "PY"\nargs = [1]\n',
        "7: mcp_servers.bad.args[0]: must be a string, not a number (1)",
    ),
    (
        "config.yaml",
        'extensions:\n  ok:\n    cmd: PY\n    args: ["-c", "MARK"]\n    type: stdio\n  bad:\n    cmd: PY\n    enabled: maybe\n',
        "8: extensions.bad.enabled: must be true or false, not a string ('maybe')",
    ),
    (
        "mcp.json",
        (
            '{\n  // two servers\n  "servers": {\n    "ok": {"command": "PY", "args": ["-c", "MARK"]},\n'
            '    "bad": {"command": "PY", "env": {"K": "${input:token}"}},\n  },\n}\n'
        ),
        (
            "5: servers.bad.env.K: input 'token' has no value (and no input of that id is declared in 'inputs'): "
            "pass --input token=VALUE or set TRIO_MCP_INPUT_TOKEN"
        ),
    ),
    (
        "settings.json",
        (
            '{\n  "context_servers": {\n    "ok": {"command": "PY", "args": ["-c", "MARK"]},\n'
            '    "bad": {"url": "http://127.0.0.1:9/mcp", "type": "grpc"}\n  }\n}\n'
        ),
        (
            "4: context_servers.bad.type: unknown transport type 'grpc'; known: stdio, local, remote, http, "
            "streamable-http, streamable_http, streamablehttp, sse, ws, websocket"
        ),
    ),
    (
        "broken.json",
        '{\n  "mcpServers": {\n    "ok": {"command": "PY", "args": ["-c", "MARK"]}\n    "bad": {}\n  }\n}\n',
        '4: not valid JSON (JSONC): Unexpected """ at column 5',
    ),
]


@pytest.mark.parametrize(("name", "content", "expected"), BAD_FILES)
def test_a_bad_file_is_one_line_naming_file_line_server_and_field_and_nothing_starts(
    tmp_path: Path, name: str, content: str, expected: str
) -> None:
    mark = tmp_path / "started"
    code = f"open({str(mark)!r}, 'w').write('started')"
    path = tmp_path / name
    path.write_text(content.replace("PY", PY).replace("MARK", code.replace('"', '\\"')))
    for args in (("gateway", "--check", str(path)), ("gateway", str(path))):
        out = run_cli(*args, cwd=tmp_path)
        assert out.returncode == 1, out
        assert out.stderr == f"trio-mcp: {path}:{expected}\n", out.stderr
        assert out.stdout == ""
    assert not mark.exists()  # the valid server of a file that failed was never started


# ---------------------------------------------------------- running it


@asynccontextmanager
async def gateway_process(path: Path, seen: set[int], *args: str) -> AsyncIterator[tuple[Any, str]]:
    server = await trio.lowlevel.open_process(
        [*CLI, "gateway", str(path), "-t", "http", "--port", "0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=path.parent,
        start_new_session=True,
    )
    seen.add(server.pid)
    try:
        line = await _serving_line(server.stderr)
        yield server, line.strip().rsplit(" ", 1)[-1]
    finally:
        if server.returncode is None:
            os.killpg(server.pid, signal.SIGKILL)
            with trio.move_on_after(10):
                await server.wait()
        await server.stderr.aclose()


async def status_of(url: str) -> dict[str, Any]:
    out = await trio.run_process([*CLI, "gateway", "status", url, "--json"], capture_stdout=True, check=False)
    return dict(json.loads(out.stdout))


async def test_sighup_reloads_status_shows_it_and_sigterm_stops_every_server_gracefully(
    tmp_path: Path, processes: set[int]
) -> None:
    eofs = {name: tmp_path / f"{name}.eof" for name in ("a", "b", "c")}

    def server(name: str) -> dict[str, Any]:
        return probe(name, env={"EOF_MARKER": str(eofs[name])})

    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": server("a"), "b": server("b")}}))
    changes = Changes()
    with trio.fail_after(TIMEOUT):
        async with gateway_process(path, processes, "--no-watch") as (gateway, url):
            fleet = children(gateway.pid)
            processes.update(fleet)
            assert len(fleet) == 2
            status = await status_of(url)
            assert status["ready"] is True
            assert {info["pid"] for info in status["servers"].values()} == fleet
            assert [info["state"] for info in status["servers"].values()] == ["connected", "connected"]
            plain = await trio.run_process([*CLI, "gateway", "status", url], capture_stdout=True)
            lines = plain.stdout.decode().splitlines()
            assert lines[0] == "ready: yes" and lines[1].startswith("a: connected  pid ")

            async with trio.open_nursery() as nursery:
                stream = await nursery.start(StreamableHttpTransport(url).run)
                async with open_session(stream, on_tools_changed=changes) as client:
                    assert not any(t.name.startswith("c__") for t in await client.list_all_tools())
                    path.write_text(
                        json.dumps({"mcpServers": {"a": server("a"), "b": server("b"), "c": server("c")}})
                    )
                    gateway.send_signal(signal.SIGHUP)
                    await changes.wait_beyond(0)
                    assert any(t.name == "c__pid" for t in await client.list_all_tools())
                    result = await client.call_tool("c__env", {"name": "EOF_MARKER"})
                    assert result.content[0].text == str(eofs["c"])
                nursery.cancel_scope.cancel()
            fleet = children(gateway.pid)
            processes.update(fleet)
            assert len(fleet) == 3

            gateway.send_signal(signal.SIGTERM)
            with trio.fail_after(15):
                assert await gateway.wait() == 0
        assert {name: mark.read_text() for name, mark in eofs.items()} == {"a": "eof", "b": "eof", "c": "eof"}
        assert await wait_gone(processes) == set()


async def test_run_stops_gracefully_on_sigterm(tmp_path: Path, processes: set[int]) -> None:
    server = await trio.lowlevel.open_process(
        [*CLI, "run", f"{PROBE}:app", "-t", "http", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        start_new_session=True,
    )
    processes.add(server.pid)
    try:
        with trio.fail_after(TIMEOUT):
            line = await _serving_line(server.stderr)
            assert "serving probe over http" in line
            server.send_signal(signal.SIGTERM)
            with trio.fail_after(15):
                assert await server.wait() == 0
    finally:
        if server.returncode is None:
            os.killpg(server.pid, signal.SIGKILL)
            with trio.move_on_after(10):
                await server.wait()
        await server.stderr.aclose()


async def test_gateway_workers_each_run_the_fleet_and_sigterm_stops_every_process(
    tmp_path: Path, processes: set[int]
) -> None:
    """``--workers 2``: each worker process runs its own gateway, so its own
    stdio servers; SIGTERM to the parent stops them all, status 0."""
    from tests.cli._served import call_modern, text

    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": probe("a")}}))
    with trio.fail_after(TIMEOUT * 2):
        async with gateway_process(path, processes, "--no-watch", "--workers", "2", "--stateless") as (
            gateway,
            url,
        ):
            workers = children(gateway.pid)
            processes.update(workers)
            assert len(workers) == 2
            servers = {pid for worker in workers for pid in children(worker)}
            processes.update(servers)
            assert len(servers) == 2  # one fleet per worker
            answer = await call_modern(url, "a__pid")
            assert int(text(answer)) in servers
            gateway.send_signal(signal.SIGTERM)
            with trio.fail_after(TIMEOUT):
                assert await gateway.wait() == 0
        assert await wait_gone(processes) == set()
