"""The Streamable HTTP client transport, full stack: a trio-mcp ClientSession
over :class:`StreamableHttpTransport` to an MCPServer served by the
Streamable HTTP server on a real hypercorn (127.0.0.1, port 0).

Every server is stopped by its test, every wait is bounded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from trio_mcp._util import collapse_groups
from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.protocol import (
    ConnectionClosed,
    CreateMessageRequestParams,
    CreateMessageResult,
    LoggingMessageNotificationParams,
    TextContent,
)
from trio_mcp.server import Context, MCPServer
from trio_mcp.serving.http import HttpServer, HttpServerSettings, StreamableHttpApp, close_sse_stream
from trio_mcp.transports import TransportError
from trio_mcp.transports.http import HttpClientSettings, HttpClientStream, StreamableHttpTransport

TIMEOUT = 10.0
FAST = {"default_retry": 0.05, "max_reconnects": 3}


def make_app() -> MCPServer:
    app = MCPServer("http-client-test")

    @app.tool
    def echo(text: str) -> str:
        return text

    @app.tool
    async def count(ctx: Context, upto: int) -> int:
        for i in range(upto):
            await ctx.report_progress(i + 1, upto, f"at {i + 1}")
        return upto

    @app.tool
    async def ask(ctx: Context, question: str) -> str:
        result = await ctx.sample(question, max_tokens=10)
        assert isinstance(result.content, TextContent)
        return f"model said {result.content.text}"

    @app.tool
    async def chatty(ctx: Context) -> str:
        await ctx.debug("hidden")
        await ctx.info("visible")
        await ctx.warning({"also": "visible"})
        return "ok"

    @app.resource("memo://doc", mime_type="text/plain")
    def doc() -> str:
        return "v1"

    return app


@asynccontextmanager
async def serving(app: Any = None, **options: Any) -> AsyncIterator[HttpServer]:
    options.setdefault("retry_interval", 0.05)
    server = HttpServer(app if app is not None else make_app(), **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        try:
            yield server
        finally:
            server.stop()


@asynccontextmanager
async def serving_asgi(
    wrap: Any, app: Any = None, **settings: Any
) -> AsyncIterator[tuple[StreamableHttpApp, str]]:
    """The ASGI app behind a middleware, on plain hypercorn (the app runs in the lifespan)."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    settings.setdefault("retry_interval", 0.05)
    asgi = StreamableHttpApp(app if app is not None else make_app(), settings=HttpServerSettings(**settings))
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1.0
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(wrap(asgi), config, shutdown_trigger=stop.wait, task_status=task_status)
        )
        try:
            yield asgi, binds[0] + "/mcp"
        finally:
            stop.set()


@asynccontextmanager
async def connect(
    url: str, *, transport: dict[str, Any] | None = None, **session_options: Any
) -> AsyncIterator[tuple[ClientSession, HttpClientStream]]:
    options = {**FAST, **(transport or {})}
    async with trio.open_nursery() as nursery:
        stream = await nursery.start(StreamableHttpTransport(url, **options).run)
        async with open_session(stream, **session_options) as client:
            yield client, stream


class Cutter:
    """ASGI middleware: the first ``method`` response whose body carries
    ``marker`` is ended right after that chunk (the client sees the stream
    end); the app is told its client went away, and its later writes block
    as on a dead connection."""

    def __init__(self, app: Any, method: str, marker: bytes) -> None:
        self.app = app
        self.method = method
        self.marker = marker
        self.cuts = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != self.method or self.cuts:
            await self.app(scope, receive, send)
            return
        cut = trio.Event()

        async def wsend(message: dict[str, Any]) -> None:
            if cut.is_set():
                await trio.sleep_forever()
            await send(message)
            if message["type"] == "http.response.body" and self.marker in message.get("body", b""):
                self.cuts += 1
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                cut.set()

        async def wreceive() -> dict[str, Any]:
            result: dict[str, Any] = {"type": "http.disconnect"}
            if cut.is_set():
                return result
            async with trio.open_nursery() as nursery:

                async def real() -> None:
                    nonlocal result
                    result = await receive()
                    nursery.cancel_scope.cancel()

                async def on_cut() -> None:
                    await cut.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(real)
                nursery.start_soon(on_cut)
            return result

        await self.app(scope, wreceive, wsend)


# ---------------------------------------------------------------- calls


