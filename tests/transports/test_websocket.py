"""The WebSocket transport: a full client/server stack over real sockets,
the handshake rules (subprotocol, path, Host, Origin), the size limit,
bad frames, shutdown and close in both directions, and the WebSocket pair
that the transport conformance checks (``test_conformance``) run over.

Every server listens on 127.0.0.1 with port 0 and is stopped by its test;
every wait is bounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
import trio_websocket

from trio_mcp._util import collapse_groups
from trio_mcp.actors._client import open_session
from trio_mcp.protocol import (
    PARSE_ERROR,
    ConnectionClosed,
    CreateMessageRequestParams,
    CreateMessageResult,
    InvalidMessage,
    LoggingMessageNotificationParams,
    Notification,
    Request,
    TextContent,
    raw_or_none,
)
from trio_mcp.server import Context, MCPServer
from trio_mcp.transports import MessageStream, TransportClosed, TransportError
from trio_mcp.transports.websocket import (
    SUBPROTOCOL,
    WebSocketServer,
    WebSocketServerSettings,
    WebSocketStream,
    WebSocketTransport,
)

TIMEOUT = 10.0


# ------------------------------------------------------------------ helpers


class Gate:
    """Events a tool sets and waits on, so tests synchronise without sleeps."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.cancelled = trio.Event()


def make_app(gate: Gate | None = None) -> MCPServer:
    app = MCPServer("ws-test")
    gate = gate or Gate()

    @app.tool
    async def add(a: int, b: int) -> int:
        return a + b

    @app.tool
    async def count(ctx: Context, steps: int) -> str:
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
        return f"counted {steps}"

    @app.tool
    async def ask(ctx: Context, prompt: str) -> str:
        result = await ctx.sample(prompt, max_tokens=20)
        assert isinstance(result.content, TextContent)
        return f"{result.model}: {result.content.text}"

    @app.tool
    async def chatty(ctx: Context) -> str:
        await ctx.debug("quiet")
        await ctx.info("hello")
        await ctx.warning({"careful": True})
        return "said things"

    @app.tool
    async def block(ctx: Context) -> str:
        gate.entered.set()
        try:
            await trio.sleep_forever()
        finally:
            gate.cancelled.set()
        return "never"  # pragma: no cover

    @app.tool
    async def echo(text: str) -> str:
        return text

    return app


async def sampler(params: CreateMessageRequestParams) -> CreateMessageResult:
    text = params.messages[0].content.text  # type: ignore[union-attr]
    return CreateMessageResult(role="assistant", content=TextContent(text=text.upper()), model="shouty")


@asynccontextmanager
async def serve(app: Any, **options: Any) -> AsyncIterator[WebSocketServer]:
    """A WebSocketServer on 127.0.0.1:0 for the block; stopped on exit."""
    server = WebSocketServer(app, **options)
    async with trio.open_nursery() as nursery:
        with trio.fail_after(TIMEOUT):
            await nursery.start(server.run)
        try:
            yield server
        finally:
            server.stop()


@asynccontextmanager
async def client_stream(url: str, **options: Any) -> AsyncIterator[WebSocketStream]:
    transport = WebSocketTransport(url, **options)
    with collapse_groups():  # a start failure comes out as itself
        async with trio.open_nursery() as nursery:
            with trio.fail_after(TIMEOUT):
                stream = await nursery.start(transport.run)
            try:
                yield stream
            finally:
                with trio.fail_after(TIMEOUT):
                    await stream.aclose()


