"""Middleware around request handling (server and client), and the HTTP
headers of a request in its handler's ``Context``: over real HTTP (hypercorn
on 127.0.0.1, port 0) with our client, in both eras and in stateless mode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from trio_mcp.actors import ClientCall
from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.protocol import CallToolResult, InternalError, InvalidRequest, McpError, TextContent
from trio_mcp.server import Context, MCPServer
from trio_mcp.testing import connected
from trio_mcp.transports.http import StreamableHttpTransport

from .test_server import TIMEOUT, serving


def headers_app(log: list[Any]) -> MCPServer:
    app = MCPServer("middleware-test")

    @app.tool
    def echo(text: str) -> str:
        log.append("handler")
        return text

    @app.tool
    def tenant(ctx: Context) -> str:
        headers = ctx.request_headers
        return "no http" if headers is None else headers.get("x-tenant", "none")

    return app


@asynccontextmanager
async def client(url: str, **options: Any) -> AsyncIterator[ClientSession]:
    headers = options.pop("headers", None)
    async with trio.open_nursery() as nursery:
        stream = await nursery.start(StreamableHttpTransport(url, headers=headers).run)
        async with open_session(stream, **options) as session:
            yield session
        nursery.cancel_scope.cancel()


def text_of(result: CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


async def test_middleware_runs_in_order_around_the_handler_and_sees_the_call() -> None:
    log: list[Any] = []
    app = headers_app(log)

    async def outer(ctx: Context, call_next: Any) -> Any:
        log.append(("outer in", ctx.method, ctx.params.get("name"), ctx.request_headers is not None))
        try:
            result = await call_next()
        except McpError as exc:
            log.append(("outer error", exc.code))
            raise
        log.append(("outer out", type(result).__name__))
        return result

    @app.add_middleware
    async def inner(ctx: Context, call_next: Any) -> Any:
        log.append(("inner in", ctx.method))
        result = await call_next()
        log.append(("inner out", ctx.method))
        return result

    app.middleware = (outer, *app.middleware)  # outer first: the outermost
    async with serving(app) as (_, url), client(url) as session:
        with trio.fail_after(TIMEOUT):
            log.clear()
            assert text_of(await session.call_tool("echo", {"text": "hi"})) == "hi"
            assert log == [
                ("outer in", "tools/call", "echo", True),
                ("inner in", "tools/call"),
                "handler",
                ("inner out", "tools/call"),
                ("outer out", "CallToolResult"),
            ]
            log.clear()
            with pytest.raises(McpError) as info:
                await session.call_tool("no-such-tool", {})
            assert info.value.code == -32602
            assert log[-1] == ("outer error", -32602)


async def test_a_middleware_short_circuits_with_an_error_and_the_handler_never_runs() -> None:
    log: list[Any] = []
    app = headers_app(log)

    @app.add_middleware
    async def auth(ctx: Context, call_next: Any) -> Any:
        headers = ctx.request_headers or {}
        if ctx.method == "tools/call" and headers.get("authorization") != "Bearer good":
            raise InvalidRequest("not authorized")
        return await call_next()

    async with serving(app) as (_, url):
        with trio.fail_after(TIMEOUT):
            async with client(url, headers={"Authorization": "Bearer bad"}) as session:
                with pytest.raises(InvalidRequest, match="not authorized"):
                    await session.call_tool("echo", {"text": "x"})
                assert "handler" not in log
                assert (await session.list_tools()).tools  # other methods pass
            async with client(url, headers={"Authorization": "Bearer good"}) as session:
                assert text_of(await session.call_tool("echo", {"text": "ok"})) == "ok"
                assert log == ["handler"]


async def test_a_raising_middleware_is_an_internal_error_and_the_session_lives_on() -> None:
    app = headers_app([])
    broken = {"on": True}

    @app.add_middleware
    async def flaky(ctx: Context, call_next: Any) -> Any:
        if broken["on"] and ctx.method == "tools/call":
            raise RuntimeError("middleware bug")
        return await call_next()

    async with serving(app) as (server, url), client(url) as session:
        with trio.fail_after(TIMEOUT):
            with pytest.raises(InternalError):
                await session.call_tool("echo", {"text": "x"})
            with pytest.raises(InternalError):
                await session.call_tool("echo", {"text": "y"})
            broken["on"] = False
            assert text_of(await session.call_tool("echo", {"text": "alive"})) == "alive"
            assert server.statistics().sessions == 1


async def test_a_middleware_may_answer_in_place_of_the_handler() -> None:
    log: list[Any] = []
    app = headers_app(log)

    @app.add_middleware
    async def cached(ctx: Context, call_next: Any) -> Any:
        if ctx.method == "tools/call" and ctx.params["arguments"].get("text") == "cached":
            return CallToolResult(content=[TextContent(text="from the cache")])
        return await call_next()

    async with serving(app) as (_, url), client(url) as session:
        with trio.fail_after(TIMEOUT):
            assert text_of(await session.call_tool("echo", {"text": "cached"})) == "from the cache"
            assert log == []


@pytest.mark.parametrize("mode", ["session", "modern", "stateless"])
async def test_handlers_read_the_http_headers_of_their_request(mode: str) -> None:
    options: dict[str, Any] = {"stateless": True} if mode == "stateless" else {}
    seen: list[Any] = []
    app = headers_app([])

    @app.add_middleware
    async def record(ctx: Context, call_next: Any) -> Any:
        headers = ctx.request_headers
        seen.append(None if headers is None else headers.get("x-tenant"))
        return await call_next()

    era = "modern" if mode == "modern" else "handshake"
    async with serving(app, **options) as (_, url):
        with trio.fail_after(TIMEOUT):
            for tenant in ("acme", "globex"):
                async with client(url, headers={"X-Tenant": tenant}, era=era) as session:
                    assert text_of(await session.call_tool("tenant", {})) == tenant
    assert seen[-1] == "globex" and "acme" in seen


async def test_without_http_there_are_no_request_headers() -> None:
    app = headers_app([])
    async with connected(app) as session:
        with trio.fail_after(TIMEOUT):
            assert text_of(await session.call_tool("tenant", {})) == "no http"


async def test_client_middleware_wraps_every_call_and_can_refuse_one() -> None:
    log: list[Any] = []
    app = headers_app(log)
    calls: list[Any] = []

    async def timing(call: ClientCall, call_next: Any) -> Any:
        calls.append(("in", call.method))
        try:
            result = await call_next()
        except McpError as exc:
            calls.append(("error", call.method, exc.code))
            raise
        calls.append(("out", call.method, type(result).__name__))
        return result

    async def guard(call: ClientCall, call_next: Any) -> Any:
        if (
            call.method == "tools/call"
            and call.params.name == "echo"
            and call.params.arguments == {"text": "no"}
        ):
            raise InvalidRequest("refused on the client")
        return await call_next()

    async with serving(app) as (_, url), client(url, middleware=[timing, guard]) as session:
        with trio.fail_after(TIMEOUT):
            assert text_of(await session.call_tool("echo", {"text": "yes"})) == "yes"
            with pytest.raises(InvalidRequest, match="refused on the client"):
                await session.call_tool("echo", {"text": "no"})
            await session.list_tools()
    assert log == ["handler"]  # the refused call never reached the server
    assert calls == [
        ("in", "tools/call"),
        ("out", "tools/call", "CallToolResult"),
        ("in", "tools/call"),
        ("error", "tools/call", InvalidRequest.code),
        ("in", "tools/list"),
        ("out", "tools/list", "ListToolsResult"),
    ]