async def test_tools_over_http() -> None:
    with trio.fail_after(TIMEOUT):
        async with serving() as server, connect(server.url) as (client, stream):
            assert stream.session_id is not None
            assert stream.protocol_version == client.protocol_version == "2025-11-25"
            tools = await client.list_all_tools()
            assert {t.name for t in tools} == {"echo", "count", "ask", "chatty"}
            result = await client.call_tool("echo", {"text": "over http"})
            assert result.content[0].text == "over http"  # type: ignore[union-attr]
            # Concurrent calls each get their own POST and answer.
            results: dict[int, Any] = {}
            async with trio.open_nursery() as nursery:
                for i in range(10):

                    async def one(i: int = i) -> None:
                        results[i] = await client.call_tool("echo", {"text": str(i)})

                    nursery.start_soon(one)
            assert {i: r.content[0].text for i, r in results.items()} == {i: str(i) for i in range(10)}
            read = await client.read_resource("memo://doc")
            assert read.contents[0].text == "v1"  # type: ignore[union-attr]


async def test_older_protocol_version() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            serving() as server,
            connect(server.url, protocol_version="2025-03-26") as (client, stream),
        ):
            assert stream.protocol_version == "2025-03-26"
            assert (await client.call_tool("echo", {"text": "old"})).content[0].text == "old"  # type: ignore[union-attr]


async def test_progress_travels_on_the_request_stream() -> None:
    seen: list[tuple[float, Any, Any]] = []

    async def on_progress(progress: float, total: Any, message: Any) -> None:
        seen.append((progress, total, message))

    with trio.fail_after(TIMEOUT):
        # No GET stream: whatever arrives came on the POST's SSE stream.
        async with (
            serving() as server,
            connect(server.url, transport={"open_get_stream": False}) as (client, _),
        ):
            result = await client.call_tool("count", {"upto": 3}, on_progress=on_progress)
            assert result.structured_content == {"result": 3}
            assert seen == [(1, 3, "at 1"), (2, 3, "at 2"), (3, 3, "at 3")]
            assert server.statistics().messages_dropped == 0


async def test_sampling_during_a_tool_call() -> None:
    asked: list[CreateMessageRequestParams] = []

    async def sample(params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(text="42"), model="test-model")

    with trio.fail_after(TIMEOUT):
        async with (
            serving() as server,
            connect(server.url, transport={"open_get_stream": False}, sampling_handler=sample) as (client, _),
        ):
            result = await client.call_tool("ask", {"question": "meaning?"})
            assert result.content[0].text == "model said 42"  # type: ignore[union-attr]
            assert asked[0].messages[0].content.text == "meaning?"  # type: ignore[union-attr]


async def test_logging() -> None:
    logs: list[LoggingMessageNotificationParams] = []
    two = trio.Event()

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)
        if len(logs) == 2:
            two.set()

    with trio.fail_after(TIMEOUT):
        async with serving() as server, connect(server.url, on_log=on_log) as (client, _):
            await client.set_logging_level("info")
            assert (await client.call_tool("chatty")).content[0].text == "ok"  # type: ignore[union-attr]
            await two.wait()  # handled in order by the notification worker
            # "hidden" (debug, below the level) was never sent: it would have come first.
            assert [(m.level, m.data) for m in logs] == [
                ("info", "visible"),
                ("warning", {"also": "visible"}),
            ]


async def test_resource_update_over_the_get_stream() -> None:
    app = make_app()
    updated = trio.Event()
    uris: list[str] = []

    async def on_updated(uri: str) -> None:
        uris.append(uri)
        updated.set()

    with trio.fail_after(TIMEOUT):
        async with (
            serving(app) as server,
            connect(server.url, on_resource_updated=on_updated) as (client, stream),
        ):
            await client.subscribe_resource("memo://doc")
            await stream.wait_get_stream()
            app.resource_updated("memo://doc")
            await updated.wait()
            assert uris == ["memo://doc"]
            assert stream.get_stream_open


# ----------------------------------------------------- session lifecycle


async def test_close_deletes_the_session() -> None:
    with trio.fail_after(TIMEOUT):
        async with serving() as server:
            async with connect(server.url) as (client, _stream):
                await client.ping()
                assert server.statistics().sessions == 1
            assert server.statistics().sessions == 0