@asynccontextmanager
async def raw_ws(
    url: str,
    *,
    subprotocols: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[trio_websocket.WebSocketConnection]:
    """A bare trio-websocket client (for what our client would never send)."""
    extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    async with trio_websocket.open_websocket_url(
        url, subprotocols=[SUBPROTOCOL] if subprotocols is None else subprotocols, extra_headers=extra
    ) as ws:
        yield ws


@asynccontextmanager
async def open_client(
    stream: MessageStream, *, breaks: str | None = None, **options: Any
) -> AsyncIterator[Any]:
    """``open_session`` for the block. ``breaks``: the transport is expected to
    break (the session then ends with that TransportError, matched here)."""
    try:
        with collapse_groups():
            async with open_session(stream, **options) as client:
                yield client
    except TransportError as exc:
        if breaks is None or not re.search(breaks, str(exc)):
            raise


async def next_json(ws: trio_websocket.WebSocketConnection) -> Any:
    with trio.fail_after(TIMEOUT):
        return json.loads(await ws.get_message())


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


# ---------------------------------------------------------------- full stack


async def drive_full_stack(stream: MessageStream) -> None:
    """A client session on ``stream`` through tools, progress, sampling in the
    middle of a call, logging, and 20 concurrent calls (shared with test_sse)."""
    logs: list[LoggingMessageNotificationParams] = []
    got_logs = trio.Event()

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)
        if len(logs) == 2:
            got_logs.set()

    progress: list[tuple[float, Any, Any]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    with trio.fail_after(TIMEOUT):
        async with open_client(stream, sampling_handler=sampler, on_log=on_log) as client:
            assert client.server_info is not None and client.server_info.name == "ws-test"
            assert {t.name for t in await client.list_all_tools()} >= {"add", "count", "ask", "chatty"}

            result = await client.call_tool("add", {"a": 2, "b": 40})
            assert result.structured_content == {"result": 42}

            result = await client.call_tool("count", {"steps": 3}, on_progress=on_progress)
            assert result.content[0].text == "counted 3"
            assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

            # sampling: a server-to-client request in the middle of a tool call
            result = await client.call_tool("ask", {"prompt": "hi there"})
            assert result.content[0].text == "shouty: HI THERE"

            await client.set_logging_level("info")
            result = await client.call_tool("chatty", {})
            assert result.content[0].text == "said things"
            await got_logs.wait()
            assert [(p.level, p.data) for p in logs] == [("info", "hello"), ("warning", {"careful": True})]

            # concurrent calls on one connection, each answered to its caller
            results: dict[int, str] = {}

            async def call(i: int) -> None:
                r = await client.call_tool("echo", {"text": f"#{i}" * (i * 500 + 1)})
                results[i] = r.content[0].text

            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(call, i)
            assert results == {i: f"#{i}" * (i * 500 + 1) for i in range(20)}


async def test_full_stack_tools_progress_sampling_and_logging() -> None:
    async with serve(make_app()) as server, client_stream(server.url) as stream:
        assert stream.subprotocol == SUBPROTOCOL
        await drive_full_stack(stream)


async def test_one_session_per_connection() -> None:
    app = make_app()
    async with serve(app) as server:
        async with client_stream(server.url) as s1, client_stream(server.url) as s2:
            with trio.fail_after(TIMEOUT):
                async with open_session(s1) as c1, open_session(s2) as c2:
                    assert len(app.sessions) == 2
                    assert (await c1.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}
                    assert (await c2.call_tool("add", {"a": 2, "b": 2})).structured_content == {"result": 4}
        assert server.statistics()["accepted"] == 2


# ----------------------------------------------------------------- handshake


@pytest.mark.parametrize("subprotocols", [[], ["other"], ["mcp-ish", "json"]])
async def test_wrong_subprotocol_is_rejected(subprotocols: list[str]) -> None:
    async with serve(make_app()) as server:
        with trio.fail_after(TIMEOUT):
            with pytest.raises(trio_websocket.ConnectionRejected) as info:
                async with raw_ws(server.url, subprotocols=subprotocols):
                    pass  # pragma: no cover
        assert info.value.status_code == 400
        assert b"mcp" in (info.value.body or b"")
        # offering mcp among others is fine: the server selects it
        async with raw_ws(server.url, subprotocols=["other", "mcp"]) as ws:
            assert ws.subprotocol == "mcp"
        assert server.statistics()["rejected"] == 1


async def test_client_requires_the_server_to_select_mcp() -> None:
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        ws = await request.accept()  # no subprotocol selected
        with pytest.raises(trio_websocket.ConnectionClosed):
            await ws.get_message()

    async with trio.open_nursery() as nursery:
        server = await nursery.start(trio_websocket.serve_websocket, handler, "127.0.0.1", 0, None)
        url = f"ws://127.0.0.1:{server.port}/mcp"
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="subprotocol None"):
            async with client_stream(url):
                pass  # pragma: no cover
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "https://attacker.test:8443", "null", "http://127.0.0.1.nip.io"],
)
async def test_non_local_origin_is_rejected(origin: str) -> None:
    async with serve(make_app()) as server:
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="HTTP 403"):
            async with client_stream(server.url, headers={"Origin": origin}):
                pass  # pragma: no cover
        # local origins (any port) and no Origin at all (not a browser) pass
        for ok in ({"Origin": "http://localhost:3000"}, {"Origin": "http://127.0.0.1"}, {}):
            async with client_stream(server.url, headers=ok) as stream:
                assert stream.subprotocol == "mcp"


