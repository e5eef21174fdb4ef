"""The legacy HTTP+SSE transport: a full client/server stack over hypercorn,
the HTTP rules (status codes, session ids, DNS-rebinding protection,
keep-alive comments), the client's handling of odd servers, shutdown and
close in both directions, backpressure from a slow POSTing client, and the
SSE pair that the transport conformance checks (``test_conformance``) run over.

Every server listens on 127.0.0.1 with port 0 and is stopped by its test;
every wait is bounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from trio_mcp._util import collapse_groups
from trio_mcp.protocol import (
    PARSE_ERROR,
    ConnectionClosed,
    InvalidMessage,
    Notification,
    Request,
    raw_or_none,
)
from trio_mcp.transports import MessageStream, TransportClosed, TransportError
from trio_mcp.transports.http._sse import SseDecoder, SseEvent
from trio_mcp.transports.sse import (
    SseApp,
    SseClientStream,
    SseServer,
    SseServerSettings,
    SseSessionStream,
    SseTransport,
    resolve_endpoint,
)

from . import test_conformance as conformance
from .test_websocket import INIT, Gate, drive_full_stack, make_app, open_client

TIMEOUT = 10.0


# ------------------------------------------------------------------ helpers


@asynccontextmanager
async def serve(app: Any, **options: Any) -> AsyncIterator[SseServer]:
    """An SseServer on 127.0.0.1:0 for the block; stopped on exit."""
    server = SseServer(app, **options)
    async with trio.open_nursery() as nursery:
        with trio.fail_after(TIMEOUT):
            await nursery.start(server.run)
        try:
            yield server
        finally:
            server.stop()


@asynccontextmanager
async def client_stream(url: str, **options: Any) -> AsyncIterator[SseClientStream]:
    transport = SseTransport(url, **options)
    with collapse_groups():  # a start failure comes out as itself
        async with trio.open_nursery() as nursery:
            with trio.fail_after(TIMEOUT):
                stream = await nursery.start(transport.run)
            try:
                yield stream
            finally:
                with trio.fail_after(TIMEOUT):
                    await stream.aclose()


class RawEvents:
    """A raw GET of an event stream, read event by event (comments too)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.chunks = response.aiter_bytes()
        self.decoder = SseDecoder()
        self.pending: list[SseEvent] = []
        self.raw = bytearray()

    async def next(self) -> SseEvent:
        with trio.fail_after(TIMEOUT):
            while not self.pending:
                chunk = await self.chunks.__anext__()
                self.raw += chunk
                self.pending.extend(self.decoder.feed(chunk))
        return self.pending.pop(0)

    async def next_json(self) -> Any:
        event = await self.next()
        assert event.event == "message", event
        return json.loads(event.data)

    async def until_raw(self, needle: bytes) -> None:
        with trio.fail_after(TIMEOUT):
            while needle not in self.raw:
                chunk = await self.chunks.__anext__()
                self.raw += chunk
                self.pending.extend(self.decoder.feed(chunk))


@asynccontextmanager
async def raw_session(http: httpx.AsyncClient, url: str, **kw: Any) -> AsyncIterator[tuple[RawEvents, str]]:
    """GET the event stream; yields the reader and the absolute POST URL."""
    async with http.stream("GET", url, **kw) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = RawEvents(response)
        first = await events.next()
        assert first.event == "endpoint"
        yield events, str(httpx.URL(url).join(first.data))


@asynccontextmanager
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        yield http


async def post(http: httpx.AsyncClient, url: str, body: Any, **kw: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"content-type": "application/json", **kw.pop("headers", {})}
    with trio.fail_after(TIMEOUT):
        return await http.post(url, content=content, headers=headers, **kw)


