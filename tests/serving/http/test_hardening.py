"""The Streamable HTTP server under floods, stalls and tricks (issue 18):
abandoned sessions never lock a client out, a stalled body is closed, a
rebinding Origin is refused, a malformed message gets 400, an oversized
batch is refused at once, a cancelled request's POST ends, a client going
away frees its connection, and a 413 logs no framework error. Real server
processes (``hard_server.py``) or a real in-process hypercorn, on
127.0.0.1; every wait bounded."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio

from trio_mcp.actors import PeerLimits
from trio_mcp.server import MCPServer
from trio_mcp.serving.http import StreamableHttpApp
from trio_mcp.transports.http._security import parse_origin

from .realserver import CLOSE_WAIT, real_server, rss_kib, socket_states
from .test_server import ACCEPT_BOTH, TIMEOUT, Session, http, init_message, initialize, make_app, serving

#: Bound of the floods and of waiting for what the server does on its own.
FLOOD_TIMEOUT = 120.0


def report(record_property: Any, name: str, value: Any) -> None:
    """A figure for the test report (``-s`` prints it; junit-xml records it)."""
    record_property(name, value)
    print(f"{name}: {value}")


async def until(predicate: Any, interval: float = 0.1) -> None:
    """Poll ``predicate`` (an async callable) until it holds; callers bound the wait."""
    while not await predicate():
        await trio.sleep(interval)


# --------------------------------------------------- sessions: lock-out


async def test_abandoned_sessions_never_lock_a_fresh_client_out(tmp_path: Any, record_property: Any) -> None:
    """Twice, 1,100 initializes never followed up, at the default
    max_sessions (1,024): every one is admitted (the idlest abandoned one
    evicted), a fresh client is admitted and keeps its session, and the
    abandoned ones expire after handshake_timeout. Their memory is reused:
    the second flood costs far less than the first."""
    async with real_server(tmp_path, handshake_timeout=3) as server, http() as client:
        with trio.fail_after(FLOOD_TIMEOUT * 2):
            warm = await initialize(client, server.url)
            assert (await warm.post(warm.request("ping"))).status_code == 200
            rss = [rss_kib(server.pid)]
            for flood in (1, 2):
                abandoned = await _flood_initializes(server.url, 1100)
                rss.append(rss_kib(server.pid))

                fresh = await initialize(client, server.url)
                call = fresh.request("tools/call", {"name": "echo", "arguments": {"text": "admitted"}})
                answer = await fresh.post(call)
                assert answer.status_code == 200
                assert answer.json()["result"]["content"][0]["text"] == "admitted"

                start = trio.current_time()
                await until(functools.partial(_all_ended, client, server.url, abandoned[-20:]), 0.5)
                report(
                    record_property,
                    f"flood{flood}_abandoned_gone_after_s",
                    round(trio.current_time() - start, 1),
                )
                # Followed-up sessions live on.
                assert (await fresh.post(fresh.request("ping"))).status_code == 200
                assert (await warm.post(warm.request("ping"))).status_code == 200
                await trio.sleep(1.0)  # measurement only: let the process settle
                rss.append(rss_kib(server.pid))
            report(record_property, "rss_kib_start_flood1_expired1_flood2_expired2", rss)
            report(record_property, "kib_per_abandoned_session_flood1", round((rss[1] - rss[0]) / 1024, 1))
            first, second = rss[1] - rss[0], rss[3] - rss[2]
            assert second < first / 2 + 1024, rss  # reused, not kept


async def _flood_initializes(url: str, count: int) -> list[str]:
    """``count`` initializes, 16 at a time, never followed up; all must be
    admitted. Each flood on connections of its own: the test idles between
    its phases (the wait for the abandoned sessions to expire, then a
    second's settling: about hypercorn's 5 s keep-alive in all), and a
    second flood on the first one's pooled connections started on some the
    server was closing for idleness just then ("Server disconnected without
    sending a response"): HTTP's race, not the session admission counted."""
    statuses: list[int] = []
    abandoned: list[str] = []
    limiter = trio.CapacityLimiter(16)

    async def abandon(client: httpx.AsyncClient, i: int) -> None:
        async with limiter:
            body = json.dumps(init_message(ident=i))
            response = await client.post(url, content=body, headers=ACCEPT_BOTH)
        statuses.append(response.status_code)
        if response.status_code == 200:
            abandoned.append(response.headers["mcp-session-id"])

    async with http() as client, trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(abandon, client, i)
    assert statuses.count(200) == count, {s: statuses.count(s) for s in set(statuses)}
    return abandoned


async def _all_ended(client: httpx.AsyncClient, url: str, session_ids: list[str]) -> bool:
    """Whether these sessions have ended, asked without touching them: an
    unknown protocol version is refused (400) after the lookup (404 once ended)."""
    for session_id in session_ids:
        probe = await client.post(
            url,
            content=json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"}),
            headers={**ACCEPT_BOTH, "mcp-session-id": session_id, "mcp-protocol-version": "1999-01-01"},
        )
        if probe.status_code != 404:
            return False
    return True


async def test_sessions_not_followed_up_expire_after_handshake_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    asgi = StreamableHttpApp(make_app(), handshake_timeout=10, session_idle_timeout=600)
    async with trio.open_nursery() as nursery:
        await nursery.start(asgi.run)
        abandoned = await _asgi_initialize(asgi, follow_up=False)
        kept = await _asgi_initialize(asgi, follow_up=True)
        await trio.sleep(20)
        assert await asgi.registry.get(abandoned) is None
        assert await asgi.registry.get(kept) is not None
        assert asgi.statistics().sessions_expired == 1
        await trio.sleep(700)
        assert await asgi.registry.get(kept) is None  # idle: session_idle_timeout
        assert asgi.statistics().sessions_expired == 2
        await asgi.aclose()


async def test_a_session_still_starting_is_never_expired_under_its_initialize(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A session is registered before its task has started and its
    initialize is handed over. A start that outlasts handshake_timeout (a
    busy machine; here a lifespan taking 29 s, which ends between two
    rounds of the reaper, every 2.5 s) must not end the session
    under its own initialize: that initialize then failed (the session task
    cancelled before it started: an ASGI error and a dropped connection;
    or 404). Once started, an abandoned session expires as always."""

    @asynccontextmanager
    async def slow_start(app: Any) -> AsyncIterator[None]:
        await trio.sleep(29)
        yield None

    def factory() -> MCPServer:
        app = make_app()
        app.lifespan = slow_start
        return app

    asgi = StreamableHttpApp(factory, handshake_timeout=10, session_idle_timeout=600)
    async with trio.open_nursery() as nursery:
        await nursery.start(asgi.run)
        with trio.fail_after(60):
            session_id = await _asgi_initialize(asgi, follow_up=False)  # 200
        assert asgi.statistics().sessions_expired == 0
        await trio.sleep(20)
        assert await asgi.registry.get(session_id) is None
        assert asgi.statistics().sessions_expired == 1
        await asgi.aclose()


async def test_at_max_sessions_the_idlest_is_evicted_and_busy_ones_never() -> None:
    async with serving(max_sessions=2) as (server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            first = await initialize(client, url)
            second = await initialize(client, url)
            assert (await second.post(second.request("ping"))).status_code == 200  # first is idler
            third = await initialize(client, url)
            assert (await first.post(first.request("ping"))).status_code == 404  # evicted
            assert (await second.post(second.request("ping"))).status_code == 200
            assert server.statistics().sessions_evicted == 1
            # Both sessions busy (an open GET stream each): a new one is refused.
            async with (
                client.stream("GET", url, headers=second.headers(accept="text/event-stream")) as get2,
                client.stream("GET", url, headers=third.headers(accept="text/event-stream")) as get3,
            ):
                assert get2.status_code == get3.status_code == 200
                refused = await client.post(url, content=json.dumps(init_message()), headers=ACCEPT_BOTH)
                assert refused.status_code == 503
            assert server.statistics().sessions == 2


async def _asgi_initialize(asgi: StreamableHttpApp, *, follow_up: bool) -> str:
    from .test_server import asgi_call

    status, headers, _ = await asgi_call(asgi, "POST", json.dumps(init_message()).encode())
    assert status == 200
    session_id = headers["mcp-session-id"]
    if follow_up:
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        assert (await asgi_call(asgi, "POST", note, {"mcp-session-id": session_id}))[0] == 202
    return session_id


# ------------------------------------------------------- stalled bodies


async def test_stalled_request_bodies_are_answered_408_and_closed(tmp_path: Any) -> None:
    """100 connections send their headers (Content-Length: 1000) and one
    byte: each gets 408 and is closed after body_timeout; the server goes on."""
    async with real_server(tmp_path, body_timeout=1) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        head = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"
        )
        answers: list[bytes] = []

        async def stall() -> None:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(head)
                received = bytearray()
                while chunk := await stream.receive_some(4096):  # until the server closes
                    received += chunk
                answers.append(bytes(received))

        with trio.fail_after(FLOOD_TIMEOUT):
            async with trio.open_nursery() as nursery:
                for _ in range(100):
                    nursery.start_soon(stall)
            assert len(answers) == 100
            assert all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[0][:200]
            async with http() as client:
                session = await initialize(client, server.url)
                assert (await session.post(session.request("ping"))).status_code == 200


# -------------------------------------------------------------- origins

REBINDING_ORIGINS = [
    "http://[::1]:1@evil.example",
    "http://localhost:1@evil.example",
    "http://localhost@evil.example",
    "http://user:pass@localhost",
    "http://127.0.0.1@evil.example:80",
    "http://localhost/path",
    "http://localhost?x=1",
    "http://localhost#frag",
    "http://localhost:99999",
    "http://localhost:",
    "http://localhost\\@evil.example",
    "http://local host",
    "http:/localhost",
    "//localhost",
    "http://[::1",
    "http://[localhost]",
    "null",
    "",
]


@pytest.mark.parametrize("origin", REBINDING_ORIGINS)
def test_parse_origin_refuses_what_is_not_exactly_an_origin(origin: str) -> None:
    assert parse_origin(origin) is None


def test_parse_origin() -> None:
    assert parse_origin("http://localhost:5173") == ("http", "localhost", 5173)
    assert parse_origin("HTTPS://App.Example") == ("https", "app.example", 443)
    assert parse_origin("http://[::1]:8080") == ("http", "[::1]", 8080)
    assert parse_origin("http://127.0.0.1/") == ("http", "127.0.0.1", 80)


async def test_rebinding_origins_are_refused_for_every_method() -> None:
    async with serving() as (server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            for origin in REBINDING_ORIGINS[:6]:
                init = await client.post(
                    url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, "origin": origin}
                )
                assert init.status_code == 403, origin
                assert "mcp-session-id" not in init.headers
                call = await session.post(session.request("ping"), origin=origin)
                assert call.status_code == 403, origin
                get = await client.get(
                    url, headers=session.headers(accept="text/event-stream", origin=origin)
                )
                assert get.status_code == 403, origin
                delete = await client.delete(url, headers=session.headers(origin=origin))
                assert delete.status_code == 403, origin
            assert server.statistics().sessions == 1  # nothing created, nothing deleted
            allowed = await session.post(session.request("ping"), origin="http://[::1]:1")
            assert allowed.status_code == 200


# ------------------------------------------------------ malformed input


async def test_a_message_that_is_not_one_json_rpc_message_gets_400() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            for bad in (
                {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
                {"jsonrpc": "2.0", "id": 2, "method": "ping", "result": {}},
                {"jsonrpc": "2.0", "method": "notifications/x", "error": {"code": 1, "message": "x"}},
                {"foo": 1},
            ):
                response = await session.post(bad)
                assert response.status_code == 400, bad
                assert response.json()["error"]["code"] == -32600
            assert (await session.post(session.request("ping"))).status_code == 200


async def test_a_failed_initialize_names_no_session() -> None:
    async with serving() as (server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            bad = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 5}}
            response = await client.post(url, content=json.dumps(bad), headers=ACCEPT_BOTH)
            assert response.json()["error"]["code"] == -32602
            assert "mcp-session-id" not in response.headers
            assert server.statistics().sessions == 0


# --------------------------------------------------------------- batches

#: The peer answers every request of an accepted batch (its reply queue
#: applies backpressure instead of dropping) from the change that added
#: ``PeerLimits.max_batch_items``.


async def test_an_oversized_batch_is_refused_at_once_with_one_error() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            old = await initialize(client, url, "2025-03-26")
            limit = PeerLimits().max_batch_items
            refused = await old.post([old.request("ping") for _ in range(limit + 1)])
            assert refused.status_code == 400
            error = refused.json()
            assert error["id"] is None and error["error"]["code"] == -32600
            assert (await old.post(old.request("ping"))).status_code == 200


async def test_an_accepted_batch_is_answered_in_full() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT * 3):
            old = await initialize(client, url, "2025-03-26")
            batch = [old.request("ping") for _ in range(1000)]
            response = await old.post(batch)
            assert response.status_code == 200
            answers = response.json()
            assert sorted(a["id"] for a in answers) == sorted(m["id"] for m in batch)
            assert all("result" in a or a["error"]["code"] == -32001 for a in answers)
            assert (await old.post(old.request("ping"))).status_code == 200


# --------------------------------------------- cancelled and abandoned POSTs


async def test_a_cancelled_request_ends_its_post_and_frees_its_socket(tmp_path: Any) -> None:
    """50 calls answered in auto mode, cancelled mid-call: each POST is
    answered 202 at once (JSON mode) or its SSE stream ends; 20 more whose
    client goes away mid-call: no socket stays in CLOSE_WAIT."""
    async with real_server(tmp_path) as server, http() as client:
        with trio.fail_after(FLOOD_TIMEOUT):
            session = await initialize(client, server.url)
            statuses: list[int] = []
            started = trio.Semaphore(0)

            async def call(ident: int, accept: str) -> None:
                message = {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "method": "tools/call",
                    "params": {"name": "slow", "arguments": {"seconds": 600}},
                }
                async with httpx.AsyncClient(timeout=TIMEOUT * 6) as own:
                    request = own.stream(
                        "POST",
                        server.url,
                        content=json.dumps(message),
                        headers=session.headers(accept=accept),
                    )
                    started.release()
                    async with request as response:
                        body = await response.aread()
                statuses.append(response.status_code)
                if accept == "text/event-stream":
                    assert b'"result"' not in body  # ended without an answer

            async with trio.open_nursery() as nursery:
                for i in range(50):
                    accept = "text/event-stream" if i % 5 == 0 else "application/json, text/event-stream"
                    nursery.start_soon(call, 1000 + i, accept)
                for _ in range(50):
                    await started.acquire()
                await _until_running(session, 50)
                for i in range(50):
                    cancel = {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": 1000 + i},
                    }
                    assert (await session.post(cancel)).status_code == 202
            assert sorted(statuses) == [200] * 10 + [202] * 40

            async def go_away(ident: int) -> None:
                message = session.request("tools/call", {"name": "slow", "arguments": {"seconds": 600}})
                message["id"] = ident
                async with httpx.AsyncClient(timeout=TIMEOUT) as own:
                    with trio.move_on_after(0.5):
                        await own.post(server.url, content=json.dumps(message), headers=session.headers())

            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(go_away, 2000 + i)

            async def no_close_wait() -> bool:
                return socket_states(server.pid).get(CLOSE_WAIT, 0) == 0

            await until(no_close_wait)  # hypercorn closes an idle keep-alive within 5 s
            assert (await session.post(session.request("ping"))).status_code == 200


async def _until_running(session: Session, count: int) -> None:
    """Wait until ``count`` calls of ``slow`` run in the server (callers bound the wait)."""

    async def enough() -> bool:
        answer = await session.post(session.request("tools/call", {"name": "running"}))
        return int(answer.json()["result"]["content"][0]["text"]) >= count

    await until(enough)


async def test_a_stream_completed_while_its_client_was_gone_leaves_the_event_store(
    autojump_clock: trio.testing.MockClock,
) -> None:
    release = trio.Event()
    app = MCPServer("store")

    @app.tool
    async def wait() -> str:
        await release.wait()
        return "done"

    asgi = StreamableHttpApp(app, completed_stream_retention=30)
    store = asgi.event_store
    assert store is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(asgi.run)
        session_id = await _asgi_initialize(asgi, follow_up=True)
        gone = trio.Event()
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "wait"}}
        status = await _asgi_post_then_leave(asgi, session_id, call, gone, nursery)
        assert status == 200
        streams_with_call = store.statistics()["streams"]  # type: ignore[attr-defined]
        gone.set()
        await trio.sleep(1)
        release.set()  # answered while nobody listens: kept for a resumption...
        await trio.sleep(5)
        assert store.statistics()["streams"] == streams_with_call  # type: ignore[attr-defined]
        await trio.sleep(40)  # ...for completed_stream_retention only
        assert store.statistics()["streams"] == streams_with_call - 1  # type: ignore[attr-defined]
        assert await asgi.registry.get(session_id) is not None
        await asgi.aclose()


async def _asgi_post_then_leave(
    asgi: StreamableHttpApp, session_id: str, message: dict[str, Any], gone: trio.Event, nursery: trio.Nursery
) -> int:
    """POST ``message`` answered as SSE; the client goes away when ``gone``
    is set. Returns the status once the stream has started."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            (b"accept", b"text/event-stream"),
            (b"mcp-session-id", session_id.encode()),
        ],
    }
    delivered = False
    started = trio.Event()
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": json.dumps(message).encode(), "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(event: dict[str, Any]) -> None:
        nonlocal status
        if event["type"] == "http.response.start":
            status = event["status"]
            started.set()

    nursery.start_soon(asgi, scope, receive, send)
    await started.wait()
    return status