async def test_allowed_origins_and_hosts_are_settings() -> None:
    async with serve(make_app(), allowed_origins=("https://app.example.com",)) as server:
        async with client_stream(server.url, headers={"Origin": "https://app.example.com"}):
            pass
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="HTTP 403"):
            async with client_stream(server.url, headers={"Origin": "http://localhost"}):
                pass  # pragma: no cover
    # a Host the server does not answer to (DNS rebinding) is refused with 421
    async with serve(make_app(), allowed_hosts=("mcp.example.com",)) as server:
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="HTTP 421"):
            async with client_stream(server.url):
                pass  # pragma: no cover
    async with serve(make_app(), dns_rebinding_protection=False) as server:
        async with client_stream(server.url, headers={"Origin": "http://evil.example"}):
            pass


async def test_wrong_path_is_404_and_path_none_accepts_any() -> None:
    async with serve(make_app()) as server:
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="HTTP 404"):
            async with client_stream(server.url.replace("/mcp", "/other")):
                pass  # pragma: no cover
        async with client_stream(server.url + "?token=1"):  # a query does not change the path
            pass
    async with serve(make_app(), path=None) as server:
        assert server.url.endswith("/")
        async with client_stream(server.url + "anything/at/all"):
            pass


async def test_connection_refused_is_a_transport_error() -> None:
    async with serve(make_app()) as server:
        url = server.url
    async with trio.open_nursery() as nursery:
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="cannot open"):
            await nursery.start(WebSocketTransport(url).run)  # a plain TransportError, not a group
    async with serve(make_app()) as server, trio.open_nursery() as nursery:
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="HTTP 403"):
            await nursery.start(WebSocketTransport(server.url, headers={"Origin": "http://evil.example"}).run)


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError):
        WebSocketServerSettings(path="mcp")
    with pytest.raises(ValueError):
        WebSocketServerSettings(max_message_size=0)
    with pytest.raises(ValueError):
        WebSocketTransport("http://127.0.0.1/mcp")


# --------------------------------------------------------------- bad input


async def test_oversize_message_closes_the_connection_with_1009() -> None:
    app = make_app()
    async with serve(app, max_message_size=64 * 1024) as server, client_stream(server.url) as stream:
        with trio.fail_after(TIMEOUT):
            async with open_client(stream, breaks="1009") as client:
                ok = await client.call_tool("echo", {"text": "x" * 60_000})
                assert len(ok.content[0].text) == 60_000
                with pytest.raises(ConnectionClosed, match="1009"):
                    await client.call_tool("echo", {"text": "x" * 70_000})
                with pytest.raises(ConnectionClosed):
                    await client.ping()
        assert stream.close_code == 1009
        with pytest.raises(TransportError):
            await stream.send(Notification(method="too/late"))