@asynccontextmanager
async def serve_asgi(asgi: Any) -> AsyncIterator[str]:
    """Any ASGI app on hypercorn at 127.0.0.1:0; yields its base URL."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hyper_serve

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = 1.0
    config.accesslog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        with trio.fail_after(TIMEOUT):
            binds = await nursery.start(
                lambda task_status: hyper_serve(
                    asgi, config, shutdown_trigger=stop.wait, task_status=task_status
                )
            )
        try:
            yield binds[0]
        finally:
            stop.set()
            nursery.cancel_scope.deadline = trio.current_time() + TIMEOUT


# ---------------------------------------------------------------- full stack


async def test_full_stack_tools_progress_sampling_and_logging() -> None:
    async with serve(make_app()) as server, client_stream(server.url) as stream:
        assert re.fullmatch(
            re.escape(server.url.replace("/sse", "/messages")) + r"\?session_id=[0-9a-f]{32}", stream.endpoint
        )
        await drive_full_stack(stream)


async def test_each_get_is_a_session_with_a_random_id() -> None:
    app = make_app()
    async with serve(app) as server, http_client() as http:
        async with raw_session(http, server.url) as (ev1, url1), raw_session(http, server.url) as (ev2, url2):
            ids = [httpx.URL(u).params["session_id"] for u in (url1, url2)]
            assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids) and ids[0] != ids[1]
            assert len(app.sessions) == 2 and server.statistics()["sessions"] == 2
            # each stream carries its own session's answers
            assert (await post(http, url2, INIT)).status_code == 202
            answer = await ev2.next_json()
            assert answer["id"] == 1 and "serverInfo" in answer["result"]
            assert (await post(http, url1, {**INIT, "id": "one"})).status_code == 202
            assert (await ev1.next_json())["id"] == "one"
        with trio.fail_after(TIMEOUT):
            while app.sessions:  # the sessions end with their GETs
                await (next(iter(app.sessions))).peer.wait_stopped()
        assert server.statistics()["sessions"] == 0
        # and their ids are dead now
        assert (await post(http, url1, INIT)).status_code == 404


async def test_endpoint_honours_the_asgi_root_path() -> None:
    asgi = SseApp(make_app())

    async def mounted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            assert scope["path"].startswith("/api")
            scope = {**scope, "root_path": "/api", "path": scope["path"][len("/api") :]}
        await asgi(scope, receive, send)

    async with serve_asgi(mounted) as base, client_stream(base + "/api/sse") as stream:
        assert stream.endpoint.startswith(base + "/api/messages?session_id=")
        with trio.fail_after(TIMEOUT):
            async with open_client(stream) as client:
                assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}


# ------------------------------------------------------------ HTTP rules


async def test_post_status_codes() -> None:
    async with serve(make_app(), max_body_size=1000) as server, http_client() as http:
        base = server.url.removesuffix("/sse")
        async with raw_session(http, server.url) as (events, url):
            # unknown session: 404; no session id: 400
            r = await post(http, f"{base}/messages?session_id={'0' * 32}", INIT)
            assert r.status_code == 404 and r.json()["error"]["message"] == "Session not found"
            r = await post(http, f"{base}/messages", INIT)
            assert r.status_code == 400
            # not JSON: 400 with the JSON-RPC parse error
            r = await post(http, url, b"{nope")
            assert r.status_code == 400
            assert r.json()["error"]["code"] == PARSE_ERROR and r.json()["id"] is None
            # over the body limit: 413, announced or streamed
            r = await post(http, url, {"pad": "x" * 2000})
            assert r.status_code == 413

            async def chunks() -> AsyncIterator[bytes]:
                for _ in range(20):
                    yield b" " * 100

            with trio.fail_after(TIMEOUT):
                r = await http.post(url, content=chunks(), headers={"content-type": "application/json"})
            assert r.status_code == 413
            # wrong media type: 415; wrong methods: 405; elsewhere: 404
            r = await post(http, url, INIT, headers={"content-type": "text/plain"})
            assert r.status_code == 415
            assert (await http.get(url)).status_code == 405
            assert (await http.post(server.url)).status_code == 405
            assert (await http.get(base + "/elsewhere")).status_code == 404
            # the session is still fine
            r = await post(http, url, INIT)
            assert r.status_code == 202 and r.text == "Accepted"
            assert (await events.next_json())["id"] == 1


async def test_invalid_messages_are_answered_and_the_session_survives() -> None:
    async with serve(make_app()) as server, http_client() as http:
        async with raw_session(http, server.url) as (events, url):
            assert (await post(http, url, INIT)).status_code == 202
            assert (await events.next_json())["id"] == 1
            assert (
                await post(http, url, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            ).status_code == 202
            # JSON, but not JSON-RPC: accepted, answered on the stream with its id
            assert (await post(http, url, {"jsonrpc": "2.0", "id": 2})).status_code == 202
            answer = await events.next_json()
            assert answer["id"] == 2 and answer["error"]["code"] == -32600
            assert (await post(http, url, {"jsonrpc": "1.0", "id": 3, "method": "ping"})).status_code == 202
            answer = await events.next_json()
            assert answer["id"] == 3 and answer["error"]["code"] == -32600
            # garbage: 400 on the POST itself, nothing on the stream
            assert (await post(http, url, b"\xff\xfe")).status_code == 400
            call = {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
            }
            assert (await post(http, url, call)).status_code == 202
            answer = await events.next_json()
            assert answer["id"] == 4 and answer["result"]["structuredContent"] == {"result": 3}


@pytest.mark.parametrize("origin", ["http://evil.example", "https://attacker.test:8443", "null"])
async def test_non_local_origin_is_rejected(origin: str) -> None:
    async with serve(make_app()) as server, http_client() as http:
        r = await http.get(server.url, headers={"origin": origin})
        assert r.status_code == 403
        async with raw_session(http, server.url) as (_, url):
            r = await post(http, url, INIT, headers={"origin": origin})
            assert r.status_code == 403
            r = await post(http, url, INIT, headers={"origin": "http://localhost:5173"})
            assert r.status_code == 202
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match="HTTP 403"):
            async with client_stream(server.url, headers={"Origin": origin}):
                pass  # pragma: no cover
        async with client_stream(server.url, headers={"Origin": "http://127.0.0.1:8080"}):
            pass


async def test_host_must_be_allowed() -> None:
    async with serve(make_app()) as server, http_client() as http:
        r = await http.get(server.url, headers={"host": "evil.example"})
        assert r.status_code == 421
        async with raw_session(http, server.url) as (_, url):
            r = await post(http, url, INIT, headers={"host": "rebound.example:80"})
            assert r.status_code == 421
    async with (
        serve(make_app(), allowed_hosts=("*",), allowed_origins=("https://app.example.com",)) as server,
        http_client() as http,
        raw_session(
            http, server.url, headers={"host": "anything.example", "origin": "https://app.example.com"}
        ),
    ):
        pass
    async with serve(make_app(), dns_rebinding_protection=False) as server, http_client() as http:
        async with raw_session(
            http, server.url, headers={"host": "evil.example", "origin": "http://evil.example"}
        ):
            pass


async def test_idle_streams_get_keepalive_comments() -> None:
    async with serve(make_app(), ping_interval=0.05) as server, http_client() as http:
        async with raw_session(http, server.url) as (events, url):
            await events.until_raw(b"\n\n: ping\n\n: ping\n\n")
            assert not events.pending  # comments are not events
            # and the stream still works
            assert (await post(http, url, INIT)).status_code == 202
            assert (await events.next_json())["id"] == 1


async def test_too_many_sessions_is_503() -> None:
    async with serve(make_app(), max_sessions=1) as server, http_client() as http:
        async with raw_session(http, server.url):
            assert (await http.get(server.url)).status_code == 503


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError):
        SseServerSettings(sse_path="sse")
    with pytest.raises(ValueError):
        SseServerSettings(sse_path="/x", message_path="/x")
    with pytest.raises(ValueError):
        SseServerSettings(ping_interval=0)
    with pytest.raises(ValueError):
        SseTransport("ws://127.0.0.1/sse")
    with pytest.raises(TypeError):
        SseApp(object())


# ------------------------------------------------------------ client side


def test_endpoint_resolution() -> None:
    base = "http://127.0.0.1:8000/mcp/sse"
    assert resolve_endpoint(base, "/messages?session_id=a") == "http://127.0.0.1:8000/messages?session_id=a"
    assert resolve_endpoint(base, "messages?x=1") == "http://127.0.0.1:8000/mcp/messages?x=1"
    assert resolve_endpoint(base, "http://127.0.0.1:8000/m") == "http://127.0.0.1:8000/m"
    for foreign in (
        "http://evil.example/messages",
        "https://127.0.0.1:8000/m",
        "http://127.0.0.1:8001/m",
        "//evil.example/m",
    ):
        with pytest.raises(TransportError, match="origin"):
            resolve_endpoint(base, foreign)


async def odd_server(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app misbehaving in the ways the client must survive."""
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]
            await send({"type": kind + ".complete"})
            if kind == "lifespan.shutdown":
                return
    path = scope["path"]
    sse_headers = [(b"content-type", b"text/event-stream")]
    if path == "/json":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b"{}"})
    elif path == "/missing":
        await send(
            {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": b"no such thing"})
    elif path == "/silent":
        await send({"type": "http.response.start", "status": 200, "headers": sse_headers})
        await send({"type": "http.response.body", "body": b": hello\n\n", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
    elif path == "/ends":
        await send({"type": "http.response.start", "status": 200, "headers": sse_headers})
        await send({"type": "http.response.body", "body": b"event: other\ndata: x\n\n"})
    elif path == "/foreign":
        await send({"type": "http.response.start", "status": 200, "headers": sse_headers})
        await send(
            {"type": "http.response.body", "body": b"event: endpoint\ndata: http://evil.example/m\n\n"}
        )
    elif path == "/chatty":  # stray events around a working endpoint; ends after one message
        await send({"type": "http.response.start", "status": 200, "headers": sse_headers})
        body = (
            b'event: message\ndata: {"jsonrpc":"2.0","method":"early"}\n\n'
            b"event: endpoint\ndata: /post\n\n"
            b"event: custom\ndata: ignored\n\n"
            b"event: endpoint\ndata: /elsewhere\n\n"
            b'data: {"jsonrpc":"2.0","method":"unnamed"}\n\n'
            b'event: message\ndata: {"jsonrpc":"2.0","method":"kept"}\n\n'
            b"event: message\ndata: not json\n\n"
        )
        await send({"type": "http.response.body", "body": body})
    elif path == "/broken":  # announces a length it never delivers
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*sse_headers, (b"content-length", b"100000")],
            }
        )
        await send(
            {"type": "http.response.body", "body": b"event: endpoint\ndata: /post\n\n", "more_body": True}
        )
        await send(
            {
                "type": "http.response.body",
                "body": b'event: message\ndata: {"jsonrpc":"2.0","method":"x"}\n\n',
                "more_body": True,
            }
        )
        raise RuntimeError("the server dies mid-stream")  # hypercorn drops the connection
    elif path == "/post":
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/json", "not an event stream"),
        ("/missing", "HTTP 404: no such thing"),
        ("/silent", "no endpoint event within 0.3 s"),
        ("/ends", "ended before the endpoint event"),
        ("/foreign", "not on the origin"),
    ],
)
async def test_client_refuses_odd_servers(path: str, message: str) -> None:
    async with serve_asgi(odd_server) as base, trio.open_nursery() as nursery:
        transport = SseTransport(base + path, endpoint_timeout=0.3)
        with trio.fail_after(TIMEOUT), pytest.raises(TransportError, match=re.escape(message)):
            await nursery.start(transport.run)  # a plain TransportError, not a group


