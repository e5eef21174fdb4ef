"""One socket write per JSON answer (issue 11), over real HTTP: the server's
HTTP/1.1 protocol (``serving/http/_hypercorn.py``) writes a sized answer's
head with its body, and never an empty write; an answer without a length
(an SSE stream), a ``1xx``, hypercorn's own error answers, ``HEAD``, a sized
body in several chunks and HTTP/2 keep working. The writes are counted on
the server's side of the connection (``trio.SocketStream.send_all`` calls
whose socket is bound to the server's port), so the count does not depend
on how the client's reads are split."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trio

from trio_mcp.serving.http import HttpServer
from trio_mcp.transports._asgi import SSE_HEADERS, Receive, Scope, Send, respond

from .test_server import ACCEPT_BOTH, TIMEOUT, http, init_message, initialize, make_app, serving


class Writes:
    """The data of every ``send_all`` on a server-side socket of ``port``."""

    def __init__(self) -> None:
        self.port = 0
        self.all: list[bytes] = []

    def take(self) -> list[bytes]:
        taken, self.all = self.all, []
        return taken


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Writes]:
    seen = Writes()
    send_all = trio.SocketStream.send_all

    async def counting(self: trio.SocketStream, data: Any) -> None:
        if self.socket.getsockname()[1] == seen.port:
            seen.all.append(bytes(data))
        await send_all(self, data)

    monkeypatch.setattr(trio.SocketStream, "send_all", counting)
    yield seen


def port_of(server: HttpServer) -> int:
    assert server.info is not None
    return server.info.port


async def test_every_json_answer_is_one_write(writes: Writes) -> None:
    async with serving() as (server, url), http() as client:
        writes.port = port_of(server)
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            writes.take()
            for n in range(3):
                call = session.request("tools/call", {"name": "echo", "arguments": {"text": f"hi {n}"}})
                answer = await session.post(call)
                assert answer.status_code == 200
                (write,) = writes.take()  # head and body together, nothing empty after
                assert write.startswith(b"HTTP/1.1 200 ")
                assert write.endswith(b"\r\n\r\n" + answer.content)
                assert answer.json()["result"]["content"][0]["text"] == f"hi {n}"
            note = await session.post({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
            assert note.status_code == 202
            (write,) = writes.take()  # an empty body: the head alone, once
            assert write.startswith(b"HTTP/1.1 202 ") and write.endswith(b"\r\n\r\n")
            # a refusal of the app's is one write too
            refused = await client.post(
                url,
                content=json.dumps(session.request("ping")),
                headers={**ACCEPT_BOTH, "mcp-session-id": "nope"},
            )
            assert refused.status_code == 404
            assert len(writes.take()) == 1


async def test_a_stream_without_a_length_has_its_head_out_before_any_event(writes: Writes) -> None:
    gate = trio.Event()

    async def events(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": list(SSE_HEADERS)})
        await send({"type": "http.response.body", "body": b"", "more_body": True})  # nothing yet
        await gate.wait()  # opened by the client once it has the head
        await send({"type": "http.response.body", "body": b"data: one\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: two\n\n", "more_body": False})

    async with serving(routes={"/events": events}) as (server, url), http() as client:
        writes.port = port_of(server)
        with trio.fail_after(TIMEOUT):
            async with client.stream("GET", url.replace("/mcp", "/events")) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"] == "text/event-stream"
                gate.set()
                assert (
                    b"".join([part async for part in stream.aiter_bytes()]) == b"data: one\n\ndata: two\n\n"
                )
            head, *chunks = writes.take()
            assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")
            assert b"data:" not in head
            assert all(chunks)  # and no empty write
            assert b"".join(chunks) == b"b\r\ndata: one\n\n\r\nb\r\ndata: two\n\n\r\n0\r\n\r\n"


async def test_a_sized_body_in_chunks_goes_out_as_it_comes(writes: Writes) -> None:
    gate = trio.Event()

    async def chunks(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"10")]})
        await send({"type": "http.response.body", "body": b"hello", "more_body": True})
        await gate.wait()  # opened by the client once it has the first chunk
        await send({"type": "http.response.body", "body": b"world", "more_body": False})

    async with serving(routes={"/chunks": chunks}) as (server, url), http() as client:
        writes.port = port_of(server)
        with trio.fail_after(TIMEOUT):
            async with client.stream("GET", url.replace("/mcp", "/chunks")) as stream:
                parts = stream.aiter_raw()
                first = await parts.__anext__()
                assert first == b"hello"
                gate.set()
                rest = b"".join([part async for part in parts])
            assert rest == b"world"
            head_and_first, last = writes.take()
            assert head_and_first.startswith(b"HTTP/1.1 200 ") and head_and_first.endswith(b"\r\n\r\nhello")
            assert last == b"world"


async def test_head_and_expect_continue_and_hypercorns_own_errors(writes: Writes) -> None:
    async with serving() as (server, url), http() as client:
        port = writes.port = port_of(server)
        with trio.fail_after(TIMEOUT):
            # HEAD: the body is left out, the head still goes (once), the connection stays usable
            head = await client.head(url.replace("/mcp", "/healthz"))
            assert head.status_code == 200 and head.headers["content-length"] == "15"
            assert head.content == b""
            assert len(writes.take()) == 1
            assert (await client.get(url.replace("/mcp", "/healthz"))).json() == {"status": "ok"}
            writes.take()

            # Expect: 100-continue: the 100 comes before the client sends its body
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                body = json.dumps(init_message()).encode()
                await stream.send_all(
                    b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                    b"accept: application/json, text/event-stream\r\nexpect: 100-continue\r\n"
                    b"content-length: %d\r\n\r\n" % len(body)
                )
                continued = await stream.receive_some()
                assert continued.startswith(b"HTTP/1.1 100 ")
                await stream.send_all(body)
                answer = b""
                while b'"protocolVersion"' not in answer:
                    answer += await stream.receive_some()
                assert answer.startswith(b"HTTP/1.1 200 ")
            assert len(writes.take()) == 2  # the 100, then the whole answer

            # a request hypercorn refuses itself: its 400, whole, then the connection closes
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(b"NOT HTTP AT ALL\r\n\r\n")
                refused = b""
                while chunk := await stream.receive_some():
                    refused += chunk
            assert refused.startswith(b"HTTP/1.1 400 ")
            assert b"connection: close" in refused.lower()
            assert writes.take() == [refused]


async def test_http2_is_served_as_before() -> None:
    async with serving() as (_, url):
        async with httpx.AsyncClient(http1=False, http2=True, timeout=TIMEOUT) as client:
            with trio.fail_after(TIMEOUT):
                response = await client.post(url, content=json.dumps(init_message()), headers=ACCEPT_BOTH)
                assert response.http_version == "HTTP/2"
                assert response.status_code == 200
                assert response.json()["result"]["serverInfo"]["name"] == "http-test"


# ------------------------------------------------------------ keep-alive


async def one_answer(stream: trio.SocketStream, path: bytes = b"/healthz") -> bytes:
    await stream.send_all(b"GET %s HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n" % path)
    answer = b""
    while not answer.endswith(b"}"):
        chunk = await stream.receive_some()
        assert chunk, "closed before the answer"
        answer += chunk
    return answer


async def test_an_idle_connection_closes_after_the_keep_alive_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow_done = trio.Event()

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        await trio.sleep(20)  # busy for longer than the keep-alive timeout
        await respond(send, 200, b'{"slow":true}')
        slow_done.set()

    server = HttpServer(make_app(), routes={"/slow": slow})
    with trio.fail_after(60):  # virtual seconds
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            stream = await trio.open_tcp_stream("127.0.0.1", port_of(server))
            async with stream:
                assert (await one_answer(stream)).startswith(b"HTTP/1.1 200 ")
                assert (await one_answer(stream, b"/slow")).endswith(b'{"slow":true}')  # busy: kept
                await trio.sleep(4)
                assert (await one_answer(stream)).startswith(b"HTTP/1.1 200 ")  # 4 s idle: kept
                answered = trio.current_time()
                assert await stream.receive_some() == b""  # then closed by the server
                assert trio.current_time() - answered == pytest.approx(5)  # hypercorn's keep_alive_timeout
            server.stop()


async def test_a_stopping_server_closes_its_idle_connections_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with serving() as (server, _):
        with trio.fail_after(TIMEOUT):
            stream = await trio.open_tcp_stream("127.0.0.1", port_of(server))
            async with stream:
                assert (await one_answer(stream)).startswith(b"HTTP/1.1 200 ")
                await trio.sleep(1)
                stopped = trio.current_time()
                server.stop()
                assert await stream.receive_some() == b""
                assert trio.current_time() - stopped < 1  # not the keep-alive timeout's 4 s left
