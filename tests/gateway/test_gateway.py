"""The gateway in front of real stdio servers: the fleet shown as one MCP
server, calls and reads routed back, a server killed mid-call, start
failures, list changes, and ``trio-mcp gateway -t http`` end to end.

The servers are the project's own: ``trio-mcp demo-server`` ("alpha": tools,
the ``review`` prompt, the ``demo://greeting/{name}`` template) and the
fault-injection server of ``tests/connections`` ("flaky": ``pid``, ``slow``,
``flaky://counter``; it logs every pid it starts to ``SPAWN_LOG``). Each test
writes its ``mcpServers`` file to ``tmp_path``; every process a test starts
is stopped by the test and checked gone (the ``processes`` fixture kills
survivors after a failure, and fails the test).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.connections.test_faults_stdio import FAST  # fast restarts, bounded waits

from trio_mcp.actors._client import open_session
from trio_mcp.gateway import ConfigError, GatewayStartError, ServerUnavailable, load_config, open_gateway
from trio_mcp.protocol import InvalidParams, McpError, PromptReference, ResourceTemplateReference
from trio_mcp.testing import connected
from trio_mcp.transports.http import StreamableHttpTransport

ROOT = Path(__file__).resolve().parents[2]
FLAKY = str(ROOT / "tests" / "connections" / "fixtures" / "flaky_server.py")
CLI = [sys.executable, "-m", "trio_mcp.cli"]
TIMEOUT = 20.0

STDIO = {"close_grace": 2.0, "term_grace": 0.3, "kill_timeout": 2.0, "eof_grace": 0.5}


# ------------------------------------------------------------------ helpers


def write_config(tmp_path: Path, *, flaky_env: dict[str, str] | None = None, **extra: Any) -> Path:
    servers: dict[str, Any] = {
        "alpha": {"command": sys.executable, "args": ["-m", "trio_mcp.cli", "demo-server"]},
        "flaky": {
            "command": sys.executable,
            "args": [FLAKY],
            "env": {"SPAWN_LOG": str(tmp_path / "flaky.pids"), **(flaky_env or {})},
        },
        "sleeping": {"command": "never-started", "disabled": True},
        **extra,
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


def spawned(tmp_path: Path) -> list[int]:
    try:
        return [int(line) for line in (tmp_path / "flaky.pids").read_text().split()]
    except FileNotFoundError:
        return []


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def children(parent: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == parent:
                found.add(int(entry.name))
    return found


def gone(pid: int) -> bool:
    stat = _stat(pid)
    return stat is None or stat[0] in ("Z", "X")


async def wait_gone(pids: set[int], timeout: float = 5.0) -> set[int]:
    """The pids still running after ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        while any(not gone(p) for p in pids):
            await trio.sleep(0.05)
    return {p for p in pids if not gone(p)}


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[set[int]]:
    """Pids the test saw (plus the flaky server's spawn log): none may be left running."""
    seen: set[int] = set()
    yield seen
    survivors = {p for p in seen | set(spawned(tmp_path)) if not gone(p)}
    for pid in survivors:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not survivors, f"processes left running: {survivors}"


async def pid_of_flaky(client: Any) -> int:
    result = await client.call_tool("flaky__pid")
    assert result.is_error is not True, result
    return int(result.structured_content["result"])


# ------------------------------------------------------- the fleet as one


async def test_the_fleet_is_one_server_with_prefixed_names_and_routed_reads(
    tmp_path: Path, processes: set[int]
) -> None:
    config = load_config(write_config(tmp_path))
    with trio.fail_after(TIMEOUT):
        async with open_gateway(config, settings=FAST, stdio_options=STDIO) as gateway:
            processes.update(children(os.getpid()))
            assert len(processes) == 2 and gateway.failed == {}
            async with connected(gateway, mode="bytes") as client:
                assert client.server_info.name == "trio-mcp-gateway"
                tools = [t.name for t in await client.list_all_tools()]
                assert tools[:5] == [
                    "alpha__add",
                    "alpha__forecast",
                    "alpha__countdown",
                    "alpha__haiku",
                    "alpha__echo",
                ]  # file order, then each server's own order
                assert {"flaky__pid", "flaky__echo", "flaky__slow"} <= set(tools[5:])
                assert all(name.startswith("flaky__") for name in tools[5:])

                added = await client.call_tool("alpha__add", {"a": 2, "b": 40})
                assert added.structured_content == {"result": 42}
                echoed = await client.call_tool("flaky__echo", {"text": "through the gateway"})
                assert echoed.content[0].text == "through the gateway"
                bad = await client.call_tool("alpha__add", {"a": "two"})  # the server's own isError
                assert bad.is_error is True and "Invalid arguments" in bad.content[0].text

                steps: list[float] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    steps.append(value)

                done = await client.call_tool("alpha__countdown", {"n": 3}, on_progress=progress)
                assert done.content[0].text == "liftoff" and steps == [1, 2, 3]  # progress forwarded

                (prompt,) = await client.list_all_prompts()
                assert prompt.name == "alpha__review"
                got = await client.get_prompt("alpha__review", {"code": "print(1)"})
                assert got.messages[0].content.text == "Please review this code:\nprint(1)"

                (resource,) = await client.list_all_resources()
                assert resource.uri == "gateway://flaky/flaky://counter"
                read = await client.read_resource(resource.uri)
                assert read.contents[0].uri == resource.uri and read.contents[0].text.isdigit()
                (template,) = await client.list_all_resource_templates()
                assert template.uri_template == "gateway://alpha/demo://greeting/{name}"
                greeting = await client.read_resource("gateway://alpha/demo://greeting/world")
                assert greeting.contents[0].text == "Hello, world!"
                assert greeting.contents[0].uri == "gateway://alpha/demo://greeting/world"

                completed = await client.complete(PromptReference(name="alpha__review"), "code", "pr")
                assert completed.completion.values == []  # routed: the demo has no completer for it
                with pytest.raises(InvalidParams, match="no server named 'nobody'"):
                    await client.complete(ResourceTemplateReference(uri="gateway://nobody/x://{y}"), "y", "")
    assert await wait_gone(processes) == set()