async def test_oversize_on_the_client_side_too() -> None:
    async with serve(make_app()) as server, client_stream(server.url, max_message_size=30_000) as stream:
        with trio.fail_after(TIMEOUT):
            async with open_client(stream, breaks="1009") as client:
                with pytest.raises(ConnectionClosed, match="1009"):
                    await client.call_tool("echo", {"text": "y" * 40_000})


async def test_garbage_frames_are_answered_and_the_session_survives() -> None:
    async with serve(make_app()) as server, raw_ws(server.url) as ws:
        await ws.send_message("{this is not json")
        answer = await next_json(ws)
        assert answer["id"] is None and answer["error"]["code"] == PARSE_ERROR

        await ws.send_message(json.dumps(INIT))
        answer = await next_json(ws)
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "ws-test"
        await ws.send_message(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

        await ws.send_message('{"jsonrpc": "2.0", "id": 2}')  # no method: invalid request
        answer = await next_json(ws)
        assert answer["id"] == 2 and answer["error"]["code"] == -32600

        await ws.send_message(b"\xff\xfe not utf-8")  # a binary frame, and garbage
        answer = await next_json(ws)
        assert answer["error"]["code"] == PARSE_ERROR

        # binary frames with JSON are accepted; the session still serves
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
        }
        await ws.send_message(json.dumps(call).encode())
        answer = await next_json(ws)
        assert answer["id"] == 3 and answer["result"]["structuredContent"] == {"result": 3}


async def test_invalid_frames_reach_receive_as_invalid_messages() -> None:
    async with capture_pair() as (client_side, server_side):
        await client_side._ws.send_message("[1, 2")  # straight through the socket
        with trio.fail_after(TIMEOUT):
            frame = await server_side.receive()
        assert type(frame) is InvalidMessage and frame.error.code == PARSE_ERROR
        await client_side.send(Request(id=5, method="ping"))
        with trio.fail_after(TIMEOUT):
            frame = await server_side.receive()
        assert type(frame) is Request and frame.id == 5


# ---------------------------------------------------------- closing / shutdown


async def test_server_shutdown_fails_pending_calls_at_once() -> None:
    gate = Gate()
    app = make_app(gate)
    failed = trio.Event()
    async with trio.open_nursery() as nursery:
        server = WebSocketServer(app)
        with trio.fail_after(TIMEOUT):
            await nursery.start(server.run)
        async with client_stream(server.url) as stream:
            with trio.fail_after(TIMEOUT):
                async with open_client(stream, breaks="1001") as client:

                    async def pending() -> None:
                        with pytest.raises(ConnectionClosed, match="1001") as info:
                            await client.call_tool("block", {})
                        assert "server shutting down" in str(info.value)
                        failed.set()

                    nursery.start_soon(pending)
                    await gate.entered.wait()
                    server.stop()
                    with trio.fail_after(3):  # well under any timeout of the stack
                        await failed.wait()
                        await gate.cancelled.wait()
                    assert stream.close_code == 1001
                    with pytest.raises(ConnectionClosed):
                        await client.ping()
    assert not app.sessions


async def test_client_close_ends_the_server_session() -> None:
    app = make_app()
    async with serve(app) as server:
        async with client_stream(server.url) as stream:
            with trio.fail_after(TIMEOUT):
                async with open_session(stream) as client:
                    await client.ping()
                    (session,) = app.sessions
        with trio.fail_after(TIMEOUT):
            await session.peer.wait_stopped()
        assert stream.close_code == 1000
        assert not app.sessions
        with pytest.raises(TransportClosed):
            await stream.send(Notification(method="after/close"))