async def test_dropped_session_gives_transport_error_then_reinitialize() -> None:
    with trio.fail_after(TIMEOUT):
        async with serving() as server:
            with pytest.raises(TransportError, match="session expired"), collapse_groups():
                async with connect(server.url, transport={"open_get_stream": False}) as (client, stream):
                    old_id = stream.session_id
                    assert old_id is not None
                    assert await server.asgi.terminate_session(old_id)
                    with pytest.raises(ConnectionClosed, match="session expired"):
                        await client.call_tool("echo", {"text": "lost"})
                    await trio.sleep_forever()  # the session's failure ends this block
            # The owner initializes a new session.
            async with connect(server.url) as (client, stream):
                assert stream.session_id not in (None, old_id)
                assert (await client.call_tool("echo", {"text": "again"})).content[0].text == "again"  # type: ignore[union-attr]


async def test_dropped_session_seen_by_the_get_stream() -> None:
    with trio.fail_after(TIMEOUT):
        async with serving() as server:
            with pytest.raises(TransportError, match="session expired"), collapse_groups():
                async with connect(server.url) as (_client, stream):
                    await stream.wait_get_stream()
                    assert stream.session_id is not None
                    await server.asgi.terminate_session(stream.session_id)
                    await trio.sleep_forever()  # the GET stream reconnects, gets 404


async def test_server_gone_fails_the_transport() -> None:
    server = HttpServer(make_app(), retry_interval=0.05)
    stopped = trio.Event()

    async def run_server(task_status: trio.TaskStatus[Any]) -> None:
        try:
            await server.run(task_status=task_status)
        finally:
            stopped.set()

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_server)
            with pytest.raises(TransportError), collapse_groups():
                async with connect(server.url, transport={"close_timeout": 0.5}) as (client, _):
                    server.stop()
                    await stopped.wait()
                    with pytest.raises(ConnectionClosed):
                        await client.call_tool("echo", {"text": "anyone?"})
                    await trio.sleep_forever()


# ------------------------------------------------- headers, resumption


async def test_custom_headers_and_session_headers_are_sent() -> None:
    seen: list[dict[str, str]] = []

    def recorder(app: Any) -> Any:
        async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                seen.append(
                    {k.decode().lower(): v.decode() for k, v in scope["headers"]}
                    | {":method": scope["method"]}
                )
            await app(scope, receive, send)

        return wrapped

    with trio.fail_after(TIMEOUT):
        async with serving_asgi(recorder) as (_, url):
            transport = {"open_get_stream": False}
            headers = {"Authorization": "Bearer t0ken", "X-Trace": "abc"}
            async with trio.open_nursery() as nursery:
                stream = await nursery.start(
                    StreamableHttpTransport(url, headers=headers, **FAST, **transport).run
                )
                async with open_session(stream) as client:
                    await client.ping()
                    session_id = stream.session_id
    assert all(h["authorization"] == "Bearer t0ken" and h["x-trace"] == "abc" for h in seen)
    init, *later = seen
    assert "mcp-session-id" not in init and "mcp-protocol-version" not in init
    assert later and all(h["mcp-session-id"] == session_id for h in later)
    assert all(h["mcp-protocol-version"] == "2025-11-25" for h in later)
    assert later[-1][":method"] == "DELETE"
    assert all(
        "application/json" in h["accept"] and "text/event-stream" in h["accept"]
        for h in seen
        if h[":method"] == "POST"
    )


async def test_no_get_stream_when_the_server_answers_405() -> None:
    refused = trio.Event()

    def no_get(app: Any) -> Any:
        async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["method"] == "GET":
                await send(
                    {"type": "http.response.start", "status": 405, "headers": [(b"allow", b"POST, DELETE")]}
                )
                await send({"type": "http.response.body", "body": b""})
                refused.set()
                return
            await app(scope, receive, send)

        return wrapped

    with trio.fail_after(TIMEOUT):
        async with serving_asgi(no_get) as (_, url), connect(url) as (client, stream):
            await refused.wait()
            assert (await client.call_tool("echo", {"text": "still fine"})).content[0].text == "still fine"  # type: ignore[union-attr]
            assert not stream.get_stream_open


async def test_broken_post_stream_is_resumed_with_last_event_id() -> None:
    app = make_app()
    proceed = trio.Event()

    @app.tool
    async def long_job(ctx: Context) -> str:
        await ctx.report_progress(1, 2, "half way")
        await proceed.wait()
        return "done"

    async def on_progress(progress: float, total: Any, message: Any) -> None:
        proceed.set()  # the stream is cut right after this event

    cutter: list[Cutter] = []

    def cut_post(asgi: Any) -> Cutter:
        cutter.append(Cutter(asgi, "POST", b"half way"))
        return cutter[0]

    with trio.fail_after(TIMEOUT):
        async with (
            serving_asgi(cut_post, app) as (_, url),
            connect(url, transport={"open_get_stream": False}) as (
                client,
                _stream,
            ),
        ):
            result = await client.call_tool("long_job", on_progress=on_progress)
            assert result.content[0].text == "done"  # type: ignore[union-attr]
            assert cutter[0].cuts == 1


