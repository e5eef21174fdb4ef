"""Tasks over Streamable HTTP (a real hypercorn on 127.0.0.1, port 0), both
eras: a task outlives the POST that created it (stateless era: the server
lends its own nursery), cancellation, isolation between sessions, the store
bound, and questions a task parks answered through ``tasks/update``; the
``Mcp-Name`` header of the ``tasks/*`` methods carries the task id."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio

from trio_mcp.actors import MemoryTaskStore, TaskRuntime
from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.protocol import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    TASKS_EXTENSION_ID,
    ElicitRequestParams,
    ElicitResult,
    InvalidParams,
    McpError,
)
from trio_mcp.server import Context, MCPServer
from trio_mcp.serving.http import HttpServer
from trio_mcp.transports.http import StreamableHttpTransport

TIMEOUT = 15.0
ERAS = ("handshake", "modern")


def make_app(state: dict[str, Any]) -> MCPServer:
    app = MCPServer("http-tasks", tasks=TaskRuntime(MemoryTaskStore(max_tasks=3)))

    @app.tool(task_support="optional")
    async def slow(seconds: float, label: str = "") -> str:
        try:
            await trio.sleep(seconds)
        finally:
            state.setdefault("ended", []).append(label)
        return f"done {label}"

    @app.tool(task_support="required")
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return f"answered {answer.action}"

    return app


async def accept(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"ok": True})


@asynccontextmanager
async def serving(app: MCPServer) -> AsyncIterator[str]:
    server = HttpServer(app, retry_interval=0.05)
    async with trio.open_nursery() as nursery:
        info = await nursery.start(server.run)
        try:
            yield info.url
        finally:
            server.stop()


@asynccontextmanager
async def client_at(url: str, era: str) -> AsyncIterator[ClientSession]:
    async with trio.open_nursery() as nursery:
        stream = await nursery.start(StreamableHttpTransport(url, default_retry=0.05, max_reconnects=3).run)
        try:
            async with open_session(stream, era=era, elicitation_handler=accept) as client:
                yield client
        finally:
            with trio.move_on_after(5, shield=True):
                await stream.aclose()


@pytest.mark.parametrize("era", ERAS)
async def test_task_lifecycle_cancel_and_input(era: str) -> None:
    state: dict[str, Any] = {}
    with trio.fail_after(TIMEOUT):
        async with serving(make_app(state)) as url, client_at(url, era) as client:
            assert client.era == era
            info = await client.tasks.call_tool("slow", {"seconds": 0.2, "label": "quick"})
            assert info.status == "working"  # answered before the work ended
            result = await client.tasks.result(info.task_id)
            assert result.content[0].text == "done quick"
            assert (await client.tasks.get(info.task_id)).status == "completed"

            long = await client.tasks.call_tool("slow", {"seconds": 1000, "label": "long"})
            await client.tasks.cancel(long.task_id)
            assert (await client.tasks.get(long.task_id)).status == "cancelled"
            while "long" not in state.get("ended", []):
                await trio.sleep(0.01)

            statuses: list[str] = []
            answered = await client.tasks.run_tool(
                "confirm", {}, on_status=lambda i: statuses.append(i.status)
            )
            assert answered.content[0].text == "answered accept"
            assert statuses[-1] == "completed"


@pytest.mark.parametrize("era", ERAS)
async def test_store_bound_over_http(era: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(make_app({})) as url, client_at(url, era) as client:
            kept = [await client.tasks.call_tool("slow", {"seconds": 1000}) for _ in range(3)]
            with pytest.raises(McpError, match="task store holds 3 tasks"):
                await client.tasks.call_tool("slow", {"seconds": 1000})
            for info in kept:  # nothing lost, each still cancellable
                assert (await client.tasks.get(info.task_id)).status == "working"
                await client.tasks.cancel(info.task_id)


async def test_http_sessions_do_not_see_each_others_tasks() -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(make_app({})) as url, client_at(url, "handshake") as alice:
            async with client_at(url, "handshake") as bob:
                mine = await alice.tasks.call_tool("slow", {"seconds": 1000})
                for attempt in (bob.tasks.get, bob.tasks.cancel):
                    with pytest.raises(InvalidParams, match="Unknown task"):
                        await attempt(mine.task_id)
                assert await bob.tasks.list_tasks() == []
            await alice.tasks.cancel(mine.task_id)


async def test_task_methods_mirror_the_task_id_in_mcp_name() -> None:
    """Stateless era: tasks/get with a Mcp-Name that is not the body's taskId is refused (400, -32020)."""
    with trio.fail_after(TIMEOUT):
        async with serving(make_app({})) as url, client_at(url, "modern") as client:
            info = await client.tasks.call_tool("slow", {"seconds": 1000})
            meta = {
                META_PROTOCOL_VERSION: "2026-07-28",
                META_CLIENT_CAPABILITIES: {"extensions": {TASKS_EXTENSION_ID: {}}},
            }
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tasks/get",
                "params": {"taskId": info.task_id, "_meta": meta},
            }
            headers = {
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tasks/get",
            }
            async with httpx.AsyncClient() as http:
                good = await http.post(url, json=body, headers={**headers, "Mcp-Name": info.task_id})
                bad = await http.post(url, json=body, headers={**headers, "Mcp-Name": "another-task"})
            assert good.status_code == 200 and good.json()["result"]["taskId"] == info.task_id
            assert bad.status_code == 400 and bad.json()["error"]["code"] == -32020
            await client.tasks.cancel(info.task_id)