async def test_client_copes_with_stray_events() -> None:
    async with serve_asgi(odd_server) as base, client_stream(base + "/chatty") as stream:
        assert stream.endpoint == base + "/post"  # the first endpoint wins
        with trio.fail_after(TIMEOUT):
            frames = [await stream.receive() for _ in range(3)]
            with pytest.raises(trio.EndOfChannel):  # the server ended its response
                await stream.receive()
        assert [type(f) for f in frames] == [Notification, Notification, InvalidMessage]
        assert [f.method for f in frames[:2]] == ["unnamed", "kept"]
        with pytest.raises(TransportClosed):
            await stream.send(Notification(method="after/end"))


async def test_a_broken_stream_is_a_transport_error() -> None:
    async with serve_asgi(odd_server) as base, client_stream(base + "/broken") as stream:
        with trio.fail_after(TIMEOUT):
            assert type(await stream.receive()) is Notification
            with pytest.raises(TransportError, match="event stream lost"):
                await stream.receive()
        with pytest.raises(TransportError):
            await stream.send(Notification(method="after/break"))


async def test_oversize_post_fails_that_send_only() -> None:
    async with capture_pair(max_body_size=10_000) as (client_side, server_side):
        with trio.fail_after(TIMEOUT):
            with pytest.raises(TransportError, match="HTTP 413"):
                await client_side.send(Notification(method="big", params={"pad": "x" * 20_000}))
            await client_side.send(Notification(method="small"))
            frame = await server_side.receive()
        assert type(frame) is Notification and frame.method == "small"


