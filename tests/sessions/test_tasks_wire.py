"""Every message of a task session validates against the 2025-11-25 schema
(the version that defines tasks), in each memory mode: task-augmented
``tools/call`` and its ``CreateTaskResult``, ``tasks/get``, ``tasks/result``
(with the related-task ``_meta``), ``tasks/list``, ``tasks/cancel``, an error
answer to each, ``notifications/tasks/status``, and a task that asks the
client for input. Older versions never see the ``tasks`` capability."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp.protocol import (
    HANDSHAKE_VERSIONS,
    META_RELATED_TASK,
    V2025_11_25,
    ElicitRequestParams,
    ElicitResult,
    InvalidParams,
    MethodNotFound,
)
from trio_mcp.server import Context, MCPServer

from .conftest import TIMEOUT, Inbox

TASK_METHODS = {
    ("client", "request", "tools/call"),
    ("client", "request", "tasks/get"),
    ("client", "request", "tasks/result"),
    ("client", "request", "tasks/list"),
    ("client", "request", "tasks/cancel"),
    ("server", "notification", "notifications/tasks/status"),
    ("server", "request", "elicitation/create"),
}


def task_app() -> MCPServer:
    app = MCPServer("tasks-wire", tasks=True)

    @app.tool(task_support="optional")
    async def slow(seconds: float) -> str:
        await trio.sleep(seconds)
        return f"slept {seconds}"

    @app.tool(task_support="required")
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return answer.action

    @app.tool
    def plain() -> str:
        return "plain"

    return app


async def accept(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"ok": True})


@pytest.mark.parametrize("version", [V2025_11_25])
async def test_every_task_message_validates(connect: Any, version: str, mode: str) -> None:
    notes = Inbox()

    async def on_note(method: str, params: Any) -> None:
        if method == "notifications/tasks/status":
            await notes(params)

    with trio.fail_after(TIMEOUT):
        async with connect(task_app(), elicitation_handler=accept, on_notification=on_note) as conn:
            client = conn.client
            tools = {t.name: t for t in await client.list_all_tools()}
            assert tools["confirm"].execution.task_support == "required"
            info = await client.tasks.call_tool("slow", {"seconds": 0.05}, ttl_ms=30_000)
            assert info.ttl_ms == 30_000
            await client.tasks.get(info.task_id)
            result = await client.tasks.result(info.task_id)
            assert result.meta[META_RELATED_TASK] == {"taskId": info.task_id}
            assert len(await client.tasks.list_tasks()) == 1
            assert (await client.tasks.run_tool("confirm", {})).content[0].text == "accept"
            long = await client.tasks.call_tool("slow", {"seconds": 1000})
            await client.tasks.cancel(long.task_id)
            with pytest.raises(InvalidParams):
                await client.tasks.cancel(long.task_id)
            with pytest.raises(InvalidParams):
                await client.tasks.result(long.task_id)
            with pytest.raises(InvalidParams):
                await client.tasks.get("unknown")
            with pytest.raises(MethodNotFound):
                await client.call_tool("confirm", {})
            await notes.wait_for(5)  # completed, input_required, working, completed, cancelled
            wire = conn.wire
        sent = {
            (s.side, "request" if s.is_request else "notification", s.method)
            for s in wire.sent
            if s.method is not None and s.checked
        }
        assert sent >= TASK_METHODS
        created = [
            wire.response_to("server", r)
            for r in wire.requests("client", "tools/call")
            if "task" in (r.get("params") or {})
        ]
        assert all("task" in (answer or {}).get("result", {}) for answer in created)
        assert len(created) == 3


@pytest.mark.parametrize("version", [v for v in HANDSHAKE_VERSIONS if v < V2025_11_25])
async def test_older_versions_see_no_tasks_capability(connect: Any, version: str, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(task_app()) as conn:
            assert conn.client.server_capabilities.tasks is msgspec_unset()
            assert conn.wire.capabilities("server").get("tasks") is None


def msgspec_unset() -> Any:
    import msgspec

    return msgspec.UNSET