async def test_unknown_names_and_uris_are_typed_errors(tmp_path: Path, processes: set[int]) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_gateway(write_config(tmp_path), settings=FAST, stdio_options=STDIO) as gateway:
            processes.update(children(os.getpid()))
            async with connected(gateway, mode="bytes") as client:
                with pytest.raises(InvalidParams, match="no server named 'nobody'"):
                    await client.call_tool("nobody__echo", {})
                with pytest.raises(InvalidParams, match="gateway names are 'server__tool'"):
                    await client.call_tool("echo", {})
                with pytest.raises(InvalidParams, match="server 'alpha' has no tool 'nope'"):
                    await client.call_tool("alpha__nope", {})
                with pytest.raises(InvalidParams, match="unknown prompt 'review'"):
                    await client.get_prompt("review", {})
                with pytest.raises(McpError, match="not a gateway URI"):
                    await client.read_resource("flaky://counter")
                with pytest.raises(McpError, match="no server named 'ghost'"):
                    await client.read_resource("gateway://ghost/flaky://counter")
                # the gateway still serves after all that
                assert (await client.call_tool("flaky__echo", {"text": "ok"})).content[0].text == "ok"
    assert await wait_gone(processes) == set()


# --------------------------------------------------------------- failures


async def test_a_server_killed_mid_call_fails_that_call_at_once_then_serves_again(
    tmp_path: Path, processes: set[int]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_gateway(write_config(tmp_path), settings=FAST, stdio_options=STDIO) as gateway:
            processes.update(children(os.getpid()))
            async with connected(gateway, mode="bytes") as client, trio.open_nursery() as nursery:
                first = await pid_of_flaky(client)
                under_way = trio.Event()
                outcome: list[tuple[float, Any]] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    under_way.set()

                async def slow_call() -> None:
                    result = await client.call_tool("flaky__slow", {"seconds": 30}, on_progress=progress)
                    outcome.append((trio.current_time(), result))

                nursery.start_soon(slow_call)
                await under_way.wait()  # the server is inside the call
                killed_at = trio.current_time()
                os.kill(first, signal.SIGKILL)
                with trio.fail_after(3):
                    while not outcome:
                        await trio.sleep(0.01)
                at, result = outcome[0]
                assert at - killed_at < 2.0
                assert result.is_error is True
                assert "server 'flaky' is unavailable" in result.content[0].text, result.content[0].text
                # the supervised restart: a new process answers, the other server never noticed
                second = await pid_of_flaky(client)
                assert second != first and second in spawned(tmp_path)
                assert (await client.call_tool("alpha__add", {"a": 1, "b": 1})).structured_content == {
                    "result": 2
                }
            processes.update(children(os.getpid()))
    assert await wait_gone(processes) == set()


async def test_a_call_the_server_does_not_answer_in_time_is_an_error_result(
    tmp_path: Path, processes: set[int]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_gateway(
            write_config(tmp_path), settings=FAST, stdio_options=STDIO, request_timeout=0.5
        ) as gateway:
            processes.update(children(os.getpid()))
            async with connected(gateway, mode="bytes") as client:
                start = trio.current_time()
                result = await client.call_tool("flaky__slow", {"seconds": 10})
                assert trio.current_time() - start < 3.0
                assert result.is_error is True
                assert "did not answer tools/call 'flaky__slow' within 0.5 s" in result.content[0].text
                assert (await client.call_tool("flaky__echo", {"text": "still here"})).content[
                    0
                ].text == "still here"
    assert await wait_gone(processes) == set()


async def test_a_server_that_gives_up_is_a_typed_error_and_its_tools_go_away(
    tmp_path: Path, processes: set[int]
) -> None:
    # Up once; after a kill every new flaky process exits at start: the connection gives up.
    path = write_config(tmp_path, flaky_env={"EXIT_AT_START_AFTER": "1"})
    changes: list[str] = []
    changed = trio.Event()

    async def tools_changed() -> None:
        changes.append("tools")
        changed.set()

    with trio.fail_after(TIMEOUT):
        async with open_gateway(path, settings=FAST, stdio_options=STDIO) as gateway:
            processes.update(children(os.getpid()))
            async with connected(gateway, mode="bytes", on_tools_changed=tools_changed) as client:
                os.kill(await pid_of_flaky(client), signal.SIGKILL)
                with pytest.raises(McpError) as info:
                    await client.read_resource("gateway://flaky/flaky://counter")
                assert info.value.code == ServerUnavailable.code
                assert "server 'flaky' is unavailable" in info.value.message
                await changed.wait()  # notifications/tools/list_changed reached the client
                tools = [t.name for t in await client.list_all_tools()]
                assert tools and not any(t.startswith("flaky__") for t in tools)
                assert "flaky" not in gateway.host.servers
                assert (await client.call_tool("alpha__echo", {"text": "alive"})).content[0].text == "alive"
    assert len(spawned(tmp_path)) == FAST.start_retries + 2  # the first life, then each failed start
    assert await wait_gone(processes) == set()


async def test_a_server_that_cannot_start_is_left_out_unless_none_can(
    tmp_path: Path, processes: set[int]
) -> None:
    path = write_config(tmp_path, broken={"command": "definitely-not-a-command-xyz"})
    with trio.fail_after(TIMEOUT):
        async with open_gateway(path, settings=FAST, stdio_options=STDIO) as gateway:
            processes.update(children(os.getpid()))
            assert set(gateway.failed) == {"broken"}
            assert "definitely-not-a-command-xyz" in gateway.failed["broken"]
            assert set(gateway.host.servers) == {"alpha", "flaky"}
            async with connected(gateway, mode="bytes") as client:
                assert not any(t.name.startswith("broken__") for t in await client.list_all_tools())
        assert await wait_gone(processes) == set()

        only_broken = {
            "mcpServers": {
                "broken": {"command": "definitely-not-a-command-xyz"},
                "also": {"command": sys.executable, "args": [FLAKY], "env": {"EXIT_AT_START": "1"}},
            }
        }
        with pytest.raises(GatewayStartError) as info:
            async with open_gateway(only_broken, settings=FAST, stdio_options=STDIO):
                raise AssertionError("not reached")  # pragma: no cover
        assert set(info.value.failures) == {"broken", "also"}
        assert "exited with status 3" in info.value.failures["also"]
        with pytest.raises(ConfigError, match="no servers to start"):
            async with open_gateway({"mcpServers": {"off": {"command": "x", "disabled": True}}}):
                raise AssertionError("not reached")  # pragma: no cover


# --------------------------------------------------------------------- CLI


async def _serving_line(stderr: Any) -> str:
    """Read the server's stderr up to its "serving … at URL" line."""
    buffered = b""
    while True:
        for line in buffered.split(b"\n")[:-1]:
            if b"serving" in line:
                return line.decode()
        chunk = await stderr.receive_some()
        if not chunk:
            raise AssertionError(f"the gateway ended before serving: {buffered.decode()!r}")
        buffered += chunk


async def test_cli_gateway_over_http_end_to_end(tmp_path: Path, processes: set[int]) -> None:
    path = write_config(tmp_path)
    server = await trio.lowlevel.open_process(
        [*CLI, "gateway", str(path), "-t", "http", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        start_new_session=True,
    )
    processes.add(server.pid)
    try:
        with trio.fail_after(TIMEOUT):
            line = await _serving_line(server.stderr)
            assert "serving trio-mcp-gateway over http at http://127.0.0.1:" in line, line
            url = line.strip().rsplit(" ", 1)[-1]
            fleet = children(server.pid)
            processes.update(fleet)
            assert len(fleet) == 2
            async with trio.open_nursery() as nursery:
                stream = await nursery.start(StreamableHttpTransport(url).run)
                async with open_session(stream) as client:
                    names = {t.name for t in await client.list_all_tools()}
                    assert {"alpha__add", "flaky__pid"} <= names
                    added = await client.call_tool("alpha__add", {"a": 20, "b": 22})
                    assert added.structured_content == {"result": 42}
                    assert await pid_of_flaky(client) in fleet
                    read = await client.read_resource("gateway://alpha/demo://greeting/http")
                    assert read.contents[0].text == "Hello, http!"
                nursery.cancel_scope.cancel()
            server.send_signal(signal.SIGINT)  # a clean stop: the gateway stops its servers
            assert await server.wait() == 130
        assert await wait_gone(fleet) == set()
    finally:
        if server.returncode is None:
            os.killpg(server.pid, signal.SIGKILL)
            with trio.move_on_after(10):
                await server.wait()
        await server.stderr.aclose()


def test_cli_gateway_with_a_bad_config_says_where_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"files": {"args": ["x"]}}}))
    out = subprocess.run(
        [*CLI, "gateway", str(path)], check=False, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 1
    assert out.stderr.startswith(f"trio-mcp: {path}:1: mcpServers.files.command: missing"), out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1