async def test_a_vanished_session_breaks_the_client() -> None:
    async with capture_pair() as (client_side, _):
        client_side.endpoint = client_side.endpoint.partition("=")[0] + "=" + "x" * 32  # an unknown session
        with trio.fail_after(TIMEOUT):
            with pytest.raises(TransportError, match="HTTP 404"):
                await client_side.send(Notification(method="lost"))
            with pytest.raises(TransportError, match="session is gone"):
                await client_side.receive()
        with pytest.raises(TransportError, match="session is gone"):
            await client_side.send(Notification(method="lost/again"))


# ---------------------------------------------------------- closing / shutdown


async def test_server_shutdown_fails_pending_calls_at_once() -> None:
    gate = Gate()
    app = make_app(gate)
    failed = trio.Event()
    async with trio.open_nursery() as nursery:
        server = SseServer(app)
        with trio.fail_after(TIMEOUT):
            await nursery.start(server.run)
        async with client_stream(server.url) as stream:
            with trio.fail_after(TIMEOUT):
                async with open_client(stream) as client:

                    async def pending() -> None:
                        with pytest.raises(ConnectionClosed):
                            await client.call_tool("block", {})
                        failed.set()

                    nursery.start_soon(pending)
                    await gate.entered.wait()
                    server.stop()
                    with trio.fail_after(3):  # well under any timeout of the stack
                        await failed.wait()
                        await gate.cancelled.wait()
                    with pytest.raises(ConnectionClosed):
                        await client.ping()
    assert not app.sessions


