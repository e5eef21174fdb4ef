"""Tasks over stdio: a trio-mcp client and a trio-mcp server in a child
process (``fixtures/tasks_server.py``: a small store, 500 ms default TTL).
Lifecycle, a task's question answered while it is ``input_required``,
a failed task, cancellation, expiry and the store bound. Isolation between
sessions is tested over memory and HTTP (a stdio server has one session)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.protocol import ElicitRequestParams, ElicitResult, InvalidParams, McpError
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

SERVER = Path(__file__).parent / "fixtures" / "tasks_server.py"
TIMEOUT = 20.0
#: Bound of the wait for a task to expire (its TTL is 500 ms).
EXPIRY_WAIT = 5.0


async def accept(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"ok": True})


@asynccontextmanager
async def stdio_client(max_tasks: int = 2) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER), str(max_tasks)], close_grace=1.0, term_grace=1.0
    )
    async with trio.open_nursery() as nursery:
        stream = await nursery.start(StdioTransport(params).run)
        try:
            async with open_session(stream, elicitation_handler=accept) as client:
                yield client
        finally:
            with trio.move_on_after(5, shield=True):
                await stream.aclose()


async def test_lifecycle_input_failure_and_cancel() -> None:
    with trio.fail_after(TIMEOUT):
        async with stdio_client(max_tasks=10) as client:
            info = await client.tasks.call_tool("slow", {"seconds": 0.1}, ttl_ms=10_000)
            assert info.ttl_ms == 10_000
            assert (await client.tasks.result(info.task_id)).content[0].text == "slept 0.1"
            seen: list[str] = []
            answered = await client.tasks.run_tool(
                "confirm", {}, ttl_ms=10_000, on_status=lambda i: seen.append(i.status)
            )
            assert answered.content[0].text == "answered accept" and seen[-1] == "completed"
            broken = await client.tasks.call_tool("broken", {}, ttl_ms=10_000)
            assert (await client.tasks.wait(broken.task_id)).status == "failed"
            with pytest.raises(McpError, match="broken on purpose"):
                await client.tasks.result(broken.task_id)


async def test_cancel_expiry_and_store_bound() -> None:
    with trio.fail_after(TIMEOUT):
        async with stdio_client() as client:
            first = await client.tasks.call_tool("slow", {"seconds": 1000}, ttl_ms=60_000)
            short = await client.tasks.call_tool("slow", {"seconds": 1000})  # default TTL: 500 ms
            with pytest.raises(McpError, match="task store holds 2 tasks"):
                await client.tasks.call_tool("slow", {"seconds": 0})
            await client.tasks.cancel(first.task_id)
            assert (await client.tasks.get(first.task_id)).status == "cancelled"
            with trio.fail_after(EXPIRY_WAIT):  # the short one expires: gone, and its room free
                while True:
                    try:
                        await client.tasks.get(short.task_id)
                    except InvalidParams:
                        break
                    await trio.sleep(0.05)
            assert (await client.tasks.call_tool("slow", {"seconds": 0})).status == "working"
            assert first.task_id in {t.task_id for t in await client.tasks.list_tasks()}


async def test_a_task_call_in_the_opening_burst_runs_as_a_task() -> None:
    """initialize, initialized and a task-augmented call written at once,
    before the server reads: its reader serves the whole burst in one turn,
    so the session's task nursery must be there before the reader starts
    (it once was set after, and the call failed with "no task nursery")."""
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    burst = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 0}, "task": {"ttl": 10_000}},
        },
    ]
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        with trio.fail_after(TIMEOUT):
            await process.stdin.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in burst))
            seen = b""
            answers: dict[int, Any] = {}
            while len(answers) < 2:  # the answers to 1 and 2; a task's notifications may come first
                chunk = await process.stdout.receive_some()
                assert chunk, f"the server exited after {seen!r}"
                seen += chunk
                lines = seen.split(b"\n")[:-1]  # the complete ones
                answers = {m["id"]: m for m in map(json.loads, lines) if "id" in m}
        assert "error" not in answers[2], answers[2]
        assert answers[2]["result"]["task"]["status"] == "working"
    finally:
        with trio.CancelScope(shield=True):
            process.kill()
            await process.wait()