async def test_close_semantics_and_codes() -> None:
    async with capture_pair() as (client_side, server_side):
        await server_side.aclose(4000, "app specific")
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="4000.*app specific"):
            await client_side.receive()
        with pytest.raises(TransportError):
            await client_side.send(Notification(method="x"))
    async with capture_pair() as (client_side, server_side):
        await client_side.aclose()  # 1000: a clean end for the other side
        with trio.fail_after(TIMEOUT), pytest.raises(trio.EndOfChannel):
            await server_side.receive()
        with trio.fail_after(TIMEOUT):
            await server_side.wait_closed()
        assert server_side.close_code == 1000


async def test_queued_frames_go_out_before_the_close() -> None:
    async with capture_pair(send_buffer=64) as (client_side, server_side):
        got: list[int] = []

        async def reader() -> None:
            with pytest.raises(trio.EndOfChannel):
                while True:
                    got.append(raw_or_none((await client_side.receive()).params)["i"])

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader)
                for i in range(50):
                    await server_side.send(Notification(method="n", params={"i": i}))
                start = trio.current_time()
                await server_side.aclose()
                assert trio.current_time() - start < 1.0  # a handshake, not the close timeout
        assert got == list(range(50))
        assert client_side.close_code == 1000


async def test_close_is_bounded_when_the_other_side_does_not_read() -> None:
    async with capture_pair(close_timeout=0.5, send_buffer=0) as (client_side, server_side):
        # the client never reads: fill every buffer until the writer blocks
        async def flood() -> None:
            with pytest.raises(TransportError):
                while True:
                    await server_side.send(Notification(method="flood", params={"pad": "z" * 65536}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flood)
            with trio.fail_after(TIMEOUT):
                await trio.testing.wait_all_tasks_blocked(0.2)
                start = trio.current_time()
                await server_side.aclose()
            assert trio.current_time() - start < 3
        with trio.fail_after(TIMEOUT):
            with pytest.raises((TransportError, trio.EndOfChannel)):
                while True:
                    await client_side.receive()


async def test_a_failed_write_breaks_the_connection_for_both_sides() -> None:
    async with capture_pair() as (client_side, server_side):

        async def refuse(message: str | bytes) -> None:
            raise RuntimeError("the frame cannot be written")

        server_side._ws.send_message = refuse  # type: ignore[method-assign]
        await server_side.send(Notification(method="doomed"))
        with trio.fail_after(TIMEOUT):
            with pytest.raises(TransportError, match="write failed: RuntimeError"):
                await server_side.receive()
            with pytest.raises(TransportError, match="1006"):
                await client_side.receive()
        with pytest.raises(TransportError):
            await server_side.send(Notification(method="after"))


async def test_connection_limit_is_503() -> None:
    async with serve(make_app(), max_connections=1) as server, client_stream(server.url):
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="HTTP 503: Too many connections"):
            async with client_stream(server.url):
                pass  # pragma: no cover


# ------------------------------------------------------------ conformance


class _Capture:
    """Stands in for an app: hands each connection's stream to the test
    instead of serving a session over it."""

    def __init__(self) -> None:
        self.streams_send, self.streams = trio.open_memory_channel[MessageStream](8)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        yield None

    async def start_session(self, stream: WebSocketStream, nursery: trio.Nursery, *, name: str = "") -> None:
        await self.streams_send.send(stream)
        nursery.start_soon(stream.wait_closed)


@asynccontextmanager
async def capture_pair(**options: Any) -> AsyncIterator[tuple[WebSocketStream, WebSocketStream]]:
    """(client stream, server stream) of one real connection; settings in
    ``options`` apply to both sides where they exist."""
    client_opts = {
        k: v for k, v in options.items() if k in ("send_buffer", "close_timeout", "max_message_size")
    }
    capture = _Capture()
    async with serve(capture, **options) as server, client_stream(server.url, **client_opts) as a:
        with trio.fail_after(TIMEOUT):
            b = await capture.streams.receive()
        try:
            yield a, b  # type: ignore[misc]
        finally:
            with trio.fail_after(TIMEOUT):
                await b.aclose()
