"""Tasks over in-memory pairs, both eras and both memory modes: lifecycle,
expiry, cancellation, isolation between sessions / principals, store bounds,
required task support, and input the task parks (stateless era)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from trio_mcp.actors import MemoryTaskStore, TaskRuntime, TaskStoreFull
from trio_mcp.protocol import (
    TASKS_EXTENSION_ID,
    ElicitRequestParams,
    ElicitResult,
    InternalError,
    InvalidParams,
    McpError,
    MethodNotFound,
    MissingClientCapability,
    TaskStatusNotificationParams,
    coerce,
)
from trio_mcp.server import Context, MCPServer
from trio_mcp.testing import connected

TIMEOUT = 10

ERAS = ["handshake", "modern"]
MODES = ["zero-copy", "bytes"]


def make_app(runtime: TaskRuntime | None = None, state: dict[str, Any] | None = None) -> MCPServer:
    app = MCPServer("tasks", tasks=runtime if runtime is not None else True)
    state = state if state is not None else {}

    @app.tool(task_support="optional")
    async def slow(seconds: float, label: str = "") -> str:
        try:
            await trio.sleep(seconds)
        finally:
            state.setdefault("ended", []).append(label)
        return f"slept {seconds} {label}".strip()

    @app.tool(task_support="required")
    async def only_task(ctx: Context) -> str:
        assert ctx.task is not None
        return f"in task {ctx.task.task_id}"

    @app.tool(task_support="optional")
    async def tool_error() -> str:
        raise RuntimeError("boom")

    @app.tool(task_support="optional")
    async def protocol_error() -> str:
        raise InternalError("the backend is gone")

    @app.tool(task_support="optional")
    async def two_questions(ctx: Context) -> str:
        names: list[str] = []

        async def ask(question: str) -> None:
            result = await ctx.elicit(
                question, {"type": "object", "properties": {"name": {"type": "string"}}}
            )
            names.append(str((result.content or {}).get("name")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "first?")
            nursery.start_soon(ask, "second?")
        return " ".join(sorted(names))

    @app.tool(inline=True)
    def plain() -> str:
        return "plain"

    return app


async def name_it(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": params.message.rstrip("?")})


@asynccontextmanager
async def client_of(app: MCPServer, era: str, mode: str, **options: Any) -> AsyncIterator[Any]:
    options.setdefault("elicitation_handler", name_it)
    async with connected(app, mode=mode, era=era, **options) as client:  # type: ignore[arg-type]
        yield client


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_lifecycle(era: str, mode: str) -> None:
    statuses: list[str] = []

    async def on_note(method: str, params: Any) -> None:
        if method == "notifications/tasks/status":
            statuses.append(coerce(params, TaskStatusNotificationParams).status)

    with trio.fail_after(TIMEOUT):
        async with client_of(make_app(), era, mode, on_notification=on_note) as client:
            info = await client.tasks.call_tool("slow", {"seconds": 0.2, "label": "a"})
            assert info.status == "working" and info.ttl_ms and info.poll_interval_ms
            assert (await client.tasks.get(info.task_id)).status == "working"
            result = await client.tasks.result(info.task_id)
            assert text(result) == "slept 0.2 a"
            done = await client.tasks.get(info.task_id)
            assert done.status == "completed"
            if era == "modern":
                assert done.result is not None and text(done.result) == "slept 0.2 a"
            else:
                # the result survives the request that started it: fetched again
                assert text(await client.tasks.result(info.task_id)) == "slept 0.2 a"
                with trio.fail_after(TIMEOUT):
                    while "completed" not in statuses:
                        await trio.sleep(0.01)
            # run_tool: the whole round trip, status reported on the way
            seen: list[str] = []
            result = await client.tasks.run_tool("only_task", {}, on_status=lambda i: seen.append(i.status))
            assert text(result).startswith("in task ") and seen[-1] == "completed"
            # a plain call of an optional tool runs without a task
            assert text(await client.call_tool("slow", {"seconds": 0, "label": "sync"})) == "slept 0.0 sync"


async def test_tool_errors_and_protocol_errors(era: str, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with client_of(make_app(), era, mode) as client:
            failed_tool = await client.tasks.run_tool("tool_error", {})
            assert failed_tool.is_error is True and "boom" in text(failed_tool)
            info = await client.tasks.call_tool("protocol_error", {})
            end = await client.tasks.wait(info.task_id)
            assert end.status == "failed"
            with pytest.raises(McpError, match="the backend is gone"):
                await client.tasks.result(info.task_id)


async def test_required_task_support(era: str, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with client_of(make_app(), era, mode) as client:
            expected = MissingClientCapability if era == "modern" else MethodNotFound
            with pytest.raises(expected) as excinfo:
                await client.call_tool("only_task", {})
            if era == "modern":
                assert excinfo.value.data == {
                    "requiredCapabilities": {"extensions": {TASKS_EXTENSION_ID: {}}}
                }
            tools = {t.name: t for t in await client.list_all_tools()}
            assert tools["only_task"].execution.task_support == "required"
            assert tools["plain"].execution is msgspec_unset()


def msgspec_unset() -> Any:
    import msgspec

    return msgspec.UNSET


async def test_cancellation(era: str, mode: str) -> None:
    state: dict[str, Any] = {}
    with trio.fail_after(TIMEOUT):
        async with client_of(make_app(state=state), era, mode) as client:
            info = await client.tasks.call_tool("slow", {"seconds": 1000, "label": "long"})
            await client.tasks.cancel(info.task_id)
            assert (await client.tasks.get(info.task_id)).status == "cancelled"
            while "long" not in state.get("ended", []):  # the work itself was cancelled
                await trio.sleep(0.01)
            if era == "handshake":
                with pytest.raises(InvalidParams, match="already cancelled"):
                    await client.tasks.cancel(info.task_id)
                with pytest.raises(InvalidParams, match="cancelled"):
                    await client.tasks.result(info.task_id)
            else:
                await client.tasks.cancel(info.task_id)  # idempotent
            with pytest.raises(InvalidParams, match="Unknown task"):
                await client.tasks.get("no-such-task")


async def test_caller_cancelled_cancels_the_task(era: str, mode: str) -> None:
    state: dict[str, Any] = {}
    app = make_app(state=state)
    with trio.fail_after(TIMEOUT):
        async with client_of(app, era, mode) as client:
            with trio.move_on_after(0.3):
                await client.tasks.run_tool("slow", {"seconds": 1000, "label": "abandoned"})
            while "abandoned" not in state.get("ended", []):
                await trio.sleep(0.01)
            assert app.tasks is not None
            store = app.tasks.store
            assert isinstance(store, MemoryTaskStore)
            assert store.statistics()["live"] == 0


async def test_expiry(era: str, mode: str, autojump_clock: Any) -> None:
    state: dict[str, Any] = {}
    runtime = TaskRuntime(default_ttl_ms=1000, max_ttl_ms=5000)
    with trio.fail_after(TIMEOUT):
        async with client_of(make_app(runtime, state), era, mode) as client:
            done = await client.tasks.call_tool("slow", {"seconds": 0.1, "label": "quick"})
            running = await client.tasks.call_tool("slow", {"seconds": 100, "label": "too-long"})
            await trio.sleep(0.5)
            assert (await client.tasks.get(done.task_id)).status == "completed"  # kept within its TTL
            await trio.sleep(1)
            for task_id in (done.task_id, running.task_id):
                with pytest.raises(InvalidParams, match="Unknown task"):
                    await client.tasks.get(task_id)
            assert "too-long" in state["ended"]  # an expired task's work is stopped
            if era == "handshake":  # a longer TTL asked for is honoured (up to max_ttl_ms)
                kept = await client.tasks.call_tool("slow", {"seconds": 0, "label": "kept"}, ttl_ms=3000)
                assert kept.ttl_ms == 3000
                await trio.sleep(2)
                assert (await client.tasks.get(kept.task_id)).status == "completed"
                capped = await client.tasks.call_tool("slow", {"seconds": 0}, ttl_ms=10**9)
                assert capped.ttl_ms == 5000


async def test_store_bound(era: str, mode: str, autojump_clock: Any) -> None:
    runtime = TaskRuntime(MemoryTaskStore(max_tasks=2), default_ttl_ms=1000)
    with trio.fail_after(TIMEOUT):
        async with client_of(make_app(runtime), era, mode) as client:
            first = await client.tasks.call_tool("slow", {"seconds": 100})
            await client.tasks.call_tool("slow", {"seconds": 0})
            with pytest.raises(McpError, match="task store holds 2 tasks") as excinfo:
                await client.tasks.call_tool("slow", {"seconds": 0})
            assert excinfo.value.code == TaskStoreFull.code and excinfo.value.data == {"maxTasks": 2}
            # the refused call lost nothing: both tasks are still there
            assert (await client.tasks.get(first.task_id)).status == "working"
            await trio.sleep(1.5)  # both expire
            assert (await client.tasks.call_tool("slow", {"seconds": 0})).status == "working"


async def test_sessions_do_not_see_each_others_tasks(mode: str) -> None:
    app = make_app()
    with trio.fail_after(TIMEOUT):
        async with client_of(app, "handshake", mode) as alice, client_of(app, "handshake", mode) as bob:
            mine = await alice.tasks.call_tool("slow", {"seconds": 1000})
            await bob.tasks.call_tool("slow", {"seconds": 1000})
            for attempt in (bob.tasks.get, bob.tasks.cancel, bob.tasks.result):
                with pytest.raises(InvalidParams, match="Unknown task"):
                    await attempt(mine.task_id)
            assert [t.task_id for t in await alice.tasks.list_tasks()] == [mine.task_id]
            assert (await alice.tasks.get(mine.task_id)).status == "working"


async def test_principals_do_not_see_each_others_tasks(mode: str) -> None:
    from trio_mcp.protocol import Implementation

    runtime = TaskRuntime(owner=lambda ctx: ctx.client_info.name if ctx.client_info else None)
    app = make_app(runtime)
    with trio.fail_after(TIMEOUT):
        async with (
            client_of(app, "modern", mode, client_info=Implementation(name="alice", version="1")) as alice,
            client_of(app, "modern", mode, client_info=Implementation(name="bob", version="1")) as bob,
        ):
            mine = await alice.tasks.call_tool("slow", {"seconds": 1000})
            for attempt in (bob.tasks.get, bob.tasks.cancel):
                with pytest.raises(InvalidParams, match="Unknown task"):
                    await attempt(mine.task_id)
            assert (await alice.tasks.get(mine.task_id)).status == "working"


async def test_parked_questions_are_answered_one_at_a_time(mode: str) -> None:
    """Stateless era: the task parks both questions; a partial tasks/update keeps it input_required."""
    with trio.fail_after(TIMEOUT):
        async with client_of(make_app(), "modern", mode) as client:
            info = await client.tasks.call_tool("two_questions", {})
            while len((seen := await client.tasks.get(info.task_id)).input_requests) < 2:
                await trio.sleep(0.01)
            assert seen.status == "input_required"
            first, second = sorted(seen.input_requests)
            answer = {"action": "accept", "content": {"name": "Ada"}}
            await client.tasks._request(
                "tasks/update", {"taskId": info.task_id, "inputResponses": {first: answer}}, None
            )
            after = await client.tasks.get(info.task_id)
            assert after.status == "input_required" and list(after.input_requests) == [second]
            result = await client.tasks.run_tool("two_questions", {})  # answered by the handler
            assert text(result) == "first second"
            await client.tasks._request(
                "tasks/update", {"taskId": info.task_id, "inputResponses": {second: answer}}, None
            )
            end = await client.tasks.wait(info.task_id)
            assert end.status == "completed" and end.result is not None and text(end.result) == "Ada Ada"


async def test_modern_tasks_methods_need_the_extension(mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with client_of(make_app(), "modern", mode) as client:
            info = await client.tasks.call_tool("slow", {"seconds": 1000})
            for method in ("tasks/get", "tasks/cancel"):
                with pytest.raises(MissingClientCapability):
                    await client._call_modern(method, {"taskId": info.task_id}, None, None)
            for method in ("tasks/result", "tasks/list"):  # removed in 2026-07-28
                with pytest.raises(MethodNotFound):
                    await client.tasks._request(method, {"taskId": info.task_id}, None)


def test_capabilities_per_era() -> None:
    app = make_app()
    caps = app.capabilities()
    assert caps.tasks == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert caps.extensions == {TASKS_EXTENSION_ID: {}}
    with pytest.raises(ValueError, match="needs a server with tasks"):
        MCPServer("no-tasks").tool(task_support="optional")(lambda: "x")
