"""The gateway's fleet over time, with real processes: hot reloads (add,
remove, change, filters only, a broken file, a file that fails validation),
servers that fail at start or go away and always come back (stdio and a
remote server on the same port), status, and prompt/resource filters.

The stdio servers are ``fixtures/probe_server.py``; the remote one an
in-process :class:`HttpServer` on 127.0.0.1. The gateway watches its file
every 50 ms; each reload is awaited through ``Fleet.wait_reloads``, never a
sleep. Every process a test starts is checked gone at its end.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from msgspec import Raw
from msgspec.json import decode
from tests.connections.test_faults_stdio import FAST
from tests.gateway.test_dialects import PROBE, remote_app
from tests.gateway.test_gateway import STDIO, children, processes, wait_gone

from trio_mcp.actors._connection import Connection
from trio_mcp.gateway import STATUS_URI, Gateway, open_gateway
from trio_mcp.protocol import InvalidParams, McpError
from trio_mcp.serving.http import HttpServer
from trio_mcp.testing import connected
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

__all__ = ["processes"]

#: The gateway's policy (never give up) with fast restarts for tests.
FOREVER = attrs.evolve(FAST, retry_forever=True, reconnect_wait=2.0)
TIMEOUT = 30.0
PY = sys.executable


def probe(name: str = "probe", **extra: Any) -> dict[str, Any]:
    return {"command": PY, "args": [PROBE, "--name", name], **extra}


def write(path: Path, servers: dict[str, Any]) -> None:
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))


async def pid_of(client: Any, server: str) -> int:
    result = await client.call_tool(f"{server}__pid", {})
    assert result.is_error is not True, result
    return int(result.structured_content["result"])


async def env_of(client: Any, server: str, name: str) -> str:
    result = await client.call_tool(f"{server}__env", {"name": name})
    return str(result.content[0].text)


async def tool_names(client: Any) -> set[str]:
    return {t.name for t in await client.list_all_tools()}


class Changes:
    """``notifications/tools/list_changed`` seen by a client, awaitable."""

    def __init__(self) -> None:
        self.count = 0
        self._event = trio.Event()

    async def __call__(self) -> None:
        self.count += 1
        self._event.set()
        self._event = trio.Event()

    async def wait_beyond(self, count: int) -> None:
        while self.count <= count:
            await self._event.wait()


# ------------------------------------------------------------------ reloads


async def test_a_reload_adds_removes_restarts_and_updates_and_leaves_the_rest_alone(
    tmp_path: Path, processes: set[int]
) -> None:
    path = tmp_path / "mcp.json"
    write(
        path,
        {
            "keep": probe("keep"),
            "gone": probe("gone"),
            "change": probe("change", env={"V": "1"}),
            "filtered": probe("filtered"),
        },
    )
    changes = Changes()
    with trio.fail_after(TIMEOUT):
        async with open_gateway(path, settings=FOREVER, stdio_options=STDIO, watch=0.05) as gateway:
            processes.update(children(os.getpid()))
            assert len(processes) == 4
            async with (
                connected(gateway, mode="bytes", on_tools_changed=changes) as client,
                trio.open_nursery() as calls,
            ):
                before = {name: await pid_of(client, name) for name in ("keep", "gone", "change", "filtered")}
                # A call in flight on the untouched server, across the reload.
                under_way = trio.Event()
                outcome: list[Any] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    under_way.set()

                async def slow_call() -> None:
                    outcome.append(
                        await client.call_tool("keep__slow", {"seconds": 60}, on_progress=progress)
                    )

                calls.start_soon(slow_call)
                await under_way.wait()
                seen = changes.count

                write(
                    path,
                    {
                        "keep": probe("keep"),
                        "change": probe("change", env={"V": "2"}),
                        "filtered": probe("filtered", excludeTools=["delete_*", "write_note"]),
                        "new": probe("new"),
                    },
                )
                done = await gateway.fleet.wait_reloads(1)
                assert done.error is None, done.error
                assert (done.added, done.removed, done.restarted, done.updated) == (
                    ("new",),
                    ("gone",),
                    ("change",),
                    ("filtered",),
                )
                await changes.wait_beyond(seen)  # the client was told
                names = await tool_names(client)
                assert "new__pid" in names and not any(n.startswith("gone__") for n in names)
                assert "filtered__delete_note" not in names and "filtered__write_note" not in names
                assert "filtered__read_notes" in names
                with pytest.raises(InvalidParams, match="has no tool 'delete_note'"):
                    await client.call_tool("filtered__delete_note", {})

                # removed: stopped and gone; changed: a new process with the new env
                assert await wait_gone({before["gone"]}) == set()
                assert await pid_of(client, "keep") == before["keep"]
                assert await pid_of(client, "filtered") == before["filtered"]  # filters only: no restart
                assert await pid_of(client, "change") != before["change"]
                assert await env_of(client, "change", "V") == "2"
                assert outcome == []  # the call on the untouched server is still under way
                processes.update(children(os.getpid()))

                # A broken file, then one that fails validation: nothing changes.
                alive = {name: await pid_of(client, name) for name in ("keep", "change", "filtered", "new")}
                path.write_text('{\n  "mcpServers": {\n    "keep": {"command": }\n  }\n}\n')
                broken = await gateway.fleet.wait_reloads(2)
                assert broken.error is not None and f"{path}:3: not valid JSON" in broken.error, broken.error
                write(path, {"keep": probe("keep"), "bad": {"command": PY, "args": [PROBE, 7]}})
                invalid = await gateway.fleet.wait_reloads(3)
                lines = path.read_text().splitlines()
                line = next(
                    i
                    for i, text in enumerate(lines, 1)
                    if '"args"' in text and i > lines.index('    "bad": {')
                )
                assert (
                    invalid.error
                    == f"{path}:{line}: mcpServers.bad.args[1]: must be a string, not a number (7)"
                )
                assert {name: await pid_of(client, name) for name in alive} == alive
                assert children(os.getpid()) == set(alive.values())  # nothing started, nothing stopped
                assert outcome == []
                calls.cancel_scope.cancel()
    assert await wait_gone(processes) == set()


async def test_sighup_style_reload_request_and_the_status(tmp_path: Path, processes: set[int]) -> None:
    path = tmp_path / "mcp.json"
    write(path, {"one": probe("one", includeTools=["pid", "env"])})
    with trio.fail_after(TIMEOUT):
        async with open_gateway(path, settings=FOREVER, stdio_options=STDIO) as gateway:
            processes.update(children(os.getpid()))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(gateway.fleet.watch, 3600.0)  # only a request wakes it
                async with connected(gateway, mode="bytes") as client:
                    status = gateway.status()
                    one = status["servers"]["one"]
                    assert status["ready"] is True
                    assert one["state"] == "connected" and one["pid"] in processes
                    assert one["tools"] == ["env", "pid"] and one["restarts"] == 0
                    assert one["last_error"] is None and one["uptime"] >= 0
                    read = await client.read_resource(STATUS_URI)  # the same, for remote readers
                    assert json.loads(read.contents[0].text)["servers"]["one"]["pid"] == one["pid"]

                    write(path, {"one": probe("one"), "two": probe("two")})
                    gateway.fleet.request_reload()
                    done = await gateway.fleet.wait_reloads(1)
                    assert done.added == ("two",) and done.updated == ("one",)
                    await gateway.host.servers["two"].wait_connected()
                    processes.update(children(os.getpid()))
                    assert set(gateway.status()["servers"]) == {"one", "two"}
                    assert len(gateway.status()["servers"]["one"]["tools"]) == 8
                nursery.cancel_scope.cancel()
    assert await wait_gone(processes) == set()


# ----------------------------------------------------------- always back


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def remote_on(port: int) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        await nursery.start(HttpServer(remote_app(), host="127.0.0.1", port=port, path="/mcp").run)
        yield
        nursery.cancel_scope.cancel()


async def test_a_remote_server_down_at_start_and_later_always_comes_back_on_its_port() -> None:
    port = free_port()
    config = {"mcpServers": {"remote": {"url": f"http://127.0.0.1:{port}/mcp"}}}
    changes = Changes()
    with trio.fail_after(TIMEOUT):
        async with open_gateway(config, settings=FOREVER) as gateway:
            conn = gateway.host.servers["remote"]
            assert "remote" in gateway.failed and conn.state == "down"
            status = gateway.status()["servers"]["remote"]
            assert status["state"] == "down" and status["url"] == f"http://127.0.0.1:{port}/mcp"
            assert "start failed" in status["last_error"] and gateway.status()["ready"] is False
            async with connected(gateway, mode="bytes", on_tools_changed=changes) as client:
                failed = await client.call_tool("remote__where", {})  # at once, with the reason
                assert failed.is_error is True
                assert "server 'remote' is unavailable: start failed" in failed.content[0].text

                async with remote_on(port):
                    await changes.wait_beyond(0)  # connected: its tools appeared
                    assert (await client.call_tool("remote__where", {})).content[0].text == "remote"
                    assert gateway.status()["ready"] is True and "remote" not in gateway.failed
                # The server is gone: the next call fails at once and the server stays configured.
                lost = await client.call_tool("remote__where", {})
                assert lost.is_error is True and "server 'remote' is unavailable" in lost.content[0].text
                assert "remote" in gateway.host.servers
                with trio.fail_after(10):
                    while conn.state != "down":  # the reconnect attempts fail while it is away
                        await conn.wait_changed()
                again = await client.call_tool("remote__where", {})
                assert again.is_error is True and "retrying" in again.content[0].text
                async with remote_on(port):  # back on the same port: reconnected, never removed
                    await conn.wait_connected()
                    assert (await client.call_tool("remote__where", {})).content[0].text == "remote"
                    assert gateway.status()["servers"]["remote"]["restarts"] >= 2


async def test_a_stdio_server_that_fails_at_start_is_retried_until_it_starts(
    tmp_path: Path, processes: set[int]
) -> None:
    block = tmp_path / "block"
    block.write_text("not yet")
    starter = (
        "import os, sys\n"
        f"if os.path.exists({str(block)!r}):\n"
        "    print('blocked', file=sys.stderr); sys.exit(3)\n"
        f"os.execv({PY!r}, [{PY!r}, {PROBE!r}, '--name', 'late'])\n"
    )
    config = {"mcpServers": {"late": {"command": PY, "args": ["-c", starter]}, "early": probe("early")}}
    with trio.fail_after(TIMEOUT):
        async with open_gateway(config, settings=FOREVER, stdio_options=STDIO) as gateway:
            late = gateway.host.servers["late"]
            assert late.state == "down" and "exited with status 3" in (late.last_error or "")
            assert gateway.host.servers["early"].connected  # one server's failures never stop another
            block.unlink()
            await late.wait_connected()
            processes.update(children(os.getpid()))
            async with connected(gateway, mode="bytes") as client:
                assert await pid_of(client, "late") in processes
                assert gateway.status()["servers"]["late"]["restarts"] >= 1
    assert await wait_gone(processes) == set()


# ------------------------------------------------------------------ filters


async def test_prompt_and_resource_filters_hide_and_refuse(processes: set[int]) -> None:
    config = {
        "mcpServers": {
            "p": probe(
                "p", excludePrompts=["internal"], includeResources=["probe://public", "probe://item/*"]
            )
        }
    }
    with trio.fail_after(TIMEOUT):
        async with open_gateway(config, settings=FOREVER, stdio_options=STDIO) as gateway:
            assert isinstance(gateway, Gateway)
            processes.update(children(os.getpid()))
            async with connected(gateway, mode="bytes") as client:
                assert [p.name for p in await client.list_all_prompts()] == ["p__greet"]
                with pytest.raises(InvalidParams, match="has no prompt 'internal'"):
                    await client.get_prompt("p__internal", {})
                got = await client.get_prompt("p__greet", {"name": "fleet"})
                assert got.messages[0].content.text == "Hello, fleet!"
                assert [r.uri for r in await client.list_all_resources()] == ["gateway://p/probe://public"]
                templates = await client.list_all_resource_templates()
                assert [t.uri_template for t in templates] == ["gateway://p/probe://item/{id}"]
                assert (await client.read_resource("gateway://p/probe://item/7")).contents[0].text == "item 7"
                with pytest.raises(McpError, match="Resource not found"):
                    await client.read_resource("gateway://p/probe://private")
    assert await wait_gone(processes) == set()


# ------------------------------------------------------------- forwarding


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_a_forwarded_call_passes_raw_json_both_ways_in_either_era(
    era: str, processes: set[int]
) -> None:
    params = StdioServerParameters(command=PY, args=(PROBE,), name="probe", **STDIO)
    conn = Connection(lambda: StdioTransport(params), name="probe", settings=FOREVER, era=era)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(conn.run)
            await conn.wait_connected()
            processes.update(children(os.getpid()))
            session = await conn.session()
            assert session.era == era
            answer = await conn.forward("tools/call", Raw(b'{"name":"env","arguments":{"name":"HOME"}}'))
            assert type(answer) is Raw  # undecoded: what the server sent
            assert decode(answer)["content"][0]["text"] == os.environ.get("HOME", "")
            nursery.cancel_scope.cancel()
    assert await wait_gone(processes) == set()