# ------------------------------------------------------------------ logs


async def test_a_413_for_an_oversized_chunked_body_logs_no_framework_error(tmp_path: Any) -> None:
    async with real_server(tmp_path, max_body_size=1024) as server:
        with trio.fail_after(FLOOD_TIMEOUT):
            async with http() as client:
                session = await initialize(client, server.url)

                async def chunked() -> Any:
                    for _ in range(64):
                        yield b"x" * 256

                for headers in (session.headers(), ACCEPT_BOTH):
                    response = await client.post(server.url, content=chunked(), headers=headers)
                    assert response.status_code == 413
            port = int(server.url.rsplit(":", 1)[1].split("/")[0])
            for finish in (False, True):  # a client that stops mid-body, or ends it
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                async with stream:
                    await stream.send_all(
                        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                    )
                    try:
                        for _ in range(16):
                            await stream.send_all(b"400\r\n" + b"x" * 1024 + b"\r\n")
                        if finish:
                            await stream.send_all(b"0\r\n\r\n")
                    except trio.BrokenResourceError:
                        pass  # the server answered and closed first
                    answer = await stream.receive_some(4096)
                    assert answer.startswith(b"HTTP/1.1 413")
            async with http() as client:  # still serving
                session = await initialize(client, server.url)
                assert (await session.post(session.request("ping"))).status_code == 200
    log = server.log()
    assert "Error in ASGI Framework" not in log
    assert "Traceback" not in log
