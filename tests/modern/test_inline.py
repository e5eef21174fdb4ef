"""The ``"inline"`` in-memory mode: requests served in the caller's task.

The stateless-era and handshake-era suites also run in this mode (``MODES``
in their conftests, with every message recorded and schema-checked); these
tests pin what is particular to it: no frame crosses the pair for a call
(the handshake does), calls stay fair to other tasks, a dead server session
or a failing handler gives the same typed errors as over frames, and
concurrent callers each get their own answer.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp.actors._client import open_session
from trio_mcp.protocol import (
    CallToolRequestParams,
    CallToolResult,
    ConnectionClosed,
    InternalError,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
)
from trio_mcp.server import Context, LowLevelServer, MCPServer
from trio_mcp.testing import connected
from trio_mcp.transports import memory_pair

from .conftest import TIMEOUT


class CountingEnd:
    """A client end that counts the frames it sends, by method."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[str] = []

    async def send(self, message: Any) -> None:
        self.sent.append(getattr(message, "method", None) or "(answer)")
        await self.inner.send(message)

    async def receive(self) -> Any:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()

    @property
    def inline(self) -> Any:
        return self.inner.inline

    @property
    def inline_in_order(self) -> Any:
        return self.inner.inline_in_order


def echo_app() -> MCPServer:
    app = MCPServer("inline", "1.0")

    @app.tool
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @app.tool
    def spin(text: str) -> str:
        """Never awaits."""
        return text

    @app.tool
    async def yielding(text: str) -> str:
        """Lets the other callers run before it answers."""
        await trio.lowlevel.checkpoint()
        return text

    return app


async def open_counted(app: Any, era: str, nursery: trio.Nursery) -> tuple[Any, CountingEnd]:
    client_end, server_end = memory_pair(mode="inline")
    await app.start_session(server_end, nursery)
    return client_end, CountingEnd(client_end)


@pytest.mark.parametrize("era", ["modern", "handshake"])
async def test_calls_skip_the_pair_and_the_handshake_does_not(era: str) -> None:
    app = echo_app()
    with trio.fail_after(TIMEOUT):
        async with app.running(), trio.open_nursery() as nursery:
            _, counted = await open_counted(app, era, nursery)
            async with open_session(counted, era=era) as client:  # type: ignore[arg-type]
                for i in range(5):
                    result = await client.call_tool("echo", {"text": f"t{i}"})
                    assert result.content[0].text == f"t{i}"
            nursery.cancel_scope.cancel()
    if era == "modern":
        # server/discover and the calls were served in this task: no frame at all.
        assert counted.sent == []
    else:
        # The handshake crosses the pair; so does a call sent while the
        # notification before it is still queued (it must not overtake it);
        # the calls after that were served in this task.
        assert counted.sent[:2] == ["initialize", "notifications/initialized"]
        assert counted.sent[2:] in ([], ["tools/call"])


async def test_inline_answers_equal_the_framed_ones() -> None:
    app = echo_app()
    results: dict[str, CallToolResult] = {}
    with trio.fail_after(TIMEOUT):
        for mode in ("zero-copy", "inline"):
            async with connected(app, mode=mode, era="modern") as client:  # type: ignore[arg-type]
                results[mode] = await client.call_tool("echo", {"text": "same"})
                listed = await client.list_tools()
                assert [t.name for t in listed.tools] == ["echo", "spin", "yielding"]
    assert results["inline"] == results["zero-copy"]


async def test_a_loop_of_inline_calls_stays_fair_to_other_tasks() -> None:
    app = echo_app()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    with trio.fail_after(TIMEOUT):
        async with connected(app, mode="inline", era="modern") as client, trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            await trio.lowlevel.checkpoint()
            before = ticks
            for _ in range(20):
                await client.call_tool("spin", {"text": "x"})  # a handler with no await in it
            # Every call is a schedule point: the ticker ran alongside the loop.
            assert ticks - before >= 10
            nursery.cancel_scope.cancel()


async def test_an_inline_call_in_a_cancelled_scope_is_refused_before_the_handler_runs() -> None:
    app = MCPServer("inline", "1.0")
    runs = 0

    @app.tool
    def count() -> int:
        """Counts its runs."""
        nonlocal runs
        runs += 1
        return runs

    with trio.fail_after(TIMEOUT):
        async with connected(app, mode="inline", era="modern") as client:
            with trio.CancelScope() as scope:
                scope.cancel()
                await client.call_tool("count", {})
            assert scope.cancelled_caught
            assert runs == 0
            assert (await client.call_tool("count", {})).structured_content == {"result": 1}


async def test_a_failing_handler_is_an_internal_error_and_the_session_goes_on() -> None:
    app = LowLevelServer("inline", "1.0")

    async def call_tool(ctx: Context, params: CallToolRequestParams) -> CallToolResult:
        if params.name == "boom":
            raise RuntimeError("the handler broke")
        return CallToolResult(content=[TextContent(text=params.name)])

    async def list_tools(ctx: Context, params: PaginatedRequestParams) -> ListToolsResult:
        return ListToolsResult(tools=[])  # declares the tools capability

    app.set_request_handler("tools/list", PaginatedRequestParams, list_tools)
    app.set_request_handler("tools/call", CallToolRequestParams, call_tool)
    with trio.fail_after(TIMEOUT):
        async with connected(app, mode="inline", era="modern") as client:
            with pytest.raises(InternalError, match="the handler broke"):
                await client.call_tool("boom", {})
            assert (await client.call_tool("fine", {})).content[0].text == "fine"


async def test_a_closed_server_session_fails_inline_calls_at_once() -> None:
    app = echo_app()
    with trio.fail_after(TIMEOUT):
        async with app.running(), trio.open_nursery() as nursery:
            client_end, server_end = memory_pair(mode="inline")
            server = await app.start_session(server_end, nursery)
            async with open_session(client_end, era="modern") as client:
                assert (await client.call_tool("echo", {"text": "up"})).content[0].text == "up"
                await server.aclose()
                with pytest.raises(ConnectionClosed):
                    await client.call_tool("echo", {"text": "down"})
            nursery.cancel_scope.cancel()


async def test_concurrent_inline_callers_each_get_their_own_answer() -> None:
    app = echo_app()
    answers: dict[int, str] = {}

    async def caller(client: Any, i: int) -> None:
        for round_ in range(5):
            result = await client.call_tool("yielding", {"text": f"{i}.{round_}"})
            answers[i] = result.content[0].text
            assert answers[i] == f"{i}.{round_}"

    with trio.fail_after(TIMEOUT):
        async with connected(app, mode="inline", era="modern") as client, trio.open_nursery() as nursery:
            for i in range(64):
                nursery.start_soon(caller, client, i)
    assert answers == {i: f"{i}.4" for i in range(64)}