async def test_broken_get_stream_is_resumed_with_last_event_id() -> None:
    app = make_app()
    changed = trio.Event()

    async def on_tools_changed() -> None:
        changed.set()

    cutter: list[Cutter] = []

    def cut_get(asgi: Any) -> Cutter:
        cutter.append(Cutter(asgi, "GET", b"id: "))  # right after the priming event
        return cutter[0]

    with trio.fail_after(TIMEOUT):
        async with (
            serving_asgi(cut_get, app) as (_, url),
            connect(url, on_tools_changed=on_tools_changed) as (
                client,
                stream,
            ),
        ):
            await stream.wait_get_stream()
            app.add_tool(lambda: "new", name="new_tool")
            await changed.wait()
            assert cutter[0].cuts == 1
            assert "new_tool" in {t.name for t in await client.list_all_tools()}


async def test_server_closes_the_request_stream_and_the_client_resumes() -> None:
    """SEP-1699 polling: a handler ends its POST's HTTP response mid-call; the
    client reconnects (GET + Last-Event-ID, after the retry hint) and gets
    what was sent meanwhile, the answer included."""
    app = make_app()
    closed: list[bool] = []

    @app.tool
    async def polled(ctx: Context) -> str:
        closed.append(await close_sse_stream(ctx))
        await ctx.report_progress(1, 1, "after the close")
        return "answer after reconnect"

    seen: list[Any] = []

    async def on_progress(progress: float, total: Any, message: Any) -> None:
        seen.append(message)

    with trio.fail_after(TIMEOUT):
        async with (
            serving(app) as server,
            connect(server.url, transport={"open_get_stream": False}) as (client, _stream),
        ):
            result = await client.call_tool("polled", on_progress=on_progress)
            assert result.content[0].text == "answer after reconnect"  # type: ignore[union-attr]
            assert closed == [True]
            assert seen == ["after the close"]
            # Not over Streamable HTTP: a no-op.
            assert not await close_sse_stream(object())


async def test_json_answered_request_stream_cannot_be_closed() -> None:
    app = make_app()
    closed: list[bool] = []

    @app.tool
    async def polled(ctx: Context) -> str:
        closed.append(await close_sse_stream(ctx))
        return "json"

    with trio.fail_after(TIMEOUT):
        async with serving(app, json_response=True) as server, connect(server.url) as (client, _):
            assert (await client.call_tool("polled")).content[0].text == "json"  # type: ignore[union-attr]
            assert closed == [False]


def test_client_settings_validation() -> None:
    with pytest.raises(ValueError):
        HttpClientSettings(post_timeout=0)
    transport = StreamableHttpTransport("http://127.0.0.1:1/mcp", headers={"X-A": "1"}, max_reconnects=1)
    assert transport.settings.max_reconnects == 1
    assert transport.headers == {"x-a": "1"}


# ------------------------------------------------------- the stateless era


async def test_stateless_era_over_http() -> None:
    """era="modern": no session, every request mirrors its body in headers
    (the server refuses those that do not), sampling as an input-required
    retry, progress and logging on the request's own stream."""

    async def sampling(params: Any) -> CreateMessageResult:
        return CreateMessageResult(role="assistant", content=TextContent(text="42"), model="m")

    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params.data)

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    with trio.fail_after(TIMEOUT):
        async with (
            serving() as server,
            connect(server.url, era="modern", sampling_handler=sampling, on_log=on_log) as (client, stream),
        ):
            assert client.era == "modern" and client.protocol_version == "2026-07-28"
            assert stream.session_id is None
            assert (await client.call_tool("echo", {"text": "stateless"})).content[0].text == "stateless"  # type: ignore[union-attr]
            assert (await client.call_tool("ask", {"question": "?"})).content[0].text == "model said 42"  # type: ignore[union-attr]
            assert (
                await client.call_tool("count", {"upto": 3}, on_progress=on_progress)
            ).structured_content == {"result": 3}
            assert progress == [1, 2, 3]
            await client.set_logging_level("info")
            await client.call_tool("chatty")
            assert logs == ["visible", {"also": "visible"}]
            assert server.statistics().sessions == 0