async def test_client_close_ends_the_server_session() -> None:
    app = make_app()
    async with serve(app) as server:
        async with client_stream(server.url) as stream:
            with trio.fail_after(TIMEOUT):
                async with open_client(stream) as client:
                    await client.ping()
                    (session,) = app.sessions
        with trio.fail_after(TIMEOUT):
            await session.peer.wait_stopped()
        assert not app.sessions and server.statistics()["sessions"] == 0
        with pytest.raises(TransportClosed):
            await stream.send(Notification(method="after/close"))


async def test_plain_asgi_server_runs_the_app_in_its_lifespan() -> None:
    asgi = SseApp(make_app())
    async with serve_asgi(asgi) as base, client_stream(base + "/sse") as stream:
        with trio.fail_after(TIMEOUT):
            async with open_client(stream) as client:
                assert (await client.call_tool("add", {"a": 3, "b": 4})).structured_content == {"result": 7}
    assert not asgi.sessions


# ------------------------------------------------------------ conformance


class _Capture:
    """Stands in for an app: hands each session's stream to the test
    instead of serving a ServerSession over it."""

    def __init__(self) -> None:
        self.streams_send, self.streams = trio.open_memory_channel[SseSessionStream](8)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        yield None

    async def start_session(self, stream: SseSessionStream, nursery: trio.Nursery, *, name: str = "") -> None:
        await self.streams_send.send(stream)
        nursery.start_soon(stream.wait_closed)


CLIENT_OPTIONS = ("receive_buffer", "max_event_size", "close_timeout", "post_timeout")


@asynccontextmanager
async def capture_pair(**options: Any) -> AsyncIterator[tuple[SseClientStream, SseSessionStream]]:
    """(client stream, server session stream) of one real SSE session."""
    client_opts = {k: options.pop(k) for k in CLIENT_OPTIONS if k in options}
    capture = _Capture()
    async with serve(capture, **options) as server, client_stream(server.url, **client_opts) as a:
        with trio.fail_after(TIMEOUT):
            b = await capture.streams.receive()
        try:
            yield a, b
        finally:
            await b.aclose()


@pytest.fixture
def spec() -> conformance.TransportPair:
    return conformance.PAIR_BY_ID["sse"]


@pytest.fixture
async def pair(spec: conformance.TransportPair) -> AsyncIterator[tuple[MessageStream, MessageStream]]:
    async with spec.open() as streams:
        yield streams


async def test_client_sends_block_while_the_session_does_not_read(spec: Any, pair: Any) -> None:
    """``test_conformance.test_backpressure`` in the POST direction, with
    fewer messages: it sends 4000, one HTTP request each, which takes longer
    than its time bound on a busy machine. A send returns once the server
    queued its body, so what may complete while the session does not read is
    the inbound queue, whatever the sizes."""
    a, b = pair
    n, sent = 300, 0

    async def sender() -> None:
        nonlocal sent
        for i in range(n):
            await a.send(Notification(method="bp", params={"i": i, "pad": "z" * 4096}))
            sent += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        with trio.fail_after(TIMEOUT):
            await trio.testing.wait_all_tasks_blocked(spec.settle)
            first = sent
            await trio.testing.wait_all_tasks_blocked(spec.settle)
        assert 0 < first <= sent <= 16 + 1  # the inbound queue, and nothing more
        with trio.fail_after(TIMEOUT):
            frames = [await b.receive() for _ in range(n)]  # reading again releases it
    assert sent == n
    assert [raw_or_none(f.params)["i"] for f in frames] == list(range(n))


async def test_invalid_frames_reach_the_session_as_invalid_messages() -> None:
    async with capture_pair() as (client_side, server_side), http_client() as http:
        r = await post(http, client_side.endpoint, {"jsonrpc": "2.0", "id": 9})
        assert r.status_code == 202
        await client_side.send(Request(id=5, method="ping"))
        with trio.fail_after(TIMEOUT):
            first, second = await server_side.receive(), await server_side.receive()
        assert type(first) is InvalidMessage and first.id == 9
        assert type(second) is Request and second.id == 5
        await server_side.send(Notification(method="n", params={"x": 1}))
        with trio.fail_after(TIMEOUT):
            frame = await client_side.receive()
        assert type(frame) is Notification and raw_or_none(frame.params) == {"x": 1}
